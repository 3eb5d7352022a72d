//! Helpers shared by the socket tests.

use ferrocluster_node::ClusterNode;

/// CLUSTER MEET through the executor (the reply may be deferred behind its persist).
pub fn meet(n: &mut ClusterNode, port: u16, now: ferrocluster_node::Millis) {
    let p = port.to_string();
    let argv = ["CLUSTER", "MEET", "127.0.0.1", p.as_str(), p.as_str()];
    let out = n.cluster_command_argv(
        &argv,
        &ferrocluster_node::CommandRequest::default(),
        &ferrocluster_node::EmptyKeyspace,
        now,
    );
    assert!(
        !matches!(
            out,
            ferrocluster_node::CommandOutcome::Reply(ferrocluster_node::Reply::Error(_))
        ),
        "{out:?}"
    );
}
