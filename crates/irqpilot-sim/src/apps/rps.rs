//! Receive Packet Steering as the kernel does it (Documentation/networking/scaling.rst, "RPS:
//! Receive Packet Steering"; net/core/dev.c): the IRQ CPU runs the driver's part of a packet
//! (`rx_driver_ns`), `get_rps_cpu` picks a CPU of the queue's `rps_cpus` from the flow hash
//! (`map->cpus[reciprocal_scale(hash, map->len)]`), `enqueue_to_backlog` puts the packet in
//! that CPU's backlog and, when the backlog's NAPI is not already scheduled, sends it an IPI
//! (`wakeup_ipi_us` later it raises NET_RX there; to its own backlog a CPU sends none). The
//! backlog's poll (`process_backlog`, 64 packets per poll) runs the stack
//! (`rx_packet_ns - rx_driver_ns`, softirq time on that CPU) and wakes the thread where it
//! runs, paying the wake-up and cache costs of `apps.rs` from there.

use crate::config::Steering;
use crate::model::{AppWork, Ev, Job, JobKind};
use crate::sim::Sim;
use crate::workload::flow_hash;
use irqpilot_core::CpuId;

/// The entry of a CPU's poll list that stands for its RPS backlog (queue numbers are below).
pub(crate) const BACKLOG: u32 = u32::MAX;

/// The CPU of `cpus` that RPS picks for a flow: `reciprocal_scale(hash, len)`, the hash's high
/// bits (RSS took its low bits for the queue).
pub(crate) fn rps_pick(cpus: &[u32], flow: u32) -> Option<u32> {
    let i = (u64::from(flow_hash(flow)) * cpus.len() as u64) >> 32;
    cpus.get(i as usize).copied()
}

impl Sim {
    /// The CPUs RPS spreads a workload's flows over: `rps_cpus` (the machine's CPUs of it),
    /// else the application's CPUs, else the online CPUs of the NIC's NUMA node (all online
    /// CPUs when that node has none).
    pub(crate) fn rps_cpu_list(
        &self,
        key: &str,
        list: Option<&str>,
        nic: &str,
        app: &[u32],
    ) -> Result<Vec<u32>, crate::error::BuildError> {
        if let Some(list) = list {
            let set = super::app_cpu_set(key, list, &self.topo.online)?;
            return Ok(set.iter().map(|c| c.0).collect());
        }
        if !app.is_empty() {
            return Ok(app.to_vec());
        }
        let node = self
            .nics
            .iter()
            .find(|n| n.name == nic)
            .map_or(0, |n| n.node);
        let local: Vec<u32> = self
            .topo
            .online
            .iter()
            .filter(|&c| self.cpu_node.get(c.0 as usize) == Some(&node))
            .map(|c: CpuId| c.0)
            .collect();
        Ok(if local.is_empty() {
            self.topo.online.iter().map(|c| c.0).collect()
        } else {
            local
        })
    }

    /// Packets among the first `n` of queue `q`'s RX ring whose stack RFS or RPS moves away
    /// from the IRQ CPU (it keeps the driver's part of them).
    pub(crate) fn steered(&self, q: usize, n: u64) -> u64 {
        let nq = &self.nq[q];
        if !nq.steered {
            return 0;
        }
        nq.rx.count_tagged(n, |tag| {
            self.wls
                .get((tag >> 24) as usize)
                .is_some_and(|w| w.steers())
        })
    }

