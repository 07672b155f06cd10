//! # irqpilot-notify
//!
//! User-space notification: how fast one thread (or process) can wake another, measured fairly,
//! and a notifier that gets close to the hardware floor without burning a core when idle. It
//! sits beside the interrupt-placement pipeline of `irqpilot-core`: it takes the machine's
//! [`Topology`](irqpilot_core::Topology) to choose CPU pairs, and the `irqpilot bench notify`
//! command calls [`run`] and prints [`BenchReport::render_table`] or the report as JSON.
//!
//! * **Library**: [`channel`] / [`process_channel`] give a [`Notifier`] / [`Waiter`] pair over
//!   one futex word with [`Strategy::Spin`], [`Strategy::Block`] or the adaptive
//!   [`Strategy::Hybrid`] (spin while wake-ups come fast, block when they are rare; the rule is
//!   in [`hybrid`]); [`duplex()`] joins two for request/response. A notify costs no system call
//!   unless the waiter may be asleep.
//! * **Benchmark**: ping-pong round trips between two pinned threads (or processes), one object
//!   per direction, for a raw cache-line ping-pong, the library's spin and hybrid, futex,
//!   eventfd (blocking and busy-polled), pipe, socketpair, three signal variants, io_uring
//!   `MSG_RING` (blocking and polled) and user interrupts (detected, reported unavailable with
//!   the reason). Every placement kind the topology has ([`placement`]), back-to-back and with
//!   idle gaps; p50/p99/p99.9/max RTT from HDR histograms and CPU time per side from
//!   the thread CPU clock. Fairness rules follow the research notes (§4): same waiting style
//!   labelled in every row, both ends pinned, warm-up discarded, no allocation in the timed
//!   loop, timer overhead measured and reported.
//!
//! ```no_run
//! use irqpilot_notify::{BenchConfig, run};
//! # fn topology() -> irqpilot_core::Topology { irqpilot_core::Topology::synthetic(1, 1, 2, 1) }
//! let report = run(&BenchConfig::default(), &topology());
//! println!("{}", report.render_table());
//! ```

pub mod bench;
pub mod clock;
pub mod config;
pub mod cpu;
pub mod duplex;
pub mod environment;
pub mod error;
mod harness;
pub mod histogram;
pub mod hybrid;
pub mod mechanism;
pub mod notifier;
pub mod placement;
pub mod report;
pub mod shm;

pub use bench::{RowProgress, machine_unavailability, measure_one, run, run_with_progress};
pub use config::{BadGap, BenchConfig, parse_gap};
pub use duplex::{Duplex, duplex};
pub use environment::Environment;
pub use error::{NotifyError, Op, RunError, WireError};
pub use histogram::RttSummary;
pub use hybrid::{HybridConfig, HybridState};
pub use mechanism::uintr::UintrSupport;
pub use mechanism::{Mechanism, Mode, UnknownMechanism, WaitStyle};
pub use notifier::{Notifier, NotifyCell, SharedCell, Strategy, Waiter, channel, process_channel};
pub use placement::{Placement, PlacementKind, UnknownPlacement, select_placements};
pub use report::{BenchReport, ResultRow, SideCpu, TargetCheck};
