//! The replica side: the link to the primary (Valkey `syncWithPrimary`,
//! `replicaTryPartialResynchronization`, `readSyncBulkPayload`, the primary client's stream,
//! `replicationSendAck`, the cached primary, `replicationCron`).

use crate::error::{StreamError, StreamErrorKind};
use crate::output::{Event, LinkDownReason, Output, StreamCommand, UpstreamId};
use crate::replication::{Replication, CRON_MS};
use crate::replid::ReplId;
use crate::resp::{
    encode_command, parse_i64, parse_u64, CommandReader, Item, LineReader, ParsedCommand,
    ReaderLimits,
};
use ferrocluster_topology::Millis;
use std::collections::VecDeque;

/// Longest handshake reply line accepted, bytes.
const MAX_LINE: usize = 64 * 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Expect {
    Auth,
    Port,
    Ip,
    Capa,
    Version,
}

#[derive(Debug)]
pub(crate) enum Step {
    /// PING sent (`REPL_STATE_RECEIVE_PING_REPLY`).
    Pong,
    /// AUTH / REPLCONF sent; their replies in order.
    Replies(VecDeque<Expect>),
    /// PSYNC (or SYNC) sent.
    Psync,
}

#[derive(Debug)]
enum Framing {
    /// Before the `$...` line.
    Preamble(LineReader),
    /// `$<len>`: bytes left.
    Len { left: u64 },
    /// `$EOF:<mark>`: the last bytes seen (at most 40), held back until they cannot be the
    /// start of the mark.
    Eof { mark: [u8; 40], tail: Vec<u8> },
}

#[derive(Debug)]
pub(crate) struct Transfer {
    replid: Option<ReplId>,
    offset: u64,
    framing: Framing,
    began: bool,
}

#[derive(Debug)]
pub(crate) struct Multi {
    db: u32,
    commands: Vec<StreamCommand>,
    raw: Vec<u8>,
}

/// `server.repl_state`.
#[derive(Debug)]
pub(crate) enum LinkState {
    /// `REPL_STATE_CONNECT`: connect at `at`.
    Connect { at: Millis },
    /// `REPL_STATE_CONNECTING`.
    Connecting { link: UpstreamId },
    /// The handshake states.
    Handshake {
        link: UpstreamId,
        step: Step,
        lines: LineReader,
    },
    /// `REPL_STATE_TRANSFER`.
    Transfer { link: UpstreamId, t: Transfer },
    /// `REPL_STATE_CONNECTED`.
    Connected {
        link: UpstreamId,
        reader: CommandReader,
        multi: Option<Multi>,
    },
}

impl LinkState {
    fn link(&self) -> Option<UpstreamId> {
        match self {
            LinkState::Connect { .. } => None,
            LinkState::Connecting { link }
            | LinkState::Handshake { link, .. }
            | LinkState::Transfer { link, .. }
            | LinkState::Connected { link, .. } => Some(*link),
        }
    }

    /// The state word of `ROLE` (Valkey `roleCommand`).
    pub(crate) fn role_name(&self) -> &'static str {
        match self {
            LinkState::Connect { .. } => "connect",
            LinkState::Connecting { .. } => "connecting",
            LinkState::Handshake { .. } => "handshake",
            LinkState::Transfer { .. } => "sync",
            LinkState::Connected { .. } => "connected",
        }
    }
}

/// The replica side's state inside [`Replication`].
#[derive(Debug)]
pub(crate) struct Upstream {
    pub(crate) host: String,
    pub(crate) port: u16,
    pub(crate) state: LinkState,
    /// A partial resync may be asked with our replid and offset (Valkey: a cached primary
    /// exists).
    pub(crate) cached: bool,
    /// The database the primary's stream is in.
    pub(crate) stream_db: u32,
    pub(crate) down_since: Option<Millis>,
    pub(crate) ever_up: bool,
    pub(crate) last_interaction: Millis,
    /// Last bytes received in any state (`repl_transfer_lastio`).
    pub(crate) lastio: Millis,
    /// The primary does not speak PSYNC (we fell back to SYNC): no ACKs.
    pub(crate) pre_psync: bool,
    /// Bytes read on the current connection.
    read: u64,
    /// Stream bytes read by the reader before the current one started.
    reader_base: u64,
    /// Transfer figures: announced size, bytes read.
    pub(crate) transfer_size: Option<u64>,
    pub(crate) transfer_read: u64,
}

