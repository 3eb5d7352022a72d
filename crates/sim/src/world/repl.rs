//! Replication of the simulated hosts: each host runs the shipped
//! [`ferrocluster_dataplane::Replication`] (both roles) over data connections to the other
//! hosts' client ports, and does for it what a real host does: it opens and writes the
//! connections, parses its clients' commands (PING, AUTH, REPLCONF, PSYNC), produces RDB
//! snapshots of its keyspace with `ferrocluster_rdb` for full syncs, loads the RDBs it
//! receives with the streaming decoder, executes its primary's stream on its keyspace, and
//! hands the crate's `replication_state()` to its node.
//!
//! # Connections
//! Module `tcp`'s connections (as the slot migration data connections'): `Connect` reaches
//! the primary's host after one latency (SYN) and the replica hears it connected one latency
//! later (SYN-ACK); a crashed host refuses; a partition makes the SYN retry every
//! [`SYN_RETRY_MS`] and fail after [`CONNECT_TIMEOUT_MS`](super::tcp::CONNECT_TIMEOUT_MS).
//! Bytes take a latency and never overtake each other on one connection; a partitioned
//! direction holds them (TCP retransmission) until it heals, so a link cut by a partition goes
//! down by the crate's own `repl-timeout`. A close (either end, or a crash) reaches the peer one latency later.
//! [`World::block_data`] is a firewall that rejects the replica's replication connections:
//! open ones are reset, new ones refused.
//!
//! # Snapshots
//! `StartSnapshot` copies the keyspace into an RDB at once (the fork's point in time, with the
//! crate's aux fields `repl-id`, `repl-offset`, `repl-stream-db`); the file is complete
//! [`crate::DataConfig::sync_ms`] later and then handed to the crate (disk sync: the `$<len>`
//! framing).

use super::keys::{self, Keyspace};
use super::tcp::{Left, Next, Seg, Syn, Tcp, SYN_RETRY_MS};
use super::{DataEv, World};
use crate::cluster::ClusterSimExt;
use crate::sim::{host_ip, Violation, CLIENT_PORT};
use ferrocluster_dataplane::resp::{CommandReader, Item, ReaderLimits};
use ferrocluster_dataplane::{
    CommandOutcome, ConnId, Event, Output, Replication, ReplicationConfig, Reply, Restored, Role,
    SaveInfo, SnapshotId, StreamCommand, StreamError, StreamErrorKind, UpstreamId,
};
use ferrocluster_node::NodeId;
use ferrocluster_node::Origin;
use ferrocluster_rdb::{EntryMeta, ItemRef, RdbDecoder, RdbWriter, WriterConfig};
use ferrocluster_slot::Slot;
use rand_core::RngCore;
use std::collections::BTreeMap;

/// What one host's replication holds besides its keyspace.
#[derive(Default)]
pub(super) struct ReplHost {
    /// The engine; `None` while the host is down.
    repl: Option<Replication>,
    /// The replication fields saved with the data (an fsynced AOF survives a crash): given
    /// back to the engine at restart for a partial resync.
    saved: Option<Restored>,
    /// The offset when the host went down.
    down_offset: u64,
    /// Client connections (replicas of this host): their command readers.
    readers: BTreeMap<ConnId, CommandReader>,
    /// A full sync being loaded: the decoder and the new keyspace.
    loading: Option<(RdbDecoder, Keyspace)>,
    /// Snapshots being saved: their RDB, complete at the scheduled time.
    rdbs: BTreeMap<SnapshotId, Vec<u8>>,
    /// The host the engine was last pointed at (`None`: a primary).
    pub(super) follows: Option<usize>,
    /// Full syncs this host loaded as a replica.
    pub(super) full_loads: u64,
    /// Partial resyncs this host's link came up with.
    pub(super) partial_resyncs: u64,
    /// Syncs its primary refused or aborted (`-NOMASTERLINK`, `-LOADING`, ...).
    pub(super) refused_syncs: u64,
}

