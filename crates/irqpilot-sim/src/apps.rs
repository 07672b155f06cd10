//! Application threads where they run: a request/response workload's threads have their own
//! CPUs (`app_cpus`), pinned one per CPU or scheduled over the set (`app_schedule`), and a
//! request travels RSS queue -> IRQ CPU (hardirq, NAPI poll) -> optionally RFS or RPS
//! (`rps.rs`) -> the thread's CPU.
//!
//! Costs (docs/simulator.md, "Application threads"):
//! - Same CPU as the stack: nothing extra (warm caches, no wake-up), but the thread waits
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
//!   application thread consuming the packet is running", scaling.rst; costmodel 1.8: RFS over
//!   RPS, 174 K -> 223 K tps, p99 2468 -> 1382 us at equal CPU).
//! - RPS (`rps.rs`): the IRQ CPU keeps the driver's part, the flow hash picks a CPU of
//!   `rps_cpus` whose backlog runs the stack (softirq time there, after an IPI when it is
//!   another CPU), and that CPU wakes the thread as the softirq does without steering.
//! - Scheduled threads: a sleeping thread is woken on the CPU the model's scheduler picks
//!   ([`Sim::wake_cpu`]); one that moves to another last-level cache or node than it last ran
//!   on pays `remote_cache_us` (and `remote_node_app_us`) once more for its own cold state.

use crate::config::{AppSchedule, Steering, WorkloadCfg};
use crate::error::BuildError;
use crate::model::{AppThread, AppWork, Queued};
use crate::sim::Sim;
use irqpilot_core::{CpuId, CpuSet};

mod rps;

pub(crate) use rps::BACKLOG;

/// What a request/response workload says about its threads and how packets reach them.
#[derive(Clone, Copy, Debug)]
pub(crate) struct AppSettings<'a> {
    /// The NIC its requests arrive on.
    pub nic: &'a str,
    /// `app_cpus`, as written.
    pub app_cpus: Option<&'a str>,
    /// `app_schedule`.
    pub schedule: AppSchedule,
    /// `steering`.
    pub steering: Steering,
    /// `rps_cpus`, as written.
    pub rps_cpus: Option<&'a str>,
}

/// The application settings of a request/response workload, as the scenario gives them.
pub(crate) fn app_settings(w: &WorkloadCfg) -> Option<AppSettings<'_>> {
    match w {
        WorkloadCfg::Rpc {
            nic,
            app_cpus,
            app_schedule,
            steering,
            rps_cpus,
            ..
        }
        | WorkloadCfg::Poisson {
            nic,
            app_cpus,
            app_schedule,
            steering,
            rps_cpus,
            ..
        } => Some(AppSettings {
            nic,
            app_cpus: app_cpus.as_deref(),
            schedule: *app_schedule,
            steering: *steering,
            rps_cpus: rps_cpus.as_deref(),
        }),
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
/// `app_cpus`, its threads with ids `pid`, `pid + 1`, ...: pinned, one per CPU of the set (as
/// `taskset -c` would leave it); scheduled, one per client connection (`rpc`) or per CPU
/// (`poisson`), each allowed the whole set.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AppProcess {
    /// The process id in the exported tree.
    pub pid: u32,
    /// Its `comm`: the workload's kind and index, `rpc-0`, `poisson-1` (15 bytes at most, as
    /// the kernel's `TASK_COMM_LEN` allows).
    pub comm: String,
    /// The CPU of each thread (where a scheduled one runs or last ran).
    pub cpus: Vec<u32>,
    /// The CPUs every thread may run on when they are scheduled (`Cpus_allowed_list`); `None`:
    /// each thread is pinned to its CPU in `cpus`.
    pub allowed: Option<CpuSet>,
}

/// Where exported application processes start: above the PIDs a boot leaves to the kernel's
/// threads, below `pid_max`'s default (32768).
const FIRST_APP_PID: u32 = 4000;

