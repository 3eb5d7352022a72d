//! nodes.conf: loading the Redis 7.0, Valkey 7.2 and Valkey 8.x formats and writing the
//! Valkey 8 format (facts sheet §18).

use crate::{
    parse_client_ipv4, parse_client_ipv6, parse_ip, AnnounceError, ConfigEpoch, CurrentEpoch,
    Hostname, HumanNodename, IdError, LinkState, Millis, Node, NodeFlags, NodeId, ShardId,
    Topology,
};
use ferrocluster_slot::{Slot, SlotRange};
use std::fmt::Write as _;

/// Options that change how a file is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LoadOptions {
    /// `tls-cluster yes`: in an old-format line (no `tcp-port`/`tls-port` aux field) the port
    /// in the address is the TLS port (§18.3). Default `false`: it is the TCP port.
    pub tls_cluster: bool,
    /// Keep the written non-zero `ping_sent` / `pong_recv` values instead of replacing them
    /// with the load time as Valkey does (§18.3). Default `false` (Valkey's rule); `true` is
    /// for inspecting a file as it was written (tools, the simulator restoring a snapshot).
    pub preserve_times: bool,
}

/// Why a nodes.conf text was refused: the 1-based line number and the reason. Valkey logs
/// "Unrecoverable error: corrupted cluster config file" and exits in all these cases (§18.3);
/// we return this error and build nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("nodes.conf line {line}: {reason}")]
pub struct ConfError {
    /// 1-based line number (0 when the problem is the file as a whole).
    pub line: usize,
    /// What is wrong.
    pub reason: ConfErrorKind,
}

/// The reason part of a [`ConfError`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfErrorKind {
    /// The text is not UTF-8.
    #[error("not UTF-8 text")]
    NotUtf8,
    /// An unbalanced quote or a bad escape while splitting the line into arguments.
    #[error("unbalanced quotes or bad escape")]
    Quoting,
    /// The `vars` line has an even number of arguments.
    #[error("vars line needs name/value pairs")]
    VarsArity,
    /// A number (epoch, port, time) is not an unsigned decimal in range.
    #[error("invalid number {0:?} for {1}")]
    Number(String, &'static str),
    /// A node line with fewer than 8 fields.
    #[error("node line has {0} fields, at least 8 are needed")]
    TooFewFields(usize),
    /// An invalid node or shard ID.
    #[error("invalid ID {text:?}: {err}")]
    Id {
        /// The text.
        text: String,
        /// Why.
        err: IdError,
    },
    /// The address field lacks the `ip:port` form.
    #[error("invalid address {0:?}")]
    Address(String),
    /// An aux field that is not `key=value` with aux-valid characters (an unknown key in that
    /// form is skipped with a [`ConfWarning`]).
    #[error("invalid aux field {0:?}")]
    Aux(String),
    /// An announced value (hostname, nodename, IP) that does not validate.
    #[error(transparent)]
    Announce(#[from] AnnounceError),
    /// An unknown flag name.
    #[error("unknown flag {0:?}")]
    Flag(String),
    /// A second line flagged `myself`.
    #[error("more than one node is flagged myself")]
    SecondMyself,
    /// No line is flagged `myself`.
    #[error("no node is flagged myself")]
    NoMyself,
    /// A node listed as its own primary.
    #[error("node is its own primary")]
    SelfPrimary,
    /// A slot token that is not `N`, `A-B`, `[N->-id]` or `[N-<-id]` with slots in range.
    #[error("invalid slot token {0:?}")]
    Slot(String),
    /// The same node ID appears on two lines.
    #[error("node {0} appears on two lines")]
    DuplicateLine(NodeId),
}

/// Something in a nodes.conf that was loaded anyway, for the host to log once: the 1-based
/// line number and what was skipped. Nothing of it reaches the model, so the next save drops
/// it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("nodes.conf line {line}: {kind}")]
pub struct ConfWarning {
    /// 1-based line number.
    pub line: usize,
    /// What was skipped.
    pub kind: ConfWarningKind,
}

/// The kind part of a [`ConfWarning`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfWarningKind {
    /// An aux field of the address (`key=value` with aux-valid characters) whose key this
    /// version does not know, written by a newer node (forward compatibility across a
    /// rolling upgrade, which the aux format exists for). Valkey 8/9 refuse such a file
    /// (`clusterLoadConfig`: no handler for the field); we skip the field instead.
    #[error("unknown aux field {0:?} skipped")]
    UnknownAux(String),
}

