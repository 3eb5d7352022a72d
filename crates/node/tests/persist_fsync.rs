//! Which nodes.conf saves the node asks to fsync (`Output::Persist::fsync`): Valkey's
//! `clusterDoBeforeSleep` flags. CLUSTER commands that change slots or nodes save without
//! `CLUSTER_TODO_FSYNC_CONFIG` (`clusterCommandSetSlot`, `clusterCommandSpecial`: ADDSLOTS,
//! DELSLOTS, SETSLOT, FORGET); a change of an epoch (`clusterBumpConfigEpochWithoutConsensus`,
//! a vote in `clusterSendFailoverAuthIfNeeded`, an election), of myself's role, or one learned
//! from the bus (`clusterUpdateSlotsConfigWith`, a FAIL) is fsynced.

mod common;

use common::Net;
use ferrocluster_node::Output;

/// The `fsync` flags of node `i`'s persists logged from `from` on.
fn fsyncs(net: &Net, i: usize, from: usize) -> Vec<bool> {
    net.log[from..]
        .iter()
        .filter_map(|(n, o)| match o {
            Output::Persist { fsync, .. } if *n == i => Some(*fsync),
            _ => None,
        })
        .collect()
}

/// Runs CLUSTER `args` on node `i` (which must reply +OK) and returns its persists' flags.
fn ok_fsyncs(net: &mut Net, i: usize, args: &[&str]) -> Vec<bool> {
    let from = net.log.len();
    net.ok(i, args);
    fsyncs(net, i, from)
}

#[test]
fn a_fresh_node_fsyncs_its_first_save() {
    let net = Net::new(1, 5000);
    assert_eq!(fsyncs(&net, 0, 0), vec![true]);
}

#[test]
fn bumpepoch_is_fsynced_and_the_next_slot_change_is_not() {
    let mut net = Net::new(1, 5000);
    // BUMPED 1: currentEpoch and myself's configEpoch move.
    let from = net.log.len();
    let (out, id) = net.command(0, &["BUMPEPOCH"]);
    assert_eq!(
        net.reply_of(0, id, &out).map(|r| r.to_resp2()),
        Some(b"+BUMPED 1\r\n".to_vec())
    );
    assert_eq!(fsyncs(&net, 0, from), vec![true]);
    assert_eq!(ok_fsyncs(&mut net, 0, &["ADDSLOTS", "7"]), vec![false]);
}

#[test]
fn slot_and_node_commands_save_without_fsync_epoch_and_role_changes_with_it() {
    let mut net = Net::new(3, 5000);
    let id1 = net.nodes[1].myself_id().to_string();
    net.meet(0, 1);
    net.meet(0, 2);
    net.run_until(5000, |n| n.fully_meshed());
    assert_eq!(
        ok_fsyncs(&mut net, 0, &["ADDSLOTSRANGE", "0", "99"]),
        vec![false]
    );
    assert_eq!(ok_fsyncs(&mut net, 0, &["DELSLOTS", "99"]), vec![false]);
    assert_eq!(
        ok_fsyncs(&mut net, 0, &["SETSLOT", "5", "MIGRATING", &id1]),
        vec![false]
    );
    assert_eq!(
        ok_fsyncs(&mut net, 0, &["SETSLOT", "5", "STABLE"]),
        vec![false]
    );
    // REPLICATE changes myself's role.
    let id0 = *net.nodes[0].myself_id();
    let from = net.log.len();
    net.replicate(2, &id0);
    assert_eq!(fsyncs(&net, 2, from).first(), Some(&true));
    // FORGET: a node leaves myself's table, no epoch moves.
    assert_eq!(
        ok_fsyncs(&mut net, 1, &["FORGET", id0.as_str()]),
        vec![false]
    );
}

#[test]
fn a_save_learned_from_the_bus_is_fsynced() {
    let mut net = Net::new(2, 5000);
    let from = net.log.len();
    net.meet(0, 1);
    net.run_until(5000, |n| n.fully_meshed());
    // Node 1 heard of node 0 on the bus only.
    let learned = fsyncs(&net, 1, from);
    assert!(
        !learned.is_empty() && learned.iter().all(|f| *f),
        "{learned:?}"
    );
}
