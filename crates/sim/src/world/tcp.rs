//! The simulated TCP connections of the hosts' data plane (replication links, module
//! `repl`; slot migration data connections, module `asm`): one copy of the network's rules.
//!
//! A connect is answered once the network delivers both ways between the two hosts: the
//! SYN of a running host is accepted, a crashed host (or a firewall) refuses it, and while a
//! partition keeps it unanswered it is retried every [`SYN_RETRY_MS`] and fails after
//! [`CONNECT_TIMEOUT_MS`] (`Connection timed out`). Bytes take a latency and never overtake
//! each other in one direction; a direction the partitions block holds them (TCP
//! retransmission) until it heals or an end closes; bytes that reach a closed or crashed
//! end vanish. A close reaches the peer as a FIN, in order after the bytes sent before it.
//! A crash closes the host's ends at once: the peer hears it one latency later, and what
//! was on the way to the crashed host is lost. A reset loses everything in flight and both
//! ends hear a FIN.

use crate::net::Partitions;
use ferrocluster_topology::Millis;
use std::collections::VecDeque;

/// A connect across a partition fails after this long (the reference server's connect
/// timeout), ms.
pub const CONNECT_TIMEOUT_MS: u64 = 5_000;
/// How often a connect across a partition retries (SYN retransmission), ms.
pub(super) const SYN_RETRY_MS: u64 = 1_000;

/// What one direction of a connection carries.
#[derive(Debug)]
pub(super) enum Seg {
    Bytes(Vec<u8>),
    Fin,
}

/// The answer to a SYN ([`Tcp::syn`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Syn {
    /// Answered: the connection is up ([`Tcp::accept`]).
    Accept,
    /// Unanswered so far: retry after [`SYN_RETRY_MS`].
    Retry,
    /// Refused (`Connection refused`).
    Refused,
    /// Unanswered for [`CONNECT_TIMEOUT_MS`] (`Connection timed out`).
    TimedOut,
}

/// What [`Tcp::next`] found in a direction.
#[derive(Debug)]
pub(super) enum Next {
    /// Nothing ready yet.
    Wait,
    /// Held by a partition: retry later.
    Held,
    /// A segment that reached a closed or crashed end: it vanished.
    Lost,
    /// A segment delivered to the receiving end (after a FIN that end is closed).
    Seg(Seg),
}

/// What is left of a connection after one end went away ([`Tcp::crash`], [`Tcp::close`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Left {
    /// Nobody holds it any more: forget it.
    Nothing,
    /// The peer is open: send it a FIN from the end that went.
    Fin,
    /// Kept for the other end (the host connected to crashed before the SYN was answered:
    /// the connect is refused; or this end had closed already).
    Pending,
}

/// One simulated TCP connection: end 0 connects to end 1.
#[derive(Debug)]
pub(super) struct Tcp {
    /// The connecting host and the host it connects to; `usize::MAX` for an address no host
    /// has.
    pub ends: [usize; 2],
    /// When the connect began.
    pub started: Millis,
    /// The SYN was answered.
    pub accepted: bool,
    /// Which ends are open.
    pub open: [bool; 2],
    /// `dirs[d]`: what end `d` sent, with the time it is ready at the other end.
    dirs: [VecDeque<(Millis, Seg)>; 2],
    last_ready: [Millis; 2],
}

impl Tcp {
    /// A connect from host `from` to host `to` begun at `now`.
    pub fn new(from: usize, to: usize, now: Millis) -> Tcp {
        Tcp {
            ends: [from, to],
            started: now,
            accepted: false,
            open: [true, true],
            dirs: [VecDeque::new(), VecDeque::new()],
            last_ready: [now, now],
        }
    }

    /// Which open end host `h` holds.
    pub fn side_of(&self, h: usize) -> Option<usize> {
        (0..2).find(|&s| self.ends[s] == h && self.open[s])
    }

