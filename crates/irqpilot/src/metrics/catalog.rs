//! Every metric irqpilot exports, in one table: the encoder writes from it, `docs/metrics.md`
//! lists it, and the tests check the Grafana dashboard and the alert rules against it.

/// A metric's type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Monotonic; exposed with the `_total` suffix.
    Counter,
    /// A value that goes up and down.
    Gauge,
}

/// Which endpoints export a metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// `exporter` and `daemon --metrics`.
    Always,
    /// Only with `--per-cpu-irqs`.
    PerCpuIrqs,
    /// Only `daemon --metrics`: what the daemon did.
    Daemon,
}

/// Which metric (the encoder matches on it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum Id {
    BuildInfo,
    IrqInterrupts,
    IrqCpuInterrupts,
    CpuInterrupts,
    CpuSoftirqs,
    CpuHardirqSeconds,
    CpuSoftirqSeconds,
    CpuIsolated,
    Imbalance,
    Findings,
    ModerationDelay,
    ModerationTarget,
    Migrations,
    Changes,
    ApplyErrors,
    Periods,
    Period,
    Reloads,
}

/// One metric family.
#[derive(Debug, Clone, Copy)]
pub struct Metric {
    /// Which one.
    pub id: Id,
    /// The family name, without the unit and `_total` suffixes.
    pub name: &'static str,
    /// OpenMetrics unit, appended to the name (`seconds`, `microseconds`).
    pub unit: Option<&'static str>,
    /// Type.
    pub kind: Kind,
    /// Label names, in the order they are written.
    pub labels: &'static [&'static str],
    /// Where it comes from and what it means (the `# HELP` text).
    pub help: &'static str,
    /// Who exports it.
    pub scope: Scope,
}

impl Metric {
    /// The name samples carry: family name, unit, and `_total` for counters.
    pub fn sample_name(&self) -> String {
        let mut s = self.family_name();
        if self.kind == Kind::Counter {
            s.push_str("_total");
        }
        s
    }

    /// The family name with its unit (`# TYPE` line).
    pub fn family_name(&self) -> String {
        match self.unit {
            Some(u) => format!("{}_{u}", self.name),
            None => self.name.to_string(),
        }
    }
}

/// `irqpilot_irq_interrupts_total`.
pub const IRQ_INTERRUPTS: Metric = Metric {
    id: Id::IrqInterrupts,
    name: "irqpilot_irq_interrupts",
    unit: None,
    kind: Kind::Counter,
    labels: &["irq", "name", "device", "queue"],
    help: "Interrupts of one numbered IRQ over all CPUs (/proc/interrupts). name: its actions; device: the interface, NVMe controller or PCI device it belongs to (empty for platform IRQs); queue: its queue (rx0, txrx3, io7, misc) or empty.",
    scope: Scope::Always,
};

/// `irqpilot_irq_cpu_interrupts_total`.
pub const IRQ_CPU_INTERRUPTS: Metric = Metric {
    id: Id::IrqCpuInterrupts,
    name: "irqpilot_irq_cpu_interrupts",
    unit: None,
    kind: Kind::Counter,
    labels: &["irq", "cpu"],
    help: "Interrupts of one numbered IRQ on one CPU (/proc/interrupts), for the CPUs that took any; join on irq with irqpilot_irq_interrupts_total for names. Only with --per-cpu-irqs.",
    scope: Scope::PerCpuIrqs,
};

/// `irqpilot_cpu_interrupts_total`.
pub const CPU_INTERRUPTS: Metric = Metric {
    id: Id::CpuInterrupts,
    name: "irqpilot_cpu_interrupts",
    unit: None,
    kind: Kind::Counter,
    labels: &["cpu"],
    help: "Numbered-IRQ interrupts taken by one CPU (sum of its /proc/interrupts column; timer and IPI rows such as LOC and RES excluded).",
    scope: Scope::Always,
};

/// `irqpilot_cpu_softirqs_total`.
pub const CPU_SOFTIRQS: Metric = Metric {
    id: Id::CpuSoftirqs,
    name: "irqpilot_cpu_softirqs",
    unit: None,
    kind: Kind::Counter,
    labels: &["cpu", "type"],
    help: "Softirqs raised on one CPU, by type (/proc/softirqs: NET_RX, BLOCK, TIMER, ...).",
    scope: Scope::Always,
};

