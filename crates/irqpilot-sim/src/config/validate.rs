//! Checks across fields that the schema cannot express (ranges of single keys are in
//! `ranges.rs`). Each error names the key it is about, so that a file's error has its place.

use super::choices::{AppSchedule, Steering};
use super::error::{Inconsistency, Rule};
use super::isolation::isolation_of;
use super::schema::{Scenario, WorkloadCfg};
use irqpilot_core::CpuSet;
use irqpilot_core::placement::PlacementConfigError;

/// `v > 0`, with NaN counting as not positive.
pub(crate) fn positive(v: f64) -> bool {
    v > 0.0
}

fn broken(key: String, value: impl std::fmt::Display, rule: Rule) -> Inconsistency {
    Inconsistency {
        key,
        value: Some(value.to_string()),
        rule,
    }
}

impl Scenario {
    /// Consistency checks serde and the ranges cannot express.
    pub(super) fn validate(&self) -> Result<(), Inconsistency> {
        if self.warmup_ms >= self.duration_ms {
            return Err(broken(
                "warmup_ms".into(),
                self.warmup_ms,
                Rule::WarmupTooLong {
                    duration_ms: self.duration_ms,
                },
            ));
        }
        if let Some(m) = &self.moderator {
            m.validate().map_err(|e| {
                broken(
                    format!("moderator.{}", e.field),
                    e.value.clone(),
                    Rule::Moderator(e),
                )
            })?;
        }
        self.placement.irqpilot.validate().map_err(placement)?;
        isolation_of(&self.machine).map_err(|e| {
            broken(
                "machine.cmdline".into(),
                format!("{:?}", self.machine.cmdline),
                Rule::Cmdline(e),
            )
        })?;
        for (i, n) in self.nic.iter().enumerate() {
            if n.queues.checked_rem(n.vms) != Some(0) {
                return Err(broken(
                    format!("nic.{i}.vms"),
                    n.vms,
                    Rule::VmSplit { queues: n.queues },
                ));
            }
        }
        for (i, w) in self.workload.iter().enumerate() {
            let key = |k: &str| format!("workload.{i}.{k}");
            self.check_app_settings(i, w)?;
            let nic = match w {
                WorkloadCfg::Bulk {
                    nic,
                    window_kb,
                    chunk_kb,
                    ..
                } => {
                    if window_kb < chunk_kb {
                        return Err(broken(
                            key("window_kb"),
                            window_kb,
                            Rule::WindowBelowChunk {
                                chunk_kb: *chunk_kb,
                            },
                        ));
                    }
                    nic
                }
                WorkloadCfg::Rpc {
                    nic,
                    queue: Some(q),
                    ..
                } => {
                    if let Some(n) = self.nic.iter().find(|n| &n.name == nic && *q >= n.queues) {
                        return Err(broken(
                            key("queue"),
                            q,
                            Rule::NoSuchQueue {
                                nic: nic.clone(),
                                queues: n.queues,
                            },
                        ));
                    }
                    nic
                }
                WorkloadCfg::BulkTx { nic, .. }
                | WorkloadCfg::Poisson { nic, .. }
                | WorkloadCfg::Rpc { nic, .. } => nic,
                WorkloadCfg::Fio { nvme, .. } => {
                    if !self.nvme.iter().any(|d| &d.name == nvme) {
                        return Err(broken(key("nvme"), format!("{nvme:?}"), Rule::UnknownNvme));
                    }
                    continue;
                }
            };
            if !self.nic.iter().any(|n| &n.name == nic) {
                return Err(broken(key("nic"), format!("{nic:?}"), Rule::UnknownNic));
            }
        }
        Ok(())
    }
}

impl Scenario {
    /// CPUs of the machine (`packages x cores_per_package x threads_per_core`).
    fn machine_cpus(&self) -> u64 {
        let m = &self.machine;
        u64::from(m.packages.max(1))
            * u64::from(m.cores_per_package.max(1))
            * u64::from(m.threads_per_core.max(1))
    }

    /// A request/response workload's application CPUs, schedule and RPS CPUs.
    fn check_app_settings(&self, i: usize, w: &WorkloadCfg) -> Result<(), Inconsistency> {
        let key = |k: &str| format!("workload.{i}.{k}");
        let (WorkloadCfg::Rpc {
            app_cpus,
            app_schedule,
            steering,
            rps_cpus,
            ..
        }
        | WorkloadCfg::Poisson {
            app_cpus,
            app_schedule,
            steering,
            rps_cpus,
            ..
        }) = w
        else {
            return Ok(());
        };
        let cpus = self.machine_cpus();
        for (k, list) in [("app_cpus", app_cpus), ("rps_cpus", rps_cpus)] {
            if let Some(list) = list {
                cpu_list(key(k), list, cpus)?;
            }
        }
        if let Some(list) = rps_cpus {
            if *steering != Steering::Rps {
                let steering = serde_json::to_value(steering)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_default();
                return Err(broken(
                    key("rps_cpus"),
                    format!("{list:?}"),
                    Rule::RpsCpusWithoutRps { steering },
                ));
            }
        }
        if *app_schedule == AppSchedule::Scheduled && app_cpus.is_none() {
            return Err(broken(
                key("app_schedule"),
                "\"scheduled\"",
                Rule::ScheduleWithoutAppCpus,
            ));
        }
        Ok(())
    }
}

/// A CPU list at `key` that parses and names a CPU of a machine with `cpus` CPUs.
fn cpu_list(key: String, list: &str, cpus: u64) -> Result<(), Inconsistency> {
    let value = format!("{list:?}");
    let set = CpuSet::parse_list(list)
        .map_err(|e| broken(key.clone(), &value, Rule::CpuList(e.to_string())))?;
    if !set.iter().any(|c| u64::from(c.0) < cpus) {
        return Err(broken(key, &value, Rule::NoCpuOfMachine { cpus }));
    }
    Ok(())
}

/// An error of `[placement.irqpilot]`, at the key it is about.
fn placement(e: PlacementConfigError) -> Inconsistency {
    let key = |k: String| format!("placement.irqpilot.{k}");
    let (key, value) = match &e {
        PlacementConfigError::OutOfRange { field, value, .. } => {
            (key(field.to_string()), Some(value.clone()))
        }
        PlacementConfigError::BadPin { index, .. } => (key(format!("pin.{index}")), None),
        PlacementConfigError::BadApplication { index, .. } => {
            (key(format!("applications.{index}")), None)
        }
        PlacementConfigError::BadGlob {
            field,
            index,
            pattern,
            ..
        } => (
            key(format!("{field}.{index}")),
            Some(format!("{pattern:?}")),
        ),
    };
    Inconsistency {
        key,
        value,
        rule: Rule::Placement(e),
    }
}
