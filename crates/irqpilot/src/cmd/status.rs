//! `irqpilot status`: this machine explained. Topology, isolation and housekeeping CPUs, each
//! PCI device with its queues and the CPUs they are delivered to, measured load, findings, and
//! what could not be read (and why).
//!
//! The report is built once as a [`StatusReport`] (the stable JSON of `--format json`) and
//! rendered as text by [`crate::render::status`].

mod report;
mod summarize;

pub(crate) use crate::live::devices::{device_name, queue_label};
pub use report::*;
pub(crate) use summarize::gap_entry;
use summarize::{cache_summary, queue_groups, topology_summary};
pub use summarize::{device_kind, ranges};

use crate::Settings;
use crate::cli::{Format, StatusArgs};
use anyhow::Result;
use irqpilot_core::findings::{Finding, findings};
use irqpilot_core::{CpuSet, Irq, Machine, Platform, Rates};
use irqpilot_linux::LinuxPlatform;
use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::process::ExitCode;

/// Runs `irqpilot status`.
pub fn run(args: &StatusArgs, settings: &Settings) -> Result<ExitCode> {
    let mut platform = LinuxPlatform::with_root(&settings.root);
    let machine = platform.machine()?;
    let rates = if args.sample.is_zero() {
        None
    } else {
        let first = platform.snapshot()?;
        platform.sleep(u64::try_from(args.sample.as_nanos()).unwrap_or(u64::MAX));
        let second = platform.snapshot()?;
        Some(Rates::between(&first, &second)?)
    };
    let found = findings(&machine, rates.as_ref(), &settings.config.findings);
    let report = StatusReport::build(
        &settings.root.display().to_string(),
        &machine,
        rates.as_ref(),
        found,
    );
    let mut out = std::io::stdout().lock();
    match settings.format {
        Format::Json => {
            serde_json::to_writer_pretty(&mut out, &report)?;
            out.write_all(b"\n")?;
        }
        Format::Table => out.write_all(crate::render::status::render(&report).as_bytes())?,
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

impl StatusReport {
    /// Builds the report from what was read.
    pub fn build(
        root: &str,
        m: &Machine,
        rates: Option<&Rates>,
        found: Vec<Finding>,
    ) -> StatusReport {
        let t = &m.topology;
        let iso = &m.isolation;
        let hk = iso.housekeeping(&t.online);
        let isolated = iso.isolated_cpus();
        let per_irq = rates.map(irq_rates).unwrap_or_default();
        let irq_summary = |i: &Irq| IrqSummary {
            irq: i.irq.0,
            name: i.name(),
            chip: i.chip.clone(),
            queue: i.queue.clone(),
            requested: i.requested.clone(),
            effective: i.effective.clone(),
            node: i.node.map(|n| n.0),
            managed: i.managed,
            rate_per_sec: per_irq.get(&i.irq.0).copied(),
        };
        let mut devices = Vec::new();
        let mut devices_without_irqs = Vec::new();
        let mut owned = BTreeSet::new();
        for dev in m.devices.values() {
            let irqs: Vec<&Irq> = m.device_irqs(dev).collect();
            if irqs.is_empty() {
                devices_without_irqs.push(DeviceBrief {
                    addr: dev.addr.to_string(),
                    kind: device_kind(dev.class),
                    driver: dev.driver.clone(),
                });
                continue;
            }
            owned.extend(irqs.iter().map(|i| i.irq));
            let on_isolated = irqs
                .iter()
                .filter(|i| i.delivered_to().is_some_and(|d| d.intersects(&isolated)))
                .count();
            // As the findings judge it: the IRQ's own node (the device's, or for kernel-managed
            // queues the node of the CPUs they serve) against the node of its CPU.
            let remote = irqs
                .iter()
                .filter(|i| {
                    let cpu_node = i
                        .delivered_to()
                        .and_then(CpuSet::first)
                        .and_then(|c| t.node_of(c));
                    matches!((i.node, cpu_node), (Some(d), Some(c)) if d != c)
                })
                .count();
            devices.push(DeviceSummary {
                addr: Some(dev.addr.to_string()),
                name: device_name(dev, &irqs),
                kind: device_kind(dev.class),
                class: dev.class.map(|c| format!("0x{c:06x}")),
                driver: dev.driver.clone(),
                numa_node: dev.numa_node.map(|n| n.0),
                local_cpus: dev.local_cpus.clone(),
                queues: queue_groups(&irqs),
                on_isolated,
                remote,
                irqs: irqs.iter().map(|i| irq_summary(i)).collect(),
            });
        }
        // IRQs with a recognised queue but no known PCI function (a root without sysfs) are
        // still devices: group them by the owner their names carry.
        let mut by_owner: BTreeMap<String, Vec<&Irq>> = BTreeMap::new();
        for irq in m.irqs.values().filter(|i| !owned.contains(&i.irq)) {
            if let Some(q) = &irq.queue {
                by_owner.entry(q.owner.clone()).or_default().push(irq);
            }
        }
        for (owner, irqs) in by_owner {
            owned.extend(irqs.iter().map(|i| i.irq));
            devices.push(DeviceSummary {
                addr: None,
                name: owner,
                kind: "unknown",
                class: None,
                driver: None,
                numa_node: None,
                local_cpus: None,
                queues: queue_groups(&irqs),
                on_isolated: irqs
                    .iter()
                    .filter(|i| i.delivered_to().is_some_and(|d| d.intersects(&isolated)))
                    .count(),
                remote: 0,
                irqs: irqs.iter().map(|i| irq_summary(i)).collect(),
            });
        }
        let other_irqs = m
            .irqs
            .values()
            .filter(|i| !owned.contains(&i.irq))
            .map(irq_summary)
            .collect();
        let mut findings: Vec<FindingEntry> = found
            .into_iter()
            .map(|f| FindingEntry {
                severity: f.severity(),
                message: f.describe(),
                finding: f,
            })
            .collect();
        // Warnings first; the order within a severity is the analysis's (deterministic).
        findings.sort_by_key(|f| std::cmp::Reverse(f.severity));
        StatusReport {
            root: root.to_string(),
            kernel: m.kernel_release.clone(),
            cpus: Cpus {
                online: t.online.clone(),
                online_count: t.online.len(),
                possible: t.possible.clone(),
                possible_count: t.possible.as_ref().map(CpuSet::len),
            },
            numa_nodes: t
                .nodes
                .iter()
                .map(|(n, cpus)| NumaNode {
                    node: n.0,
                    cpus: cpus.clone(),
                })
                .collect(),
            topology: topology_summary(m),
            caches: cache_summary(m),
            isolation: IsolationSummary {
                isolated: iso.isolated.clone(),
                nohz_full: iso.nohz_full.clone(),
                isolcpus: iso.isolcpus.as_ref().map(|ic| ic.cpus.clone()),
                isolcpus_flags: iso
                    .isolcpus
                    .as_ref()
                    .map(|ic| ic.flags.iter().map(flag_name).collect())
                    .unwrap_or_default(),
                irqaffinity: iso.irqaffinity.clone(),
                isolated_cpus: isolated,
                housekeeping: hk.cpus.clone(),
                housekeeping_basis: hk.basis,
            },
            default_affinity: m.default_affinity.clone(),
            devices,
            devices_without_irqs,
            other_irqs,
            load: rates.map(|r| load(m, r, &hk.cpus)),
            findings,
            gaps: m.gaps.iter().map(gap_entry).collect(),
        }
    }
}

fn flag_name(f: &irqpilot_core::IsolFlag) -> String {
    use irqpilot_core::IsolFlag as F;
    match f {
        F::Domain => "domain".into(),
        F::ManagedIrq => "managed_irq".into(),
        F::Nohz => "nohz".into(),
        F::Other(s) => s.clone(),
    }
}

/// Total rate of each numbered IRQ.
fn irq_rates(r: &Rates) -> BTreeMap<u32, f64> {
    r.rows
        .iter()
        .filter_map(|row| row.label.irq().map(|n| (n.0, row.total_per_sec)))
        .collect()
}

fn load(m: &Machine, r: &Rates, hk: &CpuSet) -> Load {
    let is_device = |n| m.irqs.get(&n).is_some_and(Irq::is_device);
    let mut device_per_cpu = vec![0.0; r.cpus.len()];
    let (mut irq_total, mut device_total, mut arch_total) = (0.0, 0.0, 0.0);
    let mut top: Vec<TopIrq> = Vec::new();
    for row in &r.rows {
        let Some(n) = row.label.irq() else {
            arch_total += row.total_per_sec;
            continue;
        };
        irq_total += row.total_per_sec;
        if is_device(n) {
            device_total += row.total_per_sec;
            for (slot, v) in device_per_cpu.iter_mut().zip(&row.per_cpu_per_sec) {
                *slot += v;
            }
        }
        if row.total_per_sec > 0.0 {
            let cpu = row
                .per_cpu_per_sec
                .iter()
                .enumerate()
                .max_by(|a, b| a.1.total_cmp(b.1))
                .and_then(|(j, _)| r.cpus.get(j))
                .map(|c| c.0);
            top.push(TopIrq {
                irq: n.0,
                name: m.irqs.get(&n).map(Irq::name).unwrap_or_default(),
                per_sec: row.total_per_sec,
                cpu,
            });
        }
    }
    top.sort_by(|a, b| b.per_sec.total_cmp(&a.per_sec).then(a.irq.cmp(&b.irq)));
    top.truncate(5);
    let loads: Vec<f64> = r
        .cpus
        .iter()
        .zip(&device_per_cpu)
        .filter(|(c, _)| hk.contains(**c))
        .map(|(_, v)| *v)
        .collect();
    Load {
        interval_s: r.interval_ns as f64 / 1e9,
        irq_per_sec: irq_total,
        device_irq_per_sec: device_total,
        arch_per_sec: arch_total,
        imbalance: irqpilot_core::rates::imbalance(&loads),
        top_irqs: top,
    }
}
