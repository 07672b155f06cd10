//! Checks across fields that the schema cannot express (ranges of single keys are in
//! `ranges.rs`).

use super::error::Inconsistency;
use super::isolation::isolation_of;
use super::schema::{Scenario, WorkloadCfg};

/// `v > 0`, with NaN counting as not positive.
pub(crate) fn positive(v: f64) -> bool {
    v > 0.0
}

impl Scenario {
    /// Consistency checks serde cannot express.
    pub(super) fn validate(&self) -> Result<(), Inconsistency> {
        let m = &self.machine;
        if m.cores_per_package == 0 || m.packages == 0 || m.threads_per_core == 0 {
            return Err(Inconsistency::NoCpu);
        }
        if self.duration_ms == 0 {
            return Err(Inconsistency::NoDuration);
        }
        if self.warmup_ms >= self.duration_ms {
            return Err(Inconsistency::WarmupTooLong);
        }
        if let Some(m) = &self.moderator {
            m.validate()?;
        }
        placement(self)?;
        for n in &self.nic {
            if n.queues == 0 || !positive(n.link_gbps) || n.mtu_bytes < 64 || n.ring_size == 0 {
                return Err(Inconsistency::NicSize(n.name.clone()));
            }
            if n.aim_mode > 2 {
                return Err(Inconsistency::AimMode(n.name.clone()));
            }
            if n.vms == 0 || n.queues % n.vms != 0 {
                return Err(Inconsistency::VmSplit(n.name.clone()));
            }
        }
        for d in &self.nvme {
            if d.drives == 0 || d.queues_per_drive == 0 || !positive(d.max_iops) {
                return Err(Inconsistency::NvmeSize(d.name.clone()));
            }
            if d.coalesce_threshold == 0 || d.coalesce_threshold > 256 {
                return Err(Inconsistency::CoalesceThreshold(d.name.clone()));
            }
        }
        for w in &self.workload {
            if !(w.probe_per_sec() >= 0.0 && w.probe_per_sec().is_finite()) {
                return Err(Inconsistency::ProbeRate);
            }
            let nic = match w {
                WorkloadCfg::Bulk {
                    nic,
                    load,
                    window_kb,
                    chunk_kb,
                    ..
                } => {
                    if !positive(*load)
                        || !positive(*chunk_kb)
                        || window_kb < chunk_kb
                        || window_kb.is_nan()
                    {
                        return Err(Inconsistency::BulkShape(nic.clone()));
                    }
                    Some(nic)
                }
                WorkloadCfg::BulkTx { nic, load, .. } => {
                    if !positive(*load) {
                        return Err(Inconsistency::NoLoad(nic.clone()));
                    }
                    Some(nic)
                }
                WorkloadCfg::Rpc {
                    nic,
                    queue: Some(q),
                    ..
                } if self.nic.iter().any(|n| &n.name == nic && *q >= n.queues) => {
                    return Err(Inconsistency::NoSuchQueue {
                        nic: nic.clone(),
                        queue: *q,
                    });
                }
                WorkloadCfg::Poisson { nic, .. } | WorkloadCfg::Rpc { nic, .. } => Some(nic),
                WorkloadCfg::Fio {
                    nvme,
                    iodepth,
                    jobs,
                    rate_iops,
                    ..
                } => {
                    if !self.nvme.iter().any(|d| &d.name == nvme) {
                        return Err(Inconsistency::UnknownNvme(nvme.clone()));
                    }
                    if *iodepth == 0 || *jobs == 0 {
                        return Err(Inconsistency::FioDepth);
                    }
                    if !(*rate_iops >= 0.0 && rate_iops.is_finite()) {
                        return Err(Inconsistency::FioRate);
                    }
                    None
                }
            };
            if let Some(nic) = nic {
                if !self.nic.iter().any(|n| &n.name == nic) {
                    return Err(Inconsistency::UnknownNic(nic.clone()));
                }
            }
        }
        Ok(())
    }
}

/// Checks of the `[placement]` section and the machine fields placement depends on.
fn placement(sc: &Scenario) -> Result<(), Inconsistency> {
    if sc.placement.rotate_interval_ms == 0 {
        return Err(Inconsistency::NotPositive("placement.rotate_interval_ms"));
    }
    if sc.machine.vectors_per_cpu == 0 {
        return Err(Inconsistency::NotPositive("machine.vectors_per_cpu"));
    }
    sc.placement.irqpilot.validate()?;
    isolation_of(&sc.machine)?;
    Ok(())
}
