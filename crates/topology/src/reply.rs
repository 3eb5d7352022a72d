//! Protocol-neutral reply values and their RESP2 / RESP3 encodings, and the encoding of a
//! command ([`encode_command`]).
//!
//! The views and the node's command executor return [`Reply`]; the host encodes it for the
//! client's protocol with [`Reply::encode_resp2`] or [`Reply::encode_resp3`] (or its own
//! encoder). The encodings follow the real servers' bytes (checked against the captures in
//! `shared/vectors/*/text`): in RESP2 a map is a flat array of `2n` items and a verbatim string
//! is a plain bulk string; in RESP3 they are `%n` and `=len\r\ntxt:...`.
//!
//! A command a node writes to another (a replication stream, a slot migration stream, a
//! `CLUSTER SYNCSLOTS` message, a `RESTORE` of MIGRATE) is an array of bulk strings:
//! [`encode_command`] writes it without building a [`Reply`] first.

/// A reply value, independent of the wire protocol.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// A status line: `+OK`. Must not contain `\r` or `\n`.
    Simple(String),
    /// An error line; the text includes its code (`ERR ...`, `MOVED ...`). Must not contain
    /// `\r` or `\n`.
    Error(String),
    /// A signed integer.
    Integer(i64),
    /// A binary-safe bulk string.
    Bulk(Vec<u8>),
    /// Text meant for humans, sent as RESP3 verbatim string of format `txt` (CLUSTER INFO,
    /// CLUSTER NODES, §19.1/§19.4); RESP2 sends it as a bulk string.
    Verbatim(String),
    /// An array.
    Array(Vec<Reply>),
    /// A map with ordered pairs (key order is part of the reply).
    Map(Vec<(Reply, Reply)>),
    /// The null value (RESP2 `$-1`, RESP3 `_`).
    Null,
    /// A double (RESP2: bulk string of its text form; RESP3 `,`).
    Double(f64),
    /// A boolean (RESP2: integer 1/0; RESP3 `#t`/`#f`).
    Bool(bool),
}

impl Reply {
    /// `+OK`.
    pub fn ok() -> Reply {
        Reply::Simple("OK".to_owned())
    }

    /// A bulk string from text.
    pub fn bulk(text: impl AsRef<[u8]>) -> Reply {
        Reply::Bulk(text.as_ref().to_vec())
    }

    /// An integer from any unsigned count, saturating at `i64::MAX`.
    pub fn uint(n: u64) -> Reply {
        Reply::Integer(i64::try_from(n).unwrap_or(i64::MAX))
    }

    /// Appends the RESP2 encoding to `out`.
    pub fn encode_resp2(&self, out: &mut Vec<u8>) {
        self.encode(out, false)
    }

    /// Appends the RESP3 encoding to `out`.
    pub fn encode_resp3(&self, out: &mut Vec<u8>) {
        self.encode(out, true)
    }

    /// The RESP2 encoding as a new buffer.
    pub fn to_resp2(&self) -> Vec<u8> {
        let mut v = Vec::new();
        self.encode_resp2(&mut v);
        v
    }

    /// The RESP3 encoding as a new buffer.
    pub fn to_resp3(&self) -> Vec<u8> {
        let mut v = Vec::new();
        self.encode_resp3(&mut v);
        v
    }

    fn encode(&self, out: &mut Vec<u8>, resp3: bool) {
        fn line(out: &mut Vec<u8>, prefix: u8, body: &str) {
            out.push(prefix);
            // Line replies cannot carry CR/LF; replace them so the stream stays framed.
            out.extend(
                body.bytes()
                    .map(|b| if b == b'\r' || b == b'\n' { b' ' } else { b }),
            );
            out.extend_from_slice(b"\r\n");
        }
        fn bulk(out: &mut Vec<u8>, prefix: u8, body: &[u8]) {
            out.push(prefix);
            push_bulk_body(out, body);
        }
        match self {
            Reply::Simple(s) => line(out, b'+', s),
            Reply::Error(s) => line(out, b'-', s),
            Reply::Integer(n) => line(out, b':', &n.to_string()),
            Reply::Bulk(b) => bulk(out, b'$', b),
            Reply::Verbatim(t) if resp3 => {
                let mut body = b"txt:".to_vec();
                body.extend_from_slice(t.as_bytes());
                bulk(out, b'=', &body)
            }
            Reply::Verbatim(t) => bulk(out, b'$', t.as_bytes()),
            Reply::Array(items) => {
                line(out, b'*', &items.len().to_string());
                for i in items {
                    i.encode(out, resp3);
                }
            }
            Reply::Map(pairs) => {
                if resp3 {
                    line(out, b'%', &pairs.len().to_string());
                } else {
                    line(out, b'*', &(pairs.len() * 2).to_string());
                }
                for (k, v) in pairs {
                    k.encode(out, resp3);
                    v.encode(out, resp3);
                }
            }
            Reply::Null if resp3 => out.extend_from_slice(b"_\r\n"),
            Reply::Null => out.extend_from_slice(b"$-1\r\n"),
            Reply::Double(d) if resp3 => line(out, b',', &format_double(*d)),
            Reply::Double(d) => bulk(out, b'$', format_double(*d).as_bytes()),
            Reply::Bool(b) if resp3 => {
                out.extend_from_slice(if *b { b"#t\r\n" } else { b"#f\r\n" })
            }
            Reply::Bool(b) => line(out, b':', if *b { "1" } else { "0" }),
        }
    }
}

