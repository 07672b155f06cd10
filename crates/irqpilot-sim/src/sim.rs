//! The simulation: running the events of a machine built from a scenario (`build.rs` builds it).
//!
//! The interrupt path modelled for every vector:
//!
//! ```text
//! device completion lands in a ring ──(device moderation: ITR holdoff, rx-usecs/frames timer,
//!   NVMe aggregation)──> MSI write ──(platform: latency, DMA efficiency above the knee)──>
//! hardirq on the effective CPU (preempts softirq and application work, pollutes their caches)
//!   ├─ NIC: napi_schedule ──> softirq NAPI polls (64 packets each) ──> ring drained: driver
//!   │       moderation (DIM/AIM) runs, vector re-armed ──> application work (requests)
//!   └─ NVMe: reap completions in the handler, re-arm ──> application reaps and resubmits
//! ```

use crate::config::{Scenario, WorkloadCfg};
use crate::cq::{HwMod, NO_TAG};
use crate::engine::EventQueue;
use crate::metrics::{Metrics, SeriesPoint};
use crate::model::*;
use crate::platform::MsiPlatform;
use crate::time::{MS, SEC, SimTime, us_to_ns};
use irqpilot_core::moderation::{aim, dim};
use irqpilot_core::{CpuSet, Topology};

mod build;

pub(crate) use build::nic_moderation;

/// First Linux IRQ number given to simulated vectors (x86 puts device MSIs above the legacy 24).
pub(crate) const FIRST_IRQ: u32 = 24;

/// A simulated machine running a scenario.
#[derive(Debug)]
pub struct Sim {
    pub(crate) now: SimTime,
    pub(crate) events: EventQueue<Ev>,
    pub(crate) sc: Scenario,
    pub(crate) k: Ns,
    pub(crate) topo: Topology,
    /// NUMA node of each CPU (hot path; `Topology::node_of` walks maps).
    pub(crate) cpu_node: Vec<u32>,
    pub(crate) cpus: Vec<Cpu>,
    pub(crate) srcs: Vec<Source>,
    /// Interrupts per (vector, CPU): `src * ncpu + cpu`.
    pub(crate) irq_counts: Vec<u64>,
    pub(crate) nics: Vec<Nic>,
    pub(crate) nq: Vec<NicQueue>,
    pub(crate) drives: Vec<Drive>,
    pub(crate) vq: Vec<NvmeQueue>,
    pub(crate) wls: Vec<WlState>,
    pub(crate) plat: MsiPlatform,
    pub(crate) m: Metrics,
    pub(crate) end: SimTime,
    /// `/proc/irq/default_smp_affinity`.
    pub(crate) default_affinity: CpuSet,
    /// IRQ moves applied (affinity changes that changed the effective CPU).
    pub(crate) migrations: u64,
    /// `migrations` at the end of warm-up.
    pub(crate) migrations_at_warmup: u64,
    /// SMT siblings of each CPU (itself excluded); empty unless `costs.smt_slowdown` applies.
    pub(crate) smt_siblings: Vec<Vec<u32>>,
    /// The kernel's software moderation (GSIM).
    pub(crate) gsim: crate::gsim::Gsim,
    /// Dense last-level-cache key of each CPU (its first sharer); filled only when some
    /// workload pins its application threads.
    pub(crate) cpu_llc: Vec<u32>,
    /// Scratch buffers reused on hot paths.
    scratch_served: Vec<(u32, u64)>,
    scratch_lat: Vec<(u64, u32, u32)>,
}

impl Sim {
    /// Simulated time now.
    pub fn now(&self) -> SimTime {
        self.now
    }

    /// When the scenario ends.
    pub fn end(&self) -> SimTime {
        self.end
    }

    /// Events handled so far.
    pub fn events_handled(&self) -> u64 {
        self.events.handled()
    }

    /// Runs every event up to and including `until` (never past the scenario's end), then sets
    /// the clock to `until`.
    pub fn run_until(&mut self, until: SimTime) {
        let until = until.min(self.end);
        while let Some((t, ev)) = self.events.pop_until(until) {
            self.now = t;
            self.handle(ev);
        }
        self.now = self.now.max(until);
    }

