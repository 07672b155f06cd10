//! `SimPlatform`: the simulated machine behind the same [`Platform`] trait as the Linux backend,
//! so the production control loop runs against the twin unchanged. Snapshots are built in the
//! kernel's own formats (`/proc/interrupts` rows with kernel layout, `/proc/stat` ticks,
//! `/proc/softirqs`); plans act on the simulated vectors and devices; `sleep` runs the simulation.

use crate::cq::HwMod;
use crate::model::{Dev, Driver};
use crate::sim::Sim;
use crate::time::SimTime;
use irqpilot_core::moderation::knobs::{Knob, SoftModeration, SoftModerationForm};
use irqpilot_core::{
    Action, ApplyError, ApplyReport, CpuId, CpuSet, CpuTicks, DiskCounters, InterruptTable, Irq,
    IrqNum, Machine, MonoNs, NetDevCounters, NodeId, Outcome, PciAddr, PciDevice, Plan, Platform,
    PlatformError, ProcStat, RowLabel, Snapshot, SoftirqTable, Trigger,
};
use irqpilot_linux::format::irq_desc::kernel_tail;

/// Kernel `USER_HZ`: `/proc/stat` counts in 10 ms ticks.
const TICK_NS: u64 = 10_000_000;

/// The simulated machine as a [`Platform`].
#[derive(Debug)]
pub struct SimPlatform {
    sim: Sim,
}

impl SimPlatform {
    /// Wraps a simulation (usually fresh from [`Sim::new`]).
    pub fn new(sim: Sim) -> SimPlatform {
        SimPlatform { sim }
    }

    /// The simulation, e.g. for its report.
    pub fn sim(&self) -> &Sim {
        &self.sim
    }

    /// Consumes the platform, returning the simulation.
    pub fn into_sim(self) -> Sim {
        self.sim
    }

    /// Runs the simulation up to `ns` since its start.
    pub fn sleep_until(&mut self, ns: u64) {
        self.sim.run_until(SimTime(ns));
    }
}

/// PCI address of NIC `i` / drive `d` in the simulated machine.
pub(crate) fn nic_addr(i: usize) -> PciAddr {
    PciAddr(format!("0000:{:02x}:00.0", 0x18 + i))
}
pub(crate) fn drive_addr(d: usize) -> PciAddr {
    PciAddr(format!("0000:{:02x}:00.0", 0x40 + d))
}

impl Sim {
    fn src_addr(&self, s: usize) -> PciAddr {
        match self.srcs[s].dev {
            Dev::Nic(q) => nic_addr(self.nq[q as usize].nic as usize),
            Dev::Nvme(q) => drive_addr(self.vq[q as usize].drive as usize),
        }
    }

    fn src_hwirq(&self, s: usize) -> u64 {
        match self.srcs[s].dev {
            Dev::Nic(q) => self.nq[q as usize].index as u64,
            // MSI-X entry 0 is the NVMe admin queue.
            Dev::Nvme(q) => self.vq[q as usize].index as u64 + 1,
        }
    }

