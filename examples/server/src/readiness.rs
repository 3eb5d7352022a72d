//! Failover readiness on the data port (issue 11): the `INFO readiness` section and the
//! `FERROCLUSTER` container command (`CKQUORUM`, `SUMMARY`, `HELP`).
//!
//! Both read the node's `&self` queries (`ClusterNode::readiness`, `quorum_check`) under the
//! state lock; the rules, field names and reply texts are the `ferrocluster-health` crate's
//! (its crate docs hold the field table, copied into the top-level README section "INFO
//! readiness and FERROCLUSTER CKQUORUM").
//!
//! `FERROCLUSTER` is not a Valkey or Redis command name (a vendor-named container cannot be
//! taken by a future release; reasons in the health crate's docs, "Command name").

use crate::client::Args;
use crate::resp::Out;
use crate::server::State;
use ferrocluster_node::health::INFO_SECTION;
use ferrocluster_node::Millis;
use ferrocluster_topology::Reply;

/// The top-level command name (`FERROCLUSTER <subcommand>`), lower case as in the table.
pub const COMMAND_NAME: &str = "ferrocluster";

/// The `FERROCLUSTER HELP` lines (Redis' HELP shape: an array of simple strings).
pub const HELP: &[&str] = &[
    "FERROCLUSTER <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "CKQUORUM",
    "    Checks whether this cluster could detect a failure and fail over right now, as far",
    "    as this node sees: +OK <reason>, or the errors -NOTREADY <reason> (a majority of",
    "    voting primaries is reachable but some shard cannot fail over) and -NOQUORUM <reason>",
    "    (too few voting primaries reachable to agree a FAIL or authorize a failover).",
    "SUMMARY",
    "    One line for people, e.g. 'cluster ok, failover-ready: no (replica <id> of primary",
    "    <id> has not synced yet)'. The details are in INFO readiness.",
    "HELP",
    "    Prints this help.",
];

/// The section name for INFO (`readiness`); not part of the default INFO, but of `all` and
/// `everything` (like Redis' optional sections such as `commandstats`).
pub fn section_name() -> &'static str {
    INFO_SECTION
}

/// The `INFO readiness` text at `now` (Unix ms): `# Readiness\r\n` and the health crate's
/// fields, one `name:value\r\n` line each. In standalone mode only the header (there is no
/// cluster to judge).
pub fn info_section(state: &State, now: u64) -> String {
    match state.cluster.as_ref() {
        Some(side) => side.node.readiness(Millis(now)).info_section(),
        None => "# Readiness\r\n".to_owned(),
    }
}

fn write_reply(reply: &Reply, out: &mut Out) {
    if out.resp3() {
        reply.encode_resp3(&mut out.buf);
    } else {
        reply.encode_resp2(&mut out.buf);
    }
}

/// `FERROCLUSTER CKQUORUM | SUMMARY | HELP`.
///
/// `CKQUORUM` replies `QuorumCheck::reply()`: `+OK <reason>`, `-NOTREADY <reason>` or
/// `-NOQUORUM <reason>`; `SUMMARY` a bulk string (`Readiness::summary()`). Without cluster
/// mode both reply `-ERR This instance has cluster support disabled` (CLUSTER's text).
pub fn command(state: &State, args: &Args<'_>, out: &mut Out, now: u64) {
    let sub = args.get(1);
    let is = |name: &str| sub.eq_ignore_ascii_case(name.as_bytes());
    if is("help") && args.len() == 2 {
        out.array(HELP.len());
        for line in HELP {
            out.simple(line);
        }
        return;
    }
    let known = is("ckquorum") || is("summary");
    if !known {
        out.error(&format!(
            "ERR unknown subcommand '{}'. Try FERROCLUSTER HELP.",
            String::from_utf8_lossy(&sub[..sub.len().min(128)])
        ));
        return;
    }
    if args.len() != 2 {
        out.error(&format!(
            "ERR wrong number of arguments for '{COMMAND_NAME}|{}' command",
            String::from_utf8_lossy(sub).to_ascii_lowercase()
        ));
        return;
    }
    let Some(side) = state.cluster.as_ref() else {
        out.error("ERR This instance has cluster support disabled");
        return;
    };
    if is("ckquorum") {
        write_reply(&side.node.quorum_check(Millis(now)).reply(), out);
    } else {
        out.bulk(side.node.readiness(Millis(now)).summary().as_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_name_is_neither_a_valkey_command_nor_a_cluster_subcommand() {
        // The command crate's table is Valkey 8's (src/commands/*.json).
        assert!(ferrocluster_command::lookup(COMMAND_NAME.as_bytes()).is_none());
        assert!(!ferrocluster_command::cluster_subcommands()
            .iter()
            .any(|c| c.name.eq_ignore_ascii_case("cluster|ckquorum")));
        assert_eq!(section_name(), "readiness");
    }

    #[test]
    fn help_lines_are_simple_strings() {
        assert!(HELP.iter().all(|l| !l.contains('\r') && !l.contains('\n')));
        assert!(HELP.contains(&"CKQUORUM"));
    }
}
