//! The text of `irqpilot status` (its JSON is the [`StatusReport`] itself).

use crate::cmd::status::{DeviceSummary, FindingEntry, QueueGroup, StatusReport};
use crate::render::human;
use crate::render::table::{Align, Table};
use irqpilot_core::findings::{Finding, Severity};
use irqpilot_core::{CacheKind, CpuSet, HousekeepingBasis, IrqNum};
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// Width of a CPU list inside a queue group before it is abbreviated.
const CPUS_WIDTH: usize = 28;

/// The whole report as text.
pub fn render(r: &StatusReport) -> String {
    let mut out = String::new();
    let mut facts = Table::new(&[("", Align::Left), ("", Align::Left)]);
    let mut fact = |k: &str, v: String| facts.row(vec![k.to_string(), v]);
    fact(
        "kernel",
        format!(
            "{}  (root {})",
            r.kernel.as_deref().unwrap_or("unknown"),
            r.root
        ),
    );
    fact("cpus", cpus_line(r));
    fact("numa", numa_line(r));
    fact("topology", topology_line(r));
    fact("caches", caches_line(r));
    fact("isolation", isolation_line(r));
    let iso = &r.isolation;
    let basis = match iso.housekeeping_basis {
        HousekeepingBasis::AllOnline => "every online CPU",
        HousekeepingBasis::Derived => "online CPUs that are not isolated",
        HousekeepingBasis::FallbackAllOnline => "isolation leaves none: every online CPU",
    };
    fact(
        "housekeeping",
        format!(
            "{} ({} CPUs: {basis})",
            human::cpus(&iso.housekeeping, 60),
            iso.housekeeping.len()
        ),
    );
    fact(
        "default irq",
        r.default_affinity
            .as_ref()
            .map_or("unknown".to_string(), |d| {
                format!("{d} (default_smp_affinity)")
            }),
    );
    // The facts table has no header line: drop it.
    let text = facts.render();
    out.push_str(text.split_once('\n').map_or("", |(_, rest)| rest));

    out.push_str("\ndevices: queues -> the CPUs they are delivered to\n");
    if r.devices.is_empty() {
        out.push_str("  none found\n");
    } else {
        let mut t = Table::new(&[
            ("NAME", Align::Left),
            ("PCI", Align::Left),
            ("KIND", Align::Left),
            ("DRIVER", Align::Left),
            ("NODE", Align::Left),
            ("QUEUES", Align::Left),
        ])
        .indent(2);
        for d in &r.devices {
            t.row(vec![
                d.name.clone(),
                d.addr.clone().unwrap_or_else(|| "-".into()),
                d.kind.to_string(),
                d.driver.clone().unwrap_or_else(|| "-".into()),
                d.numa_node.map_or("-".into(), |n| n.to_string()),
                queues_text(d),
            ]);
        }
        out.push_str(&t.render());
    }
    let (named, silent): (Vec<_>, Vec<_>) = r.other_irqs.iter().partition(|i| !i.name.is_empty());
    if !named.is_empty() {
        let list: Vec<String> = named
            .iter()
            .map(|i| {
                let cpus = i
                    .effective
                    .as_ref()
                    .or(i.requested.as_ref())
                    .map_or("?".to_string(), |c| human::cpus(c, CPUS_WIDTH));
                format!("{} {}->{cpus}", i.irq, i.name)
            })
            .collect();
        let _ = writeln!(out, "  other IRQs: {}", list.join(", "));
    }
    if !silent.is_empty() {
        let n: Vec<u32> = silent.iter().map(|i| i.irq).collect();
        let _ = writeln!(
            out,
            "  allocated without a handler: {}",
            crate::cmd::status::ranges(&n)
        );
    }
    if !r.devices_without_irqs.is_empty() {
        let list: Vec<String> = r
            .devices_without_irqs
            .iter()
            .map(|d| format!("{} ({})", d.addr, d.kind))
            .collect();
        let _ = writeln!(out, "  PCI functions without IRQs: {}", list.join(", "));
    }

    out.push('\n');
    load_section(r, &mut out);
    out.push_str("\nfindings\n");
    let lines = finding_lines(&r.findings, r);
    if lines.is_empty() {
        out.push_str("  none\n");
    }
    for (sev, line) in lines {
        let tag = match sev {
            Severity::Warning => "warning",
            Severity::Info => "info   ",
        };
        let _ = writeln!(out, "  {tag}  {line}");
    }
    if !r.gaps.is_empty() {
        out.push_str("\nnot available\n");
        let mut t = Table::new(&[("", Align::Left), ("", Align::Left)]).indent(2);
        for g in &r.gaps {
            t.row(vec![g.path.clone(), g.why.clone()]);
        }
        let text = t.render();
        out.push_str(text.split_once('\n').map_or("", |(_, rest)| rest));
    }
    out
}