    /// The answer to the SYN now: `to_up` whether the host it goes to runs, `firewall`
    /// whether a firewall rejects it.
    pub fn syn(&self, now: Millis, p: &Partitions, to_up: bool, firewall: bool) -> Syn {
        let [from, to] = self.ends;
        let net_ok = to != usize::MAX && p.delivers(from, to) && p.delivers(to, from);
        if firewall || (net_ok && (!to_up || !self.open[1])) {
            Syn::Refused
        } else if net_ok {
            Syn::Accept
        } else if now.since(self.started) >= CONNECT_TIMEOUT_MS {
            // A partition or an address nobody has: the SYN is never answered.
            Syn::TimedOut
        } else {
            Syn::Retry
        }
    }

    /// The SYN was answered at `now`.
    pub fn accept(&mut self, now: Millis) {
        self.accepted = true;
        self.last_ready = [now, now];
    }

    /// Queues `seg` from end `side`, ready `latency_ms` after `now` and never before what
    /// that end sent earlier; returns when it is ready (the time to try [`Tcp::next`]).
    pub fn push(&mut self, side: usize, seg: Seg, now: Millis, latency_ms: u64) -> Millis {
        let ready = now.saturating_add_ms(latency_ms).max(self.last_ready[side]);
        self.last_ready[side] = ready;
        self.dirs[side].push_back((ready, seg));
        ready
    }

    /// The next segment end `dir` sent, at `now`: delivered if ready and the partitions
    /// deliver it and the receiving end is open and running (`is_up`).
    pub fn next(&mut self, dir: usize, now: Millis, p: &Partitions, is_up: bool) -> Next {
        let (from, to) = (self.ends[dir], self.ends[1 - dir]);
        match self.dirs[dir].front() {
            Some((at, _)) if *at <= now => {}
            _ => return Next::Wait,
        }
        if !p.delivers(from, to) {
            return Next::Held;
        }
        let Some((_, seg)) = self.dirs[dir].pop_front() else {
            return Next::Wait;
        };
        if !self.open[1 - dir] || !is_up {
            return Next::Lost;
        }
        if matches!(seg, Seg::Fin) {
            self.open[1 - dir] = false;
        }
        Next::Seg(seg)
    }

    /// Bytes end `side` sent that the other end has not got yet.
    pub fn undelivered(&self, side: usize) -> u64 {
        self.dirs[side]
            .iter()
            .map(|(_, s)| match s {
                Seg::Bytes(b) => b.len() as u64,
                Seg::Fin => 0,
            })
            .sum()
    }

    /// Whether both ends are closed.
    pub fn is_closed(&self) -> bool {
        !self.open[0] && !self.open[1]
    }

    /// A reset: everything in flight is lost. Returns the ends that are open (each must hear
    /// a FIN from the other).
    pub fn reset(&mut self) -> [bool; 2] {
        self.dirs[0].clear();
        self.dirs[1].clear();
        self.open
    }

    /// The host of end `side` crashed: its end closes at once and what was on its way to it
    /// is lost.
    pub fn crash(&mut self, side: usize) -> Left {
        if !self.accepted {
            // A connecting host gone before the answer: nobody hears of it. The host it
            // connects to refuses the SYN, even once it is back up.
            self.open[side] = false;
            return if side == 0 {
                Left::Nothing
            } else {
                Left::Pending
            };
        }
        let was_open = self.open[side];
        self.open[side] = false;
        self.dirs[1 - side].clear();
        if !self.open[1 - side] {
            Left::Nothing
        } else if was_open {
            Left::Fin
        } else {
            Left::Pending
        }
    }

