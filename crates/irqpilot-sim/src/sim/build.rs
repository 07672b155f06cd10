//! Building the machine of a checked scenario at time zero, one step per part: the CPUs and
//! their boot-time defaults, the NICs (queues, vectors where the driver or the vector matrix
//! puts them, their moderation), the NVMe drives (kernel-managed vectors), the workloads'
//! state, and the start (application threads, placement's set-up, the first events).

use super::{FIRST_IRQ, Sim};
use crate::config::{NicCfg, NicModeration, NvmeModeration, Scenario, WorkloadCfg};
use crate::cq::{Cq, HwMod};
use crate::engine::EventQueue;
use crate::error::BuildError;
use crate::metrics::Metrics;
use crate::model::*;
use crate::platform::MsiPlatform;
use crate::rng::Stream;
use crate::time::{MS, SimTime, us_to_ns};
use irqpilot_core::moderation::{aim, dim};
use irqpilot_core::{CpuId, CpuSet, Isolation, Topology};

/// The CPUs and what the kernel command line decides about them at boot.
struct Boot {
    topo: Topology,
    ncpu: usize,
    iso: Isolation,
    /// `/proc/irq/default_smp_affinity` at boot: `irqaffinity=` when it names an online CPU.
    default_affinity: CpuSet,
}

/// Every interrupt source (vector) and the device queues behind them, in IRQ order: NIC
/// queues first, then NVMe queues.
#[derive(Default)]
struct Devices {
    srcs: Vec<Source>,
    nics: Vec<Nic>,
    nq: Vec<NicQueue>,
    drives: Vec<Drive>,
    vq: Vec<NvmeQueue>,
}

impl Sim {
    /// Builds the machine of a scenario at time zero.
    pub fn new(sc: Scenario) -> Result<Sim, BuildError> {
        let boot = boot(&sc)?;
        let mut dev = Devices::default();
        add_nics(&sc, &boot, &mut dev)?;
        add_nvme(&sc, &boot, &mut dev)?;
        let wls = workload_states(&sc, &dev.nics);
        let mut sim = assemble(sc, boot, dev, wls);
        sim.start()?;
        Ok(sim)
    }

    /// What runs before the first event: application threads, placement's set-up (which may
    /// refuse the initial layout), the workloads' first arrivals, warm-up and sampling.
    fn start(&mut self) -> Result<(), BuildError> {
        self.init_apps()?;
        crate::placement::prepare(self)?;
        self.start_workloads();
        if self.sc.warmup_ms > 0 {
            self.events
                .push(SimTime(self.sc.warmup_ms * MS), Ev::WarmupEnd);
        } else {
            self.warmup_end();
        }
        if self.sc.metrics.series_ms > 0 {
            self.m.series_step_ms = self.sc.metrics.series_ms;
            self.events
                .push(SimTime(self.sc.metrics.series_ms * MS), Ev::Sample);
        }
        Ok(())
    }
}

/// The CPUs of the scenario's machine and its isolation from the kernel command line.
fn boot(sc: &Scenario) -> Result<Boot, BuildError> {
    let mc = &sc.machine;
    let topo = Topology::synthetic(
        mc.numa_nodes,
        mc.packages,
        mc.cores_per_package,
        mc.threads_per_core,
    );
    let ncpu = topo.online.len();
    let iso = crate::placement::isolation_of(&sc.machine)?;
    let default_affinity = iso
        .irqaffinity
        .as_ref()
        .map(|a| a.intersection(&topo.online))
        .filter(|a| !a.is_empty())
        .unwrap_or_else(|| topo.online.clone());
    Ok(Boot {
        topo,
        ncpu,
        iso,
        default_affinity,
    })
}

/// The online CPUs of a device's `cpus` list (all online CPUs without one); `owner` names
/// the device in errors (`nic eth0`).
fn cpus_of(owner: &str, list: &Option<String>, topo: &Topology) -> Result<Vec<u32>, BuildError> {
    let set = match list {
        Some(l) => CpuSet::parse_list(l).map_err(|e| BuildError::BadCpuList {
            key: format!("{owner}: cpus"),
            list: l.clone(),
            message: e.to_string(),
        })?,
        None => topo.online.clone(),
    };
    let v: Vec<u32> = set
        .iter()
        .filter(|c| topo.online.contains(*c))
        .map(|c| c.0)
        .collect();
    if v.is_empty() {
        return Err(BuildError::NoCpuOfMachine {
            key: format!("{owner}: cpus"),
            list: list.clone().unwrap_or_default(),
        });
    }
    Ok(v)
}