fn err(line: usize, reason: ConfErrorKind) -> ConfError {
    ConfError { line, reason }
}

/// Splits a line into arguments like Valkey's `sdssplitargs`: whitespace separates, `"..."`
/// with `\n \r \t \b \a \\ \" \xHH` escapes and `'...'` (only `\'`) quote; a closing quote must
/// be followed by whitespace or the end.
fn split_args(line: &str) -> Option<Vec<String>> {
    let b = line.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    loop {
        while i < b.len() && b[i].is_ascii_whitespace() {
            i += 1;
        }
        if i >= b.len() {
            return Some(out);
        }
        let mut cur: Vec<u8> = Vec::new();
        let (mut inq, mut insq) = (false, false);
        loop {
            if inq {
                let c = *b.get(i)?;
                if c == b'\\' && i + 3 < b.len() && b[i + 1] == b'x' {
                    let h = std::str::from_utf8(&b[i + 2..i + 4]).ok()?;
                    if let Ok(v) = u8::from_str_radix(h, 16) {
                        cur.push(v);
                        i += 4;
                        continue;
                    }
                }
                if c == b'\\' && i + 1 < b.len() {
                    cur.push(match b[i + 1] {
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'b' => 8,
                        b'a' => 7,
                        o => o,
                    });
                    i += 2;
                    continue;
                }
                if c == b'"' {
                    if b.get(i + 1).is_some_and(|n| !n.is_ascii_whitespace()) {
                        return None;
                    }
                    i += 1;
                    break;
                }
                cur.push(c);
                i += 1;
            } else if insq {
                let c = *b.get(i)?;
                if c == b'\\' && b.get(i + 1) == Some(&b'\'') {
                    cur.push(b'\'');
                    i += 2;
                    continue;
                }
                if c == b'\'' {
                    if b.get(i + 1).is_some_and(|n| !n.is_ascii_whitespace()) {
                        return None;
                    }
                    i += 1;
                    break;
                }
                cur.push(c);
                i += 1;
            } else {
                match b.get(i) {
                    None => break,
                    Some(c) if c.is_ascii_whitespace() => break,
                    Some(b'"') => inq = true,
                    Some(b'\'') => insq = true,
                    Some(c) => cur.push(*c),
                }
                i += 1;
            }
        }
        out.push(String::from_utf8(cur).ok()?);
    }
}

fn parse_u64(text: &str, what: &'static str) -> Result<u64, ConfErrorKind> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(ConfErrorKind::Number(text.to_owned(), what));
    }
    text.parse::<u64>()
        .map_err(|_| ConfErrorKind::Number(text.to_owned(), what))
}

fn parse_port(text: &str, what: &'static str) -> Result<u16, ConfErrorKind> {
    // §18.2: 1-5 decimal characters, 0..65535.
    if text.len() > 5 {
        return Err(ConfErrorKind::Number(text.to_owned(), what));
    }
    let v = parse_u64(text, what)?;
    u16::try_from(v).map_err(|_| ConfErrorKind::Number(text.to_owned(), what))
}

fn parse_node_id(text: &str) -> Result<NodeId, ConfErrorKind> {
    NodeId::parse(text).map_err(|e| ConfErrorKind::Id {
        text: text.to_owned(),
        err: e,
    })
}

/// What one node line says, before it is applied to the model.
struct Line {
    id: NodeId,
    ip: Option<std::net::IpAddr>,
    tcp_port: u16,
    tls_port: u16,
    bus_port: u16,
    hostname: Option<Hostname>,
    nodename: Option<HumanNodename>,
    client_ipv4: Option<std::net::Ipv4Addr>,
    client_ipv6: Option<std::net::Ipv6Addr>,
    shard_id: Option<ShardId>,
    flags: NodeFlags,
    primary: Option<NodeId>,
    ping_sent: u64,
    pong_received: u64,
    config_epoch: u64,
    link: LinkState,
    slots: Vec<SlotRange>,
    importing: Vec<(Slot, NodeId)>,
    migrating: Vec<(Slot, NodeId)>,
    /// Well-formed aux fields with a key this version does not know (skipped).
    unknown_aux: Vec<String>,
}

