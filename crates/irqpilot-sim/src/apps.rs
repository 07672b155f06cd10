//! Application threads where they run: a request/response workload's threads may be pinned to
//! their own CPUs (`app_cpus`), so a request travels RSS queue -> IRQ CPU (hardirq, NAPI poll)
//! -> optionally RFS -> the thread's CPU.
//!
//! Costs (docs/simulator.md, "Application threads"):
//! - Same CPU as the softirq: nothing extra (warm caches, no wake-up), but the thread waits
//!   behind the interrupt work of that CPU (costmodel.md 2.7).
//! - Another CPU, no steering: the softirq runs the stack and wakes the thread. An idle thread
//!   starts `wakeup_ipi_us` later (the wake-up IPI, costmodel 1.1 / 3); the request costs the
//!   thread `remote_cache_us` more when the two CPUs have different last-level caches and
//!   `remote_node_app_us` more again across NUMA nodes (the packet and socket cache lines cross
//!   over; costmodel 2.7, ESnet: up to 2x throughput loss across sockets).
//! - Another CPU with RFS: the IRQ CPU keeps only the driver's part of each packet
//!   (`rx_driver_ns`), the stack (`rx_packet_ns - rx_driver_ns`) runs on the thread's CPU after
//!   the IPI that hands the packets over; nothing crosses caches afterwards (RFS "increases
//!   data cache hitrate by steering kernel processing of packets to the CPU where the
//!   application thread consuming the packet is running", scaling.rst; costmodel 1.7: RFS over
//!   RPS, 174 K -> 223 K tps, p99 2468 -> 1382 us at equal CPU).

use crate::config::{Steering, WorkloadCfg};
use crate::error::BuildError;
use crate::model::{AppWork, Queued};
use crate::sim::Sim;
use irqpilot_core::{CpuId, CpuSet};

/// The NIC, application CPUs and steering of a request/response workload, as the scenario
/// gives them.
pub(crate) fn app_settings(w: &WorkloadCfg) -> Option<(&str, Option<&str>, Steering)> {
    match w {
        WorkloadCfg::Rpc {
            nic,
            app_cpus,
            steering,
            ..
        }
        | WorkloadCfg::Poisson {
            nic,
            app_cpus,
            steering,
            ..
        } => Some((nic, app_cpus.as_deref(), *steering)),
        _ => None,
    }
}

/// The CPUs of an `app_cpus` list that the machine has.
pub(crate) fn app_cpu_set(key: &str, list: &str, online: &CpuSet) -> Result<CpuSet, BuildError> {
    let set = CpuSet::parse_list(list).map_err(|e| BuildError::BadCpuList {
        key: key.into(),
        list: list.into(),
        message: e.to_string(),
    })?;
    let on = set.intersection(online);
    if on.is_empty() {
        return Err(BuildError::NoCpuOfMachine {
            key: key.into(),
            list: list.into(),
        });
    }
    Ok(on)
}

/// An application's threads as the exported tree shows them: one process per workload with
/// `app_cpus`, one thread per CPU (ids `pid`, `pid + 1`, ...), each pinned there (as
/// `taskset -c` would leave it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AppProcess {
    /// The process id in the exported tree.
    pub pid: u32,
    /// Its `comm`: the workload's kind and index, `rpc-0`, `poisson-1` (15 bytes at most, as
    /// the kernel's `TASK_COMM_LEN` allows).
    pub comm: String,
    /// The CPU of each thread.
    pub cpus: Vec<u32>,
}

/// Where exported application processes start: above the PIDs a boot leaves to the kernel's
/// threads, below `pid_max`'s default (32768).
const FIRST_APP_PID: u32 = 4000;

impl Sim {
    /// Resolves every workload's application CPUs and steering; marks the NIC queues whose
    /// packets RFS steers.
    pub(crate) fn init_apps(&mut self) -> Result<(), BuildError> {
        for wi in 0..self.sc.workload.len() {
            let Some((nic, Some(list), steering)) = app_settings(&self.sc.workload[wi]) else {
                continue;
            };
            let cpus = app_cpu_set(&format!("workload.{wi}.app_cpus"), list, &self.topo.online)?;
            self.wls[wi].app_cpus = cpus.iter().map(|c| c.0).collect();
            self.wls[wi].rfs = steering == Steering::Rfs;
            if steering == Steering::Rfs {
                for nq in &mut self.nq {
                    if self.nics[nq.nic as usize].name == nic {
                        nq.rfs = true;
                    }
                }
            }
        }
        if self.wls.iter().any(|w| !w.app_cpus.is_empty()) {
            self.cpu_llc = (0..self.cpus.len() as u32)
                .map(|c| {
                    self.topo
                        .llc(CpuId(c))
                        .and_then(|l| l.shared_cpus.first())
                        .map_or(c, |f| f.0)
                })
                .collect();
        }
        Ok(())
    }