fn cpus_line(r: &StatusReport) -> String {
    let c = &r.cpus;
    let mut s = format!("{} online ({})", c.online_count, human::cpus(&c.online, 60));
    if let (Some(p), Some(n)) = (&c.possible, c.possible_count) {
        if p == &c.online {
            let _ = write!(s, ", all {n} possible");
        } else {
            let _ = write!(s, " of {n} possible ({})", human::cpus(p, 60));
        }
    }
    s
}

fn numa_line(r: &StatusReport) -> String {
    if r.numa_nodes.is_empty() {
        return "unknown".into();
    }
    let nodes: Vec<String> = r
        .numa_nodes
        .iter()
        .map(|n| format!("node{} {}", n.node, human::cpus(&n.cpus, 40)))
        .collect();
    let plural = if nodes.len() == 1 { "" } else { "s" };
    format!("{} node{plural}: {}", nodes.len(), nodes.join("; "))
}

fn topology_line(r: &StatusReport) -> String {
    let t = &r.topology;
    let Some(p) = t.packages else {
        return "unknown".into();
    };
    let mut s = format!("{p} package{}", if p == 1 { "" } else { "s" });
    if let Some(c) = t.cores {
        let _ = write!(s, ", {c} cores");
    }
    match t.threads_per_core {
        Some(1) => s.push_str(", 1 thread per core (no SMT)"),
        Some(n) => {
            let _ = write!(s, ", {n} threads per core (SMT)");
        }
        None => {}
    }
    s
}

fn caches_line(r: &StatusReport) -> String {
    if r.caches.is_empty() {
        return "unknown".into();
    }
    let mut parts = Vec::new();
    let mut llc_groups = Vec::new();
    for c in &r.caches {
        let kind = match c.kind {
            CacheKind::Data => "d",
            CacheKind::Instruction => "i",
            CacheKind::Unified => "",
        };
        let size = c.size_bytes.map_or("?".into(), human::bytes);
        parts.push(format!("L{}{kind} {size} x{}", c.level, c.instances));
        if c.llc {
            llc_groups.extend(c.groups.iter().map(|g| human::cpus(g, 40)));
        }
    }
    let mut s = parts.join(", ");
    if !llc_groups.is_empty() {
        let _ = write!(s, " (LLC groups: {})", llc_groups.join(" | "));
    }
    s
}

fn isolation_line(r: &StatusReport) -> String {
    let i = &r.isolation;
    let mut parts = Vec::new();
    let list = |s: &CpuSet| human::cpus(s, 40);
    if let Some(s) = i.isolated.as_ref().filter(|s| !s.is_empty()) {
        parts.push(format!("isolated {}", list(s)));
    }
    if let Some(s) = i.nohz_full.as_ref().filter(|s| !s.is_empty()) {
        parts.push(format!("nohz_full {}", list(s)));
    }
    if let Some(s) = &i.isolcpus {
        parts.push(format!(
            "isolcpus={} {}",
            i.isolcpus_flags.join(","),
            list(s)
        ));
    }
    if let Some(s) = &i.irqaffinity {
        parts.push(format!("irqaffinity {}", list(s)));
    }
    if parts.is_empty() {
        let unknown = i.isolated.is_none() && i.nohz_full.is_none();
        return if unknown {
            "unknown (no cpu/isolated, nohz_full or command line)".into()
        } else {
            "none".into()
        };
    }
    parts.join("; ")
}

/// `txrx0-63->0-63 misc->0`, then how many IRQs reach isolated or remote CPUs.
fn queues_text(d: &DeviceSummary) -> String {
    let mut parts: Vec<String> = d.queues.iter().map(group_text).collect();
    if d.on_isolated > 0 {
        parts.push(format!("[{} on isolated CPUs]", d.on_isolated));
    }
    if d.remote > 0 {
        parts.push(format!("[{} on a remote node]", d.remote));
    }
    parts.join(" ")
}

fn group_text(g: &QueueGroup) -> String {
    let cpus = if g.cpus.is_empty() {
        "?".to_string()
    } else {
        human::cpus(&g.cpus, CPUS_WIDTH)
    };
    let unknown = if g.unknown > 0 && !g.cpus.is_empty() {
        format!(" ({} unknown)", g.unknown)
    } else {
        String::new()
    };
    match &g.indexes {
        Some(ix) => format!("{}{ix}->{cpus}{unknown}", g.kind),
        None if g.count == 1 => format!("{}->{cpus}{unknown}", g.kind),
        None => format!("{}×{}->{cpus}{unknown}", g.kind, g.count),
    }
}

fn load_section(r: &StatusReport, out: &mut String) {
    let Some(l) = &r.load else {
        out.push_str("load: not measured (--sample 0)\n");
        return;
    };
    let imbalance = l.imbalance.map_or("-".to_string(), |v| format!("{v:.2}"));
    let _ = writeln!(
        out,
        "load over {:.2}s: {} device IRQs, {} all numbered IRQs, {} timer and IPIs; \
         imbalance {imbalance} (max/mean over housekeeping CPUs)",
        l.interval_s,
        human::rate(l.device_irq_per_sec),
        human::rate(l.irq_per_sec),
        human::rate(l.arch_per_sec),
    );
    if !l.top_irqs.is_empty() {
        let list: Vec<String> = l
            .top_irqs
            .iter()
            .map(|t| {
                let cpu = t.cpu.map_or(String::new(), |c| format!(" on {c}"));
                format!("{} {} {}{cpu}", t.irq, t.name, human::rate(t.per_sec))
            })
            .collect();
        let _ = writeln!(out, "  busiest: {}", list.join(", "));
    }
}

