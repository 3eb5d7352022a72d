//! The two RESP shapes the replication link carries: commands (arrays of bulk strings, what a
//! primary streams and what a replica sends) and single reply lines (`+PONG`, `+FULLRESYNC ..`,
//! `$EOF:..`). Incremental: bytes arrive in any chunking and give the same result.
//!
//! Facts: Valkey `networking.c` `processMultibulkBuffer` (limits and error texts), the captures
//! in `tests/vectors/*/conn*.p2r.bin`.

use crate::error::{StreamError, StreamErrorKind};

pub use ferrocluster_topology::{command_bytes, encode_array_len, encode_bulk, encode_command};

/// Limits of [`CommandReader`]. Defaults are Valkey's: `proto-max-bulk-len` 512 MiB, at most
/// `i32::MAX` arguments, header lines of at most 64 KiB (`PROTO_INLINE_MAX_SIZE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReaderLimits {
    /// Largest accepted bulk string, bytes.
    pub max_bulk_len: u64,
    /// Largest accepted argument count.
    pub max_args: u64,
    /// Longest accepted `*<n>` / `$<n>` / reply line, bytes (without CRLF).
    pub max_line_len: usize,
}

impl Default for ReaderLimits {
    fn default() -> Self {
        ReaderLimits {
            max_bulk_len: 512 * 1024 * 1024,
            max_args: i32::MAX as u64,
            max_line_len: 64 * 1024,
        }
    }
}

/// One command read from a stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedCommand {
    /// The arguments, the command name first.
    pub argv: Vec<Vec<u8>>,
    /// The command's wire bytes, exactly as received (what the replication offset counts and
    /// what a replica proxies to its own replicas).
    pub raw: Vec<u8>,
}

/// Incremental reader of a stream of RESP commands (arrays of bulk strings), the form a
/// primary's replication stream takes. Bare newlines between commands (`\n` or `\r\n`, the
/// keep-alive Valkey sends out of band, `replicationCron`) come back as [`Item::Empty`].
///
/// Errors are final: after one, the stream has lost its framing and the reader refuses more
/// input (the link must be closed). Nothing is allocated from a declared length before its
/// bytes arrive.
#[derive(Debug, Clone)]
pub struct CommandReader {
    limits: ReaderLimits,
    buf: Vec<u8>,
    pos: usize,
    /// Bytes consumed by earlier items (for error positions).
    consumed: u64,
    failed: Option<StreamError>,
}

/// What [`CommandReader::next_item`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Item {
    /// A whole command.
    Command(ParsedCommand),
    /// A bare newline (`\n`, `\r\n`) or an empty multibulk (`*0\r\n`, `*-1\r\n`) between
    /// commands: no command, but bytes of the stream (Valkey counts them in a replica's
    /// processed offset, `commandProcessed`). Holds the raw bytes.
    Empty(Vec<u8>),
}

impl CommandReader {
    /// An empty reader with the given limits.
    pub fn new(limits: ReaderLimits) -> CommandReader {
        CommandReader {
            limits,
            buf: Vec::new(),
            pos: 0,
            consumed: 0,
            failed: None,
        }
    }

    /// Appends received bytes. After an error the bytes are ignored.
    pub fn push(&mut self, bytes: &[u8]) {
        if self.failed.is_some() {
            return;
        }
        if self.pos > 0 && self.pos == self.buf.len() {
            self.buf.clear();
            self.pos = 0;
        } else if self.pos > 64 * 1024 && self.pos * 2 > self.buf.len() {
            self.buf.drain(..self.pos);
            self.pos = 0;
        }
        self.buf.extend_from_slice(bytes);
    }

    /// Bytes received and not yet returned as an item.
    pub fn buffered(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// Takes the bytes not yet returned as an item, leaving the reader empty.
    pub fn take_buffered(&mut self) -> Vec<u8> {
        let rest = self.buf.split_off(self.pos);
        self.buf.clear();
        self.pos = 0;
        rest
    }

    /// The next whole item, `Ok(None)` when more bytes are needed.
    ///
    /// # Errors
    /// [`StreamError`] with the stream position (bytes from the reader's start) when the bytes
    /// are not a command: a first byte other than `*` or a newline, a bad or oversized length,
    /// a bulk not followed by CRLF. The error repeats on every later call.
    pub fn next_item(&mut self) -> Result<Option<Item>, StreamError> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        match self.parse() {
            Ok(Some((item, len))) => {
                self.pos += len;
                self.consumed += len as u64;
                Ok(Some(item))
            }
            Ok(None) => Ok(None),
            Err((kind, at)) => {
                let e = StreamError {
                    kind,
                    offset: self.consumed + at as u64,
                };
                self.failed = Some(e.clone());
                Err(e)
            }
        }
    }

    /// The next whole command's arguments, skipping bare newlines and empty multibulks
    /// (for streams whose byte count does not matter: a slot migration link).
    ///
    /// # Errors
    /// As [`CommandReader::next_item`].
    pub fn next_command(&mut self) -> Result<Option<Vec<Vec<u8>>>, StreamError> {
        loop {
            match self.next_item()? {
                Some(Item::Command(c)) => return Ok(Some(c.argv)),
                Some(Item::Empty(_)) => continue,
                None => return Ok(None),
            }
        }
    }