fn parse_address(field: &str, opts: LoadOptions, line: &mut Line) -> Result<(), ConfErrorKind> {
    let mut parts = field.split(',');
    // `split` always yields at least one item.
    let addr = parts.next().unwrap_or("");
    if let Some(h) = parts.next() {
        if !h.is_empty() {
            line.hostname = Some(Hostname::new(h)?);
        }
    }
    let (mut has_tcp, mut has_tls) = (false, false);
    for aux in parts {
        let (k, v) = aux
            .split_once('=')
            .ok_or_else(|| ConfErrorKind::Aux(aux.to_owned()))?;
        if v.contains('=')
            || k.is_empty()
            || !k.bytes().chain(v.bytes()).all(crate::is_aux_valid_byte)
        {
            return Err(ConfErrorKind::Aux(aux.to_owned()));
        }
        match k {
            "shard-id" => {
                line.shard_id = Some(ShardId::parse(v).map_err(|e| ConfErrorKind::Id {
                    text: v.to_owned(),
                    err: e,
                })?)
            }
            "nodename" => {
                line.nodename = if v.is_empty() {
                    None
                } else {
                    Some(HumanNodename::new(v)?)
                }
            }
            "tcp-port" => {
                line.tcp_port = parse_port(v, "tcp-port")?;
                has_tcp = true;
            }
            "tls-port" => {
                line.tls_port = parse_port(v, "tls-port")?;
                has_tls = true;
            }
            "client-ipv4" => {
                line.client_ipv4 = if v.is_empty() {
                    None
                } else {
                    Some(parse_client_ipv4(v)?)
                }
            }
            "client-ipv6" => {
                line.client_ipv6 = if v.is_empty() {
                    None
                } else {
                    Some(parse_client_ipv6(v)?)
                }
            }
            _ => line.unknown_aux.push(aux.to_owned()),
        }
    }
    let (ip, rest) = addr
        .rsplit_once(':')
        .ok_or_else(|| ConfErrorKind::Address(addr.into()))?;
    line.ip = if ip.is_empty() {
        None
    } else {
        Some(parse_ip(ip)?)
    };
    let (port, bus) = match rest.split_once('@') {
        Some((p, b)) => (p, Some(b)),
        None => (rest, None),
    };
    let port = parse_port(port, "port")?;
    match (has_tcp, has_tls) {
        (false, false) if opts.tls_cluster => line.tls_port = port,
        (false, false) | (false, true) => line.tcp_port = port,
        (true, false) => line.tls_port = port,
        (true, true) => {}
    }
    line.bus_port = match bus {
        Some(b) => parse_port(b, "cport")?,
        None => {
            // §18.3: a missing cport means the main port + 10000.
            let main = if opts.tls_cluster && line.tls_port != 0 {
                line.tls_port
            } else {
                port
            };
            main.checked_add(10_000)
                .ok_or_else(|| ConfErrorKind::Address(addr.into()))?
        }
    };
    Ok(())
}

fn parse_slot_token(tok: &str, line: &mut Line) -> Result<(), ConfErrorKind> {
    let bad = || ConfErrorKind::Slot(tok.to_owned());
    if let Some(inner) = tok.strip_prefix('[') {
        let inner = inner.strip_suffix(']').ok_or_else(bad)?;
        let (slot, rest) = inner.split_once('-').ok_or_else(bad)?;
        let slot = Slot::parse(slot).map_err(|_| bad())?;
        if let Some(id) = rest.strip_prefix(">-") {
            line.migrating.push((slot, parse_node_id(id)?));
        } else if let Some(id) = rest.strip_prefix("<-") {
            line.importing.push((slot, parse_node_id(id)?));
        } else {
            return Err(bad());
        }
        return Ok(());
    }
    line.slots.push(SlotRange::parse(tok).map_err(|_| bad())?);
    Ok(())
}

