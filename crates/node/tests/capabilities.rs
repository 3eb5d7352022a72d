//! What the host declared it can do ([`Capabilities`]) decides what the node accepts: a
//! command the host could not carry out is refused at once with a clear error and changes
//! nothing (issue 17 B), instead of a role the host never serves or a slot migration job
//! that would fail after `repl-timeout` (60 s).

mod common;

use common::{settle, TestKeys};
use ferrocluster_node::{
    Capabilities, ClientState, ClusterConfig, ClusterNode, CommandOutcome, CommandRequest,
    ConfigError, Dispatch, ErrorReply, Millis, NoKeys, NodeError, Output, Reply, RequestId,
    MSG_NO_REPLICATION, MSG_NO_SLOT_MIGRATION,
};
use ferrocluster_slot::{key_hash_slot, Slot};

const T: Millis = Millis(1_796_060_460_000);
const P22001: &str = "4ac9751fe685983989b445845514090e6915e16b";

/// The captured cluster's node at `port`, on a host with `caps`.
fn load(port: u16, caps: Capabilities) -> ClusterNode {
    let conf = ferrocluster_testvectors::read(format!(
        "{}/text/nodes-conf/stable/nodes-{port}.conf",
        common::FLAVOR
    ));
    let cfg = ClusterConfig {
        port,
        node_timeout_ms: 2000,
        ..ClusterConfig::default()
    };
    let mut n = ClusterNode::new(cfg, caps, Millis(1_796_060_450_000), 1, Some(&conf)).unwrap();
    settle_all(&mut n);
    n
}

fn settle_all(n: &mut ClusterNode) {
    while let Some(o) = n.poll_output() {
        if let Output::Persist { seq, .. } = o {
            n.handle_persisted(seq);
        }
    }
}

fn run(n: &mut ClusterNode, argv: &[&str], req: &CommandRequest) -> CommandOutcome {
    n.cluster_command_argv(argv, req, &TestKeys::default(), T)
}

#[test]
fn without_replication_replicate_is_refused_and_changes_nothing() {
    // 22005 is a replica of 22003 in the capture; a host without replication is told no
    // when it asks to follow another primary.
    let mut n = load(22005, Capabilities::default());
    let before = n.nodes_conf();
    let out = run(
        &mut n,
        &["CLUSTER", "REPLICATE", P22001],
        &CommandRequest::default(),
    );
    assert_eq!(
        out,
        CommandOutcome::Reply(Reply::Error(MSG_NO_REPLICATION.into()))
    );
    assert_eq!(n.nodes_conf(), before);
    assert_eq!(n.poll_output(), None, "nothing to do, nothing saved");
    // With replication the same command is accepted (and waits for its persist).
    let mut n = load(22005, common::CAPS);
    let req = CommandRequest {
        id: RequestId(3),
        ..CommandRequest::default()
    };
    let out = run(&mut n, &["CLUSTER", "REPLICATE", P22001], &req);
    assert_eq!(settle(&mut n, req.id, &out).0, Reply::ok());
    assert_eq!(
        n.topology().myself().primary.map(|p| p.as_str().to_owned()),
        Some(P22001.to_owned())
    );
}

#[test]
fn without_a_data_plane_migrateslots_and_syncslots_are_refused_at_once() {
    let mut n = load(22003, Capabilities::default());
    let argv = [
        "CLUSTER",
        "MIGRATESLOTS",
        "SLOTSRANGE",
        "10923",
        "10930",
        "NODE",
        P22001,
    ];
    let out = run(&mut n, &argv, &CommandRequest::default());
    assert_eq!(
        out,
        CommandOutcome::Reply(Reply::Error(MSG_NO_SLOT_MIGRATION.into()))
    );
    assert_eq!(n.migrations().jobs().len(), 0, "no job that would hang");
    assert_eq!(n.poll_output(), None);
    // The target side too: no import link can be accepted.
    let conn = CommandRequest {
        conn: Some(ferrocluster_node::ConnId(7)),
        ..CommandRequest::default()
    };
    let establish = [
        "CLUSTER",
        "SYNCSLOTS",
        "ESTABLISH",
        "SOURCE",
        P22001,
        "NAME",
        "0123456789012345678901234567890123456789",
        "SLOTSRANGE",
        "0",
        "10",
    ];
    assert_eq!(
        run(&mut n, &establish, &conn),
        CommandOutcome::Reply(Reply::Error(MSG_NO_SLOT_MIGRATION.into()))
    );
    assert_eq!(n.migrations().jobs().len(), 0);
    // Reading the (empty) log still works.
    assert_eq!(
        run(
            &mut n,
            &["CLUSTER", "GETSLOTMIGRATIONS"],
            &CommandRequest::default()
        ),
        CommandOutcome::Reply(Reply::Array(Vec::new()))
    );
    // With a data plane the job starts and asks the host to connect.
    let mut n = load(22003, common::CAPS);
    let out = run(&mut n, &argv, &CommandRequest::default());
    assert_eq!(out, CommandOutcome::Reply(Reply::ok()));
    assert_eq!(n.migrations().jobs().len(), 1);
    let outs: Vec<Output> = std::iter::from_fn(|| n.poll_output()).collect();
    assert!(
        outs.iter().any(|o| matches!(o, Output::Migration(_))),
        "{outs:?}"
    );
}

