//! CLUSTER argument parsing (issue 21): argvs from the command table's grammar
//! (`shared/cluster_argv.rs`, bent one time in eight) or raw words, through
//! `ferrocluster_command::parse_cluster` and a fresh `ClusterNode`'s
//! `cluster_command_argv` (which also parses the slot migration subcommands, SYNCSLOTS
//! messages included, on a connection the input names).
//!
//! Properties: no panic; parsing is a function of the argv; a refused argv (outside the slot
//! migration subcommands) gets exactly its parse error's reply from the node and changes
//! nothing (no output, the same nodes.conf); every line reply encodes as one line; the node's
//! invariants hold after every command.
#![no_main]

use ferrocluster_command::{parse_cluster, ParseOptions};
use ferrocluster_migration::is_migration_subcommand;
use ferrocluster_node::migration::ConnId;
use ferrocluster_node::{
    error_reply, Capabilities, ClusterConfig, ClusterNode, CommandOutcome, CommandRequest,
    EmptyKeyspace, Millis, Reply, RequestId,
};
use libfuzzer_sys::arbitrary::{Result, Unstructured};
use libfuzzer_sys::fuzz_target;

#[path = "shared/cluster_argv.rs"]
mod cluster_argv;

const T0: u64 = 1_700_000_000_000;

/// A line reply (status, error) encodes as one line: the text's CR/LF do not break framing
/// (the encoder replaces them, as Valkey's `addReplyErrorLength` callers do).
fn one_line(r: &Reply) -> bool {
    match r {
        Reply::Simple(_) | Reply::Error(_) => {
            let b = r.to_resp2();
            b.ends_with(b"\r\n") && b.iter().filter(|&&c| c == b'\n' || c == b'\r').count() == 2
        }
        _ => true,
    }
}

fn argv(u: &mut Unstructured, ids: &[String]) -> Result<Vec<Vec<u8>>> {
    if u.ratio(1u8, 4)? {
        let mut v = vec![b"CLUSTER".to_vec()];
        for _ in 0..u.int_in_range(0..=6u8)? {
            v.push(cluster_argv::bytes_upto(u, 12)?);
        }
        return Ok(v);
    }
    let peers = [("127.0.0.2".to_string(), 7001u16)];
    cluster_argv::cluster_argv(
        u,
        &cluster_argv::Vocab {
            node_ids: ids,
            peers: &peers,
            jobs: &[],
        },
    )
}

fn run(u: &mut Unstructured) -> Result<()> {
    let caps = Capabilities {
        replication: true,
        slot_migration: true,
        databases: 1,
    };
    let config = ClusterConfig {
        port: 7000,
        ..ClusterConfig::default()
    };
    let mut node = ClusterNode::new(config, caps, Millis(T0), 1, None).expect("defaults are valid");
    while node.poll_output().is_some() {}
    let ids = vec![
        node.myself_id().as_str().to_string(),
        format!("{:0>40}", "b0"),
    ];
    for i in 0..16u64 {
        if u.is_empty() {
            break;
        }
        let argv = argv(u, &ids)?;
        let req = CommandRequest {
            id: RequestId(i),
            conn: if u.arbitrary()? {
                Some(ConnId(7))
            } else {
                None
            },
            from_primary: u.ratio(1u8, 8)?,
            ..CommandRequest::default()
        };
        let migration = argv.get(1).is_some_and(|s| is_migration_subcommand(s));
        let parsed = parse_cluster(&argv, ParseOptions::default());
        assert_eq!(
            format!("{parsed:?}"),
            format!("{:?}", parse_cluster(&argv, ParseOptions::default())),
            "parsing is not a function of the argv"
        );
        let before = node.nodes_conf();
        let out = node.cluster_command_argv(&argv, &req, &EmptyKeyspace, Millis(T0 + i));
        if let CommandOutcome::Reply(r) = &out {
            assert!(one_line(r), "a line reply breaks the framing: {r:?}");
        }
        match (&parsed, migration) {
            (Err(e), false) => {
                assert_eq!(
                    out,
                    CommandOutcome::Reply(error_reply(e)),
                    "a refused argv got another reply"
                );
                assert_eq!(
                    node.nodes_conf(),
                    before,
                    "a refused argv changed the config"
                );
                assert!(
                    node.poll_output().is_none(),
                    "a refused argv made an output"
                );
            }
            _ => {
                while let Some(o) = node.poll_output() {
                    if let ferrocluster_node::Output::Persist { seq, .. } = o {
                        node.handle_persisted(seq);
                    }
                }
            }
        }
        if let Err(e) = node.invariants() {
            panic!("node invariant after {argv:?}: {e}");
        }
    }
    Ok(())
}

fuzz_target!(|data: &[u8]| {
    let _ = run(&mut Unstructured::new(data));
});