fn parse_node_line(args: &[String], opts: LoadOptions) -> Result<Line, ConfErrorKind> {
    if args.len() < 8 {
        return Err(ConfErrorKind::TooFewFields(args.len()));
    }
    let mut line = Line {
        id: parse_node_id(&args[0])?,
        ip: None,
        tcp_port: 0,
        tls_port: 0,
        bus_port: 0,
        hostname: None,
        nodename: None,
        client_ipv4: None,
        client_ipv6: None,
        shard_id: None,
        flags: NodeFlags::empty(),
        primary: None,
        ping_sent: 0,
        pong_received: 0,
        config_epoch: 0,
        link: LinkState::Disconnected,
        slots: Vec::new(),
        importing: Vec::new(),
        migrating: Vec::new(),
        unknown_aux: Vec::new(),
    };
    parse_address(&args[1], opts, &mut line)?;
    for name in args[2].split(',') {
        let lower = name.to_ascii_lowercase();
        let f = NodeFlags::from_name(&lower).ok_or_else(|| ConfErrorKind::Flag(name.into()))?;
        line.flags.insert(f);
        if f == NodeFlags::NOADDR {
            // Valkey's loader sets FAIL together with NOADDR.
            line.flags.insert(NodeFlags::FAIL);
        }
    }
    if args[3] != "-" {
        let p = parse_node_id(&args[3])?;
        if p == line.id {
            return Err(ConfErrorKind::SelfPrimary);
        }
        line.primary = Some(p);
    }
    line.ping_sent = parse_u64(&args[4], "ping_sent")?;
    line.pong_received = parse_u64(&args[5], "pong_recv")?;
    line.config_epoch = parse_u64(&args[6], "configEpoch")?;
    line.link = match args[7].as_str() {
        "connected" => LinkState::Connected,
        // Valkey does not read the field; anything else reads as disconnected.
        _ => LinkState::Disconnected,
    };
    for tok in &args[8..] {
        parse_slot_token(tok, &mut line)?;
    }
    Ok(line)
}

/// Finds or creates (with a random shard) the node `id`; returns it.
fn ensure_node<R: rand_core::RngCore + ?Sized>(
    nodes: &mut Vec<Node>,
    id: NodeId,
    rng: &mut R,
    now: Millis,
) -> usize {
    if let Some(i) = nodes.iter().position(|n| n.id == id) {
        return i;
    }
    nodes.push(Node::new(id, ShardId::random(rng), now));
    nodes.len() - 1
}

/// Loads a nodes.conf text (Redis 7.0, Valkey 7.2 or Valkey 8.x format) by the rules of
/// facts sheet §18.3:
///
/// * blank lines are skipped; lines split with shell-like quoting;
/// * `vars` (case-insensitive) with name/value pairs; `currentEpoch` and `lastVoteEpoch`
///   (case-insensitive) are read, unknown names skipped;
/// * node lines need at least 8 fields; nodes named as primaries or in slot marks before their
///   own line are created on demand (random shard ID from `rng`, no flags, no address);
/// * flags are case-insensitive; `noaddr` also sets FAIL and `fail` sets `fail_time = now`;
///   exactly one line carries `myself`;
/// * a replica without `shard-id` takes its primary's; a replica whose `shard-id` differs
///   from a primary that already has a shard member is given the primary's (valkey-io/valkey
///   PR #2174 — Valkey before it refused such a file, which a node could itself have written,
///   issues #774 / #2171); a primary created on demand takes the shard-id of the first replica
///   line naming it; a primary without one keeps a random one. When every line is read, each
///   replica (and replica of a replica) gets the shard ID of the top of its replication
///   chain, so a primary line read after its replicas' lines wins too;
/// * non-zero ping_sent / pong_recv become `now` (Valkey uses the load time); zero stays
///   `None`;
/// * a node with a primary gets configEpoch 0, others the written one;
/// * `[N->-id]` marks migrating, `[N-<-id]` importing (kept for any line; Valkey only writes
///   them for myself); `N` / `A-B` assign slots;
/// * currentEpoch is raised to the largest configEpoch if lower.
///
/// The `link` field of a loaded node is kept as written (`connected` for myself); Valkey
/// ignores it, the engine may reset it.
///
/// An aux field with a key this version does not know is skipped (kept out of the model);
/// [`load_nodes_conf_with_warnings`] also returns one [`ConfWarning`] for each. A malformed
/// aux field, or a known one with an invalid value, refuses the file.
///
/// # Errors
/// [`ConfError`] with the 1-based line and the reason; nothing is built. An empty text is
/// refused with [`ConfErrorKind::NoMyself`] (the host handles "missing or empty file" by
/// starting fresh with [`Topology::fresh`]).
pub fn load_nodes_conf<R: rand_core::RngCore + ?Sized>(
    text: &[u8],
    now: Millis,
    rng: &mut R,
    opts: LoadOptions,
) -> Result<Topology, ConfError> {
    load_nodes_conf_with_warnings(text, now, rng, opts).map(|(t, _)| t)
}