/// `irqpilot_cpu_hardirq_seconds_total`.
pub const CPU_HARDIRQ_SECONDS: Metric = Metric {
    id: Id::CpuHardirqSeconds,
    name: "irqpilot_cpu_hardirq",
    unit: Some("seconds"),
    kind: Kind::Counter,
    labels: &["cpu"],
    help: "Time one CPU spent in hardirq handlers (/proc/stat irq column, 10 ms ticks; zero unless the kernel has IRQ_TIME_ACCOUNTING).",
    scope: Scope::Always,
};

/// `irqpilot_cpu_softirq_seconds_total`.
pub const CPU_SOFTIRQ_SECONDS: Metric = Metric {
    id: Id::CpuSoftirqSeconds,
    name: "irqpilot_cpu_softirq",
    unit: Some("seconds"),
    kind: Kind::Counter,
    labels: &["cpu"],
    help: "Time one CPU spent in softirq processing (/proc/stat softirq column, 10 ms ticks).",
    scope: Scope::Always,
};

/// `irqpilot_cpu_isolated`.
pub const CPU_ISOLATED: Metric = Metric {
    id: Id::CpuIsolated,
    name: "irqpilot_cpu_isolated",
    unit: None,
    kind: Kind::Gauge,
    labels: &["cpu"],
    help: "1 for a CPU kept free of device interrupts (isolcpus, nohz_full, cpusets' isolated), 0 for a housekeeping CPU.",
    scope: Scope::Always,
};

/// `irqpilot_imbalance_ratio`.
pub const IMBALANCE: Metric = Metric {
    id: Id::Imbalance,
    name: "irqpilot_imbalance_ratio",
    unit: None,
    kind: Kind::Gauge,
    labels: &[],
    help: "Imbalance index: max / mean device-IRQ interrupts/s over the housekeeping CPUs, between the last two samples at least 1 s apart (1 is perfect balance; absent with no device interrupts).",
    scope: Scope::Always,
};

/// `irqpilot_findings`.
pub const FINDINGS: Metric = Metric {
    id: Id::Findings,
    name: "irqpilot_findings",
    unit: None,
    kind: Kind::Gauge,
    labels: &["severity", "kind"],
    help: "Findings of irqpilot status by severity and kind (device-irq-on-isolated-cpu, heavy-irqs-share-cpu, remote-numa-irq, affinity-not-honoured, vector-pressure, no-housekeeping-cpu); every kind is present, 0 when none.",
    scope: Scope::Always,
};

/// `irqpilot_moderation_delay_microseconds`.
pub const MODERATION_DELAY: Metric = Metric {
    id: Id::ModerationDelay,
    name: "irqpilot_moderation_delay",
    unit: Some("microseconds"),
    kind: Kind::Gauge,
    labels: &["device", "queue"],
    help: "Interrupt delay in force per moderation knob, as last read: a NIC queue's rx-usecs (ethtool -c; queue empty when device-wide), an NVMe controller's aggregation time (feature 08h, queue empty).",
    scope: Scope::Always,
};

/// `irqpilot_moderation_target_per_second`.
pub const MODERATION_TARGET: Metric = Metric {
    id: Id::ModerationTarget,
    name: "irqpilot_moderation_target_per_second",
    unit: None,
    kind: Kind::Gauge,
    labels: &[],
    help: "The platform-wide device interrupt rate the global moderator keeps under ([moderation] target_intr_rate).",
    scope: Scope::Always,
};

/// `irqpilot_build_info`.
pub const BUILD_INFO: Metric = Metric {
    id: Id::BuildInfo,
    name: "irqpilot_build_info",
    unit: None,
    kind: Kind::Gauge,
    labels: &["version"],
    help: "Always 1; the version of irqpilot serving the metrics.",
    scope: Scope::Always,
};

