//! `PlacementConfig`: the knobs of the placement policy, the `[placement]` section of
//! `irqpilot.toml`. Every constant of the algorithm (docs/placement.md) is one of these fields,
//! with its default and where the default comes from.

use crate::cpuset::CpuSet;
use crate::ids::IrqNum;
use crate::placement::check_glob;
use serde::{Deserialize, Serialize};

/// Knobs of the placement policy. Loads are in *CPU shares*: 1.0 is one CPU fully busy with
/// interrupt work (hardirq + softirq).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PlacementConfig {
    /// An IRQ whose load is below this is light: never moved for balance, only to satisfy
    /// isolation, bans and pins (kirqd ignored light sources too, balancing.md 3.2).
    pub heavy_min_load: f64,
    /// Smallest gain (CPU shares, see docs/placement.md) a balancing move must bring. Undoing a
    /// move needs the loads to change by about twice this, which is what keeps the policy from
    /// oscillating.
    pub tolerance: f64,
    /// The gain must also reach this fraction of the source CPU's load (kirqd's max/8,
    /// balancing.md 3.2 and A4).
    pub tolerance_relative: f64,
    /// Weight of the load two SMT siblings share (their core's load, squared, in the objective).
    /// Siblings share execution units: "HT has shown no benefit" for interrupt handling
    /// (scaling.rst, balancing.md 5.8).
    pub smt_weight: f64,
    /// Weight of the load the CPUs of one last-level cache share.
    pub llc_weight: f64,
    /// Weight of the load the CPUs of one package share (Kamble: balance packages first,
    /// balancing.md 3.1).
    pub package_weight: f64,
    /// Weight of the load one device's queues put on one core: spreads a device's queues one
    /// per core (vendor scripts and RSS do the same, balancing.md 5.8, 6.5).
    pub queue_spread_weight: f64,
    /// What placing an IRQ off its device's NUMA-local CPUs costs, in CPU shares: it goes
    /// remote only when the local CPUs are busier than this (ESnet: up to 2x slower TCP across
    /// sockets, costmodel.md 1.8).
    pub numa_penalty: f64,
    /// Device vectors per CPU (x86: "at max. 204", about 200 allocatable, balancing.md 5.6).
    pub vector_capacity: u32,
    /// Cost of one interrupt when the kernel does not account IRQ time (no `/proc/stat` irq and
    /// softirq columns, or no `IRQ_TIME_ACCOUNTING`): 1 us hardirq + 1 us indirect
    /// (costmodel.md 1.1).
    pub interrupt_cost_us: f64,
    /// Upper bound on the time charged to one interrupt when a CPU's irq+softirq time is shared
    /// among its interrupts: one `net_rx_action` round may run 2 jiffies (2000 us at HZ=1000,
    /// costmodel.md 1.2). Stops a CPU's unrelated softirq work from making a rare IRQ heavy.
    pub max_interrupt_cost_us: f64,
    /// Shortest control period the policy asks for (after moves or load shifts), ms.
    pub min_interval_ms: u64,
    /// Longest control period (steady load), ms. irqbalance polls every 10 s (balancing.md 1.2).
    pub max_interval_ms: u64,
    /// Relative change of per-IRQ loads between two periods that counts as a load shift and
    /// shortens the period.
    pub load_shift: f64,
    /// Write `/proc/irq/default_smp_affinity` when it includes CPUs IRQs may not use, so IRQs
    /// registered later start on housekeeping CPUs (balancing.md 8.3).
    pub manage_default_affinity: bool,
    /// CPUs never to place an IRQ on (IRQs there are moved off), on top of isolation.
    pub ban_cpus: CpuSet,
    /// IRQs never to touch (they still count for load and vectors).
    pub ban_irqs: Vec<IrqNum>,
    /// IRQ name globs (`*`, `?`) never to touch, matched against each action name and the
    /// joined name as `/proc/interrupts` prints it.
    pub ban_names: Vec<String>,
    /// Pins: IRQs (by number, device or name glob) restricted to a CPU set.
    pub pin: Vec<Pin>,
    /// Where the applications that consume a device's traffic run. The device's queue IRQs
    /// then prefer the other CPUs that share a last-level cache with those (the cost of leaving
    /// that set is `numa_penalty`) rather than the device's NUMA-local CPUs: a softirq on
    /// another cache than the thread it wakes adds a wake-up IPI and cache-line transfers, on
    /// another socket up to 2x throughput loss; on the application's own CPUs it preempts the
    /// application (costmodel.md 2.7). An application whose CPUs fill their caches leaves its
    /// device's IRQs near the device.
    pub applications: Vec<Application>,
}