impl Upstream {
    pub(crate) fn new(host: String, port: u16, now: Millis) -> Upstream {
        Upstream {
            host,
            port,
            state: LinkState::Connect { at: now },
            cached: false,
            stream_db: 0,
            down_since: None,
            ever_up: false,
            last_interaction: now,
            lastio: now,
            pre_psync: false,
            read: 0,
            reader_base: 0,
            transfer_size: None,
            transfer_read: 0,
        }
    }

    pub(crate) fn in_transfer(&self) -> bool {
        matches!(self.state, LinkState::Transfer { .. })
    }
}

fn starts(line: &[u8], p: &[u8]) -> bool {
    line.starts_with(p)
}

impl Replication {
    /// Asks the host to connect to the primary now.
    pub(crate) fn connect_upstream(&mut self) {
        let link = self.new_link();
        let now = self.now;
        let Some(up) = self.upstream.as_mut() else {
            return;
        };
        up.state = LinkState::Connecting { link };
        up.lastio = now;
        up.read = 0;
        self.out.push(Output::Connect {
            link,
            host: up.host.clone(),
            port: up.port,
        });
    }

    /// Tears the current link down (the caller sets the next state). A connected link leaves
    /// its history as the cached primary; a transfer in progress is aborted.
    pub(crate) fn drop_link(&mut self, up: &mut Upstream, reason: LinkDownReason, now: Millis) {
        let state = std::mem::replace(&mut up.state, LinkState::Connect { at: now });
        let link = state.link();
        match state {
            LinkState::Connected { .. } => {
                // replicationCachePrimary: the pending transaction is discarded, the
                // processed offset stays.
                up.cached = !up.pre_psync;
                up.down_since = Some(now);
                self.out.event(Event::LinkDown(reason.clone()));
            }
            LinkState::Transfer { t, .. } if t.began => self.out.push(Output::RdbAbort),
            _ => {}
        }
        if let Some(link) = link {
            if reason != LinkDownReason::Closed {
                self.out.push(Output::CloseUpstream { link });
            }
        }
        up.transfer_size = None;
        up.transfer_read = 0;
    }

    fn current(&self, link: UpstreamId) -> bool {
        self.upstream
            .as_ref()
            .is_some_and(|u| u.state.link() == Some(link))
    }

    /// The connection asked for by [`Output::Connect`] is up: the handshake starts with PING.
    /// Ignored for a link that is not current.
    pub fn handle_upstream_connected(&mut self, link: UpstreamId, now: Millis) {
        let now = self.clock(now);
        if !self.current(link) {
            return;
        }
        let Some(up) = self.upstream.as_mut() else {
            return;
        };
        if !matches!(up.state, LinkState::Connecting { .. }) {
            return;
        }
        up.state = LinkState::Handshake {
            link,
            step: Step::Pong,
            lines: LineReader::default(),
        };
        up.lastio = now;
        let mut b = Vec::new();
        encode_command(&mut b, &["PING"]);
        self.out.send_primary(link, &b);
    }

    /// The connection could not be made: retried at the next cron (1 s), as Valkey does.
    pub fn handle_upstream_connect_failed(&mut self, link: UpstreamId, now: Millis) {
        let now = self.clock(now);
        if !self.current(link) {
            return;
        }
        if let Some(up) = self.upstream.as_mut() {
            up.state = LinkState::Connect {
                at: now.saturating_add_ms(CRON_MS),
            };
        }
        self.out
            .event(Event::LinkDown(LinkDownReason::ConnectFailed));
    }