    /// End `side` closes (after what it sent).
    pub fn close(&mut self, side: usize) -> Left {
        if !self.open[side] {
            return Left::Pending;
        }
        self.open[side] = false;
        if !self.accepted || !self.open[1 - side] {
            Left::Nothing
        } else {
            Left::Fin
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(ms: u64) -> Millis {
        Millis(1_000_000 + ms)
    }

    fn bytes(n: &Next) -> Option<&[u8]> {
        match n {
            Next::Seg(Seg::Bytes(b)) => Some(b),
            _ => None,
        }
    }

    #[test]
    fn syn_is_answered_refused_retried_and_timed_out() {
        let mut p = Partitions::default();
        let c = Tcp::new(0, 1, t(0));
        assert_eq!(c.syn(t(1), &p, true, false), Syn::Accept);
        assert_eq!(c.syn(t(1), &p, false, false), Syn::Refused);
        assert_eq!(
            c.syn(t(1), &p, true, true),
            Syn::Refused,
            "a firewall refuses"
        );
        p.block_one_way(1, 0);
        assert_eq!(
            c.syn(t(1), &p, false, false),
            Syn::Retry,
            "no answer comes back"
        );
        assert_eq!(c.syn(t(CONNECT_TIMEOUT_MS), &p, true, false), Syn::TimedOut);
        let nobody = Tcp::new(0, usize::MAX, t(0));
        assert_eq!(
            nobody.syn(t(1), &Partitions::default(), false, false),
            Syn::Retry
        );
    }

    #[test]
    fn bytes_keep_their_order_and_a_partition_holds_them() {
        let mut p = Partitions::default();
        let mut c = Tcp::new(0, 1, t(0));
        c.accept(t(0));
        // The second is sent with a shorter latency, yet is ready only after the first.
        assert_eq!(c.push(0, Seg::Bytes(b"a".to_vec()), t(0), 10), t(10));
        assert_eq!(c.push(0, Seg::Bytes(b"bc".to_vec()), t(1), 2), t(10));
        assert_eq!(c.undelivered(0), 3);
        assert!(matches!(c.next(0, t(9), &p, true), Next::Wait));
        p.block_one_way(0, 1);
        assert!(matches!(c.next(0, t(10), &p, true), Next::Held));
        p.heal();
        assert_eq!(bytes(&c.next(0, t(10), &p, true)), Some(&b"a"[..]));
        assert_eq!(bytes(&c.next(0, t(10), &p, true)), Some(&b"bc"[..]));
        assert!(matches!(c.next(0, t(10), &p, true), Next::Wait));
        // To a crashed receiver the bytes vanish.
        c.push(1, Seg::Bytes(b"x".to_vec()), t(10), 1);
        assert!(matches!(c.next(1, t(11), &p, false), Next::Lost));
    }

    #[test]
    fn close_crash_and_reset_reach_the_peer_as_a_fin() {
        let p = Partitions::default();
        let mut c = Tcp::new(0, 1, t(0));
        c.accept(t(0));
        assert_eq!(c.close(0), Left::Fin);
        assert_eq!(c.close(0), Left::Pending, "closing twice does nothing");
        c.push(0, Seg::Fin, t(0), 1);
        assert!(matches!(c.next(0, t(1), &p, true), Next::Seg(Seg::Fin)));
        assert!(c.is_closed());

        let mut c = Tcp::new(0, 1, t(0));
        c.accept(t(0));
        c.push(0, Seg::Bytes(b"lost".to_vec()), t(0), 1);
        assert_eq!(c.crash(1), Left::Fin);
        assert_eq!(
            c.undelivered(0),
            0,
            "what was on its way to the crashed host is lost"
        );
        assert_eq!(c.crash(0), Left::Nothing);

        // Before the answer: a crashed connecting host is forgotten; a crashed host it
        // connects to refuses the SYN even once it is back.
        assert_eq!(Tcp::new(0, 1, t(0)).crash(0), Left::Nothing);
        let mut c = Tcp::new(0, 1, t(0));
        assert_eq!(c.crash(1), Left::Pending);
        assert_eq!(c.syn(t(1), &p, true, false), Syn::Refused);

        let mut c = Tcp::new(0, 1, t(0));
        c.accept(t(0));
        c.push(1, Seg::Bytes(b"x".to_vec()), t(0), 1);
        assert_eq!(c.reset(), [true, true]);
        assert_eq!(c.undelivered(1), 0);
    }
}
