//! Summaries of the machine for the report: topology counts, caches, device kinds and names,
//! queue groups, the reasons behind gaps.

use super::report::{CacheSummary, GapEntry, QueueGroup, TopologySummary};
use crate::live::devices::kind_name;
use irqpilot_core::{CacheKind, CpuId, CpuSet, Gap, GapReason, Irq, Machine};
use std::collections::{BTreeMap, BTreeSet};

pub(super) fn topology_summary(m: &Machine) -> TopologySummary {
    let t = &m.topology;
    let known: Vec<CpuId> = t
        .online
        .iter()
        .filter(|c| t.cpu(*c).is_some_and(|x| x.package.is_some()))
        .collect();
    if known.is_empty() {
        return TopologySummary {
            packages: None,
            cores: None,
            threads_per_core: None,
        };
    }
    let packages: BTreeSet<u32> = known.iter().map(|c| t.package_key(*c)).collect();
    let with_siblings = t
        .online
        .iter()
        .all(|c| t.cpu(c).is_some_and(|x| x.thread_siblings.is_some()));
    let cores = with_siblings.then(|| t.cores_in(&t.online).len());
    let threads = with_siblings.then(|| {
        t.online
            .iter()
            .map(|c| t.smt_siblings(c).len())
            .max()
            .unwrap_or(1)
    });
    TopologySummary {
        packages: Some(packages.len()),
        cores,
        threads_per_core: threads,
    }
}

/// Size of the first instance seen, and the distinct sets of CPUs sharing one.
type CacheInstances = (Option<u64>, BTreeSet<Vec<u32>>);

pub(super) fn cache_summary(m: &Machine) -> Vec<CacheSummary> {
    let t = &m.topology;
    let mut by: BTreeMap<(u8, CacheKind), CacheInstances> = BTreeMap::new();
    for cpu in t.online.iter() {
        for c in t.cpu(cpu).map(|x| x.caches.as_slice()).unwrap_or(&[]) {
            let e = by
                .entry((c.level, c.kind))
                .or_insert((c.size_bytes, BTreeSet::new()));
            e.1.insert(c.shared_cpus.iter().map(|x| x.0).collect());
        }
    }
    let llc = by
        .keys()
        .filter(|(_, k)| *k != CacheKind::Instruction)
        .map(|(l, _)| *l)
        .max();
    by.into_iter()
        .map(|((level, kind), (size, groups))| {
            let is_llc = Some(level) == llc && kind != CacheKind::Instruction;
            CacheSummary {
                level,
                kind,
                size_bytes: size,
                instances: groups.len(),
                llc: is_llc,
                groups: if is_llc {
                    groups
                        .iter()
                        .map(|g| g.iter().map(|&c| CpuId(c)).collect())
                        .collect()
                } else {
                    Vec::new()
                },
            }
        })
        .collect()
}

/// The device's kind from its PCI class code.
pub fn device_kind(class: Option<u32>) -> &'static str {
    let Some(c) = class else {
        return "unknown";
    };
    match (c >> 16, (c >> 8) & 0xff, c & 0xff) {
        (0x01, 0x08, 0x02) => "nvme",
        (0x01, 0x06, _) => "sata",
        (0x01, 0x07, _) => "sas",
        (0x01, 0x04, _) => "raid",
        (0x01, _, _) => "storage",
        (0x02, _, _) => "network",
        (0x03, _, _) => "display",
        (0x06, 0x00, _) => "host-bridge",
        (0x06, 0x04, _) => "pci-bridge",
        (0x06, _, _) => "bridge",
        (0x0c, 0x03, _) => "usb",
        (0x12, _, _) => "accelerator",
        _ => "other",
    }
}