    /// The link to the primary closed. A connected link is cached and reconnected at once
    /// (Valkey `replicationHandlePrimaryDisconnection`); a handshake or transfer is retried at
    /// the next cron.
    pub fn handle_upstream_closed(&mut self, link: UpstreamId, now: Millis) {
        let now = self.clock(now);
        if !self.current(link) {
            return;
        }
        let Some(mut up) = self.upstream.take() else {
            return;
        };
        let was_connected = matches!(up.state, LinkState::Connected { .. });
        let was_transfer = up.in_transfer();
        self.drop_link(&mut up, LinkDownReason::Closed, now);
        if !was_connected && !was_transfer {
            self.out.event(Event::LinkDown(LinkDownReason::Closed));
        }
        up.state = LinkState::Connect {
            at: if was_connected || was_transfer {
                now
            } else {
                now.saturating_add_ms(CRON_MS)
            },
        };
        self.upstream = Some(up);
        if was_connected || was_transfer {
            self.connect_upstream();
        }
    }

    /// The host could not load the RDB of the last full sync (or had to drop its data set
    /// after [`Output::RdbAbort`]): the link is closed, no partial resync is attempted, and a
    /// new full sync follows at the next cron.
    pub fn handle_load_failed(&mut self, now: Millis) {
        let now = self.clock(now);
        let Some(mut up) = self.upstream.take() else {
            return;
        };
        self.drop_link(&mut up, LinkDownReason::LoadFailed, now);
        up.cached = false;
        up.state = LinkState::Connect {
            at: now.saturating_add_ms(CRON_MS),
        };
        self.upstream = Some(up);
    }

    /// Bytes from the primary on `link`: handshake replies, the RDB payload, the command
    /// stream. Outputs follow in order (RDB chunks, commands to apply, ACKs).
    ///
    /// # Errors
    /// [`StreamError`] when the bytes are not the protocol, with the position on this
    /// connection. Everything before the bad item was processed; the link is closed
    /// ([`Output::CloseUpstream`], an [`Output::RdbAbort`] if a transfer broke off) and
    /// retried; a connected link keeps its history for a partial resync.
    pub fn handle_upstream_bytes(
        &mut self,
        link: UpstreamId,
        bytes: &[u8],
        now: Millis,
    ) -> Result<(), StreamError> {
        let now = self.clock(now);
        if !self.current(link) {
            return Ok(());
        }
        let Some(mut up) = self.upstream.take() else {
            return Ok(());
        };
        up.lastio = now;
        let res = self.upstream_input(&mut up, link, bytes.to_vec(), now);
        if let Err(e) = &res {
            let connected = matches!(up.state, LinkState::Connected { .. });
            let reason = match &e.kind {
                StreamErrorKind::SyncAborted(t)
                    if t.starts_with("NOMASTERLINK") || t.starts_with("LOADING") =>
                {
                    LinkDownReason::TryLater(t.clone())
                }
                k => LinkDownReason::Protocol(k.clone()),
            };
            if !connected {
                self.out.event(Event::LinkDown(reason.clone()));
            }
            self.drop_link(&mut up, reason, now);
            up.state = LinkState::Connect {
                at: if connected {
                    now
                } else {
                    now.saturating_add_ms(CRON_MS)
                },
            };
            self.upstream = Some(up);
            if connected {
                self.connect_upstream();
            }
            return res;
        }
        self.upstream = Some(up);
        res
    }