/// The CPUs the threads consuming a device's traffic run on: configured (`cpus`), or read from
/// the running process (`process`: the union of its threads' `Cpus_allowed_list` in
/// `/proc/PID/task/TID/status`). Exactly one of the two is given.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Application {
    /// The device: PCI address, network interface (`eth0`) or NVMe controller (`nvme0`).
    pub device: String,
    /// The application's CPUs (filled from `process` when that is given).
    #[serde(default, skip_serializing_if = "CpuSet::is_empty")]
    pub cpus: CpuSet,
    /// The process name, as `/proc/PID/comm` shows it (`nginx`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub process: Option<String>,
}

/// Restricts matching IRQs to `cpus` (intersected with the housekeeping CPUs: a pin never
/// puts a device IRQ on an isolated CPU). Exactly one of `irq`, `device`, `name` is given.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Pin {
    /// One IRQ number.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub irq: Option<IrqNum>,
    /// A device: PCI address (`0000:3b:00.0`), network interface (`eth0`) or NVMe controller
    /// (`nvme0`); every IRQ of it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
    /// An IRQ name glob (`mlx5_comp*`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The CPUs.
    pub cpus: CpuSet,
}

impl Default for PlacementConfig {
    fn default() -> Self {
        PlacementConfig {
            heavy_min_load: 0.005,
            tolerance: 0.05,
            tolerance_relative: 0.125,
            smt_weight: 0.5,
            llc_weight: 0.2,
            package_weight: 0.1,
            queue_spread_weight: 0.25,
            numa_penalty: 0.2,
            vector_capacity: 200,
            interrupt_cost_us: 2.0,
            max_interrupt_cost_us: 2000.0,
            min_interval_ms: 1000,
            max_interval_ms: 10_000,
            load_shift: 0.25,
            manage_default_affinity: true,
            ban_cpus: CpuSet::new(),
            ban_irqs: Vec::new(),
            ban_names: Vec::new(),
            pin: Vec::new(),
            applications: Vec::new(),
        }
    }
}

/// A configuration value the policy cannot work with.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PlacementConfigError {
    /// A number outside its range.
    #[error("placement.{field} = {value}: {why}")]
    OutOfRange {
        /// The key.
        field: &'static str,
        /// The value given.
        value: String,
        /// The range.
        why: String,
    },
    /// A pin that names no IRQ, or more than one kind of selector.
    #[error("placement.pin[{index}]: {why}")]
    BadPin {
        /// Position in the `pin` list.
        index: usize,
        /// What is wrong.
        why: String,
    },
    /// An application entry without a device or CPUs.
    #[error("placement.applications[{index}]: {why}")]
    BadApplication {
        /// Position in the `applications` list.
        index: usize,
        /// What is wrong.
        why: &'static str,
    },
    /// A name glob that cannot mean what it says.
    #[error("placement.{field}[{index}] = {pattern:?}: {why}")]
    BadGlob {
        /// The key.
        field: &'static str,
        /// Position in the list.
        index: usize,
        /// The pattern.
        pattern: String,
        /// What is wrong.
        why: &'static str,
    },
}