#[test]
fn a_multi_database_host_gets_select_and_counts_keys_in_every_database() {
    let caps = Capabilities {
        databases: 16,
        ..common::CAPS
    };
    let n = load(22003, caps);
    let mut client = ClientState::new(false, false);
    assert_eq!(
        n.dispatch_client_command(&mut client, &["SELECT", "5"], &NoKeys),
        Dispatch::Ok
    );
    assert_eq!(client.db(), 5);
    match n.dispatch_client_command(&mut client, &["SELECT", "16"], &NoKeys) {
        Dispatch::Reject(e) => assert_eq!(e.to_resp(), b"-ERR DB index is out of range\r\n"),
        other => panic!("{other:?}"),
    }
    // A host with its own command table (GET and SELECT only): the node's entry point
    // resolves by that table, so a command the host does not serve is unknown, and SELECT
    // still spans its 16 databases.
    let mut table: ferrocluster_node::CommandTable<u8> = ferrocluster_node::CommandTable::new();
    table.serve("get", 1).unwrap();
    table.serve("select", 2).unwrap();
    let mut client = ClientState::new(false, false);
    match n.dispatch_client_command_in(&table, &mut client, &["SET", "foo", "1"], &NoKeys) {
        Dispatch::Reject(e) => assert!(
            e.to_resp().starts_with(b"-ERR unknown command 'SET'"),
            "{:?}",
            String::from_utf8_lossy(&e.to_resp())
        ),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        n.dispatch_client_command_in(&table, &mut client, &["SELECT", "7"], &NoKeys),
        Dispatch::Ok
    );
    assert_eq!(client.db(), 7);

    // One database (the default): SELECT 5 is out of range (Valkey 9 with
    // cluster-databases 1).
    let one = load(22003, common::CAPS);
    let mut client = ClientState::new(false, false);
    assert!(matches!(
        one.dispatch_client_command(&mut client, &["SELECT", "5"], &NoKeys),
        Dispatch::Reject(_)
    ));

    // A key of slot 12182 in database 3 only: SETSLOT NODE to another node is refused on
    // the 16-database host ("I still hold keys"), as Valkey 9 counts every database.
    struct Db3(Vec<u8>);
    impl ferrocluster_node::SlotKeys for Db3 {
        fn count_keys_in_slot(&self, db: usize, slot: Slot) -> u64 {
            u64::from(db == 3 && key_hash_slot(&self.0) == slot)
        }
        fn keys_in_slot(&self, _: usize, _: Slot, _: usize) -> Vec<Vec<u8>> {
            Vec::new()
        }
        fn db_size(&self, db: usize) -> u64 {
            u64::from(db == 3)
        }
    }
    let keys = Db3(b"foo".to_vec());
    assert_eq!(key_hash_slot(b"foo").get(), 12182);
    let setslot = ["CLUSTER", "SETSLOT", "12182", "NODE", P22001];
    let req = CommandRequest {
        replication_done: true,
        ..CommandRequest::default()
    };
    let mut n = load(22003, caps);
    assert_eq!(
        n.cluster_command_argv(&setslot, &req, &keys, T),
        CommandOutcome::Reply(Reply::Error(
            "ERR Can't assign hashslot 12182 to a different node while I still hold keys for \
             this hash slot."
                .into()
        ))
    );
    // A one-database host has no database 3: nothing is held there.
    let mut n = load(22003, common::CAPS);
    let out = n.cluster_command_argv(&setslot, &req, &keys, T);
    assert_eq!(settle(&mut n, req.id, &out).0, Reply::ok());
}

#[test]
fn a_host_without_databases_is_refused_at_construction() {
    let caps = Capabilities {
        databases: 0,
        ..Capabilities::default()
    };
    assert_eq!(
        ClusterNode::new(ClusterConfig::default(), caps, T, 1, None).unwrap_err(),
        NodeError::Config(ConfigError::NoDatabases)
    );
}