    fn upstream_input(
        &mut self,
        up: &mut Upstream,
        link: UpstreamId,
        mut input: Vec<u8>,
        now: Millis,
    ) -> Result<(), StreamError> {
        let base = up.read;
        up.read += input.len() as u64;
        let err = |kind: StreamErrorKind, at: u64| StreamError { kind, offset: at };
        loop {
            match &mut up.state {
                LinkState::Handshake { .. } => {
                    let LinkState::Handshake { lines, .. } = &mut up.state else {
                        unreachable!("matched above")
                    };
                    lines.push(&input);
                    input.clear();
                    while let LinkState::Handshake { lines, .. } = &mut up.state {
                        let line = match lines.next_line(MAX_LINE) {
                            Ok(Some(l)) => l,
                            Ok(None) => break,
                            Err(k) => return Err(err(k, base)),
                        };
                        self.handshake_line(up, link, line, now)
                            .map_err(|k| err(k, base))?;
                    }
                    // The bytes after the PSYNC reply went with the transition (into the
                    // transfer's preamble reader or the command reader).
                    if !matches!(
                        up.state,
                        LinkState::Transfer { .. } | LinkState::Connected { .. }
                    ) {
                        return Ok(());
                    }
                }
                LinkState::Transfer { .. } => {
                    let rest = self
                        .transfer_input(up, &input, now)
                        .map_err(|k| err(k, base))?;
                    match rest {
                        Some(rest) => input = rest,
                        None => return Ok(()),
                    }
                }
                LinkState::Connected { .. } => {
                    up.last_interaction = now;
                    return self.stream_input(up, link, &input);
                }
                _ => return Ok(()),
            }
        }
    }

    /// One handshake reply line.
    fn handshake_line(
        &mut self,
        up: &mut Upstream,
        link: UpstreamId,
        line: Vec<u8>,
        now: Millis,
    ) -> Result<(), StreamErrorKind> {
        let LinkState::Handshake { step, lines, .. } = &mut up.state else {
            return Ok(());
        };
        match step {
            Step::Pong => {
                // syncWithPrimary: +PONG, or an authentication error (AUTH follows).
                let ok = line.first() == Some(&b'+')
                    || starts(&line, b"-NOAUTH")
                    || starts(&line, b"-NOPERM")
                    || starts(&line, b"-ERR operation not permitted");
                if !ok {
                    return Err(StreamErrorKind::PingRejected(
                        String::from_utf8_lossy(&line).into_owned(),
                    ));
                }
                let mut b = Vec::new();
                let mut expect = VecDeque::new();
                if let Some(auth) = &self.cfg.primary_auth {
                    let mut argv: Vec<&[u8]> = vec![b"AUTH"];
                    if let Some(u) = &self.cfg.primary_user {
                        argv.push(u.as_bytes());
                    }
                    argv.push(auth);
                    encode_command(&mut b, &argv);
                    expect.push_back(Expect::Auth);
                }
                let port = self.cfg.listening_port.to_string();
                encode_command(&mut b, &["REPLCONF", "listening-port", &port]);
                expect.push_back(Expect::Port);
                if let Some(ip) = &self.cfg.announce_ip {
                    encode_command(&mut b, &["REPLCONF", "ip-address", ip]);
                    expect.push_back(Expect::Ip);
                }
                encode_command(&mut b, &["REPLCONF", "capa", "eof", "capa", "psync2"]);
                expect.push_back(Expect::Capa);
                if let Some(v) = &self.cfg.replica_version {
                    encode_command(&mut b, &["REPLCONF", "version", v]);
                    expect.push_back(Expect::Version);
                }
                *step = Step::Replies(expect);
                self.out.send_primary(link, &b);
            }
            Step::Replies(expect) => {
                let what = expect.pop_front();
                if what == Some(Expect::Auth) && line.first() == Some(&b'-') {
                    return Err(StreamErrorKind::AuthRejected(
                        String::from_utf8_lossy(&line).into_owned(),
                    ));
                }
                // Errors to REPLCONF are not critical (older primaries).
                if expect.is_empty() {
                    *step = Step::Psync;
                    let mut b = Vec::new();
                    if up.cached {
                        let off = (self.offset + 1).to_string();
                        encode_command(
                            &mut b,
                            &[b"PSYNC".as_slice(), self.replid.as_bytes(), off.as_bytes()],
                        );
                    } else {
                        encode_command(&mut b, &["PSYNC", "?", "-1"]);
                    }
                    self.out.send_primary(link, &b);
                }
            }
            Step::Psync => {
                if line.is_empty() {
                    // Keep-alive newline before the reply.
                    return Ok(());
                }
                let rest = lines.take();
                if starts(&line, b"+FULLRESYNC") {
                    let text = String::from_utf8_lossy(&line).into_owned();
                    let mut parts = line.split(|&c| c == b' ').skip(1);
                    let id = parts.next().and_then(ReplId::parse);
                    let off = parts.next().and_then(parse_i64).filter(|o| *o >= 0);
                    let (Some(id), Some(off)) = (id, off) else {
                        return Err(StreamErrorKind::BadFullResync(text));
                    };
                    self.begin_transfer(up, link, Some(id), off as u64, rest);
                } else if starts(&line, b"+CONTINUE") {
                    if !up.cached {
                        return Err(StreamErrorKind::BadFullResync(
                            "+CONTINUE to PSYNC ? -1".to_owned(),
                        ));
                    }
                    let new = line.get(10..).and_then(ReplId::parse);
                    if let Some(new) = new {
                        if !self.replid.matches(new.as_bytes()) {
                            // The primary's history moved on (it was promoted): keep ours as
                            // replid2 so our own replicas can still PSYNC, and make them
                            // reconnect to learn the new one.
                            self.replid2 = self.replid;
                            self.second_offset = Some(self.offset + 1);
                            self.replid = new;
                            self.out.event(Event::ReplIdShifted {
                                replid: new,
                                replid2: self.replid2,
                                second_offset: self.offset + 1,
                            });
                            self.disconnect_replicas(crate::output::CloseReason::HistoryChanged);
                        }
                    }
                    self.backlog_active = true;
                    up.state = LinkState::Connected {
                        link,
                        reader: CommandReader::new(ReaderLimits::default()),
                        multi: None,
                    };
                    up.reader_base = up.read - rest.len() as u64;
                    up.ever_up = true;
                    up.down_since = None;
                    up.last_interaction = now;
                    self.out.event(Event::LinkUp { partial: true });
                    if let LinkState::Connected { reader, .. } = &mut up.state {
                        reader.push(&rest);
                    }
                } else if starts(&line, b"-NOMASTERLINK") || starts(&line, b"-LOADING") {
                    return Err(StreamErrorKind::SyncAborted(
                        String::from_utf8_lossy(&line[1..]).into_owned(),
                    ));
                } else {
                    // PSYNC_NOT_SUPPORTED: fall back to SYNC.
                    up.pre_psync = true;
                    self.out.send_primary(link, b"SYNC\r\n");
                    self.begin_transfer(up, link, None, 0, rest);
                }
            }
        }
        Ok(())
    }