    /// Runs to the end of the scenario.
    pub fn run(&mut self) {
        self.run_until(self.end);
    }

    fn handle(&mut self, ev: Ev) {
        match ev {
            Ev::Chunk { wl, flow } => self.on_chunk(wl, flow),
            Ev::TxSegment { wl, q } => self.on_tx_segment(wl, q),
            Ev::Request { wl, client } => self.on_request(wl, client),
            Ev::ClientSend { wl, client } => self.on_client_send(wl, client),
            Ev::RpsIpi { cpu } => self.on_rps_ipi(cpu),
            Ev::PoissonArrive { wl } => self.on_poisson(wl),
            Ev::Fire { src } => self.on_fire(src),
            Ev::HardDone { src } => self.on_hard_done(src),
            Ev::SoftDone { cpu } => self.on_soft_done(cpu),
            Ev::AppDone { cpu } => self.on_app_done(cpu),
            Ev::GsimTimer { cpu } => self.on_gsim_timer(cpu),
            Ev::Sample => self.on_sample(),
            Ev::WarmupEnd => self.warmup_end(),
            Ev::FioSubmit { q, job } => self.fio_submit_due(q, job as usize),
        }
    }

    // ----- interrupt sources -------------------------------------------------------------

    /// The driver re-enables the vector (NAPI complete, NVMe CQ doorbell).
    #[inline]
    pub(crate) fn rearm(&mut self, s: u32) {
        let (r0, r1) = self.ring_heads(s);
        let src = &mut self.srcs[s as usize];
        src.armed = true;
        src.arm_time = self.now;
        src.from = [r0, r1];
        self.schedule_fire(s);
    }

    fn ring_heads(&self, s: u32) -> (u64, u64) {
        match self.srcs[s as usize].dev {
            Dev::Nic(q) => (self.nq[q as usize].rx.head, self.nq[q as usize].tx.head),
            Dev::Nvme(q) => (self.vq[q as usize].cq.head, 0),
        }
    }