    /// `enqueue_to_backlog`: request `work`, received by `cpu`'s softirq, joins the backlog of
    /// the CPU its flow hashes to.
    pub(crate) fn rps_enqueue(&mut self, cpu: usize, work: AppWork) {
        let AppWork::Serve { wl, client, .. } = work else {
            return self.push_app(cpu, work);
        };
        let w = &self.wls[wl as usize];
        debug_assert_eq!(w.steering, Steering::Rps);
        let target = rps_pick(&w.rps_cpus, client).map_or(cpu, |c| c as usize);
        let c = &mut self.cpus[target];
        c.backlog.push_back(work);
        if c.backlog_scheduled {
            return; // polled, on the poll list, or its IPI already on the way
        }
        c.backlog_scheduled = true;
        if target == cpu {
            // Its own backlog: polled later in this softirq round, no IPI.
            c.poll_list.push_back(BACKLOG);
        } else {
            self.m.c.rps_ipis += 1;
            let at = self.now.after(self.k.wakeup_ipi);
            self.events.push(at, Ev::RpsIpi { cpu: target as u32 });
        }
    }

    /// The RPS IPI reaches `cpu`: NET_RX is raised there and its backlog joins the poll list.
    pub(crate) fn on_rps_ipi(&mut self, cpu: u32) {
        let cpu = cpu as usize;
        let c = &mut self.cpus[cpu];
        c.poll_list.push_back(BACKLOG);
        if c.soft.is_none() {
            self.start_poll(cpu);
        }
    }

    /// Starts `cpu`'s backlog poll (its softirq is idle): the stack of up to a NAPI weight of
    /// its requests.
    pub(crate) fn poll_backlog(&mut self, cpu: usize) {
        let now = self.now;
        let n = self.cpus[cpu]
            .backlog
            .len()
            .min(self.k.napi_weight as usize);
        if n == 0 {
            self.cpus[cpu].backlog_scheduled = false;
            return self.start_poll(cpu);
        }
        let stack = self.k.rx_pkt - self.k.rx_driver;
        let factor = self.k.remote_packet_factor;
        let mut per_pkt = 0.0;
        for w in self.cpus[cpu].backlog.iter().take(n) {
            let AppWork::Serve { q, .. } = *w else {
                continue;
            };
            let nic = &self.nics[self.nq[q as usize].nic as usize];
            // Its buffers are in the device node's memory, as for the poll of a remote queue.
            let remote = self.cpu_node[cpu] != nic.node;
            per_pkt += stack * [1.0, factor][usize::from(remote)];
        }
        let start = now.max(self.cpus[cpu].hard_until);
        let cost = self.smt_scaled(cpu, start, per_pkt as u64);
        let c = &mut self.cpus[cpu];
        let job = Job {
            end: start.after(cost),
            cost,
            what: JobKind::Backlog { n: n as u32 },
        };
        c.soft = Some(job);
        c.net_rx_softirqs += 1;
        // Softirq runs before the application: the application waits this long more.
        if let Some(a) = c.app.as_mut() {
            a.end = a.end.after(cost);
        }
        self.events.push(job.end, Ev::SoftDone { cpu: cpu as u32 });
    }

    /// `cpu`'s backlog poll of `n` requests finished: each goes to its thread; the backlog
    /// stays scheduled while it holds more.
    pub(crate) fn backlog_done(&mut self, cpu: usize, n: u32) {
        for _ in 0..n {
            let Some(w) = self.cpus[cpu].backlog.pop_front() else {
                break;
            };
            self.hand_to_thread(cpu, w, false);
        }
        let c = &mut self.cpus[cpu];
        if c.backlog.is_empty() {
            c.backlog_scheduled = false;
        } else {
            c.poll_list.push_back(BACKLOG);
        }
        if !self.cpus[cpu].poll_list.is_empty() {
            self.start_poll(cpu);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::rps_pick;

    #[test]
    fn rps_spreads_flows_over_its_cpus_by_the_hash_s_high_bits() {
        let cpus = [0, 1, 2, 3];
        let mut seen = [0u32; 4];
        for flow in 0..400 {
            let c = rps_pick(&cpus, flow).unwrap_or(99);
            seen[c as usize] += 1;
        }
        assert!(seen.iter().all(|&n| (60..=140).contains(&n)), "{seen:?}");
        assert_eq!(rps_pick(&[], 7), None);
        assert_eq!(rps_pick(&[5], 7), Some(5));
    }
}