    fn begin_transfer(
        &mut self,
        up: &mut Upstream,
        link: UpstreamId,
        replid: Option<ReplId>,
        offset: u64,
        rest: Vec<u8>,
    ) {
        let mut lines = LineReader::default();
        lines.push(&rest);
        up.state = LinkState::Transfer {
            link,
            t: Transfer {
                replid,
                offset,
                framing: Framing::Preamble(lines),
                began: false,
            },
        };
        up.transfer_size = None;
        up.transfer_read = 0;
    }

    /// Transfer bytes; returns what follows the RDB when it ended.
    fn transfer_input(
        &mut self,
        up: &mut Upstream,
        input: &[u8],
        now: Millis,
    ) -> Result<Option<Vec<u8>>, StreamErrorKind> {
        let LinkState::Transfer { t, .. } = &mut up.state else {
            return Ok(None);
        };
        let mut data: Vec<u8> = input.to_vec();
        if let Framing::Preamble(lines) = &mut t.framing {
            lines.push(&data);
            loop {
                let Some(line) = lines.next_line(MAX_LINE)? else {
                    return Ok(None);
                };
                if line.is_empty() {
                    // A newline keeps the link alive while the primary prepares the RDB.
                    continue;
                }
                if line[0] == b'-' {
                    return Err(StreamErrorKind::SyncAborted(
                        String::from_utf8_lossy(&line[1..]).into_owned(),
                    ));
                }
                if line[0] != b'$' {
                    return Err(StreamErrorKind::BadPreamble(
                        String::from_utf8_lossy(&line).into_owned(),
                    ));
                }
                let framing = if let Some(m) = line.strip_prefix(b"$EOF:") {
                    let Some(m) = m.get(..40) else {
                        return Err(StreamErrorKind::BadPreamble(
                            String::from_utf8_lossy(&line).into_owned(),
                        ));
                    };
                    let mut mark = [0u8; 40];
                    mark.copy_from_slice(m);
                    Framing::Eof {
                        mark,
                        tail: Vec::new(),
                    }
                } else {
                    match parse_u64(&line[1..]) {
                        Some(n) => Framing::Len { left: n },
                        None => {
                            return Err(StreamErrorKind::BadPreamble(
                                String::from_utf8_lossy(&line).into_owned(),
                            ))
                        }
                    }
                };
                let size = match framing {
                    Framing::Len { left } => Some(left),
                    _ => None,
                };
                data = lines.take();
                t.framing = framing;
                t.began = true;
                up.transfer_size = size;
                self.out.push(Output::RdbBegin {
                    replid: t.replid,
                    offset: t.offset,
                    size,
                });
                break;
            }
        }
        let rest = match &mut t.framing {
            Framing::Preamble(_) => return Ok(None),
            Framing::Len { left } => {
                let n = (*left).min(data.len() as u64) as usize;
                self.out.rdb_chunk(&data[..n]);
                up.transfer_read += n as u64;
                *left -= n as u64;
                if *left > 0 {
                    return Ok(None);
                }
                data.split_off(n)
            }
            Framing::Eof { mark, tail } => {
                let mut w = std::mem::take(tail);
                w.extend_from_slice(&data);
                if let Some(i) = memchr::memmem::find(&w, mark) {
                    self.out.rdb_chunk(&w[..i]);
                    up.transfer_read += i as u64;
                    w.split_off(i + 40)
                } else {
                    let keep = w.len().min(39);
                    let emit = w.len() - keep;
                    self.out.rdb_chunk(&w[..emit]);
                    up.transfer_read += emit as u64;
                    *tail = w.split_off(emit);
                    return Ok(None);
                }
            }
        };
        let (replid, offset) = (t.replid, t.offset);
        self.finish_transfer(up, replid, offset, now);
        up.reader_base = up.read - rest.len() as u64;
        Ok(Some(rest))
    }