/// A finite `v` in `lo..=hi`, or `(lo, hi]` when `open` (a zero there breaks the policy).
pub(crate) fn check_range(v: f64, lo: f64, hi: f64, open: bool) -> Result<(), String> {
    let ok = v.is_finite() && v <= hi && if open { v > lo } else { v >= lo };
    if ok {
        Ok(())
    } else {
        Err(format!(
            "must be a number in {}{lo}, {hi}]",
            if open { "(" } else { "[" }
        ))
    }
}

impl PlacementConfig {
    /// Checks ranges: loads and tolerances in CPU shares (0-1], weights and penalties in
    /// [0, 100], costs ordered, intervals ordered, globs meaningful, pins well formed. Every
    /// key has a range; a value outside names its key.
    pub fn validate(&self) -> Result<(), PlacementConfigError> {
        let out = |field: &'static str, value: String, why: String| {
            Err(PlacementConfigError::OutOfRange { field, value, why })
        };
        // (key, value, low, high, low excluded). Loads are CPU shares: above 1 no IRQ could
        // ever qualify; a zero heavy_min_load or tolerance would let float noise move IRQs.
        let ranges = [
            ("heavy_min_load", self.heavy_min_load, 0.0, 1.0, true),
            ("tolerance", self.tolerance, 0.0, 1.0, true),
            (
                "tolerance_relative",
                self.tolerance_relative,
                0.0,
                1.0,
                false,
            ),
            ("smt_weight", self.smt_weight, 0.0, 100.0, false),
            ("llc_weight", self.llc_weight, 0.0, 100.0, false),
            ("package_weight", self.package_weight, 0.0, 100.0, false),
            (
                "queue_spread_weight",
                self.queue_spread_weight,
                0.0,
                100.0,
                false,
            ),
            ("numa_penalty", self.numa_penalty, 0.0, 100.0, false),
            // One interrupt costs at least some time; a second is the ceiling of sense.
            ("interrupt_cost_us", self.interrupt_cost_us, 0.0, 1e6, true),
            (
                "max_interrupt_cost_us",
                self.max_interrupt_cost_us,
                0.0,
                1e6,
                true,
            ),
            // The relative change sum|L - L'| / max(sum L, sum L') lies in [0, 2].
            ("load_shift", self.load_shift, 0.0, 2.0, true),
        ];
        for (field, v, lo, hi, open) in ranges {
            if let Err(why) = check_range(v, lo, hi, open) {
                return out(field, v.to_string(), why);
            }
        }
        if self.max_interrupt_cost_us < self.interrupt_cost_us {
            return out(
                "max_interrupt_cost_us",
                self.max_interrupt_cost_us.to_string(),
                format!(
                    "must be at least interrupt_cost_us ({})",
                    self.interrupt_cost_us
                ),
            );
        }
        if !(1..=65_535).contains(&self.vector_capacity) {
            return out(
                "vector_capacity",
                self.vector_capacity.to_string(),
                "must be in 1-65535 (device vectors per CPU; x86 has about 200)".into(),
            );
        }
        if self.min_interval_ms == 0 || self.min_interval_ms > self.max_interval_ms {
            return out(
                "min_interval_ms",
                self.min_interval_ms.to_string(),
                "must be at least 1 and at most max_interval_ms".into(),
            );
        }
        if self.max_interval_ms > 3_600_000 {
            return out(
                "max_interval_ms",
                self.max_interval_ms.to_string(),
                "must be at most 3600000 (an hour)".into(),
            );
        }
        for (index, g) in self.ban_names.iter().enumerate() {
            check_glob(g).map_err(|why| PlacementConfigError::BadGlob {
                field: "ban_names",
                index,
                pattern: g.clone(),
                why,
            })?;
        }
        for (index, a) in self.applications.iter().enumerate() {
            let why = if a.device.trim().is_empty() {
                "device is empty"
            } else if a.cpus.is_empty() == a.process.is_none() {
                "give exactly one of cpus (not empty) and process"
            } else if a.process.as_deref().is_some_and(|p| p.trim().is_empty()) {
                "process is empty"
            } else {
                continue;
            };
            return Err(PlacementConfigError::BadApplication { index, why });
        }
        for (index, p) in self.pin.iter().enumerate() {
            let bad = |why: &str| {
                Err(PlacementConfigError::BadPin {
                    index,
                    why: why.to_string(),
                })
            };
            let selectors =
                p.irq.is_some() as u8 + p.device.is_some() as u8 + p.name.is_some() as u8;
            if selectors != 1 {
                return bad("give exactly one of irq, device, name");
            }
            if p.cpus.is_empty() {
                return bad("cpus is empty");
            }
            if p.device.as_deref().is_some_and(|d| d.trim().is_empty()) {
                return bad("device is empty");
            }
            if let Some(g) = &p.name {
                if let Err(why) = check_glob(g) {
                    return bad(&format!("name {g:?}: {why}"));
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid() {
        assert_eq!(PlacementConfig::default().validate(), Ok(()));
    }

    #[test]
    fn bad_values_are_named() {
        let c = PlacementConfig {
            tolerance: 0.0,
            ..Default::default()
        };
        let e = c.validate().unwrap_err().to_string();
        assert!(e.contains("placement.tolerance"), "{e}");
        let c = PlacementConfig {
            smt_weight: f64::NAN,
            ..Default::default()
        };
        assert!(c.validate().unwrap_err().to_string().contains("smt_weight"));
        let c = PlacementConfig {
            min_interval_ms: 20_000,
            ..Default::default()
        };
        assert!(c.validate().is_err());
        let c = PlacementConfig {
            pin: vec![Pin {
                irq: Some(IrqNum(3)),
                device: Some("eth0".into()),
                name: None,
                cpus: CpuSet::single(crate::ids::CpuId(0)),
            }],
            ..Default::default()
        };
        assert!(c.validate().unwrap_err().to_string().contains("pin[0]"));
    }

    #[test]
    fn every_value_has_a_range() {
        let bad: Vec<(PlacementConfig, &str)> = vec![
            (
                PlacementConfig {
                    heavy_min_load: 2.0,
                    ..Default::default()
                },
                "heavy_min_load",
            ),
            (
                PlacementConfig {
                    heavy_min_load: 0.0,
                    ..Default::default()
                },
                "heavy_min_load",
            ),
            (
                PlacementConfig {
                    tolerance_relative: 2.0,
                    ..Default::default()
                },
                "tolerance_relative",
            ),
            (
                PlacementConfig {
                    load_shift: 0.0,
                    ..Default::default()
                },
                "load_shift",
            ),
            (
                PlacementConfig {
                    interrupt_cost_us: 0.0,
                    ..Default::default()
                },
                "interrupt_cost_us",
            ),
            (
                PlacementConfig {
                    max_interrupt_cost_us: 1.0,
                    ..Default::default()
                },
                "max_interrupt_cost_us",
            ),
            (
                PlacementConfig {
                    numa_penalty: -1.0,
                    ..Default::default()
                },
                "numa_penalty",
            ),
            (
                PlacementConfig {
                    vector_capacity: 0,
                    ..Default::default()
                },
                "vector_capacity",
            ),
            (
                PlacementConfig {
                    max_interval_ms: u64::MAX,
                    ..Default::default()
                },
                "max_interval_ms",
            ),
            (
                PlacementConfig {
                    ban_names: vec!["[".into()],
                    ..Default::default()
                },
                "ban_names[0]",
            ),
            (
                PlacementConfig {
                    ban_names: vec!["ok*".into(), "".into()],
                    ..Default::default()
                },
                "ban_names[1]",
            ),
            (
                PlacementConfig {
                    pin: vec![Pin {
                        irq: None,
                        device: None,
                        name: Some("mlx5_comp[0-3]".into()),
                        cpus: CpuSet::single(crate::ids::CpuId(0)),
                    }],
                    ..Default::default()
                },
                "pin[0]",
            ),
        ];
        for (c, key) in bad {
            let e = c.validate().unwrap_err().to_string();
            assert!(e.contains(&format!("placement.{key}")), "{key}: {e}");
        }
    }
}