/// One replication connection: end 0 the replica, end 1 the primary's host.
#[derive(Debug)]
pub(super) struct ReplConn {
    tcp: Tcp,
    link: UpstreamId,
}

/// Replication events on the world's queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ReplEv {
    Syn {
        conn: u64,
    },
    SynAck {
        conn: u64,
    },
    Flush {
        conn: u64,
        dir: usize,
    },
    RdbSaved {
        host: usize,
        session: u64,
        id: SnapshotId,
    },
}

/// The replication settings of every simulated host: Valkey's defaults, a disk-based full
/// sync (no `repl-diskless-sync-delay`), the client port as listening port.
fn config() -> ReplicationConfig {
    ReplicationConfig {
        diskless_sync: false,
        listening_port: CLIENT_PORT,
        ..ReplicationConfig::default()
    }
}

impl World {
    pub(super) fn dp_violation(&self, host: usize, message: String) -> Violation {
        Violation {
            seed: self.sim.seed(),
            at: self.sim.now(),
            elapsed_ms: self.sim.elapsed_ms(),
            event_no: self.sim.events(),
            host,
            invariant: "data plane".into(),
            message,
        }
    }

    /// Starts host `h`'s engine with the replication fields its data was saved with. A host
    /// the [`World`] adopts running (`adopt`: made beside a running simulator, whose node told
    /// its host whom to follow before the world was there to hear it) starts in the role its
    /// node has; a host that starts (a restart, a staggered first start) replicates from no
    /// one, as a real host's process does: its node tells it whom to follow
    /// ([`ferrocluster_node::Output::ReplicateFrom`], from the node's cron for a replica
    /// loaded from nodes.conf), and the host acts on that output alone. A host whose node
    /// starts as a replica keeps its saved history as its own
    /// ([`Role::ReplicaAwaitingPrimary`], Valkey `loadDataFromDisk` in cluster mode), so it
    /// resyncs partially once told.
    pub(super) fn repl_start(&mut self, h: usize, adopt: bool) -> Result<(), Violation> {
        let now = self.sim.now();
        let (is_replica, primary) = match self.sim.node(h) {
            Some(n) => {
                let me = n.topology().myself();
                let primary = me.primary.filter(|_| me.is_replica());
                (me.is_replica(), primary.and_then(|p| self.host_of(&p)))
            }
            None => (false, None),
        };
        let primary = primary.filter(|_| adopt);
        let role = match primary {
            Some(p) => Role::Replica {
                host: host_ip(p).to_string(),
                port: CLIENT_PORT,
            },
            None if is_replica => Role::ReplicaAwaitingPrimary,
            None => Role::Primary,
        };
        let seed = self.rng.next_u64();
        let restored = self.data[h].repl.saved.take();
        let repl = Replication::new(config(), seed, role, restored, now)
            .map_err(|e| self.dp_violation(h, format!("replication config: {e}")))?;
        let r = &mut self.data[h].repl;
        r.repl = Some(repl);
        r.follows = primary;
        self.repl_drain(h)
    }

    /// Host `h` crashed: its engine and connections are gone, its data and the replication
    /// fields saved with it stay.
    pub(super) fn repl_crashed(&mut self, h: usize) {
        let r = &mut self.data[h].repl;
        if let Some(repl) = r.repl.take() {
            r.saved = repl.save_info().map(|s: SaveInfo| Restored {
                replid: s.replid,
                offset: s.offset,
                stream_db: s.stream_db,
            });
            r.down_offset = repl.offset();
        }
        r.readers.clear();
        r.loading = None;
        r.rdbs.clear();
        r.follows = None;
        let ids: Vec<(u64, usize)> = self
            .repl_conns
            .iter()
            .filter_map(|(&id, c)| c.tcp.ends.iter().position(|&e| e == h).map(|s| (id, s)))
            .collect();
        for (id, side) in ids {
            let Some(c) = self.repl_conns.get_mut(&id) else {
                continue;
            };
            match c.tcp.crash(side) {
                Left::Nothing => {
                    self.repl_conns.remove(&id);
                }
                Left::Fin => self.conn_push(id, side, Seg::Fin),
                Left::Pending => {}
            }
        }
    }

