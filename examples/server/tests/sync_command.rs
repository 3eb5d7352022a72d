//! `SYNC`, the pre-PSYNC replication handshake that tools and Valkey's own test harness use
//! to watch a primary's stream (`attach_to_replication_stream`): the RDB as `$<len>\r\n` and
//! its bytes (no `+FULLRESYNC`, no CRLF after it), then the write stream. The same steps on
//! valkey-server 9.1 and on ours: the RDB is an RDB, and the first commands after it are
//! `SELECT 0` and the write another client made. Ports from `common::ports`.

mod common;

use common::stream::ReplStream;
use common::{ports, start_real_server, test_dir, Client, Procs};

/// SYNC on `port`, then a write from another client: (the RDB's first 5 bytes, the first two
/// commands of the stream).
fn sync_then_write(port: u16) -> (String, Vec<Vec<String>>) {
    let mut s = ReplStream::attach(port);
    assert_eq!(Client::connect(port).cmd_s(&["SET", "k", "v"]), "+OK\r\n");
    let cmds = vec![s.next_command(), s.next_command()];
    (s.magic.clone(), cmds)
}

#[test]
fn sync_sends_the_rdb_then_the_stream_as_valkey_does() {
    let dir = test_dir("sync-command");
    let [ours, valkey] = ports::ports(2)[..] else {
        unreachable!()
    };
    let mut procs = Procs::default();
    procs.start(&dir, ours, &["--cluster-enabled", "no"]);
    let _valkey = start_real_server("valkey-server", valkey, &dir.join("valkey"), &[]);
    let (magic, want) = sync_then_write(valkey);
    assert_eq!(magic, "VALKE", "valkey-server 9.1's RDB (`VALKEY080`)");
    let (magic, got) = sync_then_write(ours);
    // Ours writes RDB 11 (`REDIS0011`), which valkey-server 9.1 and redis-server 7.0 load.
    assert_eq!(magic, "REDIS");
    assert_eq!(got, want);
    assert_eq!(want[1], ["set", "k", "v"]);
}
