//! Keys that expire on our primary leave its replicas: a valkey-server 9.1 replica (which, as
//! Redis's, never expires keys itself) gets a `DEL` for a key our primary's active expiry
//! cycle reclaimed and for one a write met after its deadline, before that write's effect
//! (Redis `deleteExpiredKeyAndPropagate`). Without it the replica kept both, and applied the
//! INCR below to the stale value (2 where the primary has 1). Ports from `common::ports`.

mod common;

use common::{ports, test_dir, wait_until, Client, Procs};

/// The server's clock (`TIME`), unix ms.
fn server_ms(c: &mut Client) -> i64 {
    let reply = c.cmd_s(&["TIME"]);
    let parts: Vec<&str> = reply.split("\r\n").collect();
    // *2 $n secs $n micros
    let (secs, micros): (i64, i64) = (parts[2].parse().unwrap(), parts[4].parse().unwrap());
    secs * 1000 + micros / 1000
}

#[test]
fn expired_keys_leave_a_valkey_replica_of_our_primary() {
    let dir = test_dir("expiry-propagation");
    let mut procs = Procs::default();
    let [primary, replica_port] = ports::ports(2)[..] else {
        unreachable!()
    };
    procs.start(&dir, primary, &["--cluster-enabled", "no", "--save", ""]);
    let (_replica, mut replica) = common::valkey_replica_of(primary, replica_port, &dir);
    let mut c = Client::connect(primary);
    for i in 0..50 {
        assert_eq!(
            c.cmd_s(&["SET", &format!("gone{i}"), "1", "PX", "100"]),
            "+OK\r\n"
        );
    }
    assert_eq!(c.cmd_s(&["SET", "counter", "1", "PX", "100"]), "+OK\r\n");
    // The counter's deadline is at most 100 ms after this on the primary's clock; wait until
    // it passed there (without reading the key, which would expire it on the read).
    let deadline = server_ms(&mut c) + 100;
    assert_eq!(c.cmd_s(&["SET", "stays", "x"]), "+OK\r\n");
    wait_until(
        "the counter's deadline to pass on the primary's clock",
        || server_ms(&mut c) > deadline,
    );
    // Met by a write after its deadline (or already reclaimed): a new counter either way.
    assert_eq!(c.cmd_s(&["INCR", "counter"]), ":1\r\n");
    wait_until("the primary's cycle reclaims", || {
        c.cmd_s(&["DBSIZE"]) == ":2\r\n"
    });
    wait_until("the replica follows", || {
        replica.cmd_s(&["DBSIZE"]) == ":2\r\n"
    });
    assert_eq!(replica.cmd_s(&["GET", "counter"]), "$1\r\n1\r\n");
    assert_eq!(replica.cmd_s(&["GET", "stays"]), "$1\r\nx\r\n");
}
