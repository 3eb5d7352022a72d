//! Building the header and PING/PONG/MEET messages (facts sheet §3 "Sender-side rules",
//! §6.3, §7.1).

use crate::{Blacklist, ExtensionSet, GossipConfig, Links};
use ferrocluster_bus::{
    msg_flags, Body, ExtString, FullHeader, Gossip as GossipSection, GossipEntry, IpField, Message,
    NodeName, PingExt,
};
use ferrocluster_topology::{Millis, Node, NodeFlags, NodeId, Topology};
use rand_core::RngCore;

/// Which of the three gossip-carrying messages to build.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PingKind {
    /// PING (type 0).
    Ping,
    /// PONG (type 1).
    Pong,
    /// MEET (type 2).
    Meet,
}

fn ip_field(ip: Option<std::net::IpAddr>) -> IpField {
    match ip {
        // Written by hand: this runs for every gossip entry of every PING/PONG (100 per
        // message at 1000 nodes), and `to_string` allocates and goes through `fmt`.
        Some(std::net::IpAddr::V4(v4)) => {
            let mut text = [0u8; 15];
            let len = ipv4_text(v4, &mut text);
            IpField::from_text(&text[..len]).unwrap_or(IpField::UNSET)
        }
        Some(ip) => IpField::from_text(ip.to_string().as_bytes()).unwrap_or(IpField::UNSET),
        None => IpField::UNSET,
    }
}

/// Writes `ip` in dotted decimal (as `Display` does: no leading zeros) into `out`; returns
/// the length (at most 15).
fn ipv4_text(ip: std::net::Ipv4Addr, out: &mut [u8; 15]) -> usize {
    let mut len = 0;
    for (i, octet) in ip.octets().into_iter().enumerate() {
        if i > 0 {
            out[len] = b'.';
            len += 1;
        }
        if octet >= 100 {
            out[len] = b'0' + octet / 100;
            len += 1;
        }
        if octet >= 10 {
            out[len] = b'0' + (octet / 10) % 10;
            len += 1;
        }
        out[len] = b'0' + octet % 10;
        len += 1;
    }
    len
}

/// The full header every message of myself carries (V8 `clusterBuildMessageHdr`, §3):
/// `myslots`/`configEpoch` from the primary when myself is a replica with a known primary;
/// `replicaof` = that primary; `myip` = `cluster-announce-ip` or zeros; ports from myself's
/// record (the node crate stores announced ports there); `flags` = myself's flag word;
/// `state` = `state_byte`; `mflags` zero (callers add EXT_DATA to PING/PONG/MEET).
pub fn build_header(topo: &Topology, cfg: &GossipConfig, state_byte: u8) -> FullHeader {
    let me = topo.myself();
    let primary = if me.is_replica() {
        me.primary.as_ref().and_then(|p| topo.node(p))
    } else {
        None
    };
    let (myslots, config_epoch) = match primary {
        Some(p) => (p.slots().clone(), p.config_epoch),
        None => (me.slots().clone(), me.config_epoch),
    };
    let (port, pport) = wire_ports(cfg, me.port, me.tls_port);
    FullHeader {
        port,
        current_epoch: topo.current_epoch.get(),
        config_epoch: config_epoch.get(),
        offset: me.repl_offset,
        sender: NodeName::new(*me.id().as_bytes()),
        myslots,
        replicaof: primary.map(|p| NodeName::new(*p.id().as_bytes())),
        myip: ip_field(cfg.announce_ip),
        reserved: [0; 30],
        pport,
        cport: me.bus_port,
        flags: me.flags.bits(),
        state: state_byte,
        mflags: [0; 3],
    }
}

/// The wire's (`port`, `pport`) for a node's plaintext and TLS ports: swapped with
/// `tls-cluster yes` ([`GossipConfig::tls_cluster`]).
fn wire_ports(cfg: &GossipConfig, tcp: u16, tls: u16) -> (u16, u16) {
    if cfg.tls_cluster {
        (tls, tcp)
    } else {
        (tcp, tls)
    }
}

