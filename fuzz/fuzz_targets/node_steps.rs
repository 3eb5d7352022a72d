//! Drives one `ClusterNode` beside four scripted peers with a fuzzer-chosen sequence of steps
//! (issue 21): structure-aware bus messages (PING/PONG/MEET with gossip and extensions, FAIL,
//! UPDATE, FAILOVER_AUTH_REQUEST/ACK, MFSTART, Pub/Sub, module, unknown types) from a peer,
//! myself's own name or a stranger, raw or bent frames (mutated encodings and what the node
//! itself sent), link events (accept, connected, connect failed, closed), time that jumps
//! forward or back, persists acknowledged late or never, CLUSTER commands from the command
//! table's grammar (`shared/cluster_argv.rs`), replication facts and write-pause reports,
//! and slot migration data-plane facts for the jobs and connections the node named.
//!
//! The input starts with captured frames (a u16 length, then the bytes), then its first bytes
//! pick the start: a nodes.conf naming myself and the four peers
//! (roles, slots, configEpochs, currentEpoch, lastVoteEpoch chosen), or a fresh node.
//!
//! After every step: no panic; every `Transmit` splits into frames that decode; the node's
//! own invariants hold (`ClusterNode::invariants`: no vote or auth request before its persist
//! is acknowledged, epochs never go down, one vote per epoch, no slot with two owners of the
//! same configEpoch won from a peer, myself's record never rewritten by a peer); at the end of
//! the input, the topology's own consistency (`Topology::check_invariants`).
#![no_main]

use ferrocluster_bus::{
    decode, encode, node_flags, Body, FullHeader, Gossip, GossipEntry, IpField, Message, ModuleMsg,
    NodeName, PingExt, Publish, UnknownMsg, Update,
};
use ferrocluster_bus::{msg_flags, ExtString};
use ferrocluster_node::migration::{AuthReply, ConnId, JobName, SnapshotResult};
use ferrocluster_node::{
    Capabilities, ClusterConfig, ClusterNode, CommandRequest, EmptyKeyspace, LinkEvent, LinkId,
    MigrationInput, MigrationRequest, Millis, Output, ReplLink, ReplicationState, RequestId,
};
use ferrocluster_slot::{Slot, SlotRange, SlotSet};
use libfuzzer_sys::arbitrary::{Result, Unstructured};
use libfuzzer_sys::fuzz_target;
use std::net::{IpAddr, Ipv4Addr};

#[path = "shared/cluster_argv.rs"]
mod cluster_argv;

const PEERS: usize = 4;
const T0: u64 = 1_700_000_000_000;
const NODE_TIMEOUT_MS: u64 = 2_000;
const MAX_STEPS: usize = 256;

fn myself_name() -> String {
    format!("{:0>40}", "a0")
}
fn peer_name(p: usize) -> String {
    format!("{:0>40}", format!("b{p}"))
}
fn peer_ip(p: usize) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2 + p as u8))
}
fn peer_port(p: usize) -> u16 {
    7001 + p as u16
}
const MY_IP: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 1));

struct Harness {
    node: ClusterNode,
    now: u64,
    /// Links the node can read from: accepted ones and connected outbound ones.
    links: Vec<LinkId>,
    /// Outbound connects not yet answered.
    connecting: Vec<LinkId>,
    /// Persist sequence numbers not yet acknowledged, in order.
    persists: Vec<u64>,
    jobs: Vec<JobName>,
    conns: Vec<ConnId>,
    job_names: Vec<String>,
    ids: Vec<String>,
    peers: Vec<(String, u16)>,
    /// The last frames the node sent (material for bent frames).
    sent: Vec<Vec<u8>>,
    /// Captured frames from the input's head (material for bent frames).
    captured: Vec<u8>,
    next_request: u64,
    next_conn: u64,
}

