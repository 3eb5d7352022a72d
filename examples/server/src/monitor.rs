//! `MONITOR`: every command the server runs, as a status line to each monitoring connection
//! (Redis 7.0 `replicationFeedMonitors`, src/replication.c):
//! `+<unix s>.<µs> [<db> <ip:port>] "arg" "arg"...` with each argument quoted as
//! `sdscatrepr` quotes it. Commands flagged `skip_monitor` or `admin` are not shown (Redis 7.0
//! `call()`), nor are those of the replication stream's applier (it has no address).
//!
//! A server without monitors pays one relaxed load per command.

use crate::client::{Args, Delivery};
use crate::server::Shared;
use parking_lot::RwLock;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// The monitoring connections: (I/O thread, token, client id).
#[derive(Debug, Default)]
pub struct Monitors {
    count: AtomicUsize,
    list: RwLock<Vec<(usize, usize, u64)>>,
}

impl Monitors {
    /// Adds a monitoring connection.
    pub fn add(&self, io_thread: usize, token: usize, client_id: u64) {
        let mut l = self.list.write();
        if !l.iter().any(|m| m.2 == client_id) {
            l.push((io_thread, token, client_id));
            self.count.store(l.len(), Ordering::Relaxed);
        }
    }

    /// Removes a connection (closed or RESET).
    pub fn remove(&self, client_id: u64) {
        let mut l = self.list.write();
        l.retain(|m| m.2 != client_id);
        self.count.store(l.len(), Ordering::Relaxed);
    }

    /// Whether any connection monitors.
    pub fn any(&self) -> bool {
        self.count.load(Ordering::Relaxed) > 0
    }
}

/// Appends `arg` quoted as Redis's `sdscatrepr`: `"..."` with `\\`, `\"`, `\n`, `\r`, `\t`,
/// `\a`, `\b` escaped and other non-printable bytes as `\xHH`.
fn push_repr(line: &mut Vec<u8>, arg: &[u8]) {
    line.push(b'"');
    for &b in arg {
        match b {
            b'\\' => line.extend_from_slice(b"\\\\"),
            b'"' => line.extend_from_slice(b"\\\""),
            b'\n' => line.extend_from_slice(b"\\n"),
            b'\r' => line.extend_from_slice(b"\\r"),
            b'\t' => line.extend_from_slice(b"\\t"),
            7 => line.extend_from_slice(b"\\a"),
            8 => line.extend_from_slice(b"\\b"),
            0x20..=0x7e => line.push(b),
            _ => line.extend_from_slice(format!("\\x{b:02x}").as_bytes()),
        }
    }
    line.push(b'"');
}

/// The MONITOR line of one command (`now_us`: unix µs).
pub fn line(now_us: u64, db: usize, addr: &str, args: &Args<'_>) -> Vec<u8> {
    let mut l = format!(
        "+{}.{:06} [{} {}]",
        now_us / 1_000_000,
        now_us % 1_000_000,
        db,
        addr
    )
    .into_bytes();
    for i in 0..args.len() {
        l.push(b' ');
        push_repr(&mut l, args.get(i));
    }
    l.extend_from_slice(b"\r\n");
    l
}

/// Sends one command's line to every monitor.
pub fn feed(shared: &Shared, db: usize, addr: std::net::SocketAddr, args: &Args<'_>) {
    let Some(io) = shared.io.get() else {
        return;
    };
    let now_us = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or(0);
    let bytes: Arc<[u8]> = line(now_us, db, &addr.to_string(), args).into();
    for &(thread, token, client_id) in shared.monitors.list.read().iter() {
        if let Some(h) = io.get(thread) {
            h.send(crate::net::ToIo::Deliver {
                token,
                client_id,
                what: Delivery::Raw(Arc::clone(&bytes)),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_quote_arguments_as_redis_does() {
        let flat = b"set\"a\\b\n\x01".to_vec();
        let ranges = vec![0..3, 3..9];
        let args = Args::new(&flat, &ranges);
        let l = line(1_339_518_083_107_412, 0, "127.0.0.1:60866", &args);
        assert_eq!(
            String::from_utf8(l).unwrap(),
            "+1339518083.107412 [0 127.0.0.1:60866] \"set\" \"\\\"a\\\\b\\n\\x01\"\r\n"
        );
    }
}