/// `wanted` gossip entries for a cluster of `known` nodes (myself included), §7.1:
/// floor(known / 10), at least 3, at most `known − 2` (never negative).
///
/// ```
/// use ferrocluster_gossip::gossip_wanted;
/// assert_eq!(gossip_wanted(6), 3);   // the captures: 3 entries with 6 nodes
/// assert_eq!(gossip_wanted(2), 0);
/// assert_eq!(gossip_wanted(4), 2);
/// assert_eq!(gossip_wanted(100), 10);
/// ```
pub fn gossip_wanted(known: usize) -> usize {
    let fresh = known.saturating_sub(2);
    (known / 10).max(3).min(fresh)
}

fn entry_for(n: &Node, cfg: &GossipConfig) -> GossipEntry {
    let (port, pport) = wire_ports(cfg, n.port, n.tls_port);
    GossipEntry {
        name: NodeName::new(*n.id().as_bytes()),
        ping_sent_secs: n.ping_sent.map_or(0, |t| (t.as_u64() / 1000) as u32),
        pong_received_secs: n.pong_received.map_or(0, |t| (t.as_u64() / 1000) as u32),
        ip: ip_field(n.ip),
        port,
        cport: n.bus_port,
        flags: n.flags.bits(),
        pport,
        reserved: 0,
    }
}

/// The extensions V8 writes (§6.3), in its order: HOSTNAME (if set), HUMAN_NODENAME (if set),
/// CLIENT_IPV4 / CLIENT_IPV6 (if set), one FORGOTTEN_NODE per live ban, SHARDID (always) —
/// or only HOSTNAME for a peer limited to [`ExtensionSet::HostnameOnly`] (Redis 7.0, §21.1).
fn extensions(me: &Node, blacklist: &Blacklist, set: ExtensionSet, now: Millis) -> Vec<PingExt> {
    let mut v = Vec::new();
    if let Some(h) = &me.hostname {
        v.push(PingExt::Hostname(ExtString::new(h.as_str().as_bytes())));
    }
    if set == ExtensionSet::HostnameOnly {
        return v;
    }
    if let Some(h) = &me.human_nodename {
        v.push(PingExt::HumanNodename(ExtString::new(
            h.as_str().as_bytes(),
        )));
    }
    if let Some(ip) = me.client_ipv4 {
        v.push(PingExt::ClientIpv4(ExtString::new(
            ip.to_string().as_bytes(),
        )));
    }
    if let Some(ip) = me.client_ipv6 {
        v.push(PingExt::ClientIpv6(ExtString::new(
            ip.to_string().as_bytes(),
        )));
    }
    for (id, ttl_secs) in blacklist.live(now) {
        v.push(PingExt::ForgottenNode {
            name: NodeName::new(*id.as_bytes()),
            ttl_secs,
        });
    }
    v.push(PingExt::ShardId(NodeName::new(*me.shard_id.as_bytes())));
    v
}

