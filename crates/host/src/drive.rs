//! The drive loop: the host loop of the `ferrocluster-node` crate docs, written once.
//!
//! One turn ([`DriveLoop::turn`]):
//! 1. wait on the bus ([`BusDriver::wait`]) until the node's next deadline
//!    (`ClusterNode::poll_timeout`, at most [`MAX_WAIT`] ahead), bus input, or a wake-up from
//!    another thread ([`DriveLoop::waker`]: a client command gave the node an input);
//! 2. read the clock, once ([`crate::clock::now`]): every input of the turn gets that value;
//! 3. take the host's lock ([`Host::lock`]) and, holding it: [`Host::before_turn`] (the
//!    host's facts, e.g. its replication state), `cluster-link-sendbuf-limit` from the node's
//!    config to the bus, the bus input in the order it happened ([`BusDriver::feed`]), then
//!    `handle_timeout(now)` — on *every* turn, so timers never starve under steady input (an
//!    early call is harmless to the node);
//! 4. act on the node's outputs one by one, in order, until it has none, still holding the
//!    lock: bus outputs on the bus (non-blocking); everything else but `Persist` handed to
//!    [`Host::act`]. The `Persist`s met on the way are written once, when the queue is empty:
//!    the newest contents, fsynced if any of them asked (`Output::Persist::fsync`), by
//!    [`NodesConfFile::persist`], and acknowledged with the newest `seq` (acknowledgements
//!    are cumulative); what waited for them, transmits and replies, comes out next and the
//!    loop goes on until the node has nothing more. A burst of config changes (CLUSTER
//!    commands of many clients, a gossip section naming several new nodes) costs one write
//!    per turn, as Valkey saves once in `clusterBeforeSleep` for all the changes of an event
//!    loop iteration. Outputs that do not wait for a persist may leave before it is written:
//!    the node holds back every one that must not (its contract). A client therefore never
//!    sees a configuration that is not on disk yet, nor a new state (a role change, lost
//!    slots) before the host acted on it: Valkey, single-threaded, applies a change, acts on
//!    it and saves nodes.conf in `clusterBeforeSleep` before it serves a client again.
//!
//! The node stays the host's, behind its own lock, so client threads can route and run
//! commands on it between turns.

use crate::bus::BusDriver;
use crate::clock;
use crate::nodesconf::NodesConfFile;
use ferrocluster_node::{ClusterNode, Millis, Output};
use std::ops::DerefMut;
use std::sync::Arc;
use std::time::Duration;

/// The longest wait of one turn, whatever the node's deadline (Valkey's `clusterCron` runs
/// every 100 ms); bounds the effect of a clock step too.
pub const MAX_WAIT: Duration = Duration::from_millis(100);

/// What the drive loop needs from the host.
pub trait Host {
    /// The host's lock on the node (and whatever it keeps beside it, reachable through the
    /// guard's own type in [`Host::act`]).
    type Guard<'a>: DerefMut<Target = ClusterNode>
    where
        Self: 'a;

    /// Takes the lock. The loop holds it for the input of a turn and while acting on the
    /// outputs (a nodes.conf write included).
    fn lock(&self) -> Self::Guard<'_>;

    /// Called at the start of every turn, before the bus input and the timeout: report host
    /// facts that changed to the node (`ClusterNode::handle_replication`). The default does
    /// nothing.
    fn before_turn(&self, guard: &mut Self::Guard<'_>, now: Millis) {
        let _ = (guard, now);
    }

    /// A `Persist` was written (`Ok`) or failed without ending the process
    /// ([`NodesConfFile::persist`]), just before the loop acknowledges it: a host answers a
    /// CLUSTER SAVECONFIG waiting for it with the error. The default does nothing.
    fn persisted(
        &self,
        guard: &mut Self::Guard<'_>,
        seq: u64,
        result: Result<(), &std::io::Error>,
    ) {
        let _ = (guard, seq, result);
    }

    /// An output that is neither a bus output nor a `Persist`: the host's duty, in order
    /// (role changes, write pauses, slots whose keys go, messages to deliver, migration
    /// requests, ...), with the lock held. Give the guard back; an implementation MAY release
    /// the lock meanwhile (drop the guard, lock again) to call code that takes it itself.
    /// Inputs it gives the node in return (`handle_writes_paused`, `handle_migration`) may
    /// queue outputs: the loop acts on them next.
    fn act<'a>(&'a self, guard: Self::Guard<'a>, out: Output, now: Millis) -> Self::Guard<'a>;
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
            // The first turn does not wait: the node's first outputs (its start-up notices,
            // a first Persist) are acted on at once.
            next: Some(Millis(0)),
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
        let Self {
            bus, host, conf, ..
        } = self;
        let mut g = host.lock();
        host.before_turn(&mut g, now);
        bus.set_sendbuf_limit(g.config().link_sendbuf_limit_bytes);
        bus.feed(&mut g, now);
        g.handle_timeout(now);
        // The newest Persist not written yet: (seq, contents, fsync asked by any).
        let mut pending: Option<(u64, Vec<u8>, bool)> = None;
        loop {
            while let Some(out) = g.poll_output() {
                g = match bus.handle_output(out) {
                    None => g,
                    Some(Output::Persist {
                        seq,
                        contents,
                        fsync,
                    }) => {
                        let fsync = fsync || pending.as_ref().is_some_and(|p| p.2);
                        pending = Some((seq, contents, fsync));
                        g
                    }
                    Some(other) => host.act(g, other, now),
                };
            }
            let Some((seq, contents, fsync)) = pending.take() else {
                break;
            };
            // Under the lock; returns only once it is written (fsynced when asked), or the
            // failure lost nothing, or best-effort said go on (else the process exits).
            let result = conf.persist(seq, &contents, fsync, now);
            host.persisted(&mut g, seq, result.as_ref().map(|_| ()));
            g.handle_persisted(seq);
        }
        self.next = g.poll_timeout();
        Ok(())
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