    /// The engine of a running host.
    pub(super) fn repl(&self, h: usize) -> Option<&Replication> {
        self.data[h].repl.repl.as_ref()
    }

    /// A host's replication offset (bytes of stream produced or processed); while it is down,
    /// the offset it went down with.
    pub fn offset(&self, host: usize) -> u64 {
        self.repl(host)
            .map_or(self.data[host].repl.down_offset, Replication::offset)
    }

    /// Acts on every output the engine of `h` has.
    pub(super) fn repl_drain(&mut self, h: usize) -> Result<(), Violation> {
        while let Some(o) = self.data[h]
            .repl
            .repl
            .as_mut()
            .and_then(|r| r.poll_output())
        {
            self.repl_act(h, o)?;
        }
        Ok(())
    }

    fn repl_act(&mut self, h: usize, o: Output) -> Result<(), Violation> {
        let now = self.sim.now();
        match o {
            Output::ToReplica { conn, bytes } => self.conn_send(conn.0, 1, bytes),
            Output::CloseReplica { conn, .. } => {
                self.data[h].repl.readers.remove(&conn);
                self.conn_close(conn.0, 1);
            }
            Output::StartSnapshot { id, info, .. } => {
                let rdb = self.rdb_of(h, info)?;
                self.data[h].repl.rdbs.insert(id, rdb);
                let at = now.saturating_add_ms(self.cfg.sync_ms);
                let session = self.data[h].session;
                self.schedule(
                    at,
                    DataEv::Repl(ReplEv::RdbSaved {
                        host: h,
                        session,
                        id,
                    }),
                );
            }
            Output::Connect { link, host, port } => {
                let primary = (0..self.sim.hosts())
                    .find(|&p| port == CLIENT_PORT && host_ip(p).to_string() == host)
                    .unwrap_or(usize::MAX);
                let id = self.next_repl_conn;
                self.next_repl_conn += 1;
                self.repl_conns.insert(
                    id,
                    ReplConn {
                        tcp: Tcp::new(h, primary, now),
                        link,
                    },
                );
                let at = now.saturating_add_ms(self.latency());
                self.schedule(at, DataEv::Repl(ReplEv::Syn { conn: id }));
            }
            Output::ToPrimary { link, bytes } => {
                if let Some(id) = self.upstream_conn(h, link) {
                    self.conn_send(id, 0, bytes);
                }
            }
            Output::CloseUpstream { link } => {
                if let Some(id) = self.upstream_conn(h, link) {
                    self.conn_close(id, 0);
                }
            }
            Output::RdbBegin { .. } => {
                self.data[h].repl.loading = Some((RdbDecoder::new(), keys::keyspace()));
            }
            Output::RdbChunk(bytes) => self.rdb_load(h, &bytes)?,
            Output::RdbAbort => self.data[h].repl.loading = None,
            Output::RdbEnd => {
                let Some((d, kv)) = self.data[h].repl.loading.take() else {
                    return Err(self.dp_violation(h, "RdbEnd without RdbBegin".into()));
                };
                if let Err(e) = d.finish() {
                    return Err(self.dp_violation(h, format!("full sync RDB: {e}")));
                }
                self.data[h].kv = kv;
                self.data[h].repl.full_loads += 1;
                // The AOF is rewritten from the loaded data: no SYNCSLOTS entries are left.
                self.data[h].aof_syncslots.clear();
                self.asm_loaded(h)?;
            }
            Output::Apply(c) => self.repl_apply(h, c)?,
            Output::ApplyTransaction(cs) => {
                for c in cs {
                    self.repl_apply(h, c)?;
                }
            }
            // No simulated client runs WAIT.
            Output::WaitDone { .. } => {}
            Output::Event(Event::LinkUp { partial: true }) => {
                self.data[h].repl.partial_resyncs += 1;
            }
            Output::Event(_) => {}
        }
        Ok(())
    }

