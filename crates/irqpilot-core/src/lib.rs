//! # irqpilot-core
//!
//! The domain model and the pure policies of irqpilot. Every job the tool does is one loop:
//!
//! ```text
//! Platform::snapshot() -> Snapshot          raw counters + time      (irqpilot-linux / irqpilot-sim)
//! Rates::between(prev, cur)                  pure arithmetic          (this crate)
//! policy.decide(...) -> Plan                 pure: no I/O/clock/RNG   (this crate)
//! Platform::apply(&Plan) -> ApplyReport      the only writer          (irqpilot-linux / irqpilot-sim)
//! ```
//!
//! This crate holds the types every stage shares: [`CpuId`], [`IrqNum`], [`CpuSet`] (with the
//! kernel's cpulist and hex-mask forms), [`Topology`], [`Isolation`], [`Irq`] and [`PciDevice`]
//! (with queue roles recognised from driver names), [`Snapshot`], [`Rates`], [`Plan`], and the
//! [`Platform`] trait. It does no I/O: text formats live in `irqpilot-linux`.

#![warn(missing_docs)]

pub mod control;
pub mod cpuset;
pub mod devstats;
pub mod findings;
pub mod ids;
pub mod irq;
pub mod isolation;
pub mod machine;
pub mod moderation;
pub mod placement;
pub mod plan;
pub mod platform;
pub mod policy;
pub mod queue;
pub mod rates;
pub mod snapshot;
pub mod topology;

pub use control::{Controller, StepReport};
pub use cpuset::{CpuSet, CpuSetError, MAX_CPUS};
pub use devstats::{DiskCounters, DiskRate, NetDevCounters, NetRate};
pub use findings::{Finding, FindingsConfig, FindingsConfigError, Severity};
pub use ids::{CpuId, IrqNum, MonoNs, NodeId, PciAddr};
pub use irq::{Irq, PciDevice, Trigger};
pub use isolation::{Housekeeping, HousekeepingBasis, IsolCpus, IsolFlag, Isolation};
pub use machine::{Gap, GapReason, Machine};
pub use placement::{PlacementConfig, PlacementPolicy};
pub use plan::{Action, ApplyError, ApplyReport, CoalesceParams, Outcome, Plan};
pub use platform::{Platform, PlatformError};
pub use policy::{Policy, PolicyInput};
pub use queue::{NamingScheme, Queue, QueueKind};
pub use rates::{CpuRate, CpuTickDelta, Rates, RowRate, RowStatus};
pub use snapshot::{
    CpuTicks, InterruptRow, InterruptTable, ProcStat, RowLabel, Snapshot, SoftirqTable,
};
pub use topology::{Cache, CacheKind, CpuRelation, CpuTopo, Topology};
