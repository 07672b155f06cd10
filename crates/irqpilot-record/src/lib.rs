//! # irqpilot-record
//!
//! Recordings: what `irqpilot watch --record`, `top --record` and `sim --record` save, and
//! what `--replay` and `irqpilot report` read. A recording is the raw
//! [`irqpilot_core::Snapshot`]s a sampler took (every `/proc/interrupts`, `/proc/stat` and
//! `/proc/softirqs` counter, with its time), the machine's inventory, and the affinity changes
//! seen while recording. It sits beside the sampling loop: `Platform::snapshot_into` ->
//! [`Writer::push`] on the way in, and [`ReplayPlatform`] (a `Platform`) on the way out, so
//! rates, findings and views come from the same code whether the machine is live or recorded.
//!
//! The format (versioned, specified in `docs/recording.md`): a header (magic, version, JSON
//! metadata), then blocks, each a small fixed header and one zstd frame of records. A sample
//! stores only the counters that moved since the previous one, so an hour of a 256-CPU server
//! at one sample a second takes a few megabytes. Key points (a full sample) every two minutes
//! let a reader seek without reading from the start.
//!
//! ```
//! use irqpilot_core::{CpuId, InterruptTable, IrqNum, Machine, MonoNs, RowLabel, Snapshot};
//! use irqpilot_record::{Meta, Recording, Writer};
//!
//! let dir = tempfile::tempdir().unwrap();
//! let path = dir.path().join("rec.irqrec");
//! let mut w = Writer::new(
//!     std::fs::File::create(&path).unwrap(),
//!     &path,
//!     &Meta::new("doc", "/", 1_000_000_000),
//!     &Machine::default(),
//! )
//! .unwrap();
//! let mut snap = Snapshot::default();
//! snap.interrupts = InterruptTable::with_kernel_header(vec![CpuId(0), CpuId(1)], 3);
//! snap.interrupts.push_kernel_row(RowLabel::Irq(IrqNum(24)), 3, &[10, 0], "  eth0");
//! for k in 0..3 {
//!     snap.taken_at = MonoNs(k * 1_000_000_000);
//!     snap.interrupts.all_counts_mut()[0] += 500;
//!     w.push(&snap).unwrap();
//! }
//! w.finish().unwrap();
//!
//! let rec = Recording::open(&path).unwrap();
//! let mut p = rec.player().unwrap();
//! let mut last = 0;
//! while p.next_sample().unwrap() {
//!     last = p.snapshot().interrupts.all_counts()[0];
//! }
//! assert_eq!(last, 1510);
//! ```

#![warn(missing_docs)]

mod error;
mod layout;
mod reader;
mod replay;
pub mod wire;
mod writer;

pub use error::{FormatError, RecordError};
pub use reader::{BlockInfo, Player, Recording};
pub use replay::{ReplayPlatform, Speed};
pub use writer::{BlockPolicy, Writer, WriterStats};

use irqpilot_core::{CpuSet, IrqNum};
use serde::{Deserialize, Serialize};

/// What the recorder says about itself, as JSON in the file header. Unknown keys are ignored
/// (a newer writer may add some without changing the version).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Meta {
    /// The irqpilot version that wrote it.
    pub irqpilot: String,
    /// What recorded it: `watch`, `top`, `sim <scenario>`.
    pub source: String,
    /// The root it sampled (`/` for the live machine).
    pub root: String,
    /// Wall-clock time when recording began, ns since the Unix epoch.
    pub created_unix_ns: u64,
    /// Monotonic time at the same instant, ns: a sample taken at monotonic `t` was taken at
    /// wall time `created_unix_ns + (t - start_mono_ns)`.
    pub start_mono_ns: u64,
    /// The sampling interval asked for, ns (samples carry their real times).
    pub interval_ns: u64,
    /// The machine's host name, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hostname: Option<String>,
}

impl Meta {
    /// Metadata for a recording made now by this build of irqpilot (times zero: the caller
    /// sets them from its clocks).
    pub fn new(source: &str, root: &str, interval_ns: u64) -> Meta {
        Meta {
            irqpilot: env!("CARGO_PKG_VERSION").to_string(),
            source: source.to_string(),
            root: root.to_string(),
            created_unix_ns: 0,
            start_mono_ns: 0,
            interval_ns,
            hostname: None,
        }
    }

    /// Wall-clock time of a sample taken at monotonic `mono_ns`, ns since the Unix epoch.
    pub fn wall_ns(&self, mono_ns: u64) -> u64 {
        let offset = mono_ns as i128 - self.start_mono_ns as i128;
        (self.created_unix_ns as i128 + offset).clamp(0, u64::MAX as i128) as u64
    }
}

/// Where an IRQ is allowed and where it is delivered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Affinity {
    /// `smp_affinity_list`.
    pub requested: Option<CpuSet>,
    /// `effective_affinity_list`.
    pub effective: Option<CpuSet>,
}

impl Affinity {
    /// Every IRQ's affinity in an inventory.
    pub fn all(machine: &irqpilot_core::Machine) -> std::collections::BTreeMap<IrqNum, Affinity> {
        machine
            .irqs
            .values()
            .map(|i| {
                (
                    i.irq,
                    Affinity {
                        requested: i.requested.clone(),
                        effective: i.effective.clone(),
                    },
                )
            })
            .collect()
    }
}

/// An affinity change seen while recording.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AffinityChange {
    /// Monotonic time of the sample after which it was seen, ns.
    pub at_ns: u64,
    /// The IRQ.
    pub irq: IrqNum,
    /// Its new affinity.
    pub affinity: Affinity,
}