impl Sim {
    /// Resolves every workload's application CPUs, threads and steering; marks the NIC queues
    /// whose packets RFS or RPS steers.
    pub(crate) fn init_apps(&mut self) -> Result<(), BuildError> {
        for wi in 0..self.sc.workload.len() {
            let Some(s) = app_settings(&self.sc.workload[wi]) else {
                continue;
            };
            let nic = s.nic.to_string();
            let (schedule, steering) = (s.schedule, s.steering);
            let rps_list = s.rps_cpus.map(str::to_string);
            if let Some(list) = s.app_cpus.map(str::to_string) {
                let key = format!("workload.{wi}.app_cpus");
                let cpus = app_cpu_set(&key, &list, &self.topo.online)?;
                self.wls[wi].app_cpus = cpus.iter().map(|c| c.0).collect();
            }
            let app = self.wls[wi].app_cpus.clone();
            self.wls[wi].steering = steering;
            if steering == Steering::Rps {
                let key = format!("workload.{wi}.rps_cpus");
                self.wls[wi].rps_cpus = self.rps_cpu_list(&key, rps_list.as_deref(), &nic, &app)?;
            }
            if schedule == AppSchedule::Scheduled && !app.is_empty() {
                // A thread per connection (rpc), a pool of one per CPU (poisson), starting
                // spread over the set as pinned ones would be.
                let n = match self.sc.workload[wi] {
                    WorkloadCfg::Rpc { clients, .. } => clients as usize,
                    _ => app.len(),
                };
                self.wls[wi].threads = (0..n)
                    .map(|t| AppThread {
                        cpu: app[t % app.len()],
                        pending: 0,
                    })
                    .collect();
            }
            if self.wls[wi].steers() {
                for nq in &mut self.nq {
                    if self.nics[nq.nic as usize].name == nic {
                        nq.steered = true;
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
            let (cpus, allowed) = if w.threads.is_empty() {
                (w.app_cpus.clone(), None)
            } else {
                (
                    w.threads.iter().map(|t| t.cpu).collect(),
                    Some(w.app_cpus.iter().map(|&c| CpuId(c)).collect()),
                )
            };
            // Thread ids follow the process id, as a fresh process's threads get them.
            let threads = cpus.len() as u32;
            out.push(AppProcess {
                pid: next,
                comm: format!("{}-{wi}", self.sc.workload[wi].kind_and_unit().0),
                cpus,
                allowed,
            });
            next += threads;
        }
        out
    }

    /// A request that `cpu`'s softirq received goes to the thread that serves its client: by
    /// way of an RPS CPU's backlog, or at once (its stack run here, or under RFS on the
    /// thread's CPU).
    pub(crate) fn serve(&mut self, cpu: usize, work: AppWork) {
        let AppWork::Serve { wl, .. } = work else {
            return self.push_app(cpu, work);
        };
        match self.wls[wl as usize].steering {
            Steering::Rps => self.rps_enqueue(cpu, work),
            Steering::Rfs => self.hand_to_thread(cpu, work, true),
            Steering::None => self.hand_to_thread(cpu, work, false),
        }
    }

    /// Request `work`, whose stack ran on `cpu` (or, under RFS, is to run on its thread's CPU),
    /// goes to its thread: wake-up and cache costs when that runs elsewhere.
    pub(crate) fn hand_to_thread(&mut self, cpu: usize, work: AppWork, rfs: bool) {
        let now = self.now;
        let AppWork::Serve { wl, client, .. } = work else {
            return self.push_app(cpu, work);
        };
        let st = &self.wls[wl as usize];
        if st.app_cpus.is_empty() {
            return self.push_app(cpu, work);
        }
        let (target, mut extra) = if st.threads.is_empty() {
            (st.app_cpus[client as usize % st.app_cpus.len()] as usize, 0)
        } else {
            self.place_thread(wl as usize, client)
        };
        let mut ready = now;
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
                extra += self.cache_cost(cpu, target);
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

    /// What a request's data costs the thread on `to` when its stack ran on `from`: cache
    /// lines pulled across last-level caches, and across nodes.
    fn cache_cost(&self, from: usize, to: usize) -> u64 {
        let mut extra = 0;
        if self.cpu_llc[to] != self.cpu_llc[from] {
            extra += self.k.remote_cache;
        }
        if self.cpu_node[to] != self.cpu_node[from] {
            extra += self.k.remote_node_app;
        }
        extra
    }

    /// The CPU a scheduled workload's thread serves `client`'s request on, and what moving
    /// there costs it: a thread already awake (requests queued or running) takes it where it
    /// is; a sleeping one is woken where [`Sim::wake_cpu`] says.
    fn place_thread(&mut self, wl: usize, client: u32) -> (usize, u64) {
        let st = &self.wls[wl];
        let t = client as usize % st.threads.len();
        let th = st.threads[t];
        if th.pending > 0 {
            self.wls[wl].threads[t].pending += 1;
            return (th.cpu as usize, 0);
        }
        let prev = th.cpu as usize;
        let target = self.wake_cpu(&self.wls[wl].app_cpus, prev);
        let mut extra = 0;
        if target != prev {
            self.m.c.thread_migrations += 1;
            // Its own state (stack, heap, socket) is cold there.
            extra = self.cache_cost(prev, target);
        }
        self.wls[wl].threads[t] = AppThread {
            cpu: target as u32,
            pending: 1,
        };
        (target, extra)
    }

    /// A scheduled request is done: its thread sleeps when it has nothing more queued.
    pub(crate) fn thread_done(&mut self, wl: u16, client: u32) {
        let threads = &mut self.wls[wl as usize].threads;
        if threads.is_empty() {
            return;
        }
        let t = client as usize % threads.len();
        threads[t].pending = threads[t].pending.saturating_sub(1);
    }

    /// Where a sleeping thread that last ran on `prev` wakes, among `set` (its `app_cpus`).
    /// The model's rule, after the Linux scheduler's wake-up path (`select_task_rq_fair` ->
    /// `select_idle_sibling`, kernel/sched/fair.c): `prev` if it is idle; else the first idle
    /// CPU sharing `prev`'s last-level cache, scanning from `prev + 1` and wrapping as
    /// `select_idle_cpu` does; else any idle CPU of the set (ours: standing in for the idle
    /// balancer, which pulls waiting threads to CPUs that go idle); else the CPU with the
    /// least application work running and queued, `prev` on ties. A CPU is idle when it runs
    /// and holds no application work: hardirq and softirq time run on top of the idle task
    /// and do not make it busy (`idle_cpu()` looks at runnable tasks only).
    pub(crate) fn wake_cpu(&self, set: &[u32], prev: usize) -> usize {
        let idle = |c: usize| self.cpus[c].app.is_none() && self.cpus[c].app_queue.is_empty();
        if idle(prev) || set.is_empty() {
            return prev;
        }
        let at = set.iter().position(|&c| c as usize == prev).unwrap_or(0);
        let order = || set[at + 1..].iter().chain(&set[..=at]).map(|&c| c as usize);
        let llc = |c: usize| self.cpu_llc.get(c).copied();
        if let Some(c) = order().find(|&c| llc(c) == llc(prev) && idle(c)) {
            return c;
        }
        if let Some(c) = order().find(|&c| idle(c)) {
            return c;
        }
        let load =
            |c: usize| usize::from(self.cpus[c].app.is_some()) + self.cpus[c].app_queue.len();
        order()
            .min_by_key(|&c| (load(c), c != prev))
            .unwrap_or(prev)
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

impl crate::model::WlState {
    /// Whether the IRQ CPU keeps only the driver's part of this workload's packets (RFS with
    /// threads of their own, or RPS).
    pub(crate) fn steers(&self) -> bool {
        match self.steering {
            Steering::Rfs => !self.app_cpus.is_empty(),
            Steering::Rps => true,
            Steering::None => false,
        }
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

    #[test]
    fn a_sleeping_thread_wakes_where_it_ran_else_idle_in_its_cache_else_idle_else_least_busy() {
        // Two packages of two cores: CPUs 0-1 share a last-level cache, 2-3 another.
        let text = "name = \"t\"\n[machine]\npackages = 2\ncores_per_package = 2\n\
                    [[nic]]\nname = \"eth0\"\nlink_gbps = 10\nqueues = 1\n\
                    [[workload]]\nkind = \"rpc\"\nnic = \"eth0\"\nclients = 4\n\
                    app_cpus = \"0-3\"\napp_schedule = \"scheduled\"\n";
        let sc = crate::config::Scenario::from_toml(text, "t").unwrap();
        let mut sim = Sim::new(sc).unwrap();
        let set = [0, 1, 2, 3];
        let load = |sim: &mut Sim, loads: [usize; 4]| {
            for (c, n) in loads.into_iter().enumerate() {
                sim.cpus[c].app_queue.clear();
                for _ in 0..n {
                    sim.cpus[c].app_queue.push_back(Queued {
                        ready: crate::time::SimTime::ZERO,
                        extra_ns: 0,
                        work: AppWork::Resubmit { q: 0, n: 1, wl: 0 },
                    });
                }
            }
        };
        load(&mut sim, [0, 0, 0, 0]);
        assert_eq!(sim.wake_cpu(&set, 0), 0);
        load(&mut sim, [1, 0, 0, 0]);
        assert_eq!(sim.wake_cpu(&set, 0), 1, "an idle CPU of its cache");
        load(&mut sim, [1, 1, 0, 0]);
        assert_eq!(sim.wake_cpu(&set, 0), 2, "an idle CPU elsewhere");
        load(&mut sim, [0, 0, 1, 0]);
        assert_eq!(
            sim.wake_cpu(&set, 2),
            3,
            "its cache first, scanning from prev + 1"
        );
        load(&mut sim, [2, 1, 1, 3]);
        assert_eq!(sim.wake_cpu(&set, 0), 1, "none idle: the least busy");
        load(&mut sim, [1, 2, 1, 3]);
        assert_eq!(sim.wake_cpu(&set, 2), 2, "prev on ties");
        assert_eq!(
            sim.wake_cpu(&[1, 3], 1),
            1,
            "prev is the least busy of its set"
        );
    }
}