/// A nodes.conf of myself and the four peers, from the input: myself a primary of the first
/// quarter of the slots, a replica of peer 0, or an empty primary; peers 0-2 primaries of the
/// other quarters; peer 3 a replica of myself, of peer 0, or an empty primary. A primary owns
/// its whole quarter (every slot covered) in one input of four, else the quarter's first 8
/// slots (loading 16384 slot owners is most of an input's time).
fn nodes_conf(u: &mut Unstructured) -> Result<String> {
    let width = if u.ratio(1u8, 4)? { 4096 } else { 8 };
    let me = u.int_in_range(0..=2u8)?;
    let p3 = u.int_in_range(0..=2u8)?;
    let mut epochs = [0u64; 1 + PEERS];
    for e in &mut epochs {
        *e = u64::from(u.int_in_range(0..=5u8)?);
    }
    let current = epochs.iter().max().copied().unwrap_or(0) + u64::from(u.int_in_range(0..=3u8)?);
    let last_vote = current.saturating_sub(u64::from(u.int_in_range(0..=3u8)?));
    let mut s = String::new();
    let (my_role, my_slots) = match me {
        0 => ("myself,master -".to_string(), format!(" 0-{}", width - 1)),
        1 => (format!("myself,slave {}", peer_name(0)), String::new()),
        _ => ("myself,master -".to_string(), String::new()),
    };
    s += &format!(
        "{} 127.0.0.1:7000@17000 {my_role} 0 0 {} connected{my_slots}\n",
        myself_name(),
        epochs[0]
    );
    for p in 0..PEERS {
        let (role, slots) = match (p, p3) {
            (3, 0) => (format!("slave {}", myself_name()), String::new()),
            (3, 1) => (format!("slave {}", peer_name(0)), String::new()),
            (3, _) => ("master -".to_string(), String::new()),
            _ => (
                "master -".to_string(),
                format!(" {}-{}", (p + 1) * 4096, (p + 1) * 4096 + width - 1),
            ),
        };
        s += &format!(
            "{} {}:{}@{} {role} 0 0 {} connected{slots}\n",
            peer_name(p),
            peer_ip(p),
            peer_port(p),
            peer_port(p) + 10_000,
            epochs[1 + p]
        );
    }
    s += &format!("vars currentEpoch {current} lastVoteEpoch {last_vote}\n");
    Ok(s)
}

impl Harness {
    fn new(u: &mut Unstructured, captured: &[u8]) -> Result<Harness> {
        let config = ClusterConfig {
            port: 7000,
            node_timeout_ms: NODE_TIMEOUT_MS,
            ..ClusterConfig::default()
        };
        let caps = Capabilities {
            replication: true,
            slot_migration: true,
            databases: 1,
        };
        let conf = if u.ratio(7u8, 8)? {
            Some(nodes_conf(u)?)
        } else {
            None
        };
        let node = ClusterNode::new(
            config,
            caps,
            Millis(T0),
            u.arbitrary::<u8>()?.into(),
            conf.as_deref().map(str::as_bytes),
        )
        .expect("the harness's nodes.conf loads");
        let mut ids = vec![node.myself_id().as_str().to_string()];
        ids.extend((0..PEERS).map(peer_name));
        let peers = (0..PEERS)
            .map(|p| (peer_ip(p).to_string(), peer_port(p)))
            .collect();
        let mut h = Harness {
            node,
            now: T0,
            links: Vec::new(),
            connecting: Vec::new(),
            persists: Vec::new(),
            jobs: Vec::new(),
            conns: Vec::new(),
            job_names: Vec::new(),
            ids,
            peers,
            sent: Vec::new(),
            captured: captured.to_vec(),
            next_request: 0,
            next_conn: 1,
        };
        h.drain();
        Ok(h)
    }