    /// (Re)computes when an armed vector fires, after anything that can change it.
    pub(crate) fn schedule_fire(&mut self, s: u32) {
        let src = &self.srcs[s as usize];
        if !src.armed || src.gsim_masked {
            return; // a masked vector latches; unmasking reschedules it
        }
        let (arm, last) = (src.arm_time, src.last_irq);
        let t = match src.dev {
            Dev::Nic(q) => {
                let nq = &self.nq[q as usize];
                let a = nq.rx.fire_time(src.from[0], arm, &src.moder, last);
                let b = nq.tx.fire_time(src.from[1], arm, &src.moder_tx, last);
                match (a, b) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                }
            }
            Dev::Nvme(q) => self.vq[q as usize]
                .cq
                .fire_time(src.from[0], arm, &src.moder, last),
        };
        let now = self.now;
        let src = &mut self.srcs[s as usize];
        src.timer_at = t;
        if let Some(t) = t {
            let t = t.max(now);
            // One live event per vector: only an earlier deadline needs a new one.
            if src.queued.is_none_or(|q| t < q) {
                src.queued = Some(t);
                self.events.push(t, Ev::Fire { src: s });
            }
        }
    }

    fn on_fire(&mut self, s: u32) {
        let now = self.now;
        let src = &mut self.srcs[s as usize];
        if src.queued != Some(now) {
            return; // superseded by an earlier event that already ran
        }
        src.queued = None;
        let Some(t) = src.timer_at else { return };
        if t > now {
            src.queued = Some(t);
            self.events.push(t, Ev::Fire { src: s });
            return;
        }
        if !src.armed || src.gsim_masked {
            return;
        }
        src.armed = false;
        src.timer_at = None;
        src.last_irq = now;
        src.irqs += 1;
        let cpu = src.cpu as usize;
        let ncpu = self.cpus.len();
        self.irq_counts[s as usize * ncpu + cpu] += 1;
        self.m.c.interrupts += 1;
        let delay = self.plat.msi(now);
        self.deliver(s, now.after(delay));
    }

    /// The MSI of `s` reaches its CPU at `arrive` (a microsecond or so after the write): the
    /// hardirq is booked then. Booking it now rather than at an event of its own saves a quarter
    /// of all events; the only approximation is that a softirq or application job starting on
    /// that CPU in the meantime begins after the hardirq instead of being preempted by it.
    fn deliver(&mut self, s: u32, arrive: SimTime) {
        let now = arrive;
        let k = &self.k;
        let src = &self.srcs[s as usize];
        let cpu = src.cpu as usize;
        let mut cost = k.hardirq;
        let mut reap = 0;
        match src.dev {
            Dev::Nvme(q) => {
                // nvme_irq reaps every completion already posted.
                reap = self.vq[q as usize].cq.landed(now);
                cost += reap * k.nvme_cqe;
            }
            Dev::Nic(q) => cost += self.nics[self.nq[q as usize].nic as usize].vm_exit_ns,
        }
        if src.migrated {
            cost += k.migration;
        }
        if src.cold_left > 0 {
            cost += k.cold_extra;
        }
        // Branch-free: which CPUs are remote follows no pattern the predictor can learn.
        cost += k.remote * u64::from(self.cpu_node[cpu] != src.node);
        let start = now.max(self.cpus[cpu].hard_until);
        let cost = self.smt_scaled(cpu, start, cost);
        let c = &mut self.cpus[cpu];
        let gap = now.since(c.last_irq) as f64;
        let pollution = (self.k.indirect * (gap / self.k.indirect_gap).min(1.0)) as u64;
        c.last_irq = now;
        c.interrupts += 1;
        c.hard_until = start.after(cost);
        let end = c.hard_until;
        let src = &mut self.srcs[s as usize];
        src.hard_cost = cost;
        src.reap = reap;
        src.migrated = false;
        src.cold_left = src.cold_left.saturating_sub(1);
        src.hard_cpu = cpu as u32;
        self.steal(cpu, start, cost, pollution);
        self.events.push(end, Ev::HardDone { src: s });
    }

    /// Higher-priority work of `ns` (plus `pollution` charged to the interrupted work) delays
    /// whatever runs below it. Ends only move later, so no event is pushed here (see [`Job`]).
    fn steal(&mut self, cpu: usize, at: SimTime, ns: u64, pollution: u64) {
        let c = &mut self.cpus[cpu];
        // Only work still running when the hardirq starts is delayed by it.
        let soft_running = c.soft.is_some_and(|j| j.end > at);
        if let Some(j) = c.soft.as_mut().filter(|j| j.end > at) {
            j.end = j.end.after(ns + pollution);
            j.cost += pollution;
        }
        if let Some(j) = c.app.as_mut().filter(|j| j.end > at) {
            j.end = j.end.after(ns + pollution);
            if !soft_running {
                j.cost += pollution;
            }
        }
    }

    fn on_hard_done(&mut self, s: u32) {
        self.after_handler(s);
        let src = &mut self.srcs[s as usize];
        let cpu = src.hard_cpu;
        self.cpus[cpu as usize].hard_ns += src.hard_cost;
        match src.dev {
            Dev::Nic(q) => {
                if let Driver::Aim { aim, counts } = &mut src.driver {
                    // FreeBSD em/igb run AIM in the queue's interrupt handler.
                    if aim.on_interrupt(*counts) {
                        // One throttle register per vector: it holds off RX and TX alike.
                        src.moder = HwMod::Holdoff {
                            interval_ns: aim.interval_ns(),
                        };
                        src.moder_tx = src.moder;
                    }
                    *counts = aim::Counts::default();
                }
                let nq = &mut self.nq[q as usize];
                let c = &mut self.cpus[cpu as usize];
                if !nq.napi_scheduled && c.soft.is_none() && c.poll_list.is_empty() {
                    // Onto an empty poll list and straight off it: poll the queue now.
                    nq.napi_scheduled = true;
                    self.poll_queue(cpu as usize, q);
                } else {
                    if !nq.napi_scheduled {
                        nq.napi_scheduled = true;
                        c.poll_list.push_back(q);
                    }
                    if c.soft.is_none() {
                        self.start_poll(cpu as usize);
                    }
                }
            }
            Dev::Nvme(q) => {
                let n = src.reap;
                src.reap = 0;
                let now = self.now;
                let mut lat = std::mem::take(&mut self.scratch_lat);
                self.vq[q as usize].cq.consume(n, |b, taken| {
                    lat.push((now.since(SimTime(b.aux)), taken, b.tag));
                });
                let di = self.vq[q as usize].drive as usize;
                for &(ns, taken, wl) in &lat {
                    let wl = u16::try_from(wl).ok();
                    self.m.record_latency(ns, taken as u64, wl);
                    self.drives[di].io_ns += ns * taken as u64;
                }
                let d = &mut self.drives[di];
                d.ios += n;
                d.in_flight = d.in_flight.saturating_sub(n);
                self.vq[q as usize].completed += n;
                self.m.c.ios += n;
                // Each workload's jobs reap and resubmit their own reads.
                for j in 0..self.vq[q as usize].jobs.len() {
                    let wl = self.vq[q as usize].jobs[j].wl;
                    let mine: u32 = lat.iter().filter(|l| l.2 == wl as u32).map(|l| l.1).sum();
                    if mine > 0 {
                        self.vq[q as usize].jobs[j].completed += mine as u64;
                        self.push_app(cpu as usize, AppWork::Resubmit { q, n: mine, wl });
                    }
                }
                lat.clear();
                self.scratch_lat = lat;
                self.rearm(s);
            }
        }
    }

    /// GSIM's hook after the handler of an enabled vector (see `gsim.rs`).
    fn after_handler(&mut self, s: u32) {
        let src = &self.srcs[s as usize];
        if !src.gsim_on || !self.gsim.cfg.enabled || self.gsim.cfg.delay_us == 0 {
            return;
        }
        let cpu = src.hard_cpu as usize;
        let now = self.now;
        if self.gsim.count(cpu) {
            let hard = self.cpus[cpu].hard_ns;
            self.gsim.maybe_new_epoch(cpu, now, hard);
        }
        let (mask, start) = self.gsim.after_handler(cpu, now);
        if let Some(at) = start {
            self.events.push(at, Ev::GsimTimer { cpu: cpu as u32 });
        }
        if mask && !self.srcs[s as usize].gsim_masked {
            self.srcs[s as usize].gsim_masked = true;
            self.gsim.cpus[cpu].masked.push(s);
            // MSI-X mask and unmask with PCIe read-back, paid in hardirq context.
            let cost = self.k.mask_unmask;
            self.charge_hardirq(cpu, cost);
        }
    }

    fn on_gsim_timer(&mut self, cpu: u32) {
        let c = &mut self.gsim.cpus[cpu as usize];
        if c.timer_at != Some(self.now) {
            return;
        }
        c.timer_at = None;
        c.sleep_ns = 0;
        let masked = std::mem::take(&mut c.masked);
        for s in masked {
            self.srcs[s as usize].gsim_masked = false;
            // Latched interrupts are delivered now (replay); others wait for their device.
            self.schedule_fire(s);
        }
    }

    /// Hardirq-context work of `ns` on `cpu` outside a handler (mask/unmask, timer callbacks).
    fn charge_hardirq(&mut self, cpu: usize, ns: u64) {
        let now = self.now;
        let c = &mut self.cpus[cpu];
        let start = now.max(c.hard_until);
        c.hard_until = start.after(ns);
        c.hard_ns += ns;
        self.steal(cpu, start, ns, 0);
    }

    // ----- softirq (NAPI) ----------------------------------------------------------------

    pub(crate) fn start_poll(&mut self, cpu: usize) {
        match self.cpus[cpu].poll_list.pop_front() {
            Some(crate::apps::BACKLOG) => self.poll_backlog(cpu),
            Some(q) => self.poll_queue(cpu, q),
            None => {}
        }
    }

    /// Starts the NAPI poll of queue `q` on `cpu` (its softirq is idle).
    fn poll_queue(&mut self, cpu: usize, q: u32) {
        let now = self.now;
        let nq = &self.nq[q as usize];
        let rx = nq.rx.landed_up_to(now, self.k.napi_weight);
        let tx = nq.tx.landed(now);
        // Under RFS and RPS the stack of steered packets runs on another CPU.
        let steered = self.steered(q as usize, rx);
        let mut per_pkt = (rx - steered) as f64 * self.k.rx_pkt
            + steered as f64 * self.k.rx_driver
            + tx as f64 * self.k.tx_done;
        // Branch-free (x * 1.0 is x exactly).
        let remote = self.cpu_node[cpu] != self.nics[nq.nic as usize].node;
        per_pkt *= [1.0, self.k.remote_packet_factor][usize::from(remote)];
        let start = now.max(self.cpus[cpu].hard_until);
        let cost = self.smt_scaled(cpu, start, self.k.napi_poll + per_pkt as u64);
        let c = &mut self.cpus[cpu];
        let job = Job {
            end: start.after(cost),
            cost,
            what: JobKind::Poll { q, rx, tx },
        };
        c.soft = Some(job);
        c.net_rx_softirqs += 1;
        // Softirq runs before the application: the application waits this long more.
        if let Some(a) = c.app.as_mut() {
            a.end = a.end.after(cost);
        }
        self.events.push(job.end, Ev::SoftDone { cpu: cpu as u32 });
    }

    fn on_soft_done(&mut self, cpu: u32) {
        let cpu_ix = cpu;
        let cpu = cpu as usize;
        let now = self.now;
        let c = &mut self.cpus[cpu];
        let Some(job) = c.soft else { return };
        if job.end > now {
            self.events.push(job.end, Ev::SoftDone { cpu: cpu_ix });
            return;
        }
        c.soft = None;
        c.soft_ns += job.cost;
        let (q, rx, tx) = match job.what {
            JobKind::Poll { q, rx, tx } => (q, rx, tx),
            JobKind::Backlog { n } => return self.backlog_done(cpu, n),
            JobKind::App(_) => return,
        };
        let counting = self.m.counting();
        let nqi = q as usize;
        // Reused between polls: no allocation on the hot path.
        let mut served = std::mem::take(&mut self.scratch_served);
        let (mut rx_bytes, mut tx_bytes) = (0u64, 0u64);
        {
            let nq = &mut self.nq[nqi];
            nq.rx.consume(rx, |b, taken| {
                rx_bytes += b.bytes as u64 * taken as u64;
                if b.tag != NO_TAG {
                    // Bulk batches carry their flow; the aux word counts bytes consumed.
                    let aux = if b.aux == u64::MAX {
                        b.bytes as u64 * taken as u64
                    } else {
                        b.aux
                    };
                    served.push((b.tag, aux));
                }
            });
            nq.tx
                .consume(tx, |b, taken| tx_bytes += b.bytes as u64 * taken as u64);
            nq.rx_pkts += rx;
            nq.rx_bytes += rx_bytes;
            nq.tx_pkts += tx;
            nq.tx_bytes += tx_bytes;
        }
        self.m.c.rx_bytes += rx_bytes;
        self.m.c.rx_pkts += rx;
        self.m.c.tx_bytes += tx_bytes;
        // Copying received data to the application is application time on this CPU.
        let copy = (rx_bytes as f64 * self.k.copy_per_byte) as u64;
        self.cpus[cpu].app_ns += copy;
        let _ = counting;
        let s = self.nq[nqi].src;
        if let Driver::Aim { counts, .. } = &mut self.srcs[s as usize].driver {
            counts.rx_bytes += rx_bytes;
            counts.rx_packets += rx;
            counts.tx_bytes += tx_bytes;
            counts.tx_packets += tx;
        }
        let mut acks = 0u32;
        for &(tag, sent) in &served {
            let wl = (tag >> 24) as u16;
            let id = tag & 0x00ff_ffff;
            match self.sc.workload.get(wl as usize) {
                Some(WorkloadCfg::Bulk { .. }) if id & PROBE_BIT == 0 => {
                    acks += 1;
                    self.flow_consumed(wl, id, sent)
                }
                _ => self.serve(
                    cpu,
                    AppWork::Serve {
                        wl,
                        q,
                        client: id,
                        sent,
                    },
                ),
            }
        }
        served.clear();
        self.scratch_served = served;
        if acks > 0 {
            // The stack acknowledges what it consumed; the ACKs' transmit completions come back
            // on this queue's vector about a microsecond later.
            let at = self.now.after(1000);
            self.nq[nqi]
                .tx
                .push(at, 0, acks, 66, crate::cq::EntryKind::TxDone, NO_TAG, 0);
        }
        if rx >= self.k.napi_weight {
            // Budget used up: stay scheduled, go to the back of the poll list.
            self.cpus[cpu].poll_list.push_back(q);
        } else {
            self.nq[nqi].napi_scheduled = false;
            self.dim_sample(s);
            self.rearm(s);
        }
        if !self.cpus[cpu].poll_list.is_empty() {
            self.start_poll(cpu);
        }
    }

    fn dim_sample(&mut self, s: u32) {
        let now = self.now;
        let src = &mut self.srcs[s as usize];
        let Dev::Nic(q) = src.dev else { return };
        let Driver::Dim { rx, tx, cqe } = &mut src.driver else {
            return;
        };
        let nq = &self.nq[q as usize];
        let events = src.irqs as u16;
        let sample = |pkts: u64, bytes: u64| dim::Sample {
            time_ns: now.ns(),
            pkt_ctr: pkts as u32,
            byte_ctr: bytes as u32,
            event_ctr: events,
        };
        if let Some(ix) = rx.on_sample(sample(nq.rx_pkts, nq.rx_bytes)) {
            let table = if *cqe {
                &dim::RX_CQE_PROFILES
            } else {
                &dim::RX_EQE_PROFILES
            };
            let p = table[ix as usize];
            src.moder = HwMod::Timer {
                usecs_ns: p.usec as u64 * 1000,
                frames: p.pkts,
                cqe: *cqe,
            };
            rx.profile_applied();
        }
        if let Some(tx) = tx {
            if let Some(ix) = tx.on_sample(sample(nq.tx_pkts, nq.tx_bytes)) {
                // mlx5 moderates TX completions in EQE mode by default.
                let p = dim::TX_EQE_PROFILES[ix as usize];
                src.moder_tx = HwMod::Timer {
                    usecs_ns: p.usec as u64 * 1000,
                    frames: p.pkts,
                    cqe: false,
                };
                tx.profile_applied();
            }
        }
    }

    // ----- application --------------------------------------------------------------------

    pub(crate) fn app_cost(&mut self, w: &AppWork) -> u64 {
        match *w {
            AppWork::Serve { wl, .. } => match &self.sc.workload[wl as usize] {
                WorkloadCfg::Poisson {
                    service_us,
                    exponential_service: true,
                    ..
                } => {
                    let mean = *service_us * 1000.0;
                    self.wls[wl as usize].rng.exp_ns(mean)
                }
                WorkloadCfg::Rpc { service_us, .. } | WorkloadCfg::Poisson { service_us, .. } => {
                    us_to_ns(*service_us)
                }
                _ => 0,
            },
            AppWork::Resubmit { n, .. } => n as u64 * self.k.nvme_io_app,
        }
    }

    /// Runs application work of `cost` on `cpu` from `start`.
    pub(crate) fn start_app_job(&mut self, cpu: usize, start: SimTime, cost: u64, w: AppWork) {
        let cost = self.smt_scaled(cpu, start, cost);
        let c = &mut self.cpus[cpu];
        let job = Job {
            end: start.after(cost),
            cost,
            what: JobKind::App(w),
        };
        c.app = Some(job);
        self.events.push(job.end, Ev::AppDone { cpu: cpu as u32 });
    }

    fn on_app_done(&mut self, cpu: u32) {
        let cpu_ix = cpu;
        let cpu = cpu as usize;
        let now = self.now;
        let c = &mut self.cpus[cpu];
        let Some(job) = c.app else { return };
        if job.end > now {
            self.events.push(job.end, Ev::AppDone { cpu: cpu_ix });
            return;
        }
        c.app = None;
        c.app_ns += job.cost;
        if let JobKind::App(w) = job.what {
            match w {
                AppWork::Serve {
                    wl,
                    q,
                    client,
                    sent,
                } => {
                    self.thread_done(wl, client);
                    self.respond(wl, q, client, sent)
                }
                AppWork::Resubmit { q, n, wl } => self.nvme_resubmit(q, n, wl),
            }
        }
        if self.cpus[cpu].app.is_none() {
            self.start_app(cpu);
        }
    }

    // ----- warm-up and sampling -----------------------------------------------------------

    fn warmup_end(&mut self) {
        self.m.warm_at = Some(self.now);
        self.migrations_at_warmup = self.migrations;
        self.m.base = self.m.c.clone();
        self.m.base_src_irqs = self.srcs.iter().map(|s| s.irqs).collect();
        self.m.base_queue_work = self.queue_work();
        self.m.base_cpu = self
            .cpus
            .iter()
            .map(|c| (c.hard_ns, c.soft_ns, c.app_ns, c.interrupts))
            .collect();
        self.m.last_sample = (self.now, self.m.c.clone());
    }

    /// Work done so far by each unit of equal demand, per workload: every bulk flow (bytes
    /// delivered), every bulk-transmit queue (bytes sent), every RPC client (transactions),
    /// every NVMe queue of a fio workload (I/Os completed; its jobs give each queue the same
    /// depth).
    pub(crate) fn queue_work(&self) -> Vec<Vec<u64>> {
        self.wls
            .iter()
            .enumerate()
            .map(|(wi, w)| match &self.sc.workload[wi] {
                WorkloadCfg::Bulk { .. } => w.flows.iter().map(|f| f.delivered).collect(),
                WorkloadCfg::BulkTx { nic, .. } => self
                    .nq
                    .iter()
                    .filter(|q| self.nics[q.nic as usize].name == *nic)
                    .map(|q| q.tx_bytes)
                    .collect(),
                WorkloadCfg::Rpc { .. } => w.done.clone(),
                // Open-loop requests are not units of demand of their own.
                WorkloadCfg::Poisson { .. } => Vec::new(),
                WorkloadCfg::Fio { .. } => self
                    .vq
                    .iter()
                    .filter_map(|q| q.jobs.iter().find(|j| j.wl as usize == wi))
                    .map(|j| j.completed)
                    .collect(),
            })
            .collect()
    }

    fn on_sample(&mut self) {
        let now = self.now;
        let (t0, prev) = self.m.last_sample.clone();
        let secs = now.since(t0) as f64 / SEC as f64;
        if secs > 0.0 {
            let d = self.m.c.minus(&prev);
            let delay = if self.srcs.is_empty() {
                0.0
            } else {
                self.srcs
                    .iter()
                    .map(|s| s.moder.delay_ns() as f64)
                    .sum::<f64>()
                    / self.srcs.len() as f64
                    / 1000.0
            };
            let eff = self.plat.efficiency(now);
            self.m.push_point(SeriesPoint {
                t_ms: now.ns() as f64 / MS as f64,
                interrupts_per_sec: d.interrupts as f64 / secs,
                throughput_gbps: d.rx_bytes as f64 * 8.0 / secs / 1e9,
                iops: d.ios as f64 / secs,
                transactions_per_sec: d.transactions as f64 / secs,
                dma_efficiency: eff,
                moderation_delay_us: delay,
            });
        }
        self.m.last_sample = (now, self.m.c.clone());
        let next = now.after(self.m.series_step_ms * MS);
        if next <= self.end {
            self.events.push(next, Ev::Sample);
        }
    }
}