    /// The machine's inventory, as `LinuxPlatform::machine` would read it.
    pub fn machine(&self) -> Machine {
        let mut m = Machine {
            topology: self.topo.clone(),
            default_affinity: Some(self.default_affinity.clone()),
            kernel_release: Some(format!("irqpilot-sim ({})", self.sc.name)),
            cmdline: Some(self.sc.machine.cmdline.trim().to_string()),
            // Checked when the scenario was loaded.
            isolation: crate::placement::isolation_of(&self.sc.machine).unwrap_or_default(),
            ..Machine::default()
        };
        for (i, n) in self.nics.iter().enumerate() {
            let mut d = PciDevice::new(nic_addr(i));
            d.class = Some(0x020000);
            d.driver = Some(if n.queues > 1 {
                "mlx5_core".into()
            } else {
                "e1000e".into()
            });
            d.numa_node = Some(NodeId(n.node));
            d.local_cpus = self.topo.nodes.get(&NodeId(n.node)).cloned();
            d.net = vec![n.name.clone()];
            m.devices.insert(d.addr.clone(), d);
        }
        for (i, dr) in self.drives.iter().enumerate() {
            let mut d = PciDevice::new(drive_addr(i));
            d.class = Some(0x010802);
            d.driver = Some("nvme".into());
            d.numa_node = Some(NodeId(dr.node));
            d.local_cpus = self.topo.nodes.get(&NodeId(dr.node)).cloned();
            d.nvme = vec![dr.name.clone()];
            m.devices.insert(d.addr.clone(), d);
        }
        for (i, s) in self.srcs.iter().enumerate() {
            if !self.src_enabled(i) {
                continue;
            }
            let addr = self.src_addr(i);
            let mut irq = Irq::new(IrqNum(s.irq));
            irq.chip = Some(format!("IR-PCI-MSIX-{addr}"));
            irq.hwirq = Some(self.src_hwirq(i));
            irq.trigger = Some(Trigger::Edge);
            irq.handler = Some("edge".into());
            irq.actions = vec![s.name.clone()];
            irq.node = Some(NodeId(s.node));
            irq.requested = Some(s.requested.clone());
            irq.effective = Some(CpuSet::single(CpuId(s.cpu)));
            irq.managed = Some(matches!(s.dev, Dev::Nvme(_)));
            irq.queue = irqpilot_core::queue::recognise(&s.name);
            if let Some(dev) = m.devices.get_mut(&addr) {
                dev.msi_irqs.push(irq.irq);
                irq.driver = dev.driver.clone();
            }
            irq.device = Some(addr);
            if let Some(knob) = self.knob(i) {
                m.moderation.knobs.insert(irq.irq, knob);
            }
            m.irqs.insert(irq.irq, irq);
        }
        if self.gsim.cfg.enabled {
            let c = &self.gsim.cfg;
            let params = [
                ("delay_us", c.delay_us),
                ("target_intr_rate", c.target_intr_rate),
                ("hardirq_percent", c.hardirq_percent),
                ("update_ms", c.update_ms),
                ("scale_cpus", c.scale_cpus),
            ];
            m.moderation.soft = Some(SoftModeration {
                form: SoftModerationForm::Directory,
                params: params.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
            });
        }
        m
    }

    /// The moderation knob of vector `s` and its current setting.
    fn knob(&self, s: usize) -> Option<Knob> {
        let src = &self.srcs[s];
        match src.dev {
            Dev::Nic(q) => {
                let nq = &self.nq[q as usize];
                let cfg = &self.sc.nic[nq.nic as usize];
                let (rx_usecs, rx_max_frames) = knob_view(src.moder, cfg.rx_usecs, cfg.rx_frames);
                let (tx_usecs, tx_max_frames) =
                    knob_view(src.moder_tx, cfg.tx_usecs, cfg.tx_frames);
                Some(Knob::NicQueue {
                    device: cfg.name.clone(),
                    queue: nq.index,
                    per_queue: true,
                    rx_usecs,
                    rx_max_frames,
                    adaptive_rx: matches!(src.driver, Driver::Dim { .. } | Driver::Aim { .. }),
                    tx_usecs,
                    tx_max_frames,
                    adaptive_tx: matches!(
                        src.driver,
                        Driver::Dim { tx: Some(_), .. } | Driver::Aim { .. }
                    ),
                    // The simulated device takes any whole microsecond as a time.
                    min_usecs: 1,
                })
            }
            Dev::Nvme(q) => {
                let vq = &self.vq[q as usize];
                let (time_100us, threshold) = match src.moder {
                    HwMod::NvmeAgg { time_ns, threshold } => {
                        ((time_ns / 100_000) as u8, threshold as u16)
                    }
                    _ => (0, 1),
                };
                Some(Knob::NvmeController {
                    controller: self.drives[vq.drive as usize].name.clone(),
                    vector: (vq.index + 1) as u16,
                    time_100us,
                    threshold,
                })
            }
        }
    }