    /// Acts on every output, then checks the invariants.
    fn drain(&mut self) {
        while let Some(out) = self.node.poll_output() {
            match out {
                Output::Connect { link, .. } => self.connecting.push(link),
                Output::Transmit { link: _, bytes } => {
                    let mut rest = &bytes[..];
                    while !rest.is_empty() {
                        assert!(rest.len() >= 8, "a transmit ends in a partial frame");
                        let len = u32::from_be_bytes([rest[4], rest[5], rest[6], rest[7]]) as usize;
                        assert!(len >= 8 && len <= rest.len(), "a frame's length is wrong");
                        let (frame, tail) = rest.split_at(len);
                        if let Err(e) = decode(frame) {
                            panic!("the node sent a frame that does not decode: {e}");
                        }
                        if self.sent.len() >= 8 {
                            self.sent.remove(0);
                        }
                        self.sent.push(frame.to_vec());
                        rest = tail;
                    }
                }
                Output::Close { link } => {
                    self.links.retain(|l| *l != link);
                    self.connecting.retain(|l| *l != link);
                }
                Output::Persist { seq, .. } => self.persists.push(seq),
                Output::Migration(req) => self.note_migration(&req),
                _ => {}
            }
        }
        if let Err(e) = self.node.invariants() {
            panic!("node invariant: {e}");
        }
    }

    fn note_migration(&mut self, req: &MigrationRequest) {
        let (job, conn) = match req {
            MigrationRequest::Connect { job, .. } | MigrationRequest::AbortSnapshot { job } => {
                (Some(job), None)
            }
            MigrationRequest::SendAuth { job, conn }
            | MigrationRequest::AcceptImportLink { job, conn, .. }
            | MigrationRequest::StartSnapshot { job, conn, .. }
            | MigrationRequest::BeginStreaming { job, conn }
            | MigrationRequest::QueryBacklog { job, conn } => (Some(job), Some(*conn)),
            MigrationRequest::Send { conn, .. } | MigrationRequest::Close { conn } => {
                (None, Some(*conn))
            }
            _ => (None, None),
        };
        if let Some(j) = job {
            if !self.jobs.contains(j) && self.jobs.len() < 8 {
                self.jobs.push(*j);
                self.job_names.push(j.to_string());
            }
        }
        if let Some(c) = conn {
            if !self.conns.contains(&c) && self.conns.len() < 8 {
                self.conns.push(c);
            }
        }
    }

    fn link(&mut self, u: &mut Unstructured) -> Result<LinkId> {
        if self.links.is_empty() || u.ratio(1u8, 16)? {
            let p = u.choose_index(PEERS)?;
            let l = self
                .node
                .handle_accept_local(peer_ip(p), MY_IP, Millis(self.now));
            self.links.push(l);
            return Ok(l);
        }
        Ok(self.links[u.choose_index(self.links.len())?])
    }

