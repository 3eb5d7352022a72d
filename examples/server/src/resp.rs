//! RESP on the data port: a request parser and a reply writer.
//!
//! Requests are always RESP2 multibulk arrays of bulk strings (or inline commands), whatever
//! the reply protocol; replies are RESP2 or RESP3 (after `HELLO 3`). We parse requests here
//! rather than with `redis-protocol` because the server needs three things that crate does not
//! give: (1) the real servers' exact protocol error texts and close decisions, (2) limits
//! checked from the headers before the data arrives, so an oversized request is refused at
//! once, and (3) no allocation per command: multibulk arguments are byte ranges into the
//! connection's read buffer, collected in a reused `Vec` (inline arguments, which may carry
//! escapes, are unescaped into a reused scratch buffer). Replies are written straight into the
//! connection's output buffer. The tests decode what we write with `redis-protocol`.
//!
//! The rules are Valkey 9.1's, taken from the real server byte for byte
//! (`tests/vectors/resp-cases.json`, made by `tests/vectors/capture_resp.py` against
//! redis-server 7.0.15 and valkey-server 9.1.2; `tests/resp_vectors.rs` replays it). Where
//! Redis 7.0 differs we follow Valkey 9, as marked below:
//!
//! * Multibulk count line `*<n>\r\n`: `n` a decimal integer (no `+`, no spaces), at most
//!   `INT_MAX`, else `invalid multibulk length`; before AUTH (when a password is set) at most
//!   10, else `unauthenticated multibulk length`. `n <= 0` is an empty request (no reply).
//! * Bulk header `$<len>\r\n`: a first byte other than `$` is `expected '$', got '<byte>'`
//!   (the byte as it is; `\r`/`\n` print as spaces); `len` in `0..=proto-max-bulk-len`, else
//!   `invalid bulk length`; before AUTH at most 16384, else `unauthenticated bulk length`.
//! * Every `\r` of a header and the two bytes after a bulk's data must be `\r\n`, else
//!   `invalid CRLF in request` (Valkey 9; Redis 7.0 skips two bytes whatever they are, so a
//!   bulk without its CRLF ran as a command there). A NUL in a header is just a bad byte
//!   (Valkey 9; Redis 7.0 stops its `\r` search at a NUL and waits).
//! * A header line without its `\r` longer than 64 KiB: `too big mbulk count string` /
//!   `too big bulk count string`.
//! * Inline requests end at `\n` (an optional `\r` before it is dropped). A NUL before the
//!   `\n` hides it, as both servers search with `strchr`: the request waits (until 64 KiB).
//!   More than 64 KiB without a `\n`, or a line longer than 64 KiB: `too big inline request`.
//!   (Both servers check the 64 KiB only when a read ends without the `\n`, so a line a bit
//!   longer than 64 KiB that arrives in one piece may pass there; we refuse every line over
//!   the limit, which is what Valkey 9 answered for 70000 bytes in one write; Redis 7.0,
//!   whose reads are 16 KiB, passed it.)
//! * Inline words ([`split_inline`]): Valkey 9's `sdssplitargs`. A closing quote may be
//!   followed by more of the same word (`"a"b` is `ab`; Redis 7.0 answers `unbalanced quotes`).
//!
//! Any error is answered `-ERR Protocol error: <text>` after the requests before it, and the
//! connection is closed after the reply.

use std::ops::Range;

/// Longest inline request or header line without a newline (`PROTO_INLINE_MAX_SIZE`).
pub const INLINE_MAX: usize = 64 * 1024;

/// Most elements in a multibulk request (`INT_MAX`).
const MAX_MULTIBULK: i64 = i32::MAX as i64;

/// Most elements and bulk bytes before AUTH when the server has a password (Valkey
/// `processMultibulkBuffer`, `authRequired`).
const UNAUTH_MULTIBULK: i64 = 10;
const UNAUTH_BULK: i64 = 16384;

/// Limits applied while parsing.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Largest bulk string, bytes (`proto-max-bulk-len`).
    pub max_bulk_len: usize,
    /// The client still has to authenticate (a password is set and AUTH has not succeeded):
    /// the smaller limits above apply.
    pub unauthenticated: bool,
}

/// A broken request: answered `-ERR Protocol error: ...`, then the connection closes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProtocolError {
    /// `invalid multibulk length`
    InvalidMultibulkLength,
    /// `unauthenticated multibulk length`
    UnauthenticatedMultibulkLength,
    /// `too big mbulk count string`
    TooBigMbulkCountString,
    /// `expected '$', got '<byte>'`
    ExpectedDollar(u8),
    /// `invalid bulk length`
    InvalidBulkLength,
    /// `unauthenticated bulk length`
    UnauthenticatedBulkLength,
    /// `too big bulk count string`
    TooBigBulkCountString,
    /// `invalid CRLF in request` (Valkey 9)
    InvalidCrlf,
    /// `too big inline request`
    TooBigInlineRequest,
    /// `unbalanced quotes in request`
    UnbalancedQuotes,
}