/// Appends one command as servers send commands to each other (Valkey
/// `replicationFeedReplicas`, `rioWriteBulkString`): `*<argc>\r\n` then `$<len>\r\n<arg>\r\n`
/// per argument.
pub fn encode_command<A: AsRef<[u8]>>(out: &mut Vec<u8>, argv: &[A]) {
    encode_array_len(out, argv.len());
    for a in argv {
        encode_bulk(out, a.as_ref());
    }
}

/// Appends `*<n>\r\n`, the header of an array (a command) of `n` items; a writer that
/// produces the arguments one by one follows it with `n` [`encode_bulk`]s.
pub fn encode_array_len(out: &mut Vec<u8>, n: usize) {
    out.push(b'*');
    push_decimal(out, n as u64);
    out.extend_from_slice(b"\r\n");
}

/// Appends one bulk string: `$<len>\r\n<bytes>\r\n`.
pub fn encode_bulk(out: &mut Vec<u8>, bytes: &[u8]) {
    out.push(b'$');
    push_bulk_body(out, bytes);
}

/// The bytes of one command (see [`encode_command`]).
pub fn command_bytes<A: AsRef<[u8]>>(argv: &[A]) -> Vec<u8> {
    let mut v = Vec::new();
    encode_command(&mut v, argv);
    v
}

/// `<len>\r\n<body>\r\n`: a bulk string after its `$`.
fn push_bulk_body(out: &mut Vec<u8>, body: &[u8]) {
    push_decimal(out, body.len() as u64);
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(body);
    out.extend_from_slice(b"\r\n");
}

fn push_decimal(out: &mut Vec<u8>, mut n: u64) {
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&buf[i..]);
}

fn format_double(d: f64) -> String {
    if d.is_nan() {
        "nan".to_owned()
    } else if d.is_infinite() {
        if d > 0.0 { "inf" } else { "-inf" }.to_owned()
    } else {
        format!("{d}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scalar_encodings() {
        assert_eq!(Reply::ok().to_resp2(), b"+OK\r\n");
        assert_eq!(Reply::Error("ERR x".into()).to_resp3(), b"-ERR x\r\n");
        assert_eq!(Reply::Integer(-3).to_resp2(), b":-3\r\n");
        assert_eq!(Reply::bulk("ab").to_resp2(), b"$2\r\nab\r\n");
        assert_eq!(Reply::Null.to_resp2(), b"$-1\r\n");
        assert_eq!(Reply::Null.to_resp3(), b"_\r\n");
        assert_eq!(Reply::Bool(true).to_resp3(), b"#t\r\n");
        assert_eq!(Reply::Bool(false).to_resp2(), b":0\r\n");
        assert_eq!(Reply::Double(1.5).to_resp3(), b",1.5\r\n");
        assert_eq!(Reply::Double(f64::INFINITY).to_resp2(), b"$3\r\ninf\r\n");
    }

    #[test]
    fn verbatim_and_map() {
        let v = Reply::Verbatim("a\r\n".into());
        assert_eq!(v.to_resp2(), b"$3\r\na\r\n\r\n");
        assert_eq!(v.to_resp3(), b"=7\r\ntxt:a\r\n\r\n");
        let m = Reply::Map(vec![(Reply::bulk("k"), Reply::Integer(1))]);
        assert_eq!(m.to_resp2(), b"*2\r\n$1\r\nk\r\n:1\r\n");
        assert_eq!(m.to_resp3(), b"%1\r\n$1\r\nk\r\n:1\r\n");
        assert_eq!(Reply::Map(vec![]).to_resp2(), b"*0\r\n");
        assert_eq!(Reply::Map(vec![]).to_resp3(), b"%0\r\n");
    }

    #[test]
    fn commands_encode_like_valkey() {
        assert_eq!(
            command_bytes(&["SET", "k1", "v1"]),
            b"*3\r\n$3\r\nSET\r\n$2\r\nk1\r\n$2\r\nv1\r\n"
        );
        assert_eq!(command_bytes(&["ping"]), b"*1\r\n$4\r\nping\r\n");
        assert_eq!(command_bytes::<&str>(&[]), b"*0\r\n");
        let long = vec![b'x'; 12345];
        let argv: [&[u8]; 2] = [b"", &long];
        let bytes = command_bytes(&argv);
        assert!(bytes.starts_with(b"*2\r\n$0\r\n\r\n$12345\r\nxxx"));
        // The same bytes as an array of bulk strings.
        let as_reply = Reply::Array(argv.iter().map(Reply::bulk).collect());
        assert_eq!(as_reply.to_resp2(), bytes);
    }

    #[test]
    fn line_replies_cannot_break_framing() {
        assert_eq!(
            Reply::Error("ERR a\r\nb".into()).to_resp2(),
            b"-ERR a  b\r\n"
        );
    }
}
