//! The interface between the simulator and the engine it drives.
//!
//! The simulator acts as the host of many engines. It needs the Sans-IO surface every
//! ferrocluster engine shares (DESIGN.md, "The Sans-IO contract of `ClusterNode`"): accepted
//! and connected links, bytes in, timeouts, persistence acknowledgements, and an ordered
//! stream of outputs. [`Engine`] names exactly that surface, so the network, disk and clock
//! models can be tested against a small toy engine as well as against the real
//! `ferrocluster_node::ClusterNode` (see [`crate::cluster`]).

use ferrocluster_topology::Millis;
use std::fmt::Debug;
use std::hash::Hash;
use std::net::IpAddr;

/// A link lifecycle event the host reports to the engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkEvent<L> {
    /// An outbound connect requested with [`EngineOutput::Connect`] completed.
    Connected(L),
    /// An outbound connect failed (refused, unreachable).
    ConnectFailed(L),
    /// The peer closed the link (or it broke); the engine must forget it.
    Closed(L),
}

/// One output of an engine, in the order the host must act on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EngineOutput<L, V> {
    /// Open an outbound link to `ip:port` (a bus port); the engine already chose its ID.
    Connect {
        /// The engine's ID for the new link.
        link: L,
        /// Destination IP.
        ip: IpAddr,
        /// Destination bus port.
        port: u16,
    },
    /// Send bytes on a link (a part of an ordered stream).
    Transmit {
        /// The link.
        link: L,
        /// The bytes, appended to the link's stream.
        bytes: Vec<u8>,
    },
    /// Close a link. The peer learns it after the in-flight bytes.
    Close {
        /// The link.
        link: L,
    },
    /// Write nodes.conf and acknowledge with [`Engine::handle_persisted`] once it is durable.
    Persist {
        /// Sequence number, acknowledged cumulatively.
        seq: u64,
        /// The full file contents.
        contents: Vec<u8>,
    },
    /// Anything else (the engine's other duties — replies, role changes, write pauses,
    /// data-plane requests — and its notices for logs and metrics): the simulator mixes
    /// [`Engine::trace_text`] of it into the trace, hands it to invariants, and may record
    /// it for the host models built on top ([`crate::World`]).
    Event(V),
}

/// The Sans-IO engine surface the simulator drives. Every method takes the virtual time
/// where the engine needs one; the engine must not read a clock or global randomness.
pub trait Engine {
    /// The engine's link identifier.
    type Link: Copy + Eq + Ord + Hash + Debug;
    /// The engine's event type (logs, metrics).
    type Event: Debug + Clone;

    /// A peer at `peer_ip` connected to this engine's bus port; returns the new link's ID.
    fn handle_accept(&mut self, peer_ip: IpAddr, now: Millis) -> Self::Link;
    /// A link lifecycle event.
    fn handle_link(&mut self, event: LinkEvent<Self::Link>, now: Millis);
    /// Bytes arrived on a link, in stream order (possibly split at any point).
    fn handle_link_bytes(&mut self, link: Self::Link, bytes: &[u8], now: Millis);
    /// The deadline from [`Engine::poll_timeout`] passed (calling early is harmless).
    fn handle_timeout(&mut self, now: Millis);
    /// All Persist outputs up to `seq` are durable.
    fn handle_persisted(&mut self, seq: u64, now: Millis);
    /// The next output, `None` when drained.
    fn poll_output(&mut self) -> Option<EngineOutput<Self::Link, Self::Event>>;
    /// The next instant at which [`Engine::handle_timeout`] must be called.
    fn poll_timeout(&self) -> Option<Millis>;
    /// The text of `event` the trace mixes in; `None` leaves the event out of the trace
    /// (it is still recorded and shown to invariants). Default: its `Debug` text.
    fn trace_text(event: &Self::Event) -> Option<String> {
        Some(format!("{event:?}"))
    }
}
