//! Checks across fields that the schema cannot express (ranges of single keys are in
//! `crate::ranges`).

use super::schema::{Scenario, WorkloadCfg};

/// `v > 0`, with NaN counting as not positive.
pub(crate) fn positive(v: f64) -> bool {
    v > 0.0
}

impl Scenario {
    /// Consistency checks serde cannot express.
    pub(super) fn validate(&self) -> Result<(), String> {
        let m = &self.machine;
        if m.cores_per_package == 0 || m.packages == 0 || m.threads_per_core == 0 {
            return Err("machine needs at least one CPU".into());
        }
        if self.duration_ms == 0 {
            return Err("duration_ms must be positive".into());
        }
        if self.warmup_ms >= self.duration_ms {
            return Err("warmup_ms must be shorter than duration_ms".into());
        }
        if let Some(m) = &self.moderator {
            m.validate().map_err(|e| e.to_string())?;
        }
        crate::placement::validate(self)?;
        for n in &self.nic {
            if n.queues == 0 || !positive(n.link_gbps) || n.mtu_bytes < 64 || n.ring_size == 0 {
                return Err(format!(
                    "nic {}: queues, link_gbps, mtu_bytes and ring_size must be positive",
                    n.name
                ));
            }
            if n.aim_mode > 2 {
                return Err(format!("nic {}: aim_mode must be 0, 1 or 2", n.name));
            }
            if n.vms == 0 || n.queues % n.vms != 0 {
                return Err(format!("nic {}: queues must split evenly over vms", n.name));
            }
        }
        for d in &self.nvme {
            if d.drives == 0 || d.queues_per_drive == 0 || !positive(d.max_iops) {
                return Err(format!(
                    "nvme {}: drives, queues_per_drive and max_iops must be positive",
                    d.name
                ));
            }
            if d.coalesce_threshold == 0 || d.coalesce_threshold > 256 {
                return Err(format!("nvme {}: coalesce_threshold must be 1-256", d.name));
            }
        }
        for w in &self.workload {
            if !(w.probe_per_sec() >= 0.0 && w.probe_per_sec().is_finite()) {
                return Err("probe_per_sec must be a rate >= 0".into());
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
                        return Err(format!(
                            "bulk workload on {nic}: load and chunk_kb must be > 0 and window_kb >= chunk_kb"
                        ));
                    }
                    Some(nic)
                }
                WorkloadCfg::BulkTx { nic, load, .. } => {
                    if !positive(*load) {
                        return Err(format!("workload on {nic}: load must be > 0"));
                    }
                    Some(nic)
                }
                WorkloadCfg::Rpc {
                    nic,
                    queue: Some(q),
                    ..
                } if self.nic.iter().any(|n| &n.name == nic && *q >= n.queues) => {
                    return Err(format!(
                        "rpc workload on {nic}: queue {q} is not a queue of it"
                    ));
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
                        return Err(format!("fio workload names unknown nvme group {nvme:?}"));
                    }
                    if *iodepth == 0 || *jobs == 0 {
                        return Err("fio iodepth and jobs must be positive".into());
                    }
                    if !(*rate_iops >= 0.0 && rate_iops.is_finite()) {
                        return Err("fio rate_iops must be >= 0 (0: unlimited)".into());
                    }
                    None
                }
            };
            if let Some(nic) = nic {
                if !self.nic.iter().any(|n| &n.name == nic) {
                    return Err(format!("workload names unknown nic {nic:?}"));
                }
            }
        }
        Ok(())
    }
}