/// [`load_nodes_conf`], plus what was skipped while loading (unknown aux fields), in line
/// order, for the host to log once.
///
/// # Errors
/// As [`load_nodes_conf`].
pub fn load_nodes_conf_with_warnings<R: rand_core::RngCore + ?Sized>(
    text: &[u8],
    now: Millis,
    rng: &mut R,
    opts: LoadOptions,
) -> Result<(Topology, Vec<ConfWarning>), ConfError> {
    let mut warnings = Vec::new();
    let text = std::str::from_utf8(text).map_err(|e| {
        let line = text[..e.valid_up_to()]
            .iter()
            .filter(|b| **b == b'\n')
            .count()
            + 1;
        err(line, ConfErrorKind::NotUtf8)
    })?;
    let mut nodes: Vec<Node> = Vec::new();
    let mut seen_line: Vec<NodeId> = Vec::new();
    let mut myself: Option<NodeId> = None;
    let mut current_epoch = CurrentEpoch(0);
    let mut last_vote_epoch = CurrentEpoch(0);
    let mut owners: Vec<(Slot, NodeId)> = Vec::new();
    let mut importing: Vec<(Slot, NodeId)> = Vec::new();
    let mut migrating: Vec<(Slot, NodeId)> = Vec::new();
    // (node, shard) of every node line read so far: a shard "has members" once a line put a
    // node in it (Valkey's shard dictionary; on-demand nodes are in no shard yet).
    let mut placed_shards: Vec<(NodeId, ShardId)> = Vec::new();

    for (lineno, raw) in text.split('\n').enumerate() {
        let lineno = lineno + 1;
        if raw.is_empty() || raw.trim().is_empty() {
            continue;
        }
        let args = split_args(raw).ok_or_else(|| err(lineno, ConfErrorKind::Quoting))?;
        if args.is_empty() {
            continue;
        }
        if args[0].eq_ignore_ascii_case("vars") {
            if args.len() % 2 == 0 {
                return Err(err(lineno, ConfErrorKind::VarsArity));
            }
            for pair in args[1..].chunks(2) {
                let name = &pair[0];
                if name.eq_ignore_ascii_case("currentEpoch") {
                    current_epoch = CurrentEpoch(
                        parse_u64(&pair[1], "currentEpoch").map_err(|k| err(lineno, k))?,
                    );
                } else if name.eq_ignore_ascii_case("lastVoteEpoch") {
                    last_vote_epoch = CurrentEpoch(
                        parse_u64(&pair[1], "lastVoteEpoch").map_err(|k| err(lineno, k))?,
                    );
                }
            }
            continue;
        }
        let l = parse_node_line(&args, opts).map_err(|k| err(lineno, k))?;
        warnings.extend(l.unknown_aux.iter().map(|a| ConfWarning {
            line: lineno,
            kind: ConfWarningKind::UnknownAux(a.clone()),
        }));
        if seen_line.contains(&l.id) {
            return Err(err(lineno, ConfErrorKind::DuplicateLine(l.id)));
        }
        seen_line.push(l.id);
        if l.flags.contains(NodeFlags::MYSELF) {
            if myself.is_some() {
                return Err(err(lineno, ConfErrorKind::SecondMyself));
            }
            myself = Some(l.id);
        }
        let i = ensure_node(&mut nodes, l.id, rng, now);
        let primary_shard = match l.primary {
            Some(p) => {
                let pi = ensure_node(&mut nodes, p, rng, now);
                Some((pi, nodes[pi].shard_id))
            }
            None => None,
        };
        let shard = match (l.shard_id, primary_shard) {
            (None, Some((_, ps))) => ps,
            (Some(s), Some((pi, ps))) => {
                if placed_shards.iter().any(|(_, sh)| *sh == ps) {
                    // The primary's shard has members: a differing replica shard-id is
                    // replaced by the primary's (valkey-io/valkey PR #2174; older releases
                    // refused the file).
                    ps
                } else {
                    // A primary created on demand joins its replica's shard (Valkey).
                    nodes[pi].shard_id = s;
                    s
                }
            }
            (Some(s), None) => s,
            (None, None) => nodes[i].shard_id,
        };
        placed_shards.retain(|(n, _)| *n != l.id);
        placed_shards.push((l.id, shard));
        let n = &mut nodes[i];
        n.flags = l.flags;
        if n.flags.contains(NodeFlags::FAIL) {
            n.fail_time = Some(now);
        }
        n.ip = l.ip;
        n.port = l.tcp_port;
        n.tls_port = l.tls_port;
        n.bus_port = l.bus_port;
        n.hostname = l.hostname;
        n.human_nodename = l.nodename;
        n.client_ipv4 = l.client_ipv4;
        n.client_ipv6 = l.client_ipv6;
        n.shard_id = shard;
        n.primary = l.primary;
        let time = |t: u64| match (t, opts.preserve_times) {
            (0, _) => None,
            (t, true) => Some(Millis(t)),
            (_, false) => Some(now),
        };
        n.ping_sent = time(l.ping_sent);
        n.pong_received = time(l.pong_received);
        n.config_epoch = if l.primary.is_some() && n.is_replica() {
            ConfigEpoch(0)
        } else {
            ConfigEpoch(l.config_epoch)
        };
        n.link = l.link;
        for r in &l.slots {
            owners.extend(r.iter().map(|s| (s, l.id)));
        }
        for (_, id) in l.importing.iter().chain(l.migrating.iter()) {
            ensure_node(&mut nodes, *id, rng, now);
        }
        importing.extend(l.importing);
        migrating.extend(l.migrating);
    }
    let me = myself.ok_or_else(|| err(0, ConfErrorKind::NoMyself))?;
    // Table order = the order of the nodes' own lines; nodes only referenced (created on
    // demand) follow in creation order. Writing the model back then keeps the file's order.
    let mut nodes: Vec<(usize, Node)> = nodes
        .into_iter()
        .enumerate()
        .map(|(created, n)| {
            let pos = seen_line.iter().position(|id| *id == n.id);
            (pos.unwrap_or(seen_line.len() + created), n)
        })
        .collect();
    nodes.sort_by_key(|(pos, _)| *pos);
    let nodes = nodes.into_iter().map(|(_, n)| n).collect();
    build(
        nodes,
        me,
        owners,
        importing,
        migrating,
        current_epoch,
        last_vote_epoch,
    )
    .map(|t| (t, warnings))
    .map_err(|k| err(0, k))
}

