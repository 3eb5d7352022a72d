//! A primary's write stream as Valkey's test harness watches it (`attach_to_replication_stream`):
//! `SYNC`, the RDB (`$<len>\r\n` and its bytes), then the commands, PINGs left out.

use super::{encode, frame_len, Client};
use std::io::Read;

/// A `SYNC` connection past its RDB.
pub struct ReplStream {
    c: Client,
    pending: Vec<u8>,
    /// The RDB's first five bytes (`REDIS` / `VALKE`).
    pub magic: String,
}

impl ReplStream {
    /// Sends `SYNC` to `port` and reads the RDB.
    pub fn attach(port: u16) -> ReplStream {
        let mut c = Client::connect(port);
        c.send_raw(&encode(&[b"SYNC"]));
        let head = line(&mut c);
        let len: usize = head
            .strip_prefix('$')
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("{port}: SYNC answered {head:?}"));
        let mut rdb = vec![0u8; len];
        c.stream.read_exact(&mut rdb).expect("the RDB");
        let magic = String::from_utf8_lossy(&rdb[..5.min(len)]).to_string();
        ReplStream {
            c,
            pending: Vec::new(),
            magic,
        }
    }

    /// The next command of the stream that is not a PING, as its arguments (the command name
    /// lowercased, as the harness's `read_from_replication_stream`).
    pub fn next_command(&mut self) -> Vec<String> {
        loop {
            if let Some(n) = frame_len(&self.pending, 0) {
                let frame: Vec<u8> = self.pending.drain(..n).collect();
                let text = String::from_utf8_lossy(&frame).to_string();
                let mut args: Vec<String> = text
                    .split("\r\n")
                    .skip(1)
                    .filter(|p| !p.starts_with('$') && !p.is_empty())
                    .map(str::to_string)
                    .collect();
                if let Some(a) = args.first_mut() {
                    *a = a.to_ascii_lowercase();
                }
                if args.first().is_some_and(|a| a == "ping") {
                    continue;
                }
                return args;
            }
            let mut buf = [0u8; 4096];
            let n = self.c.stream.read(&mut buf).expect("read the stream");
            assert!(n > 0, "the stream closed");
            self.pending.extend_from_slice(&buf[..n]);
        }
    }

    /// The commands up to and including the first whose arguments are `last`.
    pub fn commands_until(&mut self, last: &[&str]) -> Vec<Vec<String>> {
        let mut got = Vec::new();
        loop {
            let c = self.next_command();
            let end = c.len() == last.len() && c.iter().zip(last).all(|(a, b)| a == b);
            got.push(c);
            if end {
                return got;
            }
        }
    }
}

/// Reads one `\n`-terminated line (after any lone `\n` keepalives).
fn line(c: &mut Client) -> String {
    let mut out = Vec::new();
    let mut b = [0u8; 1];
    loop {
        c.stream.read_exact(&mut b).expect("read");
        if b[0] == b'\n' {
            if out.is_empty() {
                continue; // a keepalive newline before the payload
            }
            break;
        }
        out.push(b[0]);
    }
    String::from_utf8_lossy(&out)
        .trim_end_matches('\r')
        .to_string()
}
