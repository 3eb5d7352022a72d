//! The drive loop: the host loop of the `ferrocluster-node` crate docs, written once.
//!
//! One turn ([`DriveLoop::turn`]):
//! 1. wait on the bus ([`BusDriver::wait`]) until the node's next deadline
//!    (`ClusterNode::poll_timeout`, at most [`MAX_WAIT`] ahead), bus input, or a wake-up from
//!    another thread ([`DriveLoop::waker`]: a client command gave the node an input);
//! 2. read the clock, once ([`crate::clock::now`]): every input of the turn gets that value;
//! 3. with the node: [`Host::before_turn`] (the host's facts, e.g. its replication state),
//!    the bus input in the order it happened ([`BusDriver::feed`]), then
//!    `handle_timeout(now)` — on *every* turn, so timers never starve under steady input (an
//!    early call is harmless to the node) — and the outputs drained;
//! 4. act on the outputs in order, outside the node's lock: bus outputs on the bus; a
//!    `Persist` written by [`NodesConfFile::persist`] and acknowledged at once (what waited
//!    for it, transmits and replies, comes out of the node then and is acted on after it);
//!    everything else handed to [`Host::act`]. Until the node has no output left.
//!
//! The loop owns the bus and the file; the node stays the host's, behind its own lock
//! ([`Host::with_node`]), so client threads can route and run commands on it meanwhile.

use crate::bus::BusDriver;
use crate::clock;
use crate::nodesconf::NodesConfFile;
use ferrocluster_node::{ClusterNode, Millis, Output};
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

/// The longest wait of one turn, whatever the node's deadline (Valkey's `clusterCron` runs
/// every 100 ms); bounds the effect of a clock step too.
pub const MAX_WAIT: Duration = Duration::from_millis(100);

/// What the drive loop needs from the host.
pub trait Host {
    /// Runs `f` on the node, under the host's lock. Called a few times per turn, never
    /// nested, never while the loop does I/O.
    fn with_node<R>(&self, f: impl FnOnce(&mut ClusterNode) -> R) -> R;

    /// Called with the node at the start of every turn, before the bus input and the
    /// timeout: report host facts that changed (`ClusterNode::handle_replication`). The
    /// default does nothing.
    fn before_turn(&self, node: &mut ClusterNode, now: Millis) {
        let _ = (node, now);
    }

    /// An output that is neither a bus output nor a `Persist`: the host's duty, in order
    /// (events: role changes, write pauses, slots whose keys go, migration requests, ...).
    /// Inputs it gives the node in return (`handle_writes_paused`, `handle_migration`) may
    /// queue outputs: the loop drains them before it waits again.
    fn act(&self, out: Output, now: Millis);
}

/// The bus, the nodes.conf file and the host, driven turn by turn (see the module docs).
pub struct DriveLoop<H> {
    bus: BusDriver,
    conf: Arc<NodesConfFile>,
    host: H,
    next: Option<Millis>,
}

impl<H: Host> DriveLoop<H> {
    /// A loop over the bus and the file for `host`.
    pub fn new(bus: BusDriver, conf: Arc<NodesConfFile>, host: H) -> DriveLoop<H> {
        DriveLoop {
            bus,
            conf,
            host,
            next: None,
        }
    }

    /// Wakes a turn in progress (or the next one) from any thread: call it after giving the
    /// node an input that may have queued outputs.
    pub fn waker(&self) -> Arc<crate::Waker> {
        self.bus.waker()
    }

    /// The bus (its figures: links, send buffers, limit counter).
    pub fn bus(&self) -> &BusDriver {
        &self.bus
    }

    /// The bus, to change its settings (`set_sendbuf_limit`).
    pub fn bus_mut(&mut self) -> &mut BusDriver {
        &mut self.bus
    }

    /// The host.
    pub fn host(&self) -> &H {
        &self.host
    }

    /// One turn (see the module docs).
    ///
    /// # Errors
    /// The bus poll failed.
    pub fn turn(&mut self) -> std::io::Result<()> {
        let wait = clock::until(self.next, clock::now(), MAX_WAIT);
        self.bus.wait(Some(wait))?;
        let now = clock::now();
        let Self { bus, host, .. } = self;
        let mut queue: VecDeque<Output> = host.with_node(|node| {
            host.before_turn(node, now);
            bus.feed(node, now);
            node.handle_timeout(now);
            drain(node)
        });
        loop {
            while let Some(out) = queue.pop_front() {
                self.act(out, now, &mut queue);
            }
            let (more, next) = self
                .host
                .with_node(|node| (drain(node), node.poll_timeout()));
            self.next = next;
            if more.is_empty() {
                return Ok(());
            }
            queue = more;
        }
    }

    fn act(&mut self, out: Output, now: Millis, queue: &mut VecDeque<Output>) {
        let Some(out) = self.bus.handle_output(out) else {
            return;
        };
        match out {
            Output::Persist { seq, contents } => {
                // Returns only once it is on disk (or best-effort said go on).
                self.conf.persist(seq, &contents, now);
                let released = self.host.with_node(|node| {
                    node.handle_persisted(seq);
                    drain(node)
                });
                queue.extend(released);
            }
            other => self.host.act(other, now),
        }
    }

    /// Turns forever.
    ///
    /// # Errors
    /// The bus poll failed.
    pub fn run(mut self) -> std::io::Result<std::convert::Infallible> {
        loop {
            self.turn()?;
        }
    }
}

fn drain(node: &mut ClusterNode) -> VecDeque<Output> {
    std::iter::from_fn(|| node.poll_output()).collect()
}