    /// The RDB of `h`'s keyspace now, with the engine's aux fields.
    fn rdb_of(&mut self, h: usize, info: SaveInfo) -> Result<Vec<u8>, Violation> {
        let now = self.sim.now().0;
        let kv = &self.data[h].kv;
        let mut w = RdbWriter::new(WriterConfig::default());
        let r = (|| {
            w.aux_int(b"repl-stream-db", i64::from(info.stream_db))?;
            w.aux(b"repl-id", info.replid.as_str().as_bytes())?;
            w.aux_int(b"repl-offset", info.offset as i64)?;
            w.select_db(0)?;
            w.resize_db(kv.dbsize(0).unwrap_or(0), 0)?;
            for slot in Slot::all() {
                if kv.count_keys_in_slot(0, slot).unwrap_or(0) == 0 {
                    continue;
                }
                for key in kv.keys_in_slot(0, slot, usize::MAX).unwrap_or_default() {
                    if let Ok(Some(v)) = kv.get(0, &key, now) {
                        w.entry(&key, v, EntryMeta::default())?;
                    }
                }
            }
            w.finish()
        })();
        match r {
            Ok(()) => Ok(w.take()),
            Err(e) => Err(self.dp_violation(h, format!("RDB snapshot: {e}"))),
        }
    }

    /// RDB bytes of a full sync: decoded into the keyspace being loaded.
    fn rdb_load(&mut self, h: usize, bytes: &[u8]) -> Result<(), Violation> {
        let now = self.sim.now().0;
        let Some((d, kv)) = self.data[h].repl.loading.as_mut() else {
            return Err(self.dp_violation(h, "RdbChunk without RdbBegin".into()));
        };
        d.feed(bytes);
        let mut bad = None;
        loop {
            match d.poll_ref() {
                Ok(Some(ItemRef::Entry(e))) => {
                    let key = e.key.clone().into_owned();
                    match e.value.into_value::<keys::Val>() {
                        Ok(v) => {
                            let _ = kv.insert(0, &key, v, now);
                        }
                        Err(u) => {
                            bad = Some(format!("unsupported value {u:?}"));
                            break;
                        }
                    }
                }
                Ok(Some(ItemRef::Item(_))) => {}
                Ok(None) => break,
                Err(e) => {
                    bad = Some(e.to_string());
                    break;
                }
            }
        }
        match bad {
            None => Ok(()),
            Some(why) => Err(self.dp_violation(h, format!("full sync RDB: {why}"))),
        }
    }

    /// One command of the primary's stream, executed on replica `h`.
    fn repl_apply(&mut self, h: usize, c: StreamCommand) -> Result<(), Violation> {
        let syncslots = |i: usize| {
            c.argv
                .get(i)
                .is_some_and(|a| a.eq_ignore_ascii_case(b"SYNCSLOTS"))
        };
        let cluster = c
            .argv
            .first()
            .is_some_and(|a| a.eq_ignore_ascii_case(b"CLUSTER"));
        if syncslots(0) || (cluster && syncslots(1)) {
            // Propagated by the primary's slot migration: the replica's node follows it.
            self.data[h].aof_syncslots.push(c.argv.clone());
            self.asm_command(h, Origin::Primary, c.argv)?;
            return Ok(());
        }
        let now = self.sim.now().0;
        keys::execute(&mut self.data[h].kv, &c.argv, now)
            .map_err(|e| self.dp_violation(h, format!("replicated command: {}", e.0)))
    }

    /// Propagates a write host `h` executed as a primary; returns the offset after it.
    pub(super) fn repl_feed(&mut self, h: usize, argv: &[Vec<u8>]) -> Result<u64, Violation> {
        let now = self.sim.now();
        let Some(repl) = self.data[h].repl.repl.as_mut() else {
            return Ok(self.data[h].repl.down_offset);
        };
        let off = repl
            .feed(0, argv, now)
            .map_err(|e| self.dp_violation(h, format!("feed: {e}")))?;
        self.repl_drain(h)?;
        Ok(off)
    }

