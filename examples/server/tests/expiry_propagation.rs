//! Keys that expire on our primary leave its replicas: a valkey-server 9.1 replica (which, as
//! Redis's, never expires keys itself) gets a `DEL` for a key our primary's active expiry
//! cycle reclaimed and for one a write met after its deadline, before that write's effect
//! (Redis `deleteExpiredKeyAndPropagate`). Without it the replica kept both, and applied the
//! INCR below to the stale value (2 where the primary has 1). Ports 24670-24671.

#![allow(clippy::disallowed_methods)] // the test waits on the clock

mod common;

use common::{test_dir, wait_until, Client, Procs};
use std::time::Duration;

#[test]
fn expired_keys_leave_a_valkey_replica_of_our_primary() {
    let dir = test_dir("expiry-propagation");
    let mut procs = Procs::default();
    procs.start(&dir, 24670, &["--cluster-enabled", "no", "--save", ""]);
    let (_replica, mut replica) = common::valkey_replica_of(24670, 24671, &dir);
    let mut c = Client::connect(24670);
    for i in 0..50 {
        assert_eq!(
            c.cmd_s(&["SET", &format!("gone{i}"), "1", "PX", "100"]),
            "+OK\r\n"
        );
    }
    assert_eq!(c.cmd_s(&["SET", "counter", "1", "PX", "100"]), "+OK\r\n");
    assert_eq!(c.cmd_s(&["SET", "stays", "x"]), "+OK\r\n");
    std::thread::sleep(Duration::from_millis(300));
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