    /// The workloads' application threads (those with `app_cpus`), in workload order.
    pub fn app_processes(&self) -> Vec<AppProcess> {
        let mut next = FIRST_APP_PID;
        let mut out = Vec::new();
        for (wi, w) in self.wls.iter().enumerate() {
            if w.app_cpus.is_empty() {
                continue;
            }
            out.push(AppProcess {
                pid: next,
                comm: format!("{}-{wi}", self.sc.workload[wi].kind_and_unit().0),
                cpus: w.app_cpus.clone(),
            });
            // Thread ids follow the process id, as a fresh process's threads get them.
            next += w.app_cpus.len() as u32;
        }
        out
    }

    /// A request that `cpu`'s softirq received goes to the thread that serves its client.
    pub(crate) fn serve(&mut self, cpu: usize, work: AppWork) {
        let now = self.now;
        let AppWork::Serve { wl, client, .. } = work else {
            return self.push_app(cpu, work);
        };
        let st = &self.wls[wl as usize];
        if st.app_cpus.is_empty() {
            return self.push_app(cpu, work);
        }
        let target = st.app_cpus[client as usize % st.app_cpus.len()] as usize;
        let rfs = st.rfs;
        let (mut ready, mut extra) = (now, 0);
        if rfs {
            // The stack of this request's packet runs on the thread's CPU.
            extra += (self.k.rx_pkt - self.k.rx_driver) as u64;
        }
        if target != cpu {
            self.m.c.remote_wakeups += 1;
            // An idle thread waits for the wake-up IPI; a busy one finds the request queued.
            // Under RFS an IPI hands the packets over in any case.
            if rfs || self.cpus[target].app.is_none() {
                ready = now.after(self.k.wakeup_ipi);
            }
            if !rfs {
                if self.cpu_llc[target] != self.cpu_llc[cpu] {
                    extra += self.k.remote_cache;
                }
                if self.cpu_node[target] != self.cpu_node[cpu] {
                    extra += self.k.remote_node_app;
                }
            }
        }
        self.push_queued(
            target,
            Queued {
                ready,
                extra_ns: extra,
                work,
            },
        );
    }

    /// Packets among the first `n` of queue `q`'s RX ring that RFS steers away from the IRQ
    /// CPU (their stack runs on the application's CPU).
    pub(crate) fn rfs_steered(&self, q: usize, n: u64) -> u64 {
        let nq = &self.nq[q];
        if !nq.rfs {
            return 0;
        }
        nq.rx.count_tagged(n, |tag| {
            self.wls
                .get((tag >> 24) as usize)
                .is_some_and(|w| w.rfs && !w.app_cpus.is_empty())
        })
    }

    /// Application work on `cpu` that may start at once.
    pub(crate) fn push_app(&mut self, cpu: usize, work: AppWork) {
        let now = self.now;
        self.push_queued(
            cpu,
            Queued {
                ready: now,
                extra_ns: 0,
                work,
            },
        );
    }

    fn push_queued(&mut self, cpu: usize, q: Queued) {
        self.cpus[cpu].app_queue.push_back(q);
        if self.cpus[cpu].app.is_none() {
            self.start_app(cpu);
        }
    }

    /// Starts the next queued application work on `cpu`, after whatever runs above it and not
    /// before it is ready.
    pub(crate) fn start_app(&mut self, cpu: usize) {
        let now = self.now;
        let Some(q) = self.cpus[cpu].app_queue.pop_front() else {
            return;
        };
        let cost = self.app_cost(&q.work) + q.extra_ns;
        let c = &self.cpus[cpu];
        let busy_until = c.soft.map_or(c.hard_until, |s| s.end.max(c.hard_until));
        let start = now.max(busy_until).max(q.ready);
        self.start_app_job(cpu, start, cost, q.work);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn app_cpus_name_cpus_of_the_machine() {
        let online = CpuSet::parse_list("0-7").unwrap_or_default();
        assert_eq!(
            app_cpu_set("app_cpus", "2-3,9", &online).map(|s| s.to_string()),
            Ok("2-3".to_string())
        );
        let e = app_cpu_set("workload.0.app_cpus", "8-9", &online).unwrap_err();
        assert_eq!(
            e.to_string(),
            "workload.0.app_cpus \"8-9\" names no CPU of the machine"
        );
        let e = app_cpu_set("workload.0.app_cpus", "x", &online).unwrap_err();
        assert!(
            e.to_string().starts_with("workload.0.app_cpus \"x\": "),
            "{e}"
        );
    }
}
