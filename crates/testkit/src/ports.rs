//! Loopback ports for tests, from one allocator shared by every test process.
//!
//! A cluster node listens on a data port and on its bus port, data + [`BUS_OFFSET`] (Valkey's
//! default `cluster-port`). Both must be free when the node starts, and both must stay free
//! while it runs. Two things took them in the past:
//!
//! * **The kernel**, for the local end of an outgoing connection: Linux picks those ports from
//!   `net.ipv4.ip_local_port_range` (32768-60999 by default), and a closed connection keeps its
//!   port in TIME_WAIT for a minute. Every port handed out here, data and bus alike, lies in
//!   `DATA_FIRST..DATA_END + BUS_OFFSET` (12000-31999), below that range; a port inside the
//!   machine's actual range (read from `/proc`) is never handed out.
//! * **Another test process**: nextest runs every test in its own process and several test
//!   binaries at once. Each handed-out data port is held by an exclusive `flock` on a lock
//!   file in a directory shared by all of them (`$TMPDIR/ferrocluster-test-ports`), taken
//!   without blocking and released by the kernel when the process exits, however it exits. A
//!   shared cursor (under its own lock) moves round the range, so a port is handed out again
//!   only after the other ten thousand were, long after any TIME_WAIT of its last user.
//!
//! A port is also checked by binding it (and its bus port) on 127.0.0.1 before it is handed
//! out: a process left over from an earlier run keeps its ports to itself. There is no
//! "bind to port 0 and release": the kernel's pick comes from the outgoing range.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener};
use std::path::PathBuf;
use std::sync::Mutex;

/// The first data port handed out.
pub const DATA_FIRST: u16 = 12000;
/// One past the last data port handed out; the bus ports end at `DATA_END + BUS_OFFSET`
/// (32000), below Linux's default range for outgoing connections (32768).
pub const DATA_END: u16 = 22000;
/// The bus port of a node is its data port + 10000 (Valkey's default `cluster-port`).
pub const BUS_OFFSET: u16 = 10000;

/// Lock files of the ports this process holds: kept open (so locked) until the process exits.
static HELD: Mutex<Vec<File>> = Mutex::new(Vec::new());

/// One data port (its bus port, + [`BUS_OFFSET`], is free too), held by this process until it
/// exits.
///
/// Panics with the reason when no port is free in the whole range.
pub fn port() -> u16 {
    block(1)
}

/// `n` data ports (each with its bus port free too) for one test, in no particular order;
/// held by this process until it exits.
pub fn ports(n: usize) -> Vec<u16> {
    let first = block(n);
    (first..first + n as u16).collect()
}

/// The first of `n` consecutive data ports `first..first + n`, each with its bus port
/// (+ [`BUS_OFFSET`]) free too, held by this process until it exits. For tests and tools that
/// number nodes from a base port (`demo --base-port`, `six_node_cluster`).
///
/// Panics with the reason when `n` is 0 or no such block is free in the whole range.
pub fn block(n: usize) -> u16 {
    assert!(
        n > 0 && n < usize::from(DATA_END - DATA_FIRST),
        "ports::block({n}): n out of range"
    );
    let n = n as u16;
    let dir = lock_dir();
    let range = DATA_END - DATA_FIRST;
    let outgoing = outgoing_range();
    let mut cursor = Cursor::open(&dir);
    let start = cursor
        .read()
        .unwrap_or(DATA_FIRST + (std::process::id() % range as u32) as u16);
    let mut held = HELD.lock().unwrap_or_else(|e| e.into_inner());
    let mut offset = 0u32;
    while offset < u32::from(range) {
        let first =
            DATA_FIRST + ((u32::from(start - DATA_FIRST) + offset) % u32::from(range)) as u16;
        offset += 1;
        if first + n > DATA_END {
            continue;
        }
        let mut files = Vec::with_capacity(n as usize);
        let mut ok = true;
        for p in first..first + n {
            match take(&dir, p, outgoing) {
                Some(f) => files.push(f),
                None => {
                    // Skip past the port that was taken.
                    offset += u32::from(p - first);
                    ok = false;
                    break;
                }
            }
        }
        if ok {
            held.extend(files);
            cursor.write(if first + n >= DATA_END {
                DATA_FIRST
            } else {
                first + n
            });
            return first;
        }
    }
    panic!(
        "ports::block({n}): no {n} consecutive free ports in {DATA_FIRST}..{DATA_END} \
         (bus ports +{BUS_OFFSET}); lock files in {}",
        dir.display()
    );
}