/// `irqpilot_placement_migrations_total`.
pub const MIGRATIONS: Metric = Metric {
    id: Id::Migrations,
    name: "irqpilot_placement_migrations",
    unit: None,
    kind: Kind::Counter,
    labels: &[],
    help: "IRQ affinity changes the daemon wrote (and read back) since it started.",
    scope: Scope::Daemon,
};

/// `irqpilot_changes_total`.
pub const CHANGES: Metric = Metric {
    id: Id::Changes,
    name: "irqpilot_changes",
    unit: None,
    kind: Kind::Counter,
    labels: &["action"],
    help: "Values the daemon changed since it started, by action (affinity, default-affinity, channels, nic-coalescing, nvme-coalescing, soft-moderation).",
    scope: Scope::Daemon,
};

/// `irqpilot_apply_errors_total`.
pub const APPLY_ERRORS: Metric = Metric {
    id: Id::ApplyErrors,
    name: "irqpilot_apply_errors",
    unit: None,
    kind: Kind::Counter,
    labels: &["kind"],
    help: "Changes the kernel refused since the daemon started, by kind (vanished ENOENT, permission-denied EACCES, managed EIO/EPERM, no-vector-space ENOSPC, invalid EINVAL, unsupported, not-taken, other).",
    scope: Scope::Daemon,
};

/// `irqpilot_daemon_periods_total`.
pub const PERIODS: Metric = Metric {
    id: Id::Periods,
    name: "irqpilot_daemon_periods",
    unit: None,
    kind: Kind::Counter,
    labels: &[],
    help: "Control periods the daemon ran (sample, decide, apply).",
    scope: Scope::Daemon,
};

/// `irqpilot_daemon_period_seconds`.
pub const PERIOD: Metric = Metric {
    id: Id::Period,
    name: "irqpilot_daemon_period",
    unit: Some("seconds"),
    kind: Kind::Gauge,
    labels: &[],
    help: "The daemon's current control period (short after changes and while moderating, long when steady).",
    scope: Scope::Daemon,
};

/// `irqpilot_config_reloads_total`.
pub const RELOADS: Metric = Metric {
    id: Id::Reloads,
    name: "irqpilot_config_reloads",
    unit: None,
    kind: Kind::Counter,
    labels: &["result"],
    help: "Configuration reloads (SIGHUP) by result (ok, error: the old configuration kept).",
    scope: Scope::Daemon,
};

/// Every metric, in exposition order.
pub const METRICS: &[Metric] = &[
    BUILD_INFO,
    IRQ_INTERRUPTS,
    IRQ_CPU_INTERRUPTS,
    CPU_INTERRUPTS,
    CPU_SOFTIRQS,
    CPU_HARDIRQ_SECONDS,
    CPU_SOFTIRQ_SECONDS,
    CPU_ISOLATED,
    IMBALANCE,
    FINDINGS,
    MODERATION_DELAY,
    MODERATION_TARGET,
    MIGRATIONS,
    CHANGES,
    APPLY_ERRORS,
    PERIODS,
    PERIOD,
    RELOADS,
];

/// The finding kinds exported with a zero when absent (`Finding`'s serde tags).
pub const FINDING_KINDS: &[&str] = &[
    "heavy-irqs-share-cpu",
    "device-irq-on-isolated-cpu",
    "remote-numa-irq",
    "affinity-not-honoured",
    "vector-pressure",
    "no-housekeeping-cpu",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_conventions() {
        let mut seen = std::collections::BTreeSet::new();
        for m in METRICS {
            assert!(m.name.starts_with("irqpilot_"), "{}", m.name);
            assert!(
                m.name
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_'),
                "{}",
                m.name
            );
            assert!(!m.name.ends_with("_total"), "{}", m.name);
            assert!(seen.insert(m.sample_name()), "{} twice", m.name);
            assert!(m.help.ends_with('.') || m.help.ends_with(')'), "{}", m.name);
        }
        assert_eq!(
            CPU_HARDIRQ_SECONDS.sample_name(),
            "irqpilot_cpu_hardirq_seconds_total"
        );
        assert_eq!(
            MODERATION_DELAY.sample_name(),
            "irqpilot_moderation_delay_microseconds"
        );
    }
}
