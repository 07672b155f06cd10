//! The notification mechanisms under test, each as a pair of ping-pong endpoints with one kernel
//! or memory object per direction.
//!
//! An endpoint sends an 8-byte token and receives the peer's; the harness checks that every
//! reply carries the token it sent. Mechanisms that only ring a doorbell (spin/hybrid cells,
//! futex words, signals) reconstruct the token from a count or carry it in a shared slot, so a
//! lost or duplicated wake-up still breaks the sequence.

pub(crate) mod fd;
pub(crate) mod futex;
pub(crate) mod msg_ring;
pub(crate) mod signal;
pub(crate) mod spin;
pub mod uintr;

use crate::error::WireError;
use crate::placement::PlacementKind;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// One side of a ping-pong. Created on the coordinating thread, moved to (or inherited by) the
/// side that uses it. `send`/`recv` run in the timed loop: no allocation, no I/O besides the
/// mechanism itself.
pub(crate) trait Endpoint: Send {
    /// Runs on the side's own thread or process after pinning, before the start barrier (e.g.
    /// block a signal in this thread and publish its thread id).
    fn prepare(&mut self) -> Result<(), WireError> {
        Ok(())
    }
    /// Sends `token` (never 0) to the peer.
    fn send(&mut self, token: u64) -> Result<(), WireError>;
    /// Waits for the peer's next token.
    fn recv(&mut self) -> Result<u64, WireError>;
}

/// Why a mechanism cannot be measured here (or in this placement).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Unavailable(pub String);

/// How a receiver waits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WaitStyle {
    /// Busy-polls in user space: lowest latency, a CPU burnt while waiting.
    Spin,
    /// Sleeps in the kernel: pays scheduler wake-up and context switch.
    Block,
    /// Spins for an adaptive budget, then sleeps.
    Hybrid,
}

impl WaitStyle {
    /// The label used in tables and JSON.
    pub fn name(self) -> &'static str {
        match self {
            WaitStyle::Spin => "spin",
            WaitStyle::Block => "block",
            WaitStyle::Hybrid => "hybrid",
        }
    }
}

/// Whether the two sides are threads of this process or forked processes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// Two pinned threads of the benchmark process.
    #[default]
    Threads,
    /// Two pinned single-threaded child processes (`fork`); objects are inherited or in
    /// `MAP_SHARED` memory, futexes are shared (not `FUTEX_PRIVATE_FLAG`).
    Processes,
}

/// A notification mechanism.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mechanism {
    /// Raw cache-line ping-pong: two `AtomicU64` on separate lines, store / load + `pause`. The
    /// physical floor, and the baseline `spin` is held to.
    SpinRaw,
    /// [`Notifier`](crate::Notifier)/[`Waiter`](crate::Waiter) with [`Strategy::Spin`](crate::Strategy::Spin).
    Spin,
    /// Raw futex words: store + `FUTEX_WAKE` every time, `FUTEX_WAIT` until the word moves.
    Futex,
    /// Two blocking eventfds.
    Eventfd,
    /// Two `EFD_NONBLOCK` eventfds, receiver busy-polls `read` (Hajnoczi's fair variant).
    EventfdPoll,
    /// **Not a fair baseline**: the seed benchmark's `eventfd-bi` reproduced, one blocking
    /// eventfd for both directions with read-and-write-back, to measure what its table measured.
    EventfdShared,
    /// Two pipes, 8-byte token.
    Pipe,
    /// One `AF_UNIX` stream socketpair (each direction has its own receive queue), 8-byte token.
    Socketpair,
    /// `tgkill` a real-time signal; the receiver blocks it and waits in `sigwaitinfo`.
    Signal,
    /// `tgkill` a real-time signal to a handler; the receiver sleeps in `sigsuspend`.
    SignalHandler,
    /// `tgkill` a real-time signal to a handler; the receiver spins on the flag it sets.
    SignalHandlerSpin,
    /// io_uring `IORING_OP_MSG_RING` between two rings; receiver waits in `io_uring_enter`.
    MsgRing,
    /// io_uring `MSG_RING`; receiver busy-polls its completion queue (no system call).
    MsgRingPoll,
    /// [`Notifier`](crate::Notifier)/[`Waiter`](crate::Waiter) with the adaptive
    /// [`Strategy::Hybrid`](crate::Strategy::Hybrid).
    Hybrid,
    /// x86 user interrupts (`SENDUIPI`): detected, not delivered (no mainline kernel support).
    Uintr,
}