    fn step(&mut self, u: &mut Unstructured) -> Result<()> {
        let now = Millis(self.now);
        match u.int_in_range(0..=15u8)? {
            0..=4 => {
                let link = self.link(u)?;
                let bytes = encode(&message(u, self)?);
                self.feed(u, link, &bytes)?;
            }
            5 => {
                let link = self.link(u)?;
                let mut bytes = match u.int_in_range(0..=3u8)? {
                    0 if !self.sent.is_empty() => {
                        self.sent[u.choose_index(self.sent.len())?].clone()
                    }
                    1 if !self.captured.is_empty() => {
                        // A captured frame from a real node (or what follows an offset into the
                        // captures), its sender mostly replaced by a peer's or myself's name.
                        let from = u.choose_index(self.captured.len())?;
                        let mut b = self.captured[from..].to_vec();
                        if b.len() >= 80 && u.ratio(3u8, 4)? {
                            b[40..80].copy_from_slice(&name(u, self)?.0);
                        }
                        b
                    }
                    0..=2 => encode(&message(u, self)?),
                    _ => cluster_argv::bytes_upto(u, 64)?,
                };
                for _ in 0..u.int_in_range(0..=4u8)? {
                    if bytes.is_empty() {
                        break;
                    }
                    let i = u.choose_index(bytes.len())?;
                    bytes[i] = u.arbitrary()?;
                }
                if u.ratio(1u8, 4)? {
                    let keep = u.int_in_range(0..=bytes.len())?;
                    bytes.truncate(keep);
                }
                self.feed(u, link, &bytes)?;
            }
            6 => match u.int_in_range(0..=3u8)? {
                0 if !self.connecting.is_empty() => {
                    let l = self
                        .connecting
                        .remove(u.choose_index(self.connecting.len())?);
                    self.node.handle_link(LinkEvent::Connected(l), now);
                    self.links.push(l);
                }
                1 if !self.connecting.is_empty() => {
                    let l = self
                        .connecting
                        .remove(u.choose_index(self.connecting.len())?);
                    self.node.handle_link(LinkEvent::ConnectFailed(l), now);
                }
                2 if !self.links.is_empty() => {
                    let l = self.links.remove(u.choose_index(self.links.len())?);
                    self.node.handle_link(LinkEvent::Closed(l), now);
                }
                _ => {
                    let p = u.choose_index(PEERS)?;
                    let l = if u.arbitrary()? {
                        self.node.handle_accept_local(peer_ip(p), MY_IP, now)
                    } else {
                        self.node.handle_accept(peer_ip(p), now)
                    };
                    self.links.push(l);
                }
            },
            7 | 8 => {
                // Time: mostly forward by up to a node timeout, sometimes a long jump, sometimes back.
                match u.int_in_range(0..=7u8)? {
                    0 => self.now = self.now.saturating_sub(u64::from(u.arbitrary::<u16>()?)),
                    1 => self.now += u64::from(u.arbitrary::<u32>()?),
                    _ => self.now += u64::from(u.int_in_range(0..=NODE_TIMEOUT_MS as u32)?),
                }
                self.node.handle_timeout(Millis(self.now));
            }
            9 => {
                // Persist acknowledgements: the oldest, all, or a stale one; none at all
                // when the input never picks this step.
                if !self.persists.is_empty() {
                    match u.int_in_range(0..=2u8)? {
                        0 => {
                            let s = self.persists.remove(0);
                            self.node.handle_persisted(s);
                        }
                        1 => {
                            let s = *self.persists.last().unwrap_or(&0);
                            self.persists.clear();
                            self.node.handle_persisted(s);
                        }
                        _ => self
                            .node
                            .handle_persisted(self.persists[0].saturating_sub(1)),
                    }
                }
            }
            10 | 11 => {
                let argv = cluster_argv::cluster_argv(
                    u,
                    &cluster_argv::Vocab {
                        node_ids: &self.ids,
                        peers: &self.peers,
                        jobs: &self.job_names,
                    },
                )?;
                self.next_request += 1;
                let conn = if u.arbitrary()? { self.conn(u)? } else { None };
                let req = CommandRequest {
                    id: RequestId(self.next_request),
                    from_primary: u.ratio(1u8, 8)?,
                    replication_done: u.ratio(1u8, 4)?,
                    conn,
                    from_aof: u.ratio(1u8, 16)?,
                    ..CommandRequest::default()
                };
                let _ = self
                    .node
                    .cluster_command_argv(&argv, &req, &EmptyKeyspace, now);
            }
            12 => {
                let offset = u64::from(u.arbitrary::<u16>()?);
                if u.ratio(1u8, 3)? {
                    self.node.handle_writes_paused(offset, now);
                } else {
                    let link = match u.int_in_range(0..=2u8)? {
                        0 => ReplLink::Up {
                            last_interaction: Millis(
                                self.now.saturating_sub(u64::from(u.arbitrary::<u16>()?)),
                            ),
                        },
                        1 => ReplLink::Down,
                        _ => ReplLink::DownSince(Millis(
                            self.now.saturating_sub(u64::from(u.arbitrary::<u16>()?)),
                        )),
                    };
                    self.node
                        .handle_replication(ReplicationState { offset, link }, now);
                }
            }
            _ => {
                let input = self.migration_input(u)?;
                self.node.handle_migration(input, now);
            }
        }
        self.drain();
        Ok(())
    }