fn build(
    nodes: Vec<Node>,
    me: NodeId,
    owners: Vec<(Slot, NodeId)>,
    importing: Vec<(Slot, NodeId)>,
    migrating: Vec<(Slot, NodeId)>,
    current_epoch: CurrentEpoch,
    last_vote_epoch: CurrentEpoch,
) -> Result<Topology, ConfErrorKind> {
    let mut topo = Topology::from_nodes(nodes, me).ok_or(ConfErrorKind::NoMyself)?;
    // A replica is in its primary's shard (PR #2174): align every replication tree on its top.
    let ids: Vec<NodeId> = topo.nodes().map(|n| n.id).collect();
    for id in ids {
        let root = topo.shard_root(&id).filter(|r| *r != id);
        if let Some(shard) = root.and_then(|r| topo.node(&r)).map(|r| r.shard_id) {
            topo.set_shard_id(&id, shard);
        }
    }
    // Every ID below was created by `ensure_node`, so these calls cannot fail; map defensively.
    for (s, id) in owners {
        topo.set_slot_owner(s, Some(id))
            .map_err(|_| ConfErrorKind::DuplicateLine(id))?;
    }
    for (s, id) in importing {
        topo.set_importing(s, Some(id))
            .map_err(|_| ConfErrorKind::DuplicateLine(id))?;
    }
    for (s, id) in migrating {
        topo.set_migrating(s, Some(id))
            .map_err(|_| ConfErrorKind::DuplicateLine(id))?;
    }
    topo.current_epoch = current_epoch.max(topo.max_config_epoch().as_current());
    topo.last_vote_epoch = last_vote_epoch;
    Ok(topo)
}

