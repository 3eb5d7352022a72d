//! RESP on the data port: a request parser and a reply writer.
//!
//! Requests are always RESP2 multibulk arrays of bulk strings (or inline commands), whatever
//! the reply protocol; replies are RESP2 or RESP3 (after `HELLO 3`). We parse requests here
//! rather than with `redis-protocol` because the server needs three things that crate does not
//! give: (1) redis-server's exact protocol error texts (`Protocol error: invalid multibulk
//! length`, ...), (2) limits checked from the headers before the data arrives, so an oversized
//! request is refused at once, and (3) no allocation per command: arguments are byte ranges
//! into the connection's read buffer, collected in a reused `Vec`. Replies are written straight
//! into the connection's output buffer. The tests decode what we write with `redis-protocol`.
//!
//! Texts and limits follow redis-server `networking.c` (`processMultibulkBuffer`,
//! `processInlineBuffer`): multibulk count at most 1024*1024*1024 (we also cap it by the query
//! buffer limit), bulk length at most `proto-max-bulk-len`, header lines at most 64 KiB.

use std::borrow::Cow;
use std::ops::Range;

/// Longest inline request or header line without a newline (redis `PROTO_INLINE_MAX_SIZE`).
pub const INLINE_MAX: usize = 64 * 1024;

/// Limits applied while parsing.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Largest bulk string, bytes (`proto-max-bulk-len`).
    pub max_bulk_len: usize,
    /// Largest multibulk element count.
    pub max_multibulk: usize,
}