/// Every NIC's queues and their vectors. Vectors requested without an affinity of the
/// driver's own go where x86's vector matrix puts them: the CPU of the default affinity with
/// the fewest vectors, the lowest on ties (`matrix_find_best_cpu`), so two NICs continue one
/// after the other.
fn add_nics(sc: &Scenario, boot: &Boot, dev: &mut Devices) -> Result<(), BuildError> {
    let Boot {
        topo,
        ncpu,
        default_affinity: boot_default,
        ..
    } = boot;
    let ncpu = *ncpu;
    let Devices { srcs, nics, nq, .. } = dev;
    let mut nic_alloc = vec![0u32; ncpu];
    for (ni, n) in sc.nic.iter().enumerate() {
        let cpus = match &n.cpus {
            Some(_) => Some(cpus_of(&format!("nic {}", n.name), &n.cpus, topo)?),
            None => None,
        };
        let first_q = nq.len() as u32;
        for i in 0..n.queues {
            let src = srcs.len() as u32;
            let (moder, moder_tx, driver) = nic_moderation(n);
            let (cpu, requested) = match &cpus {
                // The driver spreads its queues itself: queue i on the i-th CPU.
                Some(cpus) => (cpus[i as usize % cpus.len()], topo.online.clone()),
                None => {
                    let c = boot_default
                        .iter()
                        .map(|c| c.0)
                        .filter(|&c| (c as usize) < ncpu)
                        .min_by_key(|&c| (nic_alloc[c as usize], c))
                        .unwrap_or(0);
                    (c, boot_default.clone())
                }
            };
            nic_alloc[cpu as usize] += 1;
            srcs.push(Source {
                moder,
                moder_tx,
                driver,
                ..Source::boot(
                    FIRST_IRQ + src,
                    format!("{}-TxRx-{i}", n.name),
                    cpu,
                    n.node,
                    Dev::Nic(nq.len() as u32),
                    requested,
                    sc.gsim.enabled,
                )
            });
            nq.push(NicQueue {
                nic: ni as u32,
                index: i,
                src,
                rx: Cq::new(n.ring_size),
                tx: Cq::new(n.ring_size.max(4096)),
                link_free: SimTime::ZERO,
                trains: 0,
                napi_scheduled: false,
                steered: false,
                rx_pkts: 0,
                rx_bytes: 0,
                tx_pkts: 0,
                tx_bytes: 0,
            });
        }
        nics.push(Nic {
            name: n.name.clone(),
            link_bps: n.link_gbps * 1e9,
            mtu: n.mtu_bytes,
            node: n.node,
            first_q,
            queues: n.queues,
            channels: n.queues,
            vm_exit_ns: if n.vms > 1 || n.vm_exit_us > 0.0 {
                us_to_ns(n.vm_exit_us)
            } else {
                0
            },
            wire_tx_free: SimTime::ZERO,
            dropped: 0,
            active: std::collections::BinaryHeap::new(),
            busy_queues: 0,
        });
    }
    Ok(())
}

/// Every NVMe group's drives and their kernel-managed queue vectors (`managed.rs`): spread
/// masks, effective CPUs allocated in IRQ order, housekeeping CPUs first under
/// `isolcpus=managed_irq`.
fn add_nvme(sc: &Scenario, boot: &Boot, dev: &mut Devices) -> Result<(), BuildError> {
    let Boot {
        topo, ncpu, iso, ..
    } = boot;
    let Devices {
        srcs, drives, vq, ..
    } = dev;
    let managed_hk = iso
        .managed_irq_isolation()
        .map(|isolated| topo.online.difference(isolated));
    let mut managed_alloc = vec![0u32; *ncpu];
    for g in &sc.nvme {
        let cpus = cpus_of(&format!("nvme {}", g.name), &g.cpus, topo)?;
        if g.queues_per_drive as usize > cpus.len() {
            return Err(BuildError::NvmeQueuesAboveCpus {
                group: g.name.clone(),
                queues: g.queues_per_drive,
                cpus: cpus.len(),
            });
        }
        let cpu_set: CpuSet = cpus.iter().map(|&c| CpuId(c)).collect();
        let masks = crate::managed::spread(topo, &cpu_set, g.queues_per_drive);
        let block_bytes = sc
            .workload
            .iter()
            .find_map(|w| match w {
                WorkloadCfg::Fio { nvme, block_kb, .. } if *nvme == g.name => {
                    Some(*block_kb * 1024)
                }
                _ => None,
            })
            .unwrap_or(4096);
        for d in 0..g.drives {
            let di = drives.len() as u32;
            drives.push(Drive {
                name: format!("{}{d}", g.name),
                node: g.node,
                latency_ns: us_to_ns(g.latency_us),
                // max_iops is for 4 KiB blocks: bandwidth = max_iops * 4 KiB.
                block_ns: 1e9 / g.max_iops * (block_bytes as f64 / 4096.0),
                block_bytes,
                dma_free: SimTime::ZERO,
                rng: Stream::new(sc.seed, &format!("drive.{}{d}", g.name)),
                ios: 0,
                io_ns: 0,
                in_flight: 0,
            });
            for i in 0..g.queues_per_drive {
                let src = srcs.len() as u32;
                let moder = match g.moderation {
                    NvmeModeration::None => HwMod::Immediate,
                    NvmeModeration::Static => HwMod::NvmeAgg {
                        time_ns: g.coalesce_time_100us as u64 * 100_000,
                        threshold: g.coalesce_threshold,
                    },
                };
                let mask = masks[i as usize].clone();
                let cpu = crate::managed::effective_cpu(
                    &mask,
                    &topo.online,
                    managed_hk.as_ref(),
                    &managed_alloc,
                )
                .map_or(cpus[0], |c| c.0);
                managed_alloc[cpu as usize] += 1;
                srcs.push(Source {
                    moder,
                    ..Source::boot(
                        FIRST_IRQ + src,
                        format!("{}{d}q{}", g.name, i + 1),
                        cpu,
                        g.node,
                        Dev::Nvme(vq.len() as u32),
                        mask,
                        sc.gsim.enabled,
                    )
                });
                vq.push(NvmeQueue {
                    drive: di,
                    index: i,
                    src,
                    cq: Cq::new(65_536),
                    completed: 0,
                    jobs: Vec::new(),
                });
            }
        }
    }
    Ok(())
}