impl ProtocolError {
    /// The text after `Protocol error: ` (the byte of [`ProtocolError::ExpectedDollar`] as it
    /// came).
    pub fn text(&self) -> Vec<u8> {
        let fixed: &str = match self {
            ProtocolError::InvalidMultibulkLength => "invalid multibulk length",
            ProtocolError::UnauthenticatedMultibulkLength => "unauthenticated multibulk length",
            ProtocolError::TooBigMbulkCountString => "too big mbulk count string",
            ProtocolError::ExpectedDollar(b) => {
                let mut t = b"expected '$', got '".to_vec();
                t.push(*b);
                t.push(b'\'');
                return t;
            }
            ProtocolError::InvalidBulkLength => "invalid bulk length",
            ProtocolError::UnauthenticatedBulkLength => "unauthenticated bulk length",
            ProtocolError::TooBigBulkCountString => "too big bulk count string",
            ProtocolError::InvalidCrlf => "invalid CRLF in request",
            ProtocolError::TooBigInlineRequest => "too big inline request",
            ProtocolError::UnbalancedQuotes => "unbalanced quotes in request",
        };
        fixed.as_bytes().to_vec()
    }

    /// Appends the reply line `-ERR Protocol error: <text>\r\n` (`\r` and `\n` inside the
    /// text become spaces, as in every error reply).
    pub fn write_reply(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(b"-ERR Protocol error: ");
        out.extend(
            self.text()
                .into_iter()
                .map(|b| if b == b'\r' || b == b'\n' { b' ' } else { b }),
        );
        out.extend_from_slice(b"\r\n");
    }
}

/// The outcome of one parse attempt.
#[derive(Debug, PartialEq, Eq)]
pub enum Parsed {
    /// A request was parsed into the argument vector; `consumed` bytes may be dropped. An
    /// empty argument vector means an empty request (skipped, no reply). `inline`: the
    /// arguments are ranges into the scratch buffer, not into the read buffer.
    Command {
        /// Bytes of the buffer the request used.
        consumed: usize,
        /// The arguments point into the scratch buffer.
        inline: bool,
    },
    /// More bytes are needed. The first `settled` bytes hold whole arguments of the request
    /// in progress (Valkey moves those out of the query buffer, so they do not count against
    /// `client-query-buffer-limit`).
    Incomplete {
        /// Bytes of complete arguments (and headers) at the start of the buffer.
        settled: usize,
    },
    /// The stream is broken: reply with [`ProtocolError::write_reply`] and close.
    Error(ProtocolError),
}

/// A decimal integer as Valkey's `string2ll` reads it: an optional `-`, digits, no leading
/// zeros (except `0` itself), no `+`, no spaces, within i64.
fn parse_len(bytes: &[u8]) -> Option<i64> {
    if bytes.is_empty() || bytes.len() > 20 {
        return None;
    }
    let (neg, digits) = match bytes[0] {
        b'-' => (true, &bytes[1..]),
        _ => (false, bytes),
    };
    if digits.is_empty() || (digits[0] == b'0' && (digits.len() > 1 || neg)) {
        return None;
    }
    let mut n: i64 = 0;
    for &b in digits {
        if !b.is_ascii_digit() {
            return None;
        }
        let d = i64::from(b - b'0');
        n = if neg {
            n.checked_mul(10)?.checked_sub(d)?
        } else {
            n.checked_mul(10)?.checked_add(d)?
        };
    }
    Some(n)
}

/// A header line starting at `from`: `Ok(Some(cr))` with `buf[cr..cr + 2] == b"\r\n"`,
/// `Ok(None)` while incomplete, `Err` for a line too long, for `check` of the line's first
/// byte, or for a `\r` not followed by `\n` (in that order).
fn header_line(
    buf: &[u8],
    from: usize,
    too_big: ProtocolError,
    check: impl FnOnce(u8) -> Result<(), ProtocolError>,
) -> Result<Option<usize>, ProtocolError> {
    let Some(off) = buf[from..].iter().position(|&b| b == b'\r') else {
        if buf.len() - from > INLINE_MAX {
            return Err(too_big);
        }
        return Ok(None);
    };
    let cr = from + off;
    if cr + 1 >= buf.len() {
        return Ok(None);
    }
    check(buf[from])?;
    if buf[cr + 1] != b'\n' {
        return Err(ProtocolError::InvalidCrlf);
    }
    Ok(Some(cr))
}