/// The findings as lines: findings about many IRQs of one device are folded into one line.
fn finding_lines(findings: &[FindingEntry], r: &StatusReport) -> Vec<(Severity, String)> {
    // IRQ -> device name, for grouping.
    let owner: BTreeMap<u32, &str> = r
        .devices
        .iter()
        .flat_map(|d| d.irqs.iter().map(move |i| (i.irq, d.name.as_str())))
        .collect();
    let device_of = |irq: &IrqNum| owner.get(&irq.0).copied().unwrap_or("-");
    let requested: BTreeMap<u32, &CpuSet> = r
        .devices
        .iter()
        .flat_map(|d| d.irqs.iter())
        .filter_map(|i| i.requested.as_ref().map(|q| (i.irq, q)))
        .collect();
    let mut groups: BTreeMap<(u8, String), Vec<&FindingEntry>> = BTreeMap::new();
    let mut lines = Vec::new();
    for f in findings {
        let key = match &f.finding {
            Finding::DeviceIrqOnIsolatedCpu { irq, .. } => Some((0u8, device_of(irq))),
            Finding::RemoteNumaIrq { irq, .. } => Some((1, device_of(irq))),
            Finding::AffinityNotHonoured { irq, .. } => Some((2, device_of(irq))),
            _ => None,
        };
        match key {
            Some((k, dev)) => groups.entry((k, dev.to_string())).or_default().push(f),
            None => lines.push((f.severity, f.message.clone())),
        }
    }
    for ((kind, dev), members) in groups {
        let sev = members
            .iter()
            .map(|f| f.severity)
            .max()
            .unwrap_or(Severity::Info);
        if members.len() == 1 {
            lines.push((sev, members[0].message.clone()));
            continue;
        }
        let mut irqs: Vec<u32> = Vec::new();
        let mut cpus = CpuSet::new();
        let mut managed = 0;
        let mut all_isolated_masks = true;
        let mut from_nodes = std::collections::BTreeSet::new();
        let mut dev_node = None;
        for f in &members {
            match &f.finding {
                Finding::DeviceIrqOnIsolatedCpu {
                    irq,
                    cpus: c,
                    managed: m,
                    ..
                } => {
                    irqs.push(irq.0);
                    cpus = cpus.union(c);
                    managed += usize::from(*m == Some(true));
                    all_isolated_masks &= requested
                        .get(&irq.0)
                        .is_some_and(|q| q.is_subset(&r.isolation.isolated_cpus));
                }
                Finding::RemoteNumaIrq {
                    irq,
                    device_node,
                    cpu,
                    cpu_node,
                    ..
                } => {
                    irqs.push(irq.0);
                    cpus.insert(*cpu);
                    from_nodes.insert(cpu_node.0);
                    dev_node = Some(device_node.0);
                }
                Finding::AffinityNotHonoured { irq, effective, .. } => {
                    irqs.push(irq.0);
                    cpus = cpus.union(effective);
                }
                _ => {}
            }
        }
        irqs.sort_unstable();
        let list = crate::cmd::status::ranges(&irqs);
        let n = irqs.len();
        let cpu_text = human::cpus(&cpus, 40);
        let line = match kind {
            0 => {
                let managed_irq = r
                    .isolation
                    .isolcpus_flags
                    .iter()
                    .any(|f| f == "managed_irq");
                let how = if managed == n && managed_irq && all_isolated_masks {
                    " (kernel-managed; isolcpus=managed_irq cannot help: their affinity holds only isolated CPUs)"
                } else if managed == n && managed_irq {
                    " (kernel-managed, although isolcpus=managed_irq is set)"
                } else if managed == n {
                    " (kernel-managed: only isolcpus=managed_irq at boot keeps them off isolated CPUs)"
                } else if managed > 0 {
                    " (some kernel-managed)"
                } else {
                    ""
                };
                format!("{dev}: {n} device IRQs ({list}) reach isolated CPUs {cpu_text}{how}")
            }
            1 => {
                let nodes: Vec<String> = from_nodes.iter().map(u32::to_string).collect();
                format!(
                    "{dev}: {n} IRQs ({list}) of a device on node {} are served from node {} (CPUs {cpu_text})",
                    dev_node.map_or("?".into(), |d| d.to_string()),
                    nodes.join(",")
                )
            }
            _ => format!(
                "{dev}: {n} IRQs ({list}) are delivered outside their requested affinity (to {cpu_text})"
            ),
        };
        lines.push((sev, line));
    }
    lines.sort_by_key(|(sev, _)| std::cmp::Reverse(*sev));
    lines
}
