//! What a cluster test compares across nodes.

use crate::wait::wait_ok;

/// The slot configuration a `CLUSTER NODES` text shows, as `redis-cli --cluster check`
/// compares it (`clusterManagerGetConfigSignature`): every node that owns slots, as
/// `<id>:<ranges joined by commas>` with migration entries (`[...]`) left out, sorted.
pub fn config_signature(nodes: &str) -> Vec<String> {
    let mut sig: Vec<String> = nodes
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            let mut slots: Vec<&str> = f
                .get(8..)?
                .iter()
                .copied()
                .filter(|s| !s.is_empty() && !s.starts_with('['))
                .collect();
            slots.sort();
            (!slots.is_empty()).then(|| format!("{}:{}", f[0], slots.join(",")))
        })
        .collect();
    sig.sort();
    sig
}

/// Waits (bounded by [`crate::HANG`]) until every node of `ports` shows the same
/// [`config_signature`]; `nodes` reads one node's `CLUSTER NODES` text. After a reshard,
/// rebalance or migration the new owner is set on some nodes and the others learn it by
/// gossip: until then `redis-cli --cluster check` reports "Nodes don't agree".
pub fn wait_agree(ports: &[u16], mut nodes: impl FnMut(u16) -> Result<String, String>) {
    wait_ok("every node to show the same slot map", || {
        let first = config_signature(&nodes(ports[0])?);
        for &p in &ports[1..] {
            let other = config_signature(&nodes(p)?);
            if other != first {
                return Err(format!("{} shows {first:?}, {p} shows {other:?}", ports[0]));
            }
        }
        Ok(())
    });
}

#[cfg(test)]
mod tests {
    use super::config_signature;

    #[test]
    fn the_signature_keeps_slot_owners_and_drops_migrations_and_replicas() {
        let nodes = "b 127.0.0.1:2@3 master - 0 0 2 connected 100-199 5 [7->-a]\n\
                     a 127.0.0.1:1@2 myself,master - 0 0 1 connected 0-4 6-99\n\
                     c 127.0.0.1:3@4 slave a 0 0 1 connected\n";
        assert_eq!(config_signature(nodes), ["a:0-4,6-99", "b:100-199,5"]);
    }
}