    /// Acts on a role output of host `h`'s node: `Some((primary, full_sync))` for
    /// [`ferrocluster_node::Output::ReplicateFrom`] (`replicate_from` the primary's host),
    /// `None` for [`ferrocluster_node::Output::BecamePrimary`] (`become_primary`). A primary
    /// the world cannot place (no host has that ID) is not followed; the node names it again
    /// when its address changes.
    pub(super) fn repl_follow(
        &mut self,
        h: usize,
        want: Option<(NodeId, bool)>,
    ) -> Result<(), Violation> {
        let now = self.sim.now();
        let target = match want {
            Some((p, full_sync)) => match self.host_of(&p) {
                Some(p) => Some((p, full_sync)),
                None => return Ok(()),
            },
            None => None,
        };
        let was_primary = self.data[h].repl.follows.is_none();
        let Some(repl) = self.data[h].repl.repl.as_mut() else {
            return Ok(());
        };
        match target {
            Some((p, full_sync)) => {
                repl.replicate_from(host_ip(p).to_string(), CLIENT_PORT, full_sync, now)
            }
            None if was_primary => return Ok(()),
            None => repl.become_primary(now),
        }
        self.data[h].repl.follows = target.map(|(p, _)| p);
        self.repl_drain(h)
    }

    /// The engine's timers of every running host.
    pub(super) fn repl_timers(&mut self) -> Result<(), Violation> {
        let now = self.sim.now();
        for h in 0..self.data.len() {
            let due = self
                .repl(h)
                .and_then(Replication::poll_timeout)
                .is_some_and(|t| t <= now);
            if due {
                if let Some(r) = self.data[h].repl.repl.as_mut() {
                    r.handle_timeout(now);
                }
                self.repl_drain(h)?;
            }
        }
        Ok(())
    }

    /// Whether a host's writes are paused: tells its engine (no pings enter the stream).
    pub(super) fn repl_pause(&mut self, h: usize, paused: bool) {
        let now = self.sim.now();
        if let Some(r) = self.data[h].repl.repl.as_mut() {
            r.handle_pause(paused, now);
        }
    }

    /// Firewall: resets every replication connection of replica `h` (both ends hear it).
    pub(super) fn repl_reset_links_of(&mut self, h: usize) {
        let ids: Vec<u64> = self
            .repl_conns
            .iter()
            .filter(|(_, c)| c.tcp.ends[0] == h && c.tcp.accepted)
            .map(|(&id, _)| id)
            .collect();
        for id in ids {
            let Some(open) = self.repl_conns.get_mut(&id).map(|c| c.tcp.reset()) else {
                continue;
            };
            for (side, is_open) in open.into_iter().enumerate() {
                if is_open {
                    // The reset reaches each end as a FIN from the other.
                    self.conn_push(id, 1 - side, Seg::Fin);
                }
            }
        }
    }

    // ----- connections -----

    fn upstream_conn(&self, h: usize, link: UpstreamId) -> Option<u64> {
        self.repl_conns
            .iter()
            .find(|(_, c)| c.tcp.ends[0] == h && c.link == link)
            .map(|(&id, _)| id)
    }

    /// Sends `seg` from end `side` (module `tcp`).
    fn conn_push(&mut self, id: u64, side: usize, seg: Seg) {
        let now = self.sim.now();
        let lat = self.latency();
        let Some(c) = self.repl_conns.get_mut(&id) else {
            return;
        };
        let ready = c.tcp.push(side, seg, now, lat);
        self.schedule(
            ready,
            DataEv::Repl(ReplEv::Flush {
                conn: id,
                dir: side,
            }),
        );
    }

    fn conn_send(&mut self, id: u64, side: usize, bytes: Vec<u8>) {
        if self.repl_conns.get(&id).is_some_and(|c| c.tcp.open[side]) {
            self.conn_push(id, side, Seg::Bytes(bytes));
        }
    }