/// Locks port `p`'s file without blocking and checks that `p` and its bus port can be bound
/// and lie outside the kernel's range for outgoing connections.
fn take(dir: &std::path::Path, p: u16, outgoing: (u16, u16)) -> Option<File> {
    let bus = p + BUS_OFFSET;
    if (outgoing.0..=outgoing.1).contains(&p) || (outgoing.0..=outgoing.1).contains(&bus) {
        return None;
    }
    let f = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(dir.join(format!("{p}.lock")))
        .unwrap_or_else(|e| panic!("ports: can't open {}/{p}.lock: {e}", dir.display()));
    f.try_lock().ok()?;
    (bindable(p) && bindable(bus)).then_some(f)
}

/// Whether nothing listens on `port` at 127.0.0.1 (nor at ::1, where the machine has IPv6).
fn bindable(port: u16) -> bool {
    if TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, port))).is_err() {
        return false;
    }
    match TcpListener::bind(SocketAddr::from((Ipv6Addr::LOCALHOST, port))) {
        Ok(_) => true,
        Err(e) => e.kind() != std::io::ErrorKind::AddrInUse,
    }
}

/// The kernel's range for the local ports of outgoing connections
/// (`/proc/sys/net/ipv4/ip_local_port_range`; Linux's default when unreadable).
pub fn outgoing_range() -> (u16, u16) {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| {
            let mut it = s.split_whitespace().map(|w| w.parse::<u16>().ok());
            Some((it.next()??, it.next()??))
        })
        .unwrap_or((32768, 60999))
}

/// The directory of the lock files, shared by every test process of this user and machine.
fn lock_dir() -> PathBuf {
    let dir = std::env::temp_dir().join("ferrocluster-test-ports");
    std::fs::create_dir_all(&dir)
        .unwrap_or_else(|e| panic!("ports: can't create {}: {e}", dir.display()));
    dir
}

/// The shared cursor: the next data port to try, in a file held under an exclusive lock while
/// one process allocates.
struct Cursor(File);

impl Cursor {
    fn open(dir: &std::path::Path) -> Cursor {
        let f = OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .write(true)
            .open(dir.join("cursor"))
            .unwrap_or_else(|e| panic!("ports: can't open {}/cursor: {e}", dir.display()));
        f.lock()
            .unwrap_or_else(|e| panic!("ports: can't lock {}/cursor: {e}", dir.display()));
        Cursor(f)
    }

    fn read(&mut self) -> Option<u16> {
        let mut s = String::new();
        self.0.seek(SeekFrom::Start(0)).ok()?;
        self.0.read_to_string(&mut s).ok()?;
        s.trim()
            .parse()
            .ok()
            .filter(|p| (DATA_FIRST..DATA_END).contains(p))
    }

    fn write(&mut self, next: u16) {
        let _ = self.0.set_len(0);
        let _ = self.0.seek(SeekFrom::Start(0));
        let _ = write!(self.0, "{next}");
    }
}