/// Parses one request from `buf`, filling `args` with byte ranges into `buf` (multibulk) or
/// into `scratch` (inline, see [`Parsed::Command`]).
pub fn parse_request(
    buf: &[u8],
    args: &mut Vec<Range<usize>>,
    scratch: &mut Vec<u8>,
    limits: Limits,
) -> Parsed {
    args.clear();
    if buf.is_empty() {
        return Parsed::Incomplete { settled: 0 };
    }
    if buf[0] != b'*' {
        return parse_inline(buf, args, scratch);
    }
    match parse_multibulk(buf, args, limits) {
        Ok(p) => p,
        Err(e) => Parsed::Error(e),
    }
}

fn parse_multibulk(
    buf: &[u8],
    args: &mut Vec<Range<usize>>,
    limits: Limits,
) -> Result<Parsed, ProtocolError> {
    let Some(cr) = header_line(buf, 0, ProtocolError::TooBigMbulkCountString, |_| Ok(()))? else {
        return Ok(Parsed::Incomplete { settled: 0 });
    };
    let count = match parse_len(&buf[1..cr]) {
        Some(n) if n <= MAX_MULTIBULK => n,
        _ => return Err(ProtocolError::InvalidMultibulkLength),
    };
    if limits.unauthenticated && count > UNAUTH_MULTIBULK {
        return Err(ProtocolError::UnauthenticatedMultibulkLength);
    }
    let mut pos = cr + 2;
    if count <= 0 {
        return Ok(Parsed::Command {
            consumed: pos,
            inline: false,
        });
    }
    let dollar = |b: u8| {
        if b == b'$' {
            Ok(())
        } else {
            Err(ProtocolError::ExpectedDollar(b))
        }
    };
    for _ in 0..count {
        let incomplete = Parsed::Incomplete { settled: pos };
        if pos >= buf.len() {
            return Ok(incomplete);
        }
        let Some(cr) = header_line(buf, pos, ProtocolError::TooBigBulkCountString, dollar)? else {
            return Ok(incomplete);
        };
        let len = match parse_len(&buf[pos + 1..cr]) {
            Some(n) if n >= 0 && n as u64 <= limits.max_bulk_len as u64 => n,
            _ => return Err(ProtocolError::InvalidBulkLength),
        };
        if limits.unauthenticated && len > UNAUTH_BULK {
            return Err(ProtocolError::UnauthenticatedBulkLength);
        }
        let start = cr + 2;
        // `len` is at most proto-max-bulk-len, a usize.
        let end = start + len as usize;
        if end + 2 > buf.len() {
            return Ok(incomplete);
        }
        if &buf[end..end + 2] != b"\r\n" {
            return Err(ProtocolError::InvalidCrlf);
        }
        args.push(start..end);
        pos = end + 2;
    }
    Ok(Parsed::Command {
        consumed: pos,
        inline: false,
    })
}

fn parse_inline(buf: &[u8], args: &mut Vec<Range<usize>>, scratch: &mut Vec<u8>) -> Parsed {
    // `strchr`: the search for the newline stops at a NUL.
    let nl = match buf.iter().position(|&b| b == b'\n' || b == 0) {
        Some(i) if buf[i] == b'\n' => i,
        _ => {
            if buf.len() > INLINE_MAX {
                return Parsed::Error(ProtocolError::TooBigInlineRequest);
            }
            return Parsed::Incomplete { settled: 0 };
        }
    };
    let line_end = if nl > 0 && buf[nl - 1] == b'\r' {
        nl - 1
    } else {
        nl
    };
    if line_end > INLINE_MAX {
        return Parsed::Error(ProtocolError::TooBigInlineRequest);
    }
    scratch.clear();
    if split_inline(&buf[..line_end], scratch, args).is_err() {
        args.clear();
        return Parsed::Error(ProtocolError::UnbalancedQuotes);
    }
    Parsed::Command {
        consumed: nl + 1,
        inline: true,
    }
}