/// Each workload's state before its first arrival.
fn workload_states(sc: &Scenario, nics: &[Nic]) -> Vec<WlState> {
    (0..sc.workload.len())
        .map(|i| WlState {
            bulk: crate::workload::bulk_params(sc, nics, i),
            rng: Stream::new(sc.seed, &format!("workload{i}")),
            next_id: 0,
            flows: Vec::new(),
            sent: Vec::new(),
            done: Vec::new(),
            app_cpus: Vec::new(),
            steering: crate::config::Steering::None,
            rps_cpus: Vec::new(),
            threads: Vec::new(),
        })
        .collect()
}

/// The machine at time zero from its parts; nothing scheduled yet.
fn assemble(sc: Scenario, boot: Boot, dev: Devices, wls: Vec<WlState>) -> Sim {
    let Boot { topo, ncpu, .. } = boot;
    let Devices {
        srcs,
        nics,
        nq,
        drives,
        vq,
    } = dev;
    let k = Ns::new(&sc.costs);
    let end = SimTime(sc.duration_ms * MS);
    // All online CPUs until placement's set-up applies `irqaffinity=` (`placement::prepare`).
    let default_affinity = topo.online.clone();
    Sim {
        now: SimTime::ZERO,
        events: EventQueue::default(),
        irq_counts: vec![0; srcs.len() * ncpu],
        cpu_node: (0..ncpu as u32)
            .map(|c| topo.node_of(irqpilot_core::CpuId(c)).map_or(0, |n| n.0))
            .collect(),
        cpus: vec![Cpu::default(); ncpu],
        plat: MsiPlatform::new(&sc.platform),
        k,
        topo,
        srcs,
        nics,
        nq,
        drives,
        vq,
        wls,
        m: Metrics::new(),
        end,
        default_affinity,
        migrations: 0,
        migrations_at_warmup: 0,
        smt_siblings: Vec::new(),
        gsim: crate::gsim::Gsim::new(sc.gsim.clone(), ncpu),
        cpu_llc: Vec::new(),
        scratch_served: Vec::new(),
        scratch_lat: Vec::new(),
        sc,
    }
}

/// Hardware programs (RX, TX) and driver logic for a NIC's vectors.
pub(crate) fn nic_moderation(n: &NicCfg) -> (HwMod, HwMod, Driver) {
    let static_tx = HwMod::Timer {
        usecs_ns: n.tx_usecs as u64 * 1000,
        frames: n.tx_frames,
        cqe: false,
    };
    match n.moderation {
        NicModeration::None => (HwMod::Immediate, HwMod::Immediate, Driver::Fixed),
        NicModeration::Static => (
            HwMod::Timer {
                usecs_ns: n.rx_usecs as u64 * 1000,
                frames: n.rx_frames,
                cqe: n.cqe_mode,
            },
            static_tx,
            Driver::Fixed,
        ),
        NicModeration::Dim => {
            let table = if n.cqe_mode {
                &dim::RX_CQE_PROFILES
            } else {
                &dim::RX_EQE_PROFILES
            };
            let p = table[dim::DEFAULT_PROFILE as usize];
            let rx = HwMod::Timer {
                usecs_ns: p.usec as u64 * 1000,
                frames: p.pkts,
                cqe: n.cqe_mode,
            };
            let (tx_mod, tx_dim) = if n.adaptive_tx {
                let t = dim::TX_EQE_PROFILES[dim::DEFAULT_PROFILE as usize];
                (
                    HwMod::Timer {
                        usecs_ns: t.usec as u64 * 1000,
                        frames: t.pkts,
                        cqe: false,
                    },
                    Some(dim::Dim::new()),
                )
            } else {
                (static_tx, None)
            };
            (
                rx,
                tx_mod,
                Driver::Dim {
                    rx: dim::Dim::new(),
                    tx: tx_dim,
                    cqe: n.cqe_mode,
                },
            )
        }
        NicModeration::Aim => {
            let mode = aim::AimMode::from_sysctl(n.aim_mode).unwrap_or(aim::AimMode::Normal);
            let a = aim::Aim::new(mode, n.itr_register, (n.link_gbps * 1000.0) as u32);
            let m = HwMod::Holdoff {
                interval_ns: a.interval_ns(),
            };
            (
                m,
                m,
                Driver::Aim {
                    aim: a,
                    counts: aim::Counts::default(),
                },
            )
        }
    }
}