/// Groups a device's IRQs by queue kind, in a fixed kind order.
pub(super) fn queue_groups(irqs: &[&Irq]) -> Vec<QueueGroup> {
    const ORDER: [&str; 7] = ["txrx", "rx", "tx", "io", "admin", "misc", "irq"];
    let mut groups: Vec<QueueGroup> = Vec::new();
    for kind in ORDER {
        let members: Vec<&&Irq> = irqs
            .iter()
            .filter(|i| kind_name(i.queue.as_ref()) == kind)
            .collect();
        if members.is_empty() {
            continue;
        }
        let mut indexes: Vec<u32> = members
            .iter()
            .filter_map(|i| i.queue.as_ref().and_then(|q| q.index))
            .collect();
        indexes.sort_unstable();
        indexes.dedup();
        let mut cpus = CpuSet::new();
        let mut unknown = 0;
        for i in &members {
            match i.delivered_to() {
                Some(d) => cpus = cpus.union(d),
                None => unknown += 1,
            }
        }
        groups.push(QueueGroup {
            kind,
            indexes: (indexes.len() == members.len()).then(|| ranges(&indexes)),
            count: members.len(),
            cpus,
            unknown,
        });
    }
    groups
}

/// Sorted numbers as ranges: `0-3,7`.
pub fn ranges(v: &[u32]) -> String {
    let mut out = String::new();
    let mut i = 0;
    while i < v.len() {
        let mut j = i;
        while j + 1 < v.len() && v[j + 1] == v[j] + 1 {
            j += 1;
        }
        if !out.is_empty() {
            out.push(',');
        }
        out.push_str(&v[i].to_string());
        if j > i {
            out.push('-');
            out.push_str(&v[j].to_string());
        }
        i = j + 1;
    }
    out
}

pub(crate) fn gap_entry(g: &Gap) -> GapEntry {
    let p = g.path.as_str();
    let (reason, why) = match &g.reason {
        GapReason::Missing if p.starts_with("sys/kernel/debug") => (
            "missing",
            "debugfs is not mounted: whether IRQs are kernel-managed is unknown".to_string(),
        ),
        GapReason::PermissionDenied if p.starts_with("sys/kernel/debug") => (
            "permission-denied",
            "debugfs is root-only: whether IRQs are kernel-managed is unknown".to_string(),
        ),
        GapReason::Missing
            if p
                .strip_prefix("proc/irq/")
                .is_some_and(|r| !r.contains('/') && r != "default_smp_affinity") =>
        (
            "missing",
            "IRQ allocated but never requested (the kernel adds /proc/irq/N on request): no affinity"
                .to_string(),
        ),
        GapReason::Missing if p.starts_with("ethtool:") => (
            "missing",
            "no live interface under this root: its coalescing is unknown".to_string(),
        ),
        GapReason::Missing if p.starts_with("dev/nvme") => (
            "missing",
            "no NVMe device node under this root: its interrupt coalescing is unknown".to_string(),
        ),
        GapReason::PermissionDenied if p.starts_with("dev/nvme") || p.starts_with("ethtool:") => (
            "permission-denied",
            "reading the device's moderation needs root".to_string(),
        ),
        GapReason::Missing if p == "sys" || p == "proc" => {
            ("missing", format!("no /{p} under this root: facts from it are unknown"))
        }
        GapReason::Missing => ("missing", "not provided by this kernel or root".to_string()),
        GapReason::PermissionDenied => (
            "permission-denied",
            "not readable by this user (root can read it)".to_string(),
        ),
        GapReason::Unparsable(msg) => ("unparsable", msg.clone()),
    };
    GapEntry {
        path: g.path.clone(),
        reason,
        why,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_fold_runs() {
        assert_eq!(ranges(&[]), "");
        assert_eq!(ranges(&[0, 1, 2, 3, 7, 9, 10]), "0-3,7,9-10");
        assert_eq!(ranges(&[5]), "5");
    }

    #[test]
    fn kinds_from_class() {
        assert_eq!(device_kind(Some(0x010802)), "nvme");
        assert_eq!(device_kind(Some(0x020000)), "network");
        assert_eq!(device_kind(Some(0x060000)), "host-bridge");
        assert_eq!(device_kind(Some(0x060400)), "pci-bridge");
        assert_eq!(device_kind(None), "unknown");
    }
}