/// Writes one node's address field, flags etc. shared by nodes.conf and CLUSTER NODES.
pub(crate) struct LineStyle {
    /// nodes.conf form: empty hostname slot always present, aux fields written.
    pub conf: bool,
    /// Which port goes in the address (TLS clients see the TLS port in CLUSTER NODES).
    pub tls_client: bool,
    /// Requester is on IPv6 (client-ipv6 shown instead of the cluster IP).
    pub ipv6_client: bool,
}

pub(crate) fn write_node_line(topo: &Topology, n: &Node, style: &LineStyle, out: &mut String) {
    let ip = if style.conf {
        n.ip
    } else {
        n.client_ip(style.ipv6_client)
    };
    let ip = ip.map(|i| i.to_string()).unwrap_or_default();
    let port = if style.tls_client && !style.conf {
        n.tls_port
    } else {
        n.port
    };
    // Writing into a String cannot fail.
    let _ = write!(out, "{} {}:{}@{}", n.id, ip, port, n.bus_port);
    match (&n.hostname, style.conf) {
        (Some(h), _) => {
            out.push(',');
            out.push_str(h.as_str());
        }
        (None, true) => out.push(','),
        (None, false) => {}
    }
    if style.conf {
        if let Some(v6) = n.client_ipv6 {
            let _ = write!(out, ",client-ipv6={v6}");
        }
        if let Some(v4) = n.client_ipv4 {
            let _ = write!(out, ",client-ipv4={v4}");
        }
        let _ = write!(out, ",tls-port={}", n.tls_port);
        if let Some(name) = &n.human_nodename {
            let _ = write!(out, ",nodename={name}");
        }
        let _ = write!(out, ",shard-id={}", n.shard_id);
    }
    let primary = n
        .primary
        .map(|p| p.to_string())
        .unwrap_or_else(|| "-".to_owned());
    let _ = write!(
        out,
        " {} {} {} {} {} {}",
        n.flags.names(),
        primary,
        n.ping_sent.unwrap_or_default(),
        n.pong_received.unwrap_or_default(),
        topo.reported_config_epoch(n),
        if n.is_myself() {
            LinkState::Connected
        } else {
            n.link
        }
        .as_str(),
    );
    for r in n.slots().ranges() {
        let _ = write!(out, " {r}");
    }
    if n.is_myself() {
        write_marks(topo, out);
    }
}

/// `[N->-id]` for every migrating slot, then `[N-<-id]` for importing slots not also
/// migrating (§18.1: a slot with both marks shows only the migrating form), ascending by slot.
fn write_marks(topo: &Topology, out: &mut String) {
    // Slot order; a slot marked both ways is written as migrating (walking the two mark maps,
    // not all 16384 slots: this runs on every save).
    let mut marks: std::collections::BTreeMap<Slot, (bool, &NodeId)> = topo
        .importing()
        .map(|(s, from)| (s, (false, from)))
        .collect();
    marks.extend(topo.migrating().map(|(s, to)| (s, (true, to))));
    for (s, (migrating, id)) in marks {
        if migrating {
            let _ = write!(out, " [{s}->-{id}]");
        } else {
            let _ = write!(out, " [{s}-<-{id}]");
        }
    }
}

/// Writes the model as a Valkey 8 nodes.conf (§18.1, §18.4): one line per node except
/// HANDSHAKE nodes, in table order (deterministic: insertion / load order; Valkey uses its
/// hash-table order), then `vars currentEpoch N lastVoteEpoch M`. Every line ends with `\n`.
///
/// Address field: `ip:port@cport,<hostname or empty>` then `client-ipv6=`, `client-ipv4=`
/// (when set), `tls-port=` (always), `nodename=` (when set), `shard-id=` (always). A node with
/// a known primary reports the primary's configEpoch. Myself's line ends with its open slots.
///
/// `ping_sent`/`pong_recv` are written as stored (0 for none).
pub fn save_nodes_conf(topo: &Topology) -> String {
    let style = LineStyle {
        conf: true,
        tls_client: false,
        ipv6_client: false,
    };
    let mut out = String::new();
    for n in topo.nodes().filter(|n| !n.in_handshake()) {
        write_node_line(topo, n, &style, &mut out);
        out.push('\n');
    }
    let _ = writeln!(
        out,
        "vars currentEpoch {} lastVoteEpoch {}",
        topo.current_epoch, topo.last_vote_epoch
    );
    out
}
