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
    #[error("scenario {origin}{}: {rule}", position.map(|p| format!(":{p}")).unwrap_or_default())]
    Inconsistent {
        /// File or built-in name.
        origin: String,
        /// Where the key the rule is about is in the file (or the table it belongs in).
        position: Option<crate::locate::Position>,
        /// Which rule, about which key (boxed: it carries core's errors).
        rule: Box<Inconsistency>,
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

/// A rule across a scenario's fields that serde and the per-key ranges cannot express, and the
/// key it is about.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{key}{}: {rule}", value.as_ref().map(|v| format!(" = {v}")).unwrap_or_default())]
pub struct Inconsistency {
    /// The key, dotted as `--set` spells it (`nic.0.vms`, `placement.irqpilot.pin.1`).
    pub key: String,
    /// Its value as TOML writes it, when it is one value.
    pub value: Option<String>,
    /// The rule.
    pub rule: Rule,
}

/// The rules across a scenario's fields.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Rule {
    /// Warm-up as long as the run (`warmup_ms`).
    #[error("must be shorter than duration_ms ({duration_ms})")]
    WarmupTooLong {
        /// The run's `duration_ms`.
        duration_ms: u64,
    },
    /// `[moderator]` (the key is `moderator.<field>`; core names it as the daemon's
    /// configuration does, `moderation.<field>`).
    #[error("{}", .0.why)]
    Moderator(irqpilot_core::moderation::global::ModerationConfigError),
    /// `[placement.irqpilot]` (the key is `placement.irqpilot.<field>`; core names it as the
    /// daemon's configuration does, `placement.<field>`).
    #[error("{}", placement_why(.0))]
    Placement(irqpilot_core::placement::PlacementConfigError),
    /// `machine.cmdline`.
    #[error("{}", .0.0)]
    Cmdline(CmdlineError),
    /// Queues that do not split evenly over the NIC's VMs (`nic.N.vms`).
    #[error("the NIC's {queues} queues must split evenly over its VMs")]
    VmSplit {
        /// The NIC's queues.
        queues: u32,
    },
    /// A bulk workload's window smaller than its chunk (`workload.N.window_kb`).
    #[error("must be at least chunk_kb ({chunk_kb})")]
    WindowBelowChunk {
        /// The workload's `chunk_kb`.
        chunk_kb: f64,
    },
    /// An RPC workload steered to a queue its NIC lacks (`workload.N.queue`).
    #[error("must be a queue of nic {nic:?} (0-{})", .queues.saturating_sub(1))]
    NoSuchQueue {
        /// The NIC.
        nic: String,
        /// Its queues.
        queues: u32,
    },
    /// A network workload on a NIC the scenario lacks (`workload.N.nic`).
    #[error("no [[nic]] has this name")]
    UnknownNic,
    /// A fio workload on an NVMe group the scenario lacks (`workload.N.nvme`).
    #[error("no [[nvme]] group has this name")]
    UnknownNvme,
    /// A CPU list that does not parse (`workload.N.app_cpus`, `workload.N.rps_cpus`).
    #[error("must be a CPU list (\"0-3,8\"): {0}")]
    CpuList(String),
    /// A CPU list naming no CPU of the machine.
    #[error("names no CPU of the machine (0-{})", .cpus.saturating_sub(1))]
    NoCpuOfMachine {
        /// CPUs the machine has.
        cpus: u64,
    },
    /// `workload.N.rps_cpus` without `steering = "rps"`.
    #[error("needs steering = \"rps\" (steering is {steering:?})")]
    RpsCpusWithoutRps {
        /// The workload's steering.
        steering: String,
    },
    /// `workload.N.app_schedule = "scheduled"` without `app_cpus` to schedule over.
    #[error("needs app_cpus, the CPUs the threads are scheduled over")]
    ScheduleWithoutAppCpus,
}

/// What is wrong in core's words, without its key (which `Inconsistency` names).
fn placement_why(e: &irqpilot_core::placement::PlacementConfigError) -> String {
    use irqpilot_core::placement::PlacementConfigError as E;
    match e {
        E::OutOfRange { why, .. } | E::BadPin { why, .. } => why.clone(),
        E::BadApplication { why, .. } | E::BadGlob { why, .. } => (*why).to_string(),
    }
}