/// Splits an inline request line into words as Valkey 9's `sdssplitargs` does, writing the
/// words into `out` and their ranges into `args`:
///
/// * words are separated by runs of ASCII whitespace (`isspace`: space, `\t`, `\n`, `\v`,
///   `\f`, `\r`); an unquoted word ends only at space, `\t`, `\n` or `\r`;
/// * `"..."` inside a word: `\xHH` (two hex digits) is that byte, `\n \r \t \b \a` the control
///   characters, `\` before any other character that character; a backslash whose next
///   character is the last of the line is kept as it is;
/// * `'...'`: only `\'` is an escape (not before the last character);
/// * a closing quote continues the word (`"a"b` is `ab`, Valkey 9; Redis 7.0 refuses it);
/// * an unterminated quote is an error.
///
/// # Errors
/// `Err(())` on unbalanced quotes; `out` and `args` then hold a partial result.
pub fn split_inline(
    line: &[u8],
    out: &mut Vec<u8>,
    args: &mut Vec<Range<usize>>,
) -> Result<(), ()> {
    let n = line.len();
    let mut i = 0;
    loop {
        while i < n && matches!(line[i], b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r') {
            i += 1;
        }
        if i >= n {
            return Ok(());
        }
        let start = out.len();
        let (mut inq, mut insq) = (false, false);
        loop {
            let c = line.get(i).copied();
            if inq {
                match c {
                    None => return Err(()),
                    Some(b'\\')
                        if line.get(i + 1) == Some(&b'x')
                            && line.get(i + 2).is_some_and(u8::is_ascii_hexdigit)
                            && line.get(i + 3).is_some_and(u8::is_ascii_hexdigit) =>
                    {
                        out.push(hex(line[i + 2]) * 16 + hex(line[i + 3]));
                        i += 4;
                    }
                    Some(b'\\') if i + 2 < n => {
                        out.push(match line[i + 1] {
                            b'n' => b'\n',
                            b'r' => b'\r',
                            b't' => b'\t',
                            b'b' => 0x08,
                            b'a' => 0x07,
                            other => other,
                        });
                        i += 2;
                    }
                    Some(b'"') => {
                        inq = false;
                        i += 1;
                    }
                    Some(b) => {
                        out.push(b);
                        i += 1;
                    }
                }
            } else if insq {
                match c {
                    None => return Err(()),
                    Some(b'\\') if line.get(i + 1) == Some(&b'\'') && i + 2 < n => {
                        out.push(b'\'');
                        i += 2;
                    }
                    Some(b'\'') => {
                        insq = false;
                        i += 1;
                    }
                    Some(b) => {
                        out.push(b);
                        i += 1;
                    }
                }
            } else {
                match c {
                    None | Some(b' ' | b'\n' | b'\r' | b'\t') => break,
                    Some(b'"') => inq = true,
                    Some(b'\'') => insq = true,
                    Some(b) => out.push(b),
                }
                i += 1;
            }
        }
        args.push(start..out.len());
    }
}

fn hex(b: u8) -> u8 {
    match b {
        b'0'..=b'9' => b - b'0',
        b'a'..=b'f' => b - b'a' + 10,
        _ => b - b'A' + 10,
    }
}

/// Writes replies in RESP2 or RESP3 into a byte buffer.
#[derive(Debug, Default)]
pub struct Out {
    /// The encoded bytes waiting to be written.
    pub buf: Vec<u8>,
    /// 2 or 3.
    pub proto: u8,
}