    /// The RDB arrived: the new history starts (Valkey `replicationAttachToNewPrimary`, then
    /// the end of `readSyncBulkPayload`).
    fn finish_transfer(
        &mut self,
        up: &mut Upstream,
        replid: Option<ReplId>,
        offset: u64,
        now: Millis,
    ) {
        let Some(link) = up.state.link() else {
            return;
        };
        // Our own replicas had the old history: they must sync again.
        self.disconnect_replicas(crate::output::CloseReason::HistoryChanged);
        self.out.push(Output::RdbEnd);
        self.replid = replid.unwrap_or_else(|| ReplId::random(&mut self.rng));
        self.replid2 = ReplId::ZERO;
        self.second_offset = None;
        self.offset = offset;
        self.backlog.reset(offset);
        self.backlog_active = true;
        up.stream_db = 0;
        up.state = LinkState::Connected {
            link,
            reader: CommandReader::new(ReaderLimits::default()),
            multi: None,
        };
        up.ever_up = true;
        up.down_since = None;
        up.last_interaction = now;
        up.transfer_size = None;
        up.transfer_read = 0;
        if !up.pre_psync {
            // Valkey sends the first ACK right after loading: it puts a diskless-synced
            // replica online on its primary.
            self.send_ack(link);
        }
        self.out.event(Event::LinkUp { partial: false });
    }

    fn send_ack(&mut self, link: UpstreamId) {
        let mut b = Vec::new();
        let off = self.offset.to_string();
        encode_command(&mut b, &["REPLCONF", "ACK", &off]);
        self.out.send_primary(link, &b);
    }