    fn conn_close(&mut self, id: u64, side: usize) {
        let Some(c) = self.repl_conns.get_mut(&id) else {
            return;
        };
        match c.tcp.close(side) {
            Left::Nothing => {
                self.repl_conns.remove(&id);
            }
            Left::Fin => self.conn_push(id, side, Seg::Fin),
            Left::Pending => {}
        }
    }

    pub(super) fn repl_event(&mut self, ev: ReplEv) -> Result<(), Violation> {
        match ev {
            ReplEv::Syn { conn } => self.on_syn(conn),
            ReplEv::SynAck { conn } => self.on_syn_ack(conn),
            ReplEv::Flush { conn, dir } => self.on_repl_flush(conn, dir),
            ReplEv::RdbSaved { host, session, id } => {
                if self.data[host].session != session {
                    return Ok(());
                }
                let Some(rdb) = self.data[host].repl.rdbs.remove(&id) else {
                    return Ok(());
                };
                let now = self.sim.now();
                if let Some(r) = self.data[host].repl.repl.as_mut() {
                    let res = r
                        .handle_snapshot_ready(id, rdb.len() as u64, now)
                        .and_then(|()| r.handle_snapshot_chunk(id, &rdb, now))
                        .and_then(|()| r.handle_snapshot_end(id, now));
                    if let Err(e) = res {
                        return Err(self.dp_violation(host, format!("snapshot: {e}")));
                    }
                }
                self.repl_drain(host)
            }
        }
    }

    fn on_syn(&mut self, id: u64) -> Result<(), Violation> {
        let now = self.sim.now();
        let Some(c) = self.repl_conns.get(&id) else {
            return Ok(());
        };
        let ([r, p], link) = (c.tcp.ends, c.link);
        if !c.tcp.open[0] || !self.sim.is_up(r) {
            self.repl_conns.remove(&id);
            return Ok(());
        }
        let up = p != usize::MAX && self.sim.is_up(p);
        match c
            .tcp
            .syn(now, self.sim.partitions(), up, self.data[r].blocked)
        {
            Syn::Retry => {
                let at = now.saturating_add_ms(SYN_RETRY_MS);
                self.schedule(at, DataEv::Repl(ReplEv::Syn { conn: id }));
                return Ok(());
            }
            Syn::Refused | Syn::TimedOut => {
                self.repl_conns.remove(&id);
                if let Some(repl) = self.data[r].repl.repl.as_mut() {
                    repl.handle_upstream_connect_failed(link, now);
                }
                self.repl_drain(r)?;
                return self.report(r);
            }
            Syn::Accept => {}
        }
        if let Some(c) = self.repl_conns.get_mut(&id) {
            c.tcp.accept(now);
        }
        self.data[p]
            .repl
            .readers
            .insert(ConnId(id), CommandReader::new(ReaderLimits::default()));
        let at = now.saturating_add_ms(self.latency());
        self.schedule(at, DataEv::Repl(ReplEv::SynAck { conn: id }));
        Ok(())
    }

    fn on_syn_ack(&mut self, id: u64) -> Result<(), Violation> {
        let now = self.sim.now();
        let Some(c) = self.repl_conns.get(&id) else {
            return Ok(());
        };
        if !c.tcp.open[0] {
            return Ok(());
        }
        let (r, link) = (c.tcp.ends[0], c.link);
        if let Some(repl) = self.data[r].repl.repl.as_mut() {
            repl.handle_upstream_connected(link, now);
        }
        self.repl_drain(r)?;
        self.report(r)
    }