fn push_int(buf: &mut Vec<u8>, n: i64) {
    let mut tmp = [0u8; 20];
    let mut i = tmp.len();
    let mut v = n.unsigned_abs();
    loop {
        i -= 1;
        tmp[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    if n < 0 {
        buf.push(b'-');
    }
    buf.extend_from_slice(&tmp[i..]);
}

impl Out {
    /// An empty RESP2 writer.
    pub fn new() -> Out {
        Out {
            buf: Vec::with_capacity(16 * 1024),
            proto: 2,
        }
    }

    /// True after `HELLO 3`.
    pub fn resp3(&self) -> bool {
        self.proto == 3
    }

    /// `+OK`
    pub fn ok(&mut self) {
        self.buf.extend_from_slice(b"+OK\r\n");
    }

    /// `+text` (must not contain CR/LF).
    pub fn simple(&mut self, s: &str) {
        self.buf.push(b'+');
        self.buf.extend_from_slice(s.as_bytes());
        self.buf.extend_from_slice(b"\r\n");
    }

    /// `-text` (the text includes its prefix, e.g. `ERR ...`, `MOVED ...`); CR/LF become spaces.
    pub fn error(&mut self, s: &str) {
        self.buf.push(b'-');
        self.buf.extend(
            s.bytes()
                .map(|b| if b == b'\r' || b == b'\n' { b' ' } else { b }),
        );
        self.buf.extend_from_slice(b"\r\n");
    }

    /// `:n`
    pub fn int(&mut self, n: i64) {
        self.buf.push(b':');
        push_int(&mut self.buf, n);
        self.buf.extend_from_slice(b"\r\n");
    }

    /// `$len\r\nbytes\r\n`
    pub fn bulk(&mut self, b: &[u8]) {
        self.buf.push(b'$');
        push_int(&mut self.buf, b.len() as i64);
        self.buf.extend_from_slice(b"\r\n");
        self.buf.extend_from_slice(b);
        self.buf.extend_from_slice(b"\r\n");
    }

    /// A bulk string holding the decimal form of `n`.
    pub fn bulk_int(&mut self, n: i64) {
        let mut tmp = Vec::with_capacity(20);
        push_int(&mut tmp, n);
        self.bulk(&tmp);
    }

    /// Null bulk string (`$-1` in RESP2, `_` in RESP3).
    pub fn null(&mut self) {
        if self.resp3() {
            self.buf.extend_from_slice(b"_\r\n");
        } else {
            self.buf.extend_from_slice(b"$-1\r\n");
        }
    }

    /// Null array (`*-1` in RESP2, `_` in RESP3): EXEC after a failed WATCH-free abort etc.
    pub fn null_array(&mut self) {
        if self.resp3() {
            self.buf.extend_from_slice(b"_\r\n");
        } else {
            self.buf.extend_from_slice(b"*-1\r\n");
        }
    }

    fn header(&mut self, c: u8, n: usize) {
        self.buf.push(c);
        push_int(&mut self.buf, n as i64);
        self.buf.extend_from_slice(b"\r\n");
    }

    /// Array of `n` elements.
    pub fn array(&mut self, n: usize) {
        self.header(b'*', n);
    }

    /// Map of `n` pairs (RESP3 `%`; RESP2: flat array of 2n elements).
    pub fn map(&mut self, n: usize) {
        if self.resp3() {
            self.header(b'%', n);
        } else {
            self.header(b'*', 2 * n);
        }
    }

    /// Set of `n` elements (RESP3 `~`; RESP2 array).
    pub fn set(&mut self, n: usize) {
        if self.resp3() {
            self.header(b'~', n);
        } else {
            self.header(b'*', n);
        }
    }

    /// Push of `n` elements (RESP3 `>`; RESP2 array) for pub/sub messages.
    pub fn push(&mut self, n: usize) {
        if self.resp3() {
            self.header(b'>', n);
        } else {
            self.header(b'*', n);
        }
    }

    /// Verbatim text (RESP3 `=len\r\ntxt:...`; RESP2 bulk string), used by INFO and
    /// CLUSTER NODES/INFO.
    pub fn verbatim(&mut self, text: &[u8]) {
        if self.resp3() {
            self.buf.push(b'=');
            push_int(&mut self.buf, text.len() as i64 + 4);
            self.buf.extend_from_slice(b"\r\ntxt:");
            self.buf.extend_from_slice(text);
            self.buf.extend_from_slice(b"\r\n");
        } else {
            self.bulk(text);
        }
    }
}

#[cfg(test)]
#[path = "../tests/common/resp_cases.rs"]
mod resp_cases;

#[cfg(test)]
mod tests {
    use super::resp_cases::{latin1, parts};
    use super::*;

    const LIM: Limits = Limits {
        max_bulk_len: 512 * 1024 * 1024,
        unauthenticated: false,
    };

    type Requests = Vec<Vec<Vec<u8>>>;

    /// The requests parsed from `buf` and how parsing ended (`None`: incomplete).
    fn parse_with(buf: &[u8], lim: Limits) -> (Requests, Option<ProtocolError>) {
        let mut args = Vec::new();
        let mut scratch = Vec::new();
        let mut out = Vec::new();
        let mut pos = 0;
        loop {
            match parse_request(&buf[pos..], &mut args, &mut scratch, lim) {
                Parsed::Command { consumed, inline } => {
                    let from: &[u8] = if inline { &scratch } else { &buf[pos..] };
                    if !args.is_empty() {
                        out.push(args.iter().map(|r| from[r.clone()].to_vec()).collect());
                    }
                    pos += consumed;
                }
                Parsed::Incomplete { .. } => return (out, None),
                Parsed::Error(e) => return (out, Some(e)),
            }
        }
    }

    fn parse_all(buf: &[u8]) -> (Requests, Option<ProtocolError>) {
        parse_with(buf, LIM)
    }

    fn reply(e: ProtocolError) -> String {
        let mut o = Vec::new();
        e.write_reply(&mut o);
        String::from_utf8_lossy(&o).into_owned()
    }

    #[test]
    fn pipelined_multibulk_and_inline() {
        let (cmds, err) =
            parse_all(b"*1\r\n$4\r\nPING\r\n*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$0\r\n\r\nGET  k\r\nPING\n*2\r\n$3\r\nGET");
        assert_eq!(err, None);
        let want: Vec<Vec<&[u8]>> = vec![
            vec![b"PING"],
            vec![b"SET", b"k", b""],
            vec![b"GET", b"k"],
            vec![b"PING"],
        ];
        assert_eq!(cmds.len(), want.len());
        for (c, w) in cmds.iter().zip(want) {
            assert_eq!(c.iter().map(|a| a.as_slice()).collect::<Vec<_>>(), w);
        }
    }

    #[test]
    fn errors_use_the_real_texts() {
        use ProtocolError::*;
        assert_eq!(parse_all(b"*abc\r\n").1, Some(InvalidMultibulkLength));
        assert_eq!(parse_all(b"*01\r\n").1, Some(InvalidMultibulkLength));
        assert_eq!(
            parse_all(b"*2147483648\r\n").1,
            Some(InvalidMultibulkLength)
        );
        assert_eq!(parse_all(b"*2147483647\r\n").1, None);
        assert_eq!(
            parse_all(b"*2\r\n$3\r\nGET\r\n+x\r\n").1,
            Some(ExpectedDollar(b'+'))
        );
        assert_eq!(
            reply(ExpectedDollar(b'\r')),
            "-ERR Protocol error: expected '$', got ' '\r\n"
        );
        assert_eq!(parse_all(b"*1\r\n$-5\r\n").1, Some(InvalidBulkLength));
        assert_eq!(parse_all(b"*1\r\n$3\r\nGETxx").1, Some(InvalidCrlf));
        assert_eq!(parse_all(b"*1\r\n$3\r\nGET\r").1, None);
        assert_eq!(parse_all(b"*1\rx").1, Some(InvalidCrlf));
        assert_eq!(parse_all(b"*1\r\n$4\rx").1, Some(InvalidCrlf));
        assert_eq!(parse_all(b"*1\r\n+4\rx").1, Some(ExpectedDollar(b'+')));
        assert_eq!(parse_all(b"*1\r\n+4").1, None);
        assert_eq!(parse_all(b"SET \"abc\r\n").1, Some(UnbalancedQuotes));
        let mut big = vec![b'a'; INLINE_MAX + 1];
        assert_eq!(parse_all(&big).1, Some(TooBigInlineRequest));
        assert_eq!(parse_all(&big[..INLINE_MAX]).1, None);
        big[0] = b'*';
        assert_eq!(parse_all(&big).1, Some(TooBigMbulkCountString));
        assert_eq!(
            reply(TooBigMbulkCountString),
            "-ERR Protocol error: too big mbulk count string\r\n"
        );
    }

    #[test]
    fn inline_lines_up_to_64k_pass_and_longer_ones_are_refused() {
        let mut line = vec![b'a'; INLINE_MAX];
        line.extend_from_slice(b"\r\n");
        assert_eq!(parse_all(&line), (vec![vec![vec![b'a'; INLINE_MAX]]], None));
        let mut line = vec![b'a'; INLINE_MAX + 1];
        line.push(b'\n');
        assert_eq!(parse_all(&line).1, Some(ProtocolError::TooBigInlineRequest));
    }

    #[test]
    fn a_nul_hides_the_newline_of_an_inline_request() {
        assert_eq!(parse_all(b"PI\0NG\r\nPING\r\n"), (vec![], None));
        let mut big = b"PING\0".to_vec();
        big.resize(INLINE_MAX + 1, b'\n');
        assert_eq!(parse_all(&big).1, Some(ProtocolError::TooBigInlineRequest));
        // Inside a bulk a NUL is data.
        assert_eq!(
            parse_all(b"*1\r\n$3\r\na\0b\r\n"),
            (vec![vec![b"a\0b".to_vec()]], None)
        );
    }

    #[test]
    fn inline_words_follow_valkey_9() {
        let words = |line: &str| -> Result<Vec<String>, ()> {
            let (mut out, mut args) = (Vec::new(), Vec::new());
            split_inline(line.as_bytes(), &mut out, &mut args)?;
            Ok(args
                .iter()
                .map(|r| String::from_utf8_lossy(&out[r.clone()]).into_owned())
                .collect())
        };
        let ok = |line: &str, want: &[&str]| {
            let want: Vec<String> = want.iter().map(|s| s.to_string()).collect();
            assert_eq!(words(line), Ok(want), "{line:?}")
        };
        ok("  ECHO \t hello  ", &["ECHO", "hello"]);
        ok("EC\rHO x", &["EC", "HO", "x"]);
        ok("\x0bPING", &["PING"]);
        ok("PING\x0b", &["PING\x0b"]);
        ok(r#"ECHO "a\x41\n\t\"\\z""#, &["ECHO", "aA\n\t\"\\z"]);
        ok(r#"ECHO "a\xZZ""#, &["ECHO", "axZZ"]);
        ok(r#"ECHO "\x4""#, &["ECHO", "x4"]);
        ok(r#"ECHO 'it\'s \n'"#, &["ECHO", "it's \\n"]);
        ok(r#"ECHO 'a\qb'"#, &["ECHO", "a\\qb"]);
        ok(r#"ECHO "a\qb""#, &["ECHO", "aqb"]);
        ok(r#"ECHO ab"cd""#, &["ECHO", "abcd"]);
        ok(r#"ECHO "a"b"#, &["ECHO", "ab"]);
        ok(r#"ECHO "a"'b'"#, &["ECHO", "ab"]);
        ok(r#"ECHO a"b c"d"#, &["ECHO", "ab cd"]);
        ok(r#"ECHO "a"b c"#, &["ECHO", "ab", "c"]);
        ok(r#"ECHO """#, &["ECHO", ""]);
        ok(r#"ECHO """""#, &["ECHO", ""]);
        // A backslash before the last character stays.
        ok(r#"ECHO "\""#, &["ECHO", "\\"]);
        ok(r#"ECHO "ab\""#, &["ECHO", "ab\\"]);
        ok(r#"ECHO "a\"b""#, &["ECHO", "a\"b"]);
        ok(r#"ECHO "a\\""#, &["ECHO", "a\\"]);
        ok(r#"ECHO "\\\""#, &["ECHO", "\\\\"]);
        ok(r#"ECHO 'a\'"#, &["ECHO", "a\\"]);
        ok(r#"ECHO 'a\'b'"#, &["ECHO", "a'b"]);
        ok("ECHO \"a\rb\"", &["ECHO", "a\rb"]);
        for bad in [
            r#"SET "abc"#,
            "ECHO 'abc",
            r#"ECHO ab"cd"#,
            r#"ECHO "ab\" "#,
            "ECHO \x27\x27\x27",
            r#"ECHO "a\"x"#,
        ] {
            assert_eq!(words(bad), Err(()), "{bad:?}");
        }
    }

    #[test]
    fn limits_refuse_from_the_header() {
        let lim = Limits {
            max_bulk_len: 10,
            unauthenticated: false,
        };
        assert_eq!(
            parse_with(b"*1\r\n$11\r\n", lim).1,
            Some(ProtocolError::InvalidBulkLength)
        );
        assert_eq!(parse_with(b"*1\r\n$10\r\n", lim).1, None);
        let unauth = Limits {
            unauthenticated: true,
            ..LIM
        };
        assert_eq!(
            parse_with(b"*11\r\n", unauth).1,
            Some(ProtocolError::UnauthenticatedMultibulkLength)
        );
        assert_eq!(parse_with(b"*10\r\n", unauth).1, None);
        assert_eq!(
            parse_with(b"*1\r\n$16385\r\n", unauth).1,
            Some(ProtocolError::UnauthenticatedBulkLength)
        );
        assert_eq!(parse_with(b"*1\r\n$16384\r\n", unauth).1, None);
        let (mut args, mut scratch) = (Vec::new(), Vec::new());
        assert_eq!(
            parse_request(b"*0\r\n", &mut args, &mut scratch, LIM),
            Parsed::Command {
                consumed: 4,
                inline: false
            }
        );
        assert!(args.is_empty());
        // Complete arguments of a request in progress are settled.
        assert_eq!(
            parse_request(
                b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nval",
                &mut args,
                &mut scratch,
                LIM
            ),
            Parsed::Incomplete { settled: 20 }
        );
    }

    /// Every captured case (tests/vectors/resp-cases.json): the protocol error Valkey 9.1
    /// answered (the last line of its reply), and none where it answered none.
    #[test]
    fn captured_cases() {
        let doc: serde_json::Value =
            serde_json::from_str(include_str!("../tests/vectors/resp-cases.json")).unwrap();
        let mut checked = 0;
        for case in doc["cases"].as_array().unwrap() {
            let name = case["name"].as_str().unwrap();
            let group = case["group"].as_str().unwrap();
            let mut bytes = parts(&case["send"]);
            bytes.extend(parts(&case["then"]));
            let lim = Limits {
                max_bulk_len: if group == "small-limits" {
                    1 << 20
                } else {
                    512 << 20
                },
                unauthenticated: group == "auth",
            };
            let want = &case["expect"]["valkey-9.1"];
            let reply = latin1(want["reply"].as_str().unwrap());
            let proto_err = reply
                .split(|&b| b == b'\n')
                .find(|l| l.starts_with(b"-ERR Protocol error: "))
                .map(|l| l.to_vec());
            let (_, got) = parse_with(&bytes, lim);
            let got = got.map(|e| {
                let mut o = Vec::new();
                e.write_reply(&mut o);
                o.pop();
                o
            });
            if group == "qbuf" {
                // The query buffer limit is the connection's (tests/resp_vectors.rs).
                assert_eq!(got, None, "{name}");
                continue;
            }
            assert_eq!(
                got.as_deref().map(String::from_utf8_lossy),
                proto_err.as_deref().map(String::from_utf8_lossy),
                "case {name}"
            );
            if got.is_some() {
                assert!(want["closed"].as_bool().unwrap(), "{name} closes");
            }
            checked += 1;
        }
        assert!(checked > 50, "{checked}");
    }

    proptest::proptest! {
        #[test]
        fn roundtrip_any_args(cmds in proptest::collection::vec(
            proptest::collection::vec(proptest::collection::vec(proptest::num::u8::ANY, 0..40), 1..6), 1..5)) {
            let mut wire = Vec::new();
            for c in &cmds {
                wire.extend_from_slice(format!("*{}\r\n", c.len()).as_bytes());
                for a in c {
                    wire.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
                    wire.extend_from_slice(a);
                    wire.extend_from_slice(b"\r\n");
                }
            }
            // Every prefix is Incomplete or a prefix of the commands: never an error.
            for cut in 0..wire.len() {
                let (got, err) = parse_all(&wire[..cut]);
                proptest::prop_assert_eq!(err, None);
                proptest::prop_assert!(got.len() <= cmds.len());
            }
            let (got, err) = parse_all(&wire);
            proptest::prop_assert_eq!(err, None);
            proptest::prop_assert_eq!(got, cmds);
        }

        #[test]
        fn garbage_never_panics(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..200)) {
            let _ = parse_all(&bytes);
            let _ = parse_with(&bytes, Limits { max_bulk_len: 3, unauthenticated: true });
        }

        #[test]
        fn quoted_words_roundtrip(words in proptest::collection::vec(proptest::collection::vec(proptest::num::u8::ANY, 0..12), 1..5)) {
            // Any bytes survive being written as "\xHH" escapes inside double quotes.
            let mut line = Vec::new();
            for w in &words {
                line.push(b'"');
                for b in w {
                    line.extend_from_slice(format!("\\x{b:02x}").as_bytes());
                }
                line.extend_from_slice(b"\" ");
            }
            let (mut out, mut args) = (Vec::new(), Vec::new());
            proptest::prop_assert!(split_inline(&line, &mut out, &mut args).is_ok());
            let got: Vec<Vec<u8>> = args.iter().map(|r| out[r.clone()].to_vec()).collect();
            proptest::prop_assert_eq!(got, words);
        }
    }

    #[test]
    fn replies_decode_with_redis_protocol() {
        use redis_protocol::resp2::decode::decode as d2;
        use redis_protocol::resp3::decode::complete::decode as d3;
        let mut o = Out::new();
        o.array(5);
        o.ok();
        o.error("ERR bad");
        o.int(-42);
        o.bulk(b"a\r\nb");
        o.null();
        let (frame, used) = d2(&o.buf).unwrap().unwrap();
        assert_eq!(used, o.buf.len());
        use redis_protocol::resp2::types::OwnedFrame as F2;
        assert_eq!(
            frame,
            F2::Array(vec![
                F2::SimpleString(b"OK".to_vec()),
                F2::Error("ERR bad".into()),
                F2::Integer(-42),
                F2::BulkString(b"a\r\nb".to_vec()),
                F2::Null,
            ])
        );
        let mut o = Out::new();
        o.proto = 3;
        o.map(1);
        o.bulk(b"k");
        o.set(0);
        o.push(2);
        o.bulk(b"message");
        o.null();
        o.verbatim(b"# Server\r\n");
        let mut pos = 0;
        let mut frames = Vec::new();
        while pos < o.buf.len() {
            let (f, used) = d3(&o.buf[pos..]).unwrap().unwrap();
            frames.push(f);
            pos += used;
        }
        assert_eq!(frames.len(), 3);
        assert!(matches!(
            frames[0],
            redis_protocol::resp3::types::OwnedFrame::Map { .. }
        ));
        assert!(matches!(
            frames[1],
            redis_protocol::resp3::types::OwnedFrame::Push { .. }
        ));
        assert!(matches!(
            frames[2],
            redis_protocol::resp3::types::OwnedFrame::VerbatimString { .. }
        ));
    }
}
