//! RESP2 encoding of commands and decoding of replies into the resolver's `Value`,
//! with the `redis-protocol` crate.

use ferrocluster_sentinel::Value;
use redis_protocol::resp2::types::{OwnedFrame, Resp2Frame};

/// RESP2 bytes of a command: an array of bulk strings.
pub fn encode_command(argv: &[Vec<u8>]) -> Vec<u8> {
    let frame = OwnedFrame::Array(argv.iter().cloned().map(OwnedFrame::BulkString).collect());
    let mut buf = vec![0u8; frame.encode_len(false)];
    // The buffer is exactly `encode_len` bytes, so encoding cannot run out of room.
    let n = redis_protocol::resp2::encode::encode(&mut buf, &frame, false)
        .expect("buffer sized by encode_len");
    buf.truncate(n);
    buf
}

/// Converts a decoded RESP2 frame into a protocol-neutral value.
pub fn to_value(frame: OwnedFrame) -> Value {
    match frame {
        OwnedFrame::SimpleString(s) => Value::Simple(String::from_utf8_lossy(&s).into_owned()),
        OwnedFrame::Error(e) => Value::Error(e),
        OwnedFrame::Integer(i) => Value::Int(i),
        OwnedFrame::BulkString(b) => Value::Bulk(b),
        OwnedFrame::Array(items) => Value::Array(items.into_iter().map(to_value).collect()),
        OwnedFrame::Null => Value::Nil,
    }
}

/// Decodes every complete frame at the front of `buf`, removing the bytes it used.
///
/// # Errors
/// The stream is not RESP2; the connection must be dropped.
pub fn decode_all(buf: &mut Vec<u8>) -> Result<Vec<Value>, String> {
    let mut out = Vec::new();
    loop {
        match redis_protocol::resp2::decode::decode(buf) {
            Ok(Some((frame, used))) => {
                buf.drain(..used);
                out.push(to_value(frame));
            }
            Ok(None) => return Ok(out),
            Err(e) => return Err(format!("RESP decode error: {e:?}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_is_an_array_of_bulk_strings() {
        let argv = vec![
            b"SENTINEL".to_vec(),
            b"get-master-addr-by-name".to_vec(),
            b"m".to_vec(),
        ];
        assert_eq!(
            encode_command(&argv),
            b"*3\r\n$8\r\nSENTINEL\r\n$23\r\nget-master-addr-by-name\r\n$1\r\nm\r\n".to_vec()
        );
    }

    #[test]
    fn decodes_split_and_pipelined_replies() {
        let mut buf = b"*2\r\n$9\r\n127.0.0.1\r\n$4\r\n63".to_vec();
        assert_eq!(decode_all(&mut buf).unwrap(), vec![]);
        buf.extend_from_slice(b"79\r\n*-1\r\n-ERR x\r\n+OK\r\n:5\r\n");
        assert_eq!(
            decode_all(&mut buf).unwrap(),
            vec![
                Value::Array(vec![Value::bulk("127.0.0.1"), Value::bulk("6379")]),
                Value::Nil,
                Value::Error("ERR x".into()),
                Value::Simple("OK".into()),
                Value::Int(5),
            ]
        );
        assert!(buf.is_empty());
    }

    #[test]
    fn garbage_is_an_error() {
        let mut buf = b"?what\r\n".to_vec();
        assert!(decode_all(&mut buf).is_err());
    }
}
