//! Test helpers: a small RESP2/RESP3 parser into `Reply` (to read captured replies).
#![allow(dead_code)]

use ferrocluster_topology::Reply;

/// Parses exactly one RESP value; panics on malformed input (test data).
pub fn parse_resp(bytes: &[u8]) -> Reply {
    let mut pos = 0;
    let r = parse_at(bytes, &mut pos);
    assert_eq!(pos, bytes.len(), "trailing bytes after one RESP value");
    r
}

fn line<'a>(b: &'a [u8], pos: &mut usize) -> &'a str {
    let start = *pos;
    let end = start
        + b[start..]
            .windows(2)
            .position(|w| w == b"\r\n")
            .expect("CRLF");
    *pos = end + 2;
    std::str::from_utf8(&b[start..end]).unwrap()
}

fn parse_at(b: &[u8], pos: &mut usize) -> Reply {
    let t = b[*pos];
    *pos += 1;
    let head = line(b, pos);
    match t {
        b'+' => Reply::Simple(head.to_owned()),
        b'-' => Reply::Error(head.to_owned()),
        b':' => Reply::Integer(head.parse().unwrap()),
        b'_' => Reply::Null,
        b'#' => Reply::Bool(head == "t"),
        b',' => Reply::Double(head.parse().unwrap()),
        b'$' | b'=' => {
            let n: i64 = head.parse().unwrap();
            if n < 0 {
                return Reply::Null;
            }
            let n = n as usize;
            let data = b[*pos..*pos + n].to_vec();
            *pos += n + 2;
            if t == b'=' {
                Reply::Verbatim(String::from_utf8(data[4..].to_vec()).unwrap())
            } else {
                Reply::Bulk(data)
            }
        }
        b'*' => {
            let n: usize = head.parse().unwrap();
            Reply::Array((0..n).map(|_| parse_at(b, pos)).collect())
        }
        b'%' => {
            let n: usize = head.parse().unwrap();
            Reply::Map(
                (0..n)
                    .map(|_| (parse_at(b, pos), parse_at(b, pos)))
                    .collect(),
            )
        }
        other => panic!("unknown RESP type byte {other:#x}"),
    }
}

/// Text of a bulk / simple / verbatim reply.
pub fn text_of(r: &Reply) -> String {
    match r {
        Reply::Bulk(b) => String::from_utf8(b.clone()).unwrap(),
        Reply::Simple(s) | Reply::Verbatim(s) => s.clone(),
        other => panic!("not text: {other:?}"),
    }
}

/// Looks a key up in a map (RESP3 `Map`) or a flat key/value array (RESP2).
pub fn map_get<'a>(r: &'a Reply, key: &str) -> &'a Reply {
    match r {
        Reply::Map(pairs) => &pairs.iter().find(|(k, _)| text_of(k) == key).expect(key).1,
        Reply::Array(items) => {
            let i = items
                .chunks(2)
                .position(|c| text_of(&c[0]) == key)
                .expect(key);
            &items[2 * i + 1]
        }
        other => panic!("not a map: {other:?}"),
    }
}