    fn on_repl_flush(&mut self, id: u64, dir: usize) -> Result<(), Violation> {
        let now = self.sim.now();
        loop {
            let Some(c) = self.repl_conns.get_mut(&id) else {
                return Ok(());
            };
            let (from, to) = (c.tcp.ends[dir], c.tcp.ends[1 - dir]);
            let up = self.sim.is_up(to);
            let seg = match c.tcp.next(dir, now, self.sim.partitions(), up) {
                Next::Wait => return Ok(()),
                Next::Held => {
                    // Retransmitted a cron period later.
                    let at = now.saturating_add_ms(self.cfg.cron_ms);
                    self.schedule(at, DataEv::Repl(ReplEv::Flush { conn: id, dir }));
                    return Ok(());
                }
                Next::Lost => continue,
                Next::Seg(seg) => seg,
            };
            let link = c.link;
            match seg {
                Seg::Fin => {
                    if c.tcp.is_closed() {
                        self.repl_conns.remove(&id);
                    }
                    if dir == 1 {
                        if let Some(repl) = self.data[to].repl.repl.as_mut() {
                            repl.handle_upstream_closed(link, now);
                        }
                    } else {
                        self.data[to].repl.readers.remove(&ConnId(id));
                        if let Some(repl) = self.data[to].repl.repl.as_mut() {
                            repl.handle_conn_closed(ConnId(id), now);
                        }
                    }
                    self.repl_drain(to)?;
                    self.report(to)?;
                }
                Seg::Bytes(b) if dir == 1 => {
                    let res = match self.data[to].repl.repl.as_mut() {
                        Some(repl) => repl.handle_upstream_bytes(link, &b, now),
                        None => Ok(()),
                    };
                    match res {
                        // The primary refused or aborted the sync (e.g. `-NOMASTERLINK` from a
                        // replica whose own link is down): the engine closed the link and
                        // retries, as the protocol wants.
                        Err(StreamError {
                            kind:
                                StreamErrorKind::SyncAborted(_)
                                | StreamErrorKind::PingRejected(_)
                                | StreamErrorKind::AuthRejected(_),
                            ..
                        }) => self.data[to].repl.refused_syncs += 1,
                        // Bytes our own primary side wrote that our replica side cannot read.
                        Err(e) => {
                            return Err(self.dp_violation(to, format!("stream from primary: {e}")))
                        }
                        Ok(()) => {}
                    }
                    self.repl_drain(to)?;
                    self.report(to)?;
                }
                Seg::Bytes(b) => self.primary_input(to, from, id, &b)?,
            }
        }
    }

    /// Bytes from replica host `r` on connection `id` reach primary host `p`: its client
    /// commands (the replication handshake, ACKs).
    fn primary_input(
        &mut self,
        p: usize,
        r: usize,
        id: u64,
        bytes: &[u8],
    ) -> Result<(), Violation> {
        let now = self.sim.now();
        let conn = ConnId(id);
        let mut items = Vec::new();
        {
            let Some(reader) = self.data[p].repl.readers.get_mut(&conn) else {
                return Ok(());
            };
            reader.push(bytes);
            loop {
                match reader.next_item() {
                    Ok(Some(i)) => items.push(i),
                    Ok(None) => break,
                    Err(e) => {
                        return Err(self.dp_violation(p, format!("replica {r} sent: {e}")));
                    }
                }
            }
        }
        for item in items {
            if !self.data[p].repl.readers.contains_key(&conn) {
                break; // closed by an earlier command
            }
            let reply = match item {
                Item::Empty(_) => {
                    if let Some(repl) = self.data[p].repl.repl.as_mut() {
                        repl.handle_replica_newline(conn, now);
                    }
                    None
                }
                Item::Command(c) => {
                    let argv = c.argv;
                    let name = argv
                        .first()
                        .map(|a| a.to_ascii_uppercase())
                        .unwrap_or_default();
                    match name.as_slice() {
                        b"PING" => Some(Reply::Simple("PONG".into())),
                        b"AUTH" => Some(Reply::ok()),
                        _ => match self.data[p].repl.repl.as_mut() {
                            Some(repl) => {
                                match repl.handle_command(conn, Some(host_ip(r)), &argv, now) {
                                    Ok(CommandOutcome::Reply(r)) => Some(r),
                                    Ok(CommandOutcome::NoReply) => None,
                                    Err(e) => Some(e.to_reply()),
                                }
                            }
                            None => None,
                        },
                    }
                }
            };
            if let Some(reply) = reply {
                self.conn_send(id, 1, reply.to_resp2());
            }
            self.repl_drain(p)?;
        }
        Ok(())
    }
}
