//! `ClusterNode::set_config`: a configuration changed at run time (CONFIG SET of a `cluster-*`
//! option) reaches every layer at once, and myself's announced values are saved and gossiped.

mod common;

use common::{Net, T0};
use ferrocluster_node::{
    ClusterNode, CommandOutcome, Millis, NodeError, Notice, Output, Reply, RequestId,
};

const NT: u64 = 15_000;

#[test]
fn a_shorter_node_timeout_takes_effect_at_once() {
    let mut net = Net::new(2, NT);
    net.meet(0, 1);
    assert!(net.run_until(5_000, |n| n.knows(0, 1) && n.knows(1, 0)));
    let mut cfg = net.nodes[0].config().clone();
    cfg.node_timeout_ms = 1_000;
    let now = net.now;
    net.nodes[0].set_config(cfg, RequestId(1), now).unwrap();
    assert_eq!(net.nodes[0].config().node_timeout_ms, 1_000);
    net.isolate(1);
    let peer = *net.nodes[1].myself_id();
    // With the 15 s timeout node 1 would stay healthy for 15 s; with 1 s it is PFAIL soon.
    assert!(net
        .run_until(4_000, |n| n.events.iter().any(
            |(i, e)| *i == 0 && *e == Output::Notice(Notice::NodePfail(peer))
        )));
}

#[test]
fn an_announced_hostname_is_saved_and_gossiped() {
    let mut net = Net::new(2, NT);
    net.meet(0, 1);
    assert!(net.run_until(5_000, |n| n.knows(0, 1) && n.knows(1, 0)));
    let mut cfg = net.nodes[0].config().clone();
    cfg.announce_hostname = Some("node-a.example".into());
    cfg.announce_port = 7100;
    let now = net.now;
    let out = net.nodes[0].set_config(cfg, RequestId(9), now).unwrap();
    // The change is saved: the CONFIG SET's +OK waits for the persist.
    assert_eq!(out, CommandOutcome::Deferred);
    let mut saved = None;
    let mut ok_after_persist = false;
    while let Some(o) = net.nodes[0].poll_output() {
        match o {
            Output::Persist { seq, contents, .. } => {
                saved = Some(String::from_utf8(contents).unwrap());
                net.nodes[0].handle_persisted(seq);
            }
            Output::Reply { to, reply } => {
                assert_eq!((to, reply), (RequestId(9), Reply::ok()));
                ok_after_persist = saved.is_some();
            }
            _ => {}
        }
    }
    assert!(
        ok_after_persist,
        "the +OK came before the persist, or never"
    );
    let saved = saved.expect("a Persist after the change");
    assert!(saved.contains("node-a.example"), "{saved}");
    assert!(saved.contains(":7100@"), "{saved}");
    let me = *net.nodes[0].myself_id();
    assert!(
        net.run_until(5_000, |n| n.nodes[1].topology().node(&me).is_some_and(
            |x| x
                .hostname
                .as_ref()
                .is_some_and(|h| h.as_str() == "node-a.example")
                && x.port == 7100
        ))
    );
}

#[test]
fn an_invalid_configuration_changes_nothing() {
    let mut n = ClusterNode::new(common::config(0, NT), common::CAPS, T0, 7, None).unwrap();
    while n.poll_output().is_some() {}
    let before = n.config().clone();
    let mut bad = before.clone();
    bad.node_timeout_ms = 0;
    assert!(matches!(
        n.set_config(bad, RequestId(1), Millis(T0.0 + 10)),
        Err(NodeError::Config(_))
    ));
    assert_eq!(n.config(), &before);
    assert_eq!(n.poll_output(), None);
}