    /// The counters now, in the kernel's formats.
    pub fn snapshot_into(&self, snap: &mut Snapshot) {
        let ncpu = self.cpus.len();
        let cpus: Vec<CpuId> = (0..ncpu as u32).map(CpuId).collect();
        let max_irq = self.srcs.last().map_or(0, |s| s.irq + 1);
        let prec = InterruptTable::kernel_prec(max_irq);
        let mut t = InterruptTable::with_kernel_header(cpus.clone(), prec);
        let mut counts = vec![0u64; ncpu];
        for (i, s) in self.srcs.iter().enumerate() {
            if !self.src_enabled(i) {
                continue;
            }
            counts.copy_from_slice(&self.irq_counts[i * ncpu..(i + 1) * ncpu]);
            let chip = format!("IR-PCI-MSIX-{}", self.src_addr(i));
            let tail = kernel_tail(
                &chip,
                Some(self.src_hwirq(i)),
                prec,
                Some("edge"),
                &[&s.name],
            );
            t.push_kernel_row(RowLabel::Irq(IrqNum(s.irq)), prec, &counts, &tail);
        }
        // The local timer ticks at HZ=1000 on every CPU.
        let loc = vec![self.now.ns() / 1_000_000; ncpu];
        t.push_kernel_row(
            RowLabel::Named("LOC".into()),
            prec,
            &loc,
            "   Local timer interrupts",
        );
        t.push_kernel_row(RowLabel::Named("ERR".into()), prec, &[0], "");
        t.push_kernel_row(RowLabel::Named("MIS".into()), prec, &[0], "");
        snap.taken_at = MonoNs(self.now.ns());
        snap.interrupts = t;

        let mut stat = ProcStat::default();
        let mut total = CpuTicks {
            fields: 10,
            ..CpuTicks::default()
        };
        for (i, c) in self.cpus.iter().enumerate() {
            let busy = c.hard_ns + c.soft_ns + c.app_ns;
            let ticks = CpuTicks {
                user: c.app_ns / TICK_NS,
                idle: self.now.ns().saturating_sub(busy) / TICK_NS,
                iowait: Some(0),
                irq: Some(c.hard_ns / TICK_NS),
                softirq: Some(c.soft_ns / TICK_NS),
                steal: Some(0),
                guest: Some(0),
                guest_nice: Some(0),
                fields: 10,
                ..CpuTicks::default()
            };
            total.user += ticks.user;
            total.idle += ticks.idle;
            total.irq = Some(total.irq.unwrap_or(0) + ticks.irq.unwrap_or(0));
            total.softirq = Some(total.softirq.unwrap_or(0) + ticks.softirq.unwrap_or(0));
            stat.per_cpu.push((CpuId(i as u32), ticks));
        }
        for f in [
            &mut total.iowait,
            &mut total.steal,
            &mut total.guest,
            &mut total.guest_nice,
        ] {
            *f = Some(0);
        }
        stat.total = Some(total);
        let mut per_irq = vec![0u64; max_irq as usize];
        for s in &self.srcs {
            per_irq[s.irq as usize] = s.irqs;
        }
        stat.intr = Some((per_irq.iter().sum(), per_irq));
        stat.other = vec![
            ("ctxt".into(), "0".into()),
            ("btime".into(), "0".into()),
            ("processes".into(), "1".into()),
            ("procs_running".into(), "1".into()),
            ("procs_blocked".into(), "0".into()),
        ];
        snap.stat = Some(stat);

        let names = [
            "HI", "TIMER", "NET_TX", "NET_RX", "BLOCK", "IRQ_POLL", "TASKLET", "SCHED", "HRTIMER",
            "RCU",
        ];
        let rows = names
            .iter()
            .map(|n| {
                let v = match *n {
                    "NET_RX" => self.cpus.iter().map(|c| c.net_rx_softirqs).collect(),
                    "TIMER" => loc.clone(),
                    _ => vec![0; ncpu],
                };
                (n.to_string(), v)
            })
            .collect();
        snap.softirqs = Some(SoftirqTable { cpus, rows });
        self.device_counters_into(snap);
    }

    /// `/proc/net/dev` and `/proc/diskstats` of the simulated machine: per NIC the packets and
    /// bytes its queues completed, per drive (namespace `<drive>n1`) the reads reaped and their
    /// time. What a moderator may judge its work by, exactly as on Linux.
    fn device_counters_into(&self, snap: &mut Snapshot) {
        let net = snap.net.get_or_insert_with(Vec::new);
        net.resize_with(self.nics.len(), NetDevCounters::default);
        for (i, n) in self.nics.iter().enumerate() {
            let mut f = [0u64; 16];
            for q in &self.nq[n.first_q as usize..(n.first_q + n.queues) as usize] {
                f[0] += q.rx_bytes;
                f[1] += q.rx_pkts;
                f[8] += q.tx_bytes;
                f[9] += q.tx_pkts;
            }
            f[3] = n.dropped;
            let slot = &mut net[i];
            slot.name.clone_from(&n.name);
            slot.fields = f;
        }
        let disks = snap.disks.get_or_insert_with(Vec::new);
        disks.resize_with(self.drives.len(), DiskCounters::default);
        for (i, d) in self.drives.iter().enumerate() {
            let slot = &mut disks[i];
            slot.major = 259;
            slot.minor = i as u32;
            slot.name.clear();
            slot.name.push_str(&d.name);
            slot.name.push_str("n1");
            let ms = d.io_ns / 1_000_000;
            let sectors = d.ios * (d.block_bytes as u64 / 512);
            slot.fields = [d.ios, 0, sectors, ms, 0, 0, 0, 0, d.in_flight, ms, ms];
            slot.rest.clear();
        }
    }