    /// The command stream of a connected link.
    fn stream_input(
        &mut self,
        up: &mut Upstream,
        link: UpstreamId,
        input: &[u8],
    ) -> Result<(), StreamError> {
        let base = up.reader_base;
        let LinkState::Connected { reader, multi, .. } = &mut up.state else {
            return Ok(());
        };
        reader.push(input);
        loop {
            let item = match reader.next_item() {
                Ok(Some(i)) => i,
                Ok(None) => return Ok(()),
                Err(e) => {
                    return Err(StreamError {
                        kind: e.kind,
                        offset: base + e.offset,
                    })
                }
            };
            match item {
                Item::Empty(raw) => match multi {
                    Some(m) => m.raw.extend_from_slice(&raw),
                    None => self.write_stream(&raw),
                },
                Item::Command(c) => {
                    self.stream_command(link, &mut up.stream_db, multi, c);
                }
            }
        }
    }

    /// One command from the primary.
    fn stream_command(
        &mut self,
        link: UpstreamId,
        db: &mut u32,
        multi: &mut Option<Multi>,
        c: ParsedCommand,
    ) {
        let name = c.argv[0].to_ascii_lowercase();
        if let Some(m) = multi {
            m.raw.extend_from_slice(&c.raw);
            match name.as_slice() {
                b"exec" => {
                    let m = multi.take().expect("in a transaction");
                    *db = m.db;
                    self.out.push(Output::ApplyTransaction(m.commands));
                    self.write_stream(&m.raw);
                }
                b"discard" => {
                    let m = multi.take().expect("in a transaction");
                    self.write_stream(&m.raw);
                }
                // "MULTI calls can not be nested": refused, not queued.
                b"multi" => {}
                b"select" => {
                    if let Some(n) = self.select_target(&c.argv) {
                        m.db = n;
                    }
                }
                _ => m.commands.push(StreamCommand {
                    db: m.db,
                    argv: c.argv,
                }),
            }
            return;
        }
        match name.as_slice() {
            b"ping" => {}
            b"replconf" => {
                if c.argv
                    .get(1)
                    .is_some_and(|a| a.eq_ignore_ascii_case(b"getack"))
                {
                    // The ACK carries the offset before this command (the capture shows it).
                    self.send_ack(link);
                }
            }
            b"select" => {
                if let Some(n) = self.select_target(&c.argv) {
                    *db = n;
                }
            }
            b"multi" => {
                *multi = Some(Multi {
                    db: *db,
                    commands: Vec::new(),
                    raw: c.raw,
                });
                return;
            }
            _ => self.out.push(Output::Apply(StreamCommand {
                db: *db,
                argv: c.argv,
            })),
        }
        self.write_stream(&c.raw);
    }

    fn select_target(&mut self, argv: &[Vec<u8>]) -> Option<u32> {
        let n = argv
            .get(1)
            .and_then(|a| parse_i64(a))
            .filter(|n| *n >= 0 && (*n as u64) < u64::from(self.cfg.databases))
            .map(|n| n as u32);
        if n.is_none() {
            self.out
                .event(Event::BadSelect(argv.get(1).cloned().unwrap_or_default()));
        }
        n
    }

    /// The once-a-second part of Valkey `replicationCron` for the replica side.
    pub(crate) fn replica_cron(&mut self, now: Millis) {
        let Some(mut up) = self.upstream.take() else {
            return;
        };
        let timeout = self.cfg.timeout_ms;
        let mut reconnect = false;
        match &up.state {
            LinkState::Connect { at } => reconnect = now >= *at,
            LinkState::Connecting { .. }
            | LinkState::Handshake { .. }
            | LinkState::Transfer { .. } => {
                if now.since(up.lastio) > timeout {
                    self.out.event(Event::LinkDown(LinkDownReason::Timeout));
                    self.drop_link(&mut up, LinkDownReason::Timeout, now);
                    reconnect = true;
                }
            }
            LinkState::Connected { link, .. } => {
                if now.since(up.last_interaction) > timeout {
                    self.drop_link(&mut up, LinkDownReason::Timeout, now);
                    reconnect = true;
                } else if !up.pre_psync {
                    let link = *link;
                    self.send_ack(link);
                }
            }
        }
        self.upstream = Some(up);
        if reconnect {
            self.connect_upstream();
        }
    }
}