    /// Feeds `bytes` on `link`, in one piece or two.
    fn feed(&mut self, u: &mut Unstructured, link: LinkId, bytes: &[u8]) -> Result<()> {
        let now = Millis(self.now);
        if bytes.len() > 1 && u.ratio(1u8, 4)? {
            let at = u.int_in_range(1..=bytes.len() - 1)?;
            self.node.handle_link_bytes(link, &bytes[..at], now);
            self.drain();
            self.node.handle_link_bytes(link, &bytes[at..], now);
        } else {
            self.node.handle_link_bytes(link, bytes, now);
        }
        Ok(())
    }

    fn conn(&mut self, u: &mut Unstructured) -> Result<Option<ConnId>> {
        if self.conns.is_empty() || u.ratio(1u8, 4)? {
            self.next_conn += 1;
            let c = ConnId(1000 + self.next_conn);
            if self.conns.len() < 8 {
                self.conns.push(c);
            }
            return Ok(Some(c));
        }
        Ok(Some(self.conns[u.choose_index(self.conns.len())?]))
    }

    fn job(&self, u: &mut Unstructured) -> Result<JobName> {
        if self.jobs.is_empty() {
            let text = format!("{:040x}", u.arbitrary::<u8>()?);
            return Ok(JobName::from_bytes(text.as_bytes()).expect("40 hex digits are a job name"));
        }
        Ok(self.jobs[u.choose_index(self.jobs.len())?])
    }

    fn migration_input(&mut self, u: &mut Unstructured) -> Result<MigrationInput> {
        let kind = u.int_in_range(0..=18u8)?;
        Ok(match kind {
            0 => MigrationInput::Connected {
                job: self.job(u)?,
                conn: self.conn(u)?.unwrap_or(ConnId(1)),
            },
            1 => MigrationInput::ConnectFailed {
                job: self.job(u)?,
                error: "Connection refused".into(),
            },
            2 => MigrationInput::AuthReply {
                job: self.job(u)?,
                reply: match u.int_in_range(0..=3u8)? {
                    0 => AuthReply::Ok,
                    1 => AuthReply::Rejected("-WRONGPASS invalid".into()),
                    2 => AuthReply::NoResponse,
                    _ => AuthReply::WriteFailed("Broken pipe".into()),
                },
            },
            3 => MigrationInput::EstablishReply {
                job: self.job(u)?,
                line: if u.ratio(3u8, 4)? {
                    b"+OK\r\n".to_vec()
                } else {
                    cluster_argv::bytes_upto(u, 16)?
                },
            },
            4 => MigrationInput::EstablishReplyTooLarge { job: self.job(u)? },
            5 => MigrationInput::SnapshotStartFailed { job: self.job(u)? },
            6 => MigrationInput::SnapshotDone {
                job: self.job(u)?,
                result: if u.ratio(3u8, 4)? {
                    SnapshotResult::Done {
                        cow_bytes: u64::from(u.arbitrary::<u16>()?),
                    }
                } else {
                    SnapshotResult::Failed
                },
            },
            7 => MigrationInput::LinkBacklog {
                job: self.job(u)?,
                bytes: u64::from(u.arbitrary::<u32>()?),
            },
            8 => MigrationInput::OutputBufferLimit { job: self.job(u)? },
            9 => MigrationInput::LinkClosed {
                conn: self.conn(u)?.unwrap_or(ConnId(1)),
            },
            10 => MigrationInput::ImportData {
                conn: self.conn(u)?.unwrap_or(ConnId(1)),
            },
            11 => MigrationInput::ImportOom {
                conn: self.conn(u)?.unwrap_or(ConnId(1)),
            },
            12 => MigrationInput::ImportApplyError {
                conn: self.conn(u)?.unwrap_or(ConnId(1)),
            },
            13 => MigrationInput::ChildProcess {
                active: u.arbitrary()?,
            },
            14 => MigrationInput::Flush,
            15 => MigrationInput::FullSync,
            16 => MigrationInput::BeforeLoad,
            17 => MigrationInput::LoadedSlotImport {
                name: self.job(u)?,
                ranges: vec![slot_range(u)?],
            },
            _ => MigrationInput::AfterLoad,
        })
    }
}