    /// Applies one action; `Ok(true)` if something changed.
    fn apply_action(&mut self, a: &Action) -> (Option<String>, Result<bool, ApplyError>) {
        match a {
            Action::SetAffinity { irq, cpus } => {
                let Some(i) = self.srcs.iter().position(|s| s.irq == irq.0) else {
                    return (None, Err(ApplyError::Vanished));
                };
                if !self.src_enabled(i) {
                    return (None, Err(ApplyError::Vanished));
                }
                let old = self.srcs[i].requested.to_list_string();
                (Some(old), self.set_affinity(i, cpus))
            }
            Action::SetDefaultAffinity { cpus } => {
                let old = self.default_affinity.to_list_string();
                if !cpus.intersects(&self.topo.online) {
                    return (Some(old), Err(ApplyError::Invalid));
                }
                let changed = self.default_affinity != *cpus;
                self.default_affinity = cpus.clone();
                (Some(old), Ok(changed))
            }
            Action::SetCoalesce {
                device,
                queue,
                params,
            } => {
                let Some(ni) = self.nics.iter().position(|n| &n.name == device) else {
                    return (None, Err(ApplyError::Vanished));
                };
                let nic = &self.nics[ni];
                let queues: Vec<u32> = match queue {
                    Some(q) if *q < nic.queues => vec![nic.first_q + q],
                    Some(_) => return (None, Err(ApplyError::Invalid)),
                    None => (nic.first_q..nic.first_q + nic.queues).collect(),
                };
                let cfg = self.sc.nic[ni].clone();
                let mut old = None;
                let mut changed = false;
                for q in queues {
                    let s = self.nq[q as usize].src as usize;
                    let src = &mut self.srcs[s];
                    old.get_or_insert_with(|| format!("rx {:?} tx {:?}", src.moder, src.moder_tx));
                    let before = (
                        src.moder,
                        src.moder_tx,
                        matches!(src.driver, Driver::Dim { .. }),
                    );
                    if params.use_adaptive_rx == Some(true)
                        && !matches!(src.driver, Driver::Dim { .. })
                    {
                        let mut dim_cfg = cfg.clone();
                        dim_cfg.moderation = crate::config::NicModeration::Dim;
                        dim_cfg.adaptive_tx = params.use_adaptive_tx.unwrap_or(cfg.adaptive_tx);
                        let (rx, tx, driver) = crate::sim::nic_moderation(&dim_cfg);
                        src.moder = rx;
                        src.moder_tx = tx;
                        src.driver = driver;
                    }
                    if params.use_adaptive_rx == Some(false) {
                        src.driver = Driver::Fixed;
                    }
                    if let (Some(adaptive), Driver::Dim { tx, .. }) =
                        (params.use_adaptive_tx, &mut src.driver)
                    {
                        if !adaptive {
                            *tx = None;
                        } else if tx.is_none() {
                            *tx = Some(irqpilot_core::moderation::dim::Dim::new());
                        }
                    }
                    if params.rx_usecs.is_some() || params.rx_max_frames.is_some() {
                        src.moder = program(
                            src.moder,
                            params.rx_usecs,
                            params.rx_max_frames,
                            (cfg.rx_usecs, cfg.rx_frames),
                            cfg.cqe_mode,
                        );
                    }
                    if params.tx_usecs.is_some() || params.tx_max_frames.is_some() {
                        src.moder_tx = program(
                            src.moder_tx,
                            params.tx_usecs,
                            params.tx_max_frames,
                            (cfg.tx_usecs, cfg.tx_frames),
                            false,
                        );
                    }
                    changed |= before
                        != (
                            src.moder,
                            src.moder_tx,
                            matches!(src.driver, Driver::Dim { .. }),
                        );
                    self.schedule_fire(s as u32);
                }
                (old, Ok(changed))
            }
            Action::SetNvmeCoalescing {
                controller,
                time_100us,
                threshold,
            } => {
                let Some(d) = self.drives.iter().position(|d| &d.name == controller) else {
                    return (None, Err(ApplyError::Vanished));
                };
                if *threshold == 0 || *threshold > 256 {
                    return (None, Err(ApplyError::Invalid));
                }
                let m = HwMod::NvmeAgg {
                    time_ns: *time_100us as u64 * 100_000,
                    threshold: *threshold as u32,
                };
                let mut old = None;
                let mut changed = false;
                for q in 0..self.vq.len() {
                    if self.vq[q].drive as usize == d {
                        let s = self.vq[q].src as usize;
                        old.get_or_insert_with(|| format!("{:?}", self.srcs[s].moder));
                        changed |= self.srcs[s].moder != m;
                        self.srcs[s].moder = m;
                        self.schedule_fire(s as u32);
                    }
                }
                (old, Ok(changed))
            }
            Action::SetSoftModeration { param, value } => {
                let cfg = &mut self.gsim.cfg;
                let slot = match param.as_str() {
                    "delay_us" => &mut cfg.delay_us,
                    "target_intr_rate" => &mut cfg.target_intr_rate,
                    "hardirq_percent" => &mut cfg.hardirq_percent,
                    "update_ms" => &mut cfg.update_ms,
                    "scale_cpus" => &mut cfg.scale_cpus,
                    _ => return (None, Err(ApplyError::Invalid)),
                };
                let old = slot.to_string();
                let changed = *slot != *value;
                *slot = *value;
                cfg.enabled = true;
                // Any write restarts every CPU from the maximum delay (v4).
                self.gsim.version += 1;
                (Some(old), Ok(changed))
            }
            Action::SetIrqSoftModeration { irq, enabled } => {
                let Some(s) = self.srcs.iter_mut().find(|s| s.irq == irq.0) else {
                    return (None, Err(ApplyError::Vanished));
                };
                let old = if s.gsim_on { "on" } else { "off" }.to_string();
                let changed = s.gsim_on != *enabled;
                s.gsim_on = *enabled;
                (Some(old), Ok(changed))
            }
            Action::SetChannels {
                device,
                combined,
                rx,
                tx,
            } => self.set_channels(device, *combined, rx.is_some() || tx.is_some()),
            Action::SetNvmeVectorCoalescing { .. } => (None, Err(ApplyError::Unsupported)),
        }
    }
}

