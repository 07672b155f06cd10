//! Why a scenario could not be loaded or edited.

/// Why a scenario could not be loaded.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ConfigError {
    /// The TOML did not parse, did not match the schema, or holds a value out of range.
    #[error("scenario {origin}{}: {message}", position.map(|p| format!(":{p}")).unwrap_or_default())]
    Invalid {
        /// File or built-in name.
        origin: String,
        /// Where in the file, when the error is about a place in it.
        position: Option<crate::locate::Position>,
        /// What is wrong.
        message: String,
    },
    /// A `--set` value that makes no sense for this scenario's machine (DIM, a NIC driver's
    /// moderation, on a machine without NICs): `--compare` skips it with a note.
    #[error("--set {key}={value} does not apply to {scenario}: {why}")]
    NotApplicable {
        /// The key.
        key: String,
        /// The value.
        value: String,
        /// The scenario.
        scenario: String,
        /// Why not.
        why: String,
    },
    /// The scenario breaks a rule across its fields.
    #[error("scenario {origin}: {rule}")]
    Inconsistent {
        /// File or built-in name.
        origin: String,
        /// Which rule.
        rule: Inconsistency,
    },
    /// A `--set` key or value was rejected.
    #[error("--set {key}: {message}")]
    BadSet {
        /// The key as given.
        key: String,
        /// Why.
        message: String,
    },
}

/// `machine.cmdline` does not parse as the kernel reads it.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("machine.cmdline: {0}")]
pub struct CmdlineError(pub String);

/// A rule across a scenario's fields that serde and the per-key ranges cannot express.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Inconsistency {
    /// No CPU at all.
    #[error("machine needs at least one CPU")]
    NoCpu,
    /// `duration_ms = 0`.
    #[error("duration_ms must be positive")]
    NoDuration,
    /// Warm-up as long as the run.
    #[error("warmup_ms must be shorter than duration_ms")]
    WarmupTooLong,
    /// `[moderator]`.
    #[error(transparent)]
    Moderator(#[from] irqpilot_core::moderation::global::ModerationConfigError),
    /// `[placement.irqpilot]`.
    #[error("placement.irqpilot: {0}")]
    Placement(#[from] irqpilot_core::placement::PlacementConfigError),
    /// A count or period that must be positive (`placement.rotate_interval_ms`,
    /// `machine.vectors_per_cpu`).
    #[error("{0} must be positive")]
    NotPositive(&'static str),
    /// `machine.cmdline`.
    #[error(transparent)]
    Cmdline(#[from] CmdlineError),
    /// A NIC without queues, link, a usable MTU or ring.
    #[error("nic {0}: queues, link_gbps, mtu_bytes and ring_size must be positive")]
    NicSize(String),
    /// `aim_mode` outside 0-2.
    #[error("nic {0}: aim_mode must be 0, 1 or 2")]
    AimMode(String),
    /// Queues that do not split evenly over the NIC's VMs.
    #[error("nic {0}: queues must split evenly over vms")]
    VmSplit(String),
    /// An NVMe group without drives, queues or IOPS.
    #[error("nvme {0}: drives, queues_per_drive and max_iops must be positive")]
    NvmeSize(String),
    /// `coalesce_threshold` outside 1-256.
    #[error("nvme {0}: coalesce_threshold must be 1-256")]
    CoalesceThreshold(String),
    /// A negative or infinite probe rate.
    #[error("probe_per_sec must be a rate >= 0")]
    ProbeRate,
    /// A bulk workload's load, chunk and window.
    #[error("bulk workload on {0}: load and chunk_kb must be > 0 and window_kb >= chunk_kb")]
    BulkShape(String),
    /// A transmit workload without load.
    #[error("workload on {0}: load must be > 0")]
    NoLoad(String),
    /// An RPC workload steered to a queue its NIC lacks.
    #[error("rpc workload on {nic}: queue {queue} is not a queue of it")]
    NoSuchQueue {
        /// The NIC.
        nic: String,
        /// The queue asked for.
        queue: u32,
    },
    /// A fio workload on an NVMe group the scenario lacks.
    #[error("fio workload names unknown nvme group {0:?}")]
    UnknownNvme(String),
    /// fio without depth or jobs.
    #[error("fio iodepth and jobs must be positive")]
    FioDepth,
    /// A negative or infinite fio rate.
    #[error("fio rate_iops must be >= 0 (0: unlimited)")]
    FioRate,
    /// A network workload on a NIC the scenario lacks.
    #[error("workload names unknown nic {0:?}")]
    UnknownNic(String),
}