fn slot_range(u: &mut Unstructured) -> Result<SlotRange> {
    let a = u.int_in_range(0..=16383u16)?;
    let span = u16::from(u.arbitrary::<u8>()?);
    let b = u.int_in_range(a..=16383u16.min(a.saturating_add(span)))?;
    Ok(SlotRange::new(
        Slot::new(a).expect("in range"),
        Slot::new(b).expect("in range"),
    )
    .expect("ordered"))
}

/// A slot set: empty, a peer's or myself's quarter, a few low slots, or a random range.
fn slots(u: &mut Unstructured) -> Result<SlotSet> {
    let mut s = SlotSet::new();
    match u.int_in_range(0..=4u8)? {
        0 => {}
        1 => {
            let q = u.int_in_range(0..=3u16)?;
            s.insert_range(
                SlotRange::new(
                    Slot::new(q * 4096).expect("in range"),
                    Slot::new(q * 4096 + 4095).expect("in range"),
                )
                .expect("ordered"),
            );
        }
        2 => {
            for _ in 0..u.int_in_range(1..=4u8)? {
                let q = u.int_in_range(0..=3u16)? * 4096 + u.int_in_range(0..=3u16)?;
                s.insert(Slot::new(q).expect("in range"));
            }
        }
        _ => s.insert_range(slot_range(u)?),
    }
    Ok(s)
}

/// A node name: a peer's, myself's, or a stranger's (sometimes not hex).
fn name(u: &mut Unstructured, h: &Harness) -> Result<NodeName> {
    let text = match u.int_in_range(0..=9u8)? {
        0..=5 => h.ids[1 + u.choose_index(PEERS)?].clone(),
        6 | 7 => h.ids[0].clone(),
        8 => format!("{:040x}", u.arbitrary::<u8>()?),
        _ => {
            let mut b = [b'z'; 40];
            b[..8].copy_from_slice(&u.arbitrary::<[u8; 8]>()?);
            return Ok(NodeName(b));
        }
    };
    Ok(NodeName::from_slice(text.as_bytes()).expect("40 bytes"))
}

fn epoch(u: &mut Unstructured) -> Result<u64> {
    Ok(match u.int_in_range(0..=15u8)? {
        0..=13 => u64::from(u.int_in_range(0..=12u8)?),
        14 => u64::from(u.arbitrary::<u32>()?),
        _ => u.arbitrary()?,
    })
}

fn node_flags_of(u: &mut Unstructured) -> Result<u16> {
    let role = if u.ratio(3u8, 4)? {
        node_flags::PRIMARY
    } else {
        node_flags::REPLICA
    };
    let extra = u.arbitrary::<u16>()?;
    let extra = if u.ratio(3u8, 4)? {
        extra & (node_flags::PFAIL | node_flags::FAIL | node_flags::NOFAILOVER)
    } else {
        extra
    };
    Ok(role | extra | node_flags::EXTENSIONS_SUPPORTED)
}

fn gossip(u: &mut Unstructured, h: &Harness) -> Result<Gossip> {
    let mut g = Gossip::default();
    for _ in 0..u.int_in_range(0..=3u8)? {
        let p = u.choose_index(PEERS)?;
        g.entries.push(GossipEntry {
            name: name(u, h)?,
            ping_sent_secs: u.arbitrary::<u8>()?.into(),
            pong_received_secs: (T0 / 1000) as u32 + u32::from(u.arbitrary::<u8>()?),
            ip: IpField::from_text(peer_ip(p).to_string().as_bytes()).unwrap_or_default(),
            port: peer_port(p),
            cport: peer_port(p) + 10_000,
            flags: node_flags_of(u)?,
            pport: 0,
            reserved: 0,
        });
    }
    if u.ratio(1u8, 3)? {
        let ext = match u.int_in_range(0..=3u8)? {
            0 => PingExt::Hostname(ExtString::new(b"peer.example")),
            1 => PingExt::HumanNodename(ExtString::new(b"peer")),
            2 => PingExt::ForgottenNode {
                name: name(u, h)?,
                ttl_secs: u.int_in_range(0..=60u64)?,
            },
            _ => PingExt::ShardId(name(u, h)?),
        };
        g.extensions.push(ext);
    }
    Ok(g)
}