/// Builds a PING, PONG or MEET for the node `dest` (`None` when the destination is not
/// identified, e.g. a PONG to an unknown sender), following §7.1 and §6.3:
///
/// * up to `wanted × 3` random picks ([`gossip_wanted`]) skipping myself, `dest`, PFAIL nodes
///   and nodes already picked; HANDSHAKE, NOADDR and link-less slot-less picks also use up one
///   of the `known − 2` fresh nodes;
/// * then every PFAIL node (not HANDSHAKE/NOADDR), at most `pfail_limit` of them;
/// * `mflags[0]` EXT_DATA always; extensions only when `dest` is flagged
///   EXTENSIONS_SUPPORTED (`ext_override` forces them, for a reply to a MEET that carried
///   EXT_DATA), and then only the types `dest` understands: [`Links::extension_set`]
///   (HOSTNAME alone for a Redis-7.0-shaped peer, see [`ExtensionSet`]; `dest` `None` with
///   `ext_override` gets HOSTNAME alone too).
#[allow(clippy::too_many_arguments)]
pub fn build_ping<R: RngCore + ?Sized>(
    topo: &Topology,
    links: &Links,
    blacklist: &Blacklist,
    cfg: &GossipConfig,
    state_byte: u8,
    kind: PingKind,
    dest: Option<&NodeId>,
    ext_override: bool,
    pfail_limit: usize,
    now: Millis,
    rng: &mut R,
) -> Message {
    let mut header = build_header(topo, cfg, state_byte);
    header.mflags[0] |= msg_flags::EXT_DATA;
    let known = topo.len();
    let mut fresh = known.saturating_sub(2);
    let wanted = gossip_wanted(known);
    let mut max_iter = wanted * 3;
    // Table positions already picked (a node's position is unique, like its ID).
    let mut picked: Vec<usize> = Vec::with_capacity(wanted);
    let mut entries = Vec::with_capacity(wanted);
    while fresh > 0 && entries.len() < wanted && max_iter > 0 {
        max_iter -= 1;
        let at = (rng.next_u64() % known as u64) as usize;
        // `at < known = topo.len()`.
        let Some(n) = topo.node_at(at) else { continue };
        if n.is_myself() || Some(n.id()) == dest || n.is_pfail() || picked.contains(&at) {
            continue;
        }
        if n.flags.intersects(NodeFlags::HANDSHAKE | NodeFlags::NOADDR)
            || (n.slot_count() == 0 && links.outbound_of(n.id()).is_none())
        {
            fresh -= 1;
            continue;
        }
        picked.push(at);
        entries.push(entry_for(n, cfg));
    }
    // With a limit of 0 no PFAIL entry is added: skip the walk over the table.
    let mut pfail_added = 0;
    let walk = if pfail_limit > 0 { topo.len() } else { 0 };
    for n in topo
        .nodes()
        .take(walk)
        .filter(|n| n.is_pfail() && !n.is_myself())
    {
        if pfail_added >= pfail_limit {
            break;
        }
        if n.flags.intersects(NodeFlags::HANDSHAKE | NodeFlags::NOADDR) {
            continue;
        }
        entries.push(entry_for(n, cfg));
        pfail_added += 1;
    }
    let with_ext = ext_override
        || dest
            .and_then(|d| topo.node(d))
            .is_some_and(|d| d.flags.contains(NodeFlags::EXTENSIONS_SUPPORTED));
    let exts = if with_ext {
        let set = dest.map_or(ExtensionSet::HostnameOnly, |d| links.extension_set(d));
        extensions(topo.myself(), blacklist, set, now)
    } else {
        Vec::new()
    };
    let section = GossipSection {
        entries,
        extensions: exts,
    };
    let body = match kind {
        PingKind::Ping => Body::Ping(section),
        PingKind::Pong => Body::Pong(section),
        PingKind::Meet => Body::Meet(section),
    };
    Message::full(header, body)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

    #[test]
    fn ip_field_writes_what_display_writes() {
        for ip in [
            Ipv4Addr::new(0, 0, 0, 0),
            Ipv4Addr::new(127, 0, 0, 1),
            Ipv4Addr::new(10, 0, 3, 232),
            Ipv4Addr::new(255, 255, 255, 255),
            Ipv4Addr::new(9, 10, 99, 100),
            Ipv4Addr::new(192, 168, 1, 20),
        ] {
            let want = IpField::from_text(ip.to_string().as_bytes()).unwrap();
            assert_eq!(ip_field(Some(IpAddr::V4(ip))), want, "{ip}");
        }
        let v6 = IpAddr::V6(Ipv6Addr::LOCALHOST);
        assert_eq!(ip_field(Some(v6)), IpField::from_text(b"::1").unwrap());
        assert_eq!(ip_field(None), IpField::UNSET);
    }
}