/// The outcome of one parse attempt.
#[derive(Debug, PartialEq, Eq)]
pub enum Parsed {
    /// A command was parsed into the argument vector; `consumed` bytes may be dropped.
    /// An empty argument vector means an empty request (skipped, no reply).
    Command {
        /// Bytes of the buffer the request used.
        consumed: usize,
    },
    /// More bytes are needed.
    Incomplete,
    /// The stream is broken: reply `-ERR <text>` and close the connection.
    Error(Cow<'static, str>),
}

fn find_crlf(buf: &[u8], from: usize) -> Option<usize> {
    let mut i = from;
    while let Some(off) = buf[i..].iter().position(|&b| b == b'\r') {
        let p = i + off;
        if p + 1 >= buf.len() {
            return None;
        }
        if buf[p + 1] == b'\n' {
            return Some(p);
        }
        i = p + 1;
    }
    None
}

fn parse_len(bytes: &[u8]) -> Option<i64> {
    if bytes.is_empty() || bytes.len() > 20 {
        return None;
    }
    let (neg, digits) = match bytes[0] {
        b'-' => (true, &bytes[1..]),
        _ => (false, bytes),
    };
    if digits.is_empty() {
        return None;
    }
    let mut n: i64 = 0;
    for &b in digits {
        if !b.is_ascii_digit() {
            return None;
        }
        n = n.checked_mul(10)?.checked_add(i64::from(b - b'0'))?;
    }
    Some(if neg { -n } else { n })
}

/// Parses one request from `buf`, filling `args` with byte ranges into `buf`.
pub fn parse_request(buf: &[u8], args: &mut Vec<Range<usize>>, limits: Limits) -> Parsed {
    args.clear();
    if buf.is_empty() {
        return Parsed::Incomplete;
    }
    if buf[0] != b'*' {
        return parse_inline(buf, args);
    }
    let Some(eol) = find_crlf(buf, 1) else {
        if buf.len() > INLINE_MAX {
            return Parsed::Error(Cow::Borrowed("Protocol error: too big mbulk count string"));
        }
        return Parsed::Incomplete;
    };
    let count = match parse_len(&buf[1..eol]) {
        Some(n) if n <= limits.max_multibulk as i64 => n,
        _ => return Parsed::Error(Cow::Borrowed("Protocol error: invalid multibulk length")),
    };
    let mut pos = eol + 2;
    if count <= 0 {
        return Parsed::Command { consumed: pos };
    }
    for _ in 0..count {
        if pos >= buf.len() {
            return Parsed::Incomplete;
        }
        if buf[pos] != b'$' {
            return Parsed::Error(
                format!("Protocol error: expected '$', got '{}'", buf[pos] as char).into(),
            );
        }
        let Some(eol) = find_crlf(buf, pos + 1) else {
            if buf.len() - pos > INLINE_MAX {
                return Parsed::Error(Cow::Borrowed("Protocol error: too big bulk count string"));
            }
            return Parsed::Incomplete;
        };
        let len = match parse_len(&buf[pos + 1..eol]) {
            Some(n) if n >= 0 && n as u64 <= limits.max_bulk_len as u64 => n as usize,
            _ => return Parsed::Error(Cow::Borrowed("Protocol error: invalid bulk length")),
        };
        let start = eol + 2;
        let end = start + len;
        if end + 2 > buf.len() {
            return Parsed::Incomplete;
        }
        if &buf[end..end + 2] != b"\r\n" {
            return Parsed::Error(Cow::Borrowed("Protocol error: invalid bulk length"));
        }
        args.push(start..end);
        pos = end + 2;
    }
    Parsed::Command { consumed: pos }
}

fn parse_inline(buf: &[u8], args: &mut Vec<Range<usize>>) -> Parsed {
    let Some(nl) = buf.iter().position(|&b| b == b'\n') else {
        if buf.len() > INLINE_MAX {
            return Parsed::Error(Cow::Borrowed("Protocol error: too big inline request"));
        }
        return Parsed::Incomplete;
    };
    let line_end = if nl > 0 && buf[nl - 1] == b'\r' {
        nl - 1
    } else {
        nl
    };
    let line = &buf[..line_end];
    let mut i = 0;
    while i < line.len() {
        while i < line.len() && line[i].is_ascii_whitespace() {
            i += 1;
        }
        if i >= line.len() {
            break;
        }
        if line[i] == b'"' || line[i] == b'\'' {
            // Quoted words are rare in inline requests; escapes are not supported, the quoted
            // text is taken as it is (redis-server would unescape \n, \xHH, ...).
            let q = line[i];
            let start = i + 1;
            let Some(off) = line[start..].iter().position(|&b| b == q) else {
                return Parsed::Error(Cow::Borrowed(
                    "Protocol error: unbalanced quotes in request",
                ));
            };
            args.push(start..start + off);
            i = start + off + 1;
        } else {
            let start = i;
            while i < line.len() && !line[i].is_ascii_whitespace() {
                i += 1;
            }
            args.push(start..i);
        }
    }
    Parsed::Command { consumed: nl + 1 }
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
mod tests {
    use super::*;

    const LIM: Limits = Limits {
        max_bulk_len: 512 * 1024 * 1024,
        max_multibulk: 1024 * 1024,
    };

    fn parse_all(buf: &[u8]) -> (Vec<Vec<Vec<u8>>>, Option<String>) {
        let mut args = Vec::new();
        let mut out = Vec::new();
        let mut pos = 0;
        loop {
            match parse_request(&buf[pos..], &mut args, LIM) {
                Parsed::Command { consumed } => {
                    out.push(
                        args.iter()
                            .map(|r| buf[pos..][r.clone()].to_vec())
                            .collect(),
                    );
                    pos += consumed;
                }
                Parsed::Incomplete => return (out, None),
                Parsed::Error(e) => return (out, Some(e.into_owned())),
            }
        }
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
    fn errors_use_redis_texts() {
        assert_eq!(
            parse_all(b"*abc\r\n").1,
            Some("Protocol error: invalid multibulk length".to_string())
        );
        assert_eq!(
            parse_all(b"*2\r\n$3\r\nGET\r\n+x\r\n").1,
            Some("Protocol error: expected '$', got '+'".to_string())
        );
        assert_eq!(
            parse_all(b"*1\r\n$-5\r\n").1,
            Some("Protocol error: invalid bulk length".to_string())
        );
        assert_eq!(
            parse_all(b"*1\r\n$3\r\nGETxx").1,
            Some("Protocol error: invalid bulk length".to_string())
        );
        assert_eq!(
            parse_all(b"SET \"abc\r\n").1,
            Some("Protocol error: unbalanced quotes in request".to_string())
        );
        let mut big = vec![b'a'; INLINE_MAX + 1];
        assert_eq!(
            parse_all(&big).1,
            Some("Protocol error: too big inline request".to_string())
        );
        big[0] = b'*';
        assert_eq!(
            parse_all(&big).1,
            Some("Protocol error: too big mbulk count string".to_string())
        );
    }

    #[test]
    fn limits_refuse_from_the_header() {
        let lim = Limits {
            max_bulk_len: 10,
            max_multibulk: 4,
        };
        let mut args = Vec::new();
        assert_eq!(
            parse_request(b"*1\r\n$11\r\n", &mut args, lim),
            Parsed::Error(Cow::Borrowed("Protocol error: invalid bulk length"))
        );
        assert_eq!(
            parse_request(b"*5\r\n", &mut args, lim),
            Parsed::Error(Cow::Borrowed("Protocol error: invalid multibulk length"))
        );
        assert_eq!(
            parse_request(b"*0\r\n", &mut args, lim),
            Parsed::Command { consumed: 4 }
        );
        assert!(args.is_empty());
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