/// One structured bus message from a peer (mostly), myself's name, or a stranger.
fn message(u: &mut Unstructured, h: &Harness) -> Result<Message> {
    let body = match u.int_in_range(0..=15u8)? {
        0..=2 => Body::Ping(gossip(u, h)?),
        3..=5 => Body::Pong(gossip(u, h)?),
        6 => Body::Meet(gossip(u, h)?),
        7 => Body::Fail { about: name(u, h)? },
        8 | 9 => Body::Update(Box::new(Update {
            config_epoch: epoch(u)?,
            name: name(u, h)?,
            slots: slots(u)?,
        })),
        10 => Body::FailoverAuthRequest,
        11 => Body::FailoverAuthAck,
        12 => Body::MfStart,
        13 => Body::Publish(Publish {
            channel: b"ch".to_vec(),
            message: cluster_argv::bytes_upto(u, 8)?,
        }),
        14 => Body::Module(ModuleMsg {
            module_id: u.arbitrary()?,
            module_type: u.arbitrary()?,
            payload: cluster_argv::bytes_upto(u, 8)?,
        }),
        _ => Body::Unknown(UnknownMsg {
            msg_type: u.int_in_range(11..=40u16)?,
            count: 0,
            extensions: 0,
            data: cluster_argv::bytes_upto(u, 8)?,
        }),
    };
    if matches!(body, Body::Publish(_) | Body::Module(_)) && u.ratio(1u8, 4)? {
        return Ok(Message::light(body));
    }
    let p = u.choose_index(PEERS)?;
    let sender = name(u, h)?;
    let replicaof = if u.ratio(1u8, 3)? {
        Some(name(u, h)?)
    } else {
        None
    };
    let mut flags = node_flags_of(u)? & !(node_flags::PFAIL | node_flags::FAIL);
    if replicaof.is_some() {
        flags = (flags & !node_flags::PRIMARY) | node_flags::REPLICA;
    }
    let mut mflags = [0u8; 3];
    if u.ratio(1u8, 4)? {
        mflags[0] = u.arbitrary::<u8>()? & !msg_flags::EXT_DATA;
    }
    let header = FullHeader {
        port: peer_port(p),
        current_epoch: epoch(u)?,
        config_epoch: epoch(u)?,
        offset: u64::from(u.arbitrary::<u16>()?),
        sender,
        myslots: if replicaof.is_some() {
            SlotSet::new()
        } else {
            slots(u)?
        },
        replicaof,
        myip: if u.arbitrary()? {
            IpField::from_text(peer_ip(p).to_string().as_bytes()).unwrap_or_default()
        } else {
            IpField::default()
        },
        cport: peer_port(p) + 10_000,
        flags,
        state: u.int_in_range(0..=1u8)?,
        mflags,
        ..FullHeader::default()
    };
    Ok(Message::full(header, body))
}

// Input: a big-endian u16 length L, L bytes of captured bus frames (`run-bounded.sh` seeds
// them from the vectors), then the steps.
fuzz_target!(|data: &[u8]| {
    let (captured, steps) = match data {
        [a, b, rest @ ..] => {
            rest.split_at(usize::from(u16::from_be_bytes([*a, *b])).min(rest.len()))
        }
        _ => (&data[..0], data),
    };
    let mut u = Unstructured::new(steps);
    let Ok(mut h) = Harness::new(&mut u, captured) else {
        return;
    };
    for _ in 0..MAX_STEPS {
        if u.is_empty() || h.step(&mut u).is_err() {
            break;
        }
    }
    // The topology's own consistency walks every slot: once per input, not per step.
    if let Err(e) = h.node.topology().check_invariants() {
        panic!("topology invariant: {e}");
    }
});