/// Who holds local TCP port `port` on this machine, for a failed bind's message: one line per
/// socket (`state`, and the process as `pid cmdline` where `/proc` tells), or a line saying
/// no socket has it. Reads `/proc/net/tcp{,6}` and `/proc/*/fd`.
pub fn holders(port: u16) -> String {
    let mut sockets = Vec::new(); // (inode, state)
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let Ok(text) = std::fs::read_to_string(table) else {
            continue;
        };
        for line in text.lines().skip(1) {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() < 10 {
                continue;
            }
            let local_port = f[1]
                .rsplit(':')
                .next()
                .and_then(|h| u16::from_str_radix(h, 16).ok());
            if local_port == Some(port) {
                sockets.push((f[9].to_string(), tcp_state(f[3])));
            }
        }
    }
    if sockets.is_empty() {
        return format!("no TCP socket has local port {port}");
    }
    let owners = socket_owners();
    sockets
        .iter()
        .map(|(inode, state)| {
            let who = owners
                .iter()
                .find(|(i, _)| i == inode)
                .map_or("no process (kernel-held)".to_string(), |(_, w)| w.clone());
            format!("port {port}: {state} held by {who}")
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn tcp_state(hex: &str) -> &'static str {
    match hex {
        "01" => "ESTABLISHED",
        "02" => "SYN_SENT",
        "03" => "SYN_RECV",
        "04" => "FIN_WAIT1",
        "05" => "FIN_WAIT2",
        "06" => "TIME_WAIT",
        "07" => "CLOSE",
        "08" => "CLOSE_WAIT",
        "09" => "LAST_ACK",
        "0A" => "LISTEN",
        "0B" => "CLOSING",
        _ => "UNKNOWN",
    }
}

/// (socket inode, "pid cmdline") for every socket an open file of a process refers to.
fn socket_owners() -> Vec<(String, String)> {
    let mut out = Vec::new();
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return out;
    };
    for p in procs.flatten() {
        let name = p.file_name();
        let Some(pid) = name
            .to_str()
            .filter(|s| s.bytes().all(|b| b.is_ascii_digit()))
        else {
            continue;
        };
        let Ok(fds) = std::fs::read_dir(p.path().join("fd")) else {
            continue;
        };
        let cmd = std::fs::read(p.path().join("cmdline"))
            .map(|b| {
                String::from_utf8_lossy(&b)
                    .replace('\0', " ")
                    .trim()
                    .to_string()
            })
            .unwrap_or_default();
        for fd in fds.flatten() {
            if let Ok(target) = std::fs::read_link(fd.path()) {
                let t = target.to_string_lossy();
                if let Some(inode) = t.strip_prefix("socket:[").and_then(|s| s.strip_suffix(']')) {
                    out.push((inode.to_string(), format!("pid {pid} ({cmd})")));
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_are_distinct_below_the_outgoing_range_with_free_bus_ports() {
        let a = ports(6);
        let b = ports(6);
        let c = port();
        let mut all: Vec<u16> = a.iter().chain(&b).copied().chain([c]).collect();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), 13, "{a:?} {b:?} {c}");
        let (lo, hi) = outgoing_range();
        for p in all {
            assert!((DATA_FIRST..DATA_END).contains(&p));
            for q in [p, p + BUS_OFFSET] {
                assert!(
                    !(lo..=hi).contains(&q),
                    "{q} is in the outgoing range {lo}-{hi}"
                );
                assert!(bindable(q), "{q} is taken:\n{}", holders(q));
            }
        }
    }

    #[test]
    fn a_held_port_is_not_handed_out_again_by_another_process_lock() {
        let p = port();
        // Another open file description of the same lock file cannot lock it while we hold it:
        // that is what another process would meet.
        let f = File::options()
            .write(true)
            .open(lock_dir().join(format!("{p}.lock")))
            .unwrap();
        assert!(f.try_lock().is_err(), "port {p}'s lock was free while held");
    }

    #[test]
    fn a_listening_port_is_skipped_and_its_holder_named() {
        let busy = port();
        let _l = TcpListener::bind((Ipv4Addr::LOCALHOST, busy)).unwrap();
        assert!(!bindable(busy));
        let who = holders(busy);
        assert!(who.contains("LISTEN"), "{who}");
        assert!(
            who.contains(&format!("pid {}", std::process::id())),
            "{who}"
        );
    }
}