    fn parse(&self) -> Result<Option<(Item, usize)>, (StreamErrorKind, usize)> {
        let b = &self.buf[self.pos..];
        let Some(&first) = b.first() else {
            return Ok(None);
        };
        match first {
            b'\n' => return Ok(Some((Item::Empty(b"\n".to_vec()), 1))),
            b'\r' => {
                return match b.get(1) {
                    None => Ok(None),
                    Some(b'\n') => Ok(Some((Item::Empty(b"\r\n".to_vec()), 2))),
                    Some(_) => Err((StreamErrorKind::NotACommand(first), 0)),
                }
            }
            b'*' => {}
            other => return Err((StreamErrorKind::NotACommand(other), 0)),
        }
        let Some((argc, mut at)) = read_len(b, 0, self.limits.max_line_len)? else {
            return Ok(None);
        };
        let argc = match argc {
            Len::Null => 0,
            Len::N(n) if n > self.limits.max_args => {
                return Err((StreamErrorKind::InvalidMultibulkLength, 0))
            }
            Len::N(n) => n,
        };
        let mut argv = Vec::new();
        for _ in 0..argc {
            if at >= b.len() {
                return Ok(None);
            }
            if b[at] != b'$' {
                return Err((StreamErrorKind::ExpectedBulk(b[at]), at));
            }
            let Some((len, body)) = read_len(b, at, self.limits.max_line_len)? else {
                return Ok(None);
            };
            let len = match len {
                Len::N(n) if n <= self.limits.max_bulk_len => n as usize,
                _ => return Err((StreamErrorKind::InvalidBulkLength, at)),
            };
            let end = body + len;
            if b.len() < end + 2 {
                return Ok(None);
            }
            if &b[end..end + 2] != b"\r\n" {
                return Err((StreamErrorKind::MissingCrlf, end));
            }
            argv.push(b[body..end].to_vec());
            at = end + 2;
        }
        if argv.is_empty() {
            // `*0\r\n` / `*-1\r\n`: Valkey skips an empty multibulk (`processMultibulkBuffer`).
            return Ok(Some((Item::Empty(b[..at].to_vec()), at)));
        }
        Ok(Some((
            Item::Command(ParsedCommand {
                argv,
                raw: b[..at].to_vec(),
            }),
            at,
        )))
    }
}

enum Len {
    Null,
    N(u64),
}

/// Reads `<prefix><decimal>\r\n` at `at`; returns the value and the index after the CRLF.
fn read_len(
    b: &[u8],
    at: usize,
    max_line: usize,
) -> Result<Option<(Len, usize)>, (StreamErrorKind, usize)> {
    let search = &b[at..b.len().min(at + max_line + 2)];
    let Some(nl) = memchr::memchr(b'\n', search) else {
        if search.len() >= max_line + 2 {
            return Err((StreamErrorKind::LineTooLong, at));
        }
        return Ok(None);
    };
    let line = &search[..nl];
    let Some(line) = line.strip_suffix(b"\r") else {
        return Err((StreamErrorKind::MissingCrlf, at + nl));
    };
    let digits = &line[1..];
    let kind = if line[0] == b'*' {
        StreamErrorKind::InvalidMultibulkLength
    } else {
        StreamErrorKind::InvalidBulkLength
    };
    if digits == b"-1" {
        return Ok(Some((Len::Null, at + nl + 1)));
    }
    match parse_u64(digits) {
        Some(n) => Ok(Some((Len::N(n), at + nl + 1))),
        None => Err((kind, at)),
    }
}

/// A decimal without sign, leading `+` or spaces; `None` when empty, not decimal, or above
/// `u64::MAX`.
pub(crate) fn parse_u64(d: &[u8]) -> Option<u64> {
    if d.is_empty() || d.len() > 20 {
        return None;
    }
    let mut n: u64 = 0;
    for &c in d {
        if !c.is_ascii_digit() {
            return None;
        }
        n = n.checked_mul(10)?.checked_add(u64::from(c - b'0'))?;
    }
    Some(n)
}

/// A signed decimal in Valkey's `string2ll` form (optional `-`, no `+`, no spaces, no leading
/// zeros except `0` itself).
pub(crate) fn parse_i64(d: &[u8]) -> Option<i64> {
    let (neg, digits) = match d.strip_prefix(b"-") {
        Some(rest) => (true, rest),
        None => (false, d),
    };
    if digits.is_empty() || (digits.len() > 1 && digits[0] == b'0') {
        return None;
    }
    let n = parse_u64(digits)?;
    if neg {
        if n == 0 {
            return None;
        }
        if n <= i64::MAX as u64 + 1 {
            Some((n as i128).wrapping_neg() as i64)
        } else {
            None
        }
    } else {
        i64::try_from(n).ok()
    }
}

/// Incremental reader of reply lines (`+...`, `-...`, `$...` up to `\n`, the `\r` stripped),
/// as a replica reads its primary's handshake replies (Valkey `receiveSynchronousResponse`).
#[derive(Debug, Clone, Default)]
pub(crate) struct LineReader {
    buf: Vec<u8>,
}