impl Mechanism {
    /// Every mechanism, in table order (the raw floor first).
    pub const ALL: [Mechanism; 15] = [
        Mechanism::SpinRaw,
        Mechanism::Spin,
        Mechanism::Hybrid,
        Mechanism::EventfdPoll,
        Mechanism::MsgRingPoll,
        Mechanism::SignalHandlerSpin,
        Mechanism::Futex,
        Mechanism::Eventfd,
        Mechanism::EventfdShared,
        Mechanism::Pipe,
        Mechanism::Socketpair,
        Mechanism::MsgRing,
        Mechanism::Signal,
        Mechanism::SignalHandler,
        Mechanism::Uintr,
    ];

    /// The name used in JSON and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Mechanism::SpinRaw => "spin-raw",
            Mechanism::Spin => "spin",
            Mechanism::Futex => "futex",
            Mechanism::Eventfd => "eventfd",
            Mechanism::EventfdPoll => "eventfd-poll",
            Mechanism::EventfdShared => "eventfd-shared",
            Mechanism::Pipe => "pipe",
            Mechanism::Socketpair => "socketpair",
            Mechanism::Signal => "signal",
            Mechanism::SignalHandler => "signal-handler",
            Mechanism::SignalHandlerSpin => "signal-handler-spin",
            Mechanism::MsgRing => "msg-ring",
            Mechanism::MsgRingPoll => "msg-ring-poll",
            Mechanism::Hybrid => "hybrid",
            Mechanism::Uintr => "uintr",
        }
    }

    /// How its receiver waits.
    pub fn wait_style(self) -> WaitStyle {
        match self {
            Mechanism::SpinRaw
            | Mechanism::Spin
            | Mechanism::EventfdPoll
            | Mechanism::MsgRingPoll
            | Mechanism::SignalHandlerSpin
            | Mechanism::Uintr => WaitStyle::Spin,
            Mechanism::Futex
            | Mechanism::Eventfd
            | Mechanism::EventfdShared
            | Mechanism::Pipe
            | Mechanism::Socketpair
            | Mechanism::Signal
            | Mechanism::SignalHandler
            | Mechanism::MsgRing => WaitStyle::Block,
            Mechanism::Hybrid => WaitStyle::Hybrid,
        }
    }

    /// Why this mechanism is not measured in `placement`, if it is not.
    pub fn unavailable_in(self, placement: PlacementKind) -> Option<Unavailable> {
        if placement == PlacementKind::SameCpu && self.wait_style() == WaitStyle::Spin {
            return Some(Unavailable(
                "a spinning receiver on the same CPU as its sender keeps the sender from \
                 running until the scheduler preempts it: that measures time slices, not \
                 notification"
                    .to_string(),
            ));
        }
        None
    }
}

impl fmt::Display for Mechanism {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An unknown mechanism name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown mechanism {0:?}")]
pub struct UnknownMechanism(pub String);

impl FromStr for Mechanism {
    type Err = UnknownMechanism;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Mechanism::ALL
            .into_iter()
            .find(|m| m.name() == s)
            .ok_or_else(|| UnknownMechanism(s.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_styles() {
        for m in Mechanism::ALL {
            assert_eq!(m.name().parse::<Mechanism>().unwrap(), m);
            assert_eq!(
                serde_json::to_string(&m).unwrap(),
                format!("\"{}\"", m.name())
            );
        }
        assert_eq!(Mechanism::Hybrid.wait_style(), WaitStyle::Hybrid);
        assert_eq!(Mechanism::Eventfd.wait_style(), WaitStyle::Block);
        assert_eq!(Mechanism::EventfdPoll.wait_style(), WaitStyle::Spin);
        assert!("carrier-pigeon".parse::<Mechanism>().is_err());
    }

    #[test]
    fn spinning_on_the_same_cpu_is_unavailable() {
        for m in Mechanism::ALL {
            let r = m.unavailable_in(PlacementKind::SameCpu);
            assert_eq!(r.is_some(), m.wait_style() == WaitStyle::Spin, "{m}");
            assert!(m.unavailable_in(PlacementKind::SameCache).is_none());
        }
    }
}