/// What `ethtool -c` reads for a program: `(usecs, frames)`. No moderation reads `0` usecs and
/// one frame per interrupt.
fn knob_view(m: HwMod, usecs: u32, frames: u32) -> (u32, u32) {
    match m {
        HwMod::Timer {
            usecs_ns, frames, ..
        } => ((usecs_ns / 1000) as u32, frames),
        HwMod::Holdoff { interval_ns } => ((interval_ns / 1000) as u32, 0),
        HwMod::Immediate => (0, 1),
        HwMod::NvmeAgg { .. } => (usecs, frames),
    }
}

/// The program after `ethtool -C` sets `usecs` and/or `frames` (unset ones keep their value;
/// a program without a timer starts from the configured defaults). No delay and at most one
/// frame is no moderation at all.
fn program(
    m: HwMod,
    usecs: Option<u32>,
    frames: Option<u32>,
    defaults: (u32, u32),
    cqe: bool,
) -> HwMod {
    let (u, f) = match m {
        HwMod::Timer {
            usecs_ns, frames, ..
        } => (usecs_ns, frames),
        HwMod::Immediate => (0, 1),
        _ => (defaults.0 as u64 * 1000, defaults.1),
    };
    let usecs_ns = usecs.map_or(u, |v| v as u64 * 1000);
    let frames = frames.unwrap_or(f);
    if usecs_ns == 0 && frames <= 1 {
        HwMod::Immediate
    } else {
        HwMod::Timer {
            usecs_ns,
            frames,
            cqe,
        }
    }
}

impl Platform for SimPlatform {
    fn machine(&mut self) -> Result<Machine, PlatformError> {
        Ok(self.sim.machine())
    }

    fn snapshot_into(&mut self, snap: &mut Snapshot) -> Result<(), PlatformError> {
        self.sim.snapshot_into(snap);
        Ok(())
    }

    fn apply(&mut self, plan: &Plan) -> ApplyReport {
        let outcomes = plan
            .actions
            .iter()
            .map(|a| {
                let (old, result) = self.sim.apply_action(a);
                Outcome {
                    action: a.clone(),
                    old,
                    result,
                }
            })
            .collect();
        ApplyReport { outcomes }
    }

    fn now(&mut self) -> MonoNs {
        MonoNs(self.sim.now().ns())
    }

    fn sleep(&mut self, ns: u64) {
        let until = SimTime(self.sim.now().ns().saturating_add(ns));
        self.sim.run_until(until);
    }
}