impl LineReader {
    /// Appends bytes.
    pub(crate) fn push(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// The next line without its CR LF (`Ok(None)`: incomplete).
    pub(crate) fn next_line(&mut self, max: usize) -> Result<Option<Vec<u8>>, StreamErrorKind> {
        match memchr::memchr(b'\n', &self.buf) {
            // The same verdict however the bytes were chunked.
            Some(nl) if nl > max + 1 => Err(StreamErrorKind::LineTooLong),
            Some(nl) => {
                let mut line: Vec<u8> = self.buf.drain(..=nl).collect();
                line.pop();
                if line.last() == Some(&b'\r') {
                    line.pop();
                }
                Ok(Some(line))
            }
            None if self.buf.len() > max + 1 => Err(StreamErrorKind::LineTooLong),
            None => Ok(None),
        }
    }

    /// Whether no byte waits.
    pub(crate) fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// The first waiting byte.
    pub(crate) fn first_byte(&self) -> Option<u8> {
        self.buf.first().copied()
    }

    /// Takes what follows the lines read so far.
    pub(crate) fn take(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_all(chunks: &[&[u8]]) -> Result<Vec<Item>, StreamError> {
        let mut r = CommandReader::new(ReaderLimits::default());
        let mut out = Vec::new();
        for c in chunks {
            r.push(c);
            while let Some(i) = r.next_item()? {
                out.push(i);
            }
        }
        Ok(out)
    }

    #[test]
    fn reads_commands_and_newlines() {
        let items =
            read_all(&[b"\n*1\r\n$4\r\nping\r\n\r\n*2\r\n$6\r\nSELECT\r\n$1\r\n3\r\n"]).unwrap();
        assert_eq!(items.len(), 4);
        assert_eq!(items[0], Item::Empty(b"\n".to_vec()));
        match &items[1] {
            Item::Command(c) => {
                assert_eq!(c.argv, vec![b"ping".to_vec()]);
                assert_eq!(c.raw.len(), 14);
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(items[2], Item::Empty(b"\r\n".to_vec()));
    }

    #[test]
    fn errors_carry_position() {
        let e = read_all(&[b"*1\r\n$4\r\nping\r\n+OK\r\n"]).unwrap_err();
        assert_eq!(e.offset, 14);
        assert_eq!(e.kind, StreamErrorKind::NotACommand(b'+'));
        let e = read_all(&[b"*1\r\n$4\r\npingXX"]).unwrap_err();
        assert_eq!(e.kind, StreamErrorKind::MissingCrlf);
        assert_eq!(e.offset, 12);
        let e = read_all(&[b"*1\r\n$99999999999\r\n"]).unwrap_err();
        assert_eq!(e.kind, StreamErrorKind::InvalidBulkLength);
        let e = read_all(&[b"*x\r\n"]).unwrap_err();
        assert_eq!(e.kind, StreamErrorKind::InvalidMultibulkLength);
    }

    #[test]
    fn hostile_lengths_allocate_nothing_up_front() {
        let mut r = CommandReader::new(ReaderLimits::default());
        r.push(b"*2147483647\r\n$536870912\r\n");
        assert_eq!(r.next_item().unwrap(), None);
    }

    #[test]
    fn integers() {
        assert_eq!(parse_i64(b"-1"), Some(-1));
        assert_eq!(parse_i64(b"0"), Some(0));
        assert_eq!(parse_i64(b"01"), None);
        assert_eq!(parse_i64(b"-0"), None);
        assert_eq!(parse_i64(b"+1"), None);
        assert_eq!(parse_i64(b"9223372036854775807"), Some(i64::MAX));
        assert_eq!(parse_i64(b"-9223372036854775808"), Some(i64::MIN));
        assert_eq!(parse_i64(b"9223372036854775808"), None);
    }

    proptest::proptest! {
        #[test]
        fn any_chunking_gives_the_same_items(
            cmds in proptest::collection::vec(proptest::collection::vec(proptest::collection::vec(proptest::num::u8::ANY, 0..20), 1..5), 0..8),
            cuts in proptest::collection::vec(0usize..400, 0..10),
        ) {
            let mut stream = Vec::new();
            for c in &cmds { encode_command(&mut stream, c); }
            let whole = read_all(&[&stream]).unwrap();
            let mut cuts: Vec<usize> = cuts.into_iter().filter(|&c| c <= stream.len()).collect();
            cuts.sort();
            let mut chunks = Vec::new();
            let mut last = 0;
            for c in cuts { chunks.push(&stream[last..c]); last = c; }
            chunks.push(&stream[last..]);
            let parts = read_all(&chunks).unwrap();
            proptest::prop_assert_eq!(&whole, &parts);
            let argvs: Vec<Vec<Vec<u8>>> = whole.iter().map(|i| match i { Item::Command(c) => c.argv.clone(), Item::Empty(_) => Vec::new() }).collect();
            proptest::prop_assert_eq!(argvs, cmds);
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..200)) {
            let _ = read_all(&[&bytes]);
        }
    }
}
