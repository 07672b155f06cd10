//! Topology: `sys/devices/system/cpu` (online/possible, per-CPU topology and caches) and
//! `sys/devices/system/node`.

use super::{Family, Parser, fetch_first, fetch_item, fetch_single, list_single};
use crate::format::cpu;
use crate::root::Root;
use irqpilot_core::{Cache, CpuId, CpuSet, CpuTopo, GapReason, Topology};
use std::collections::BTreeMap;

use super::gaps::GapLog;

const CPU_DIR: &str = "sys/devices/system/cpu";
const NODE_DIR: &str = "sys/devices/system/node";

/// x86 prints `BAD_APICID` (0xffff) as `cluster_id` when the CPU reports no L2 cluster; every
/// CPU then shows the same number, which would read as "one cluster".
const X86_NO_CLUSTER: u32 = 0xffff;

/// What the first pass learned about one `cpuN` directory.
struct CpuDir {
    cpu: CpuId,
    has_topology: bool,
    cache_indices: Vec<(u32, String)>,
}

pub(super) fn read_topology(root: &Root, log: &mut GapLog) -> Topology {
    let mut topo = Topology::default();
    let Some(entries) = list_single(root, log, CPU_DIR, true) else {
        return topo;
    };
    let online_rel = format!("{CPU_DIR}/online");
    let mut online = fetch_single(root, log, &online_rel, cpu::parse_cpulist);
    topo.possible = fetch_single(
        root,
        log,
        &format!("{CPU_DIR}/possible"),
        cpu::parse_cpulist,
    );
    // An online CPU that is not possible cannot be: one of the two files is wrong, and online
    // CPUs become the housekeeping set and `default_smp_affinity`. Online is then unknown
    // (the platform falls back to the CPU columns of /proc/interrupts).
    if let (Some(on), Some(possible)) = (&online, &topo.possible) {
        let beyond = on.difference(possible);
        if !beyond.is_empty() {
            log.single(
                &online_rel,
                GapReason::Unparsable(format!(
                    "online CPUs {beyond} are not possible (possible: {possible})"
                )),
            );
            online = None;
        }
    }
    // Offline CPUs lose their topology and cache directories (cpuhp teardown): only CPUs known
    // to be online, or all when `online` is unknown, are expected to have them.
    let expected = |c: CpuId| online.as_ref().is_none_or(|o| o.contains(c));

    let mut dirs: Vec<CpuDir> = Vec::new();
    let mut cpu_names: Vec<(CpuId, &String)> = entries
        .iter()
        .filter_map(|n| cpu::parse_cpu_dir_name(n).map(|c| (c, n)))
        .collect();
    cpu_names.sort();
    let expected_count = cpu_names.iter().filter(|(c, _)| expected(*c)).count();
    for (c, name) in cpu_names {
        let sub = match root.list_dir(&format!("{CPU_DIR}/{name}")) {
            Ok(sub) => sub.unwrap_or_default(),
            Err(reason) => {
                // One gap for the directory; nothing under it is looked at.
                log.item(
                    &format!("{CPU_DIR}/cpu{{}}"),
                    &c.0.to_string(),
                    expected_count,
                    reason,
                );
                dirs.push(CpuDir {
                    cpu: c,
                    has_topology: false,
                    cache_indices: Vec::new(),
                });
                continue;
            }
        };
        let has = |d: &str| sub.iter().any(|n| n == d);
        let has_topology = has("topology");
        if !has_topology && expected(c) {
            log.item(
                &format!("{CPU_DIR}/cpu{{}}/topology"),
                &c.0.to_string(),
                expected_count,
                GapReason::Missing,
            );
        }
        let mut cache_indices = Vec::new();
        if has("cache") {
            match root.list_dir(&format!("{CPU_DIR}/{name}/cache")) {
                Ok(Some(names)) => {
                    cache_indices = names
                        .into_iter()
                        .filter_map(|n| cpu::parse_cache_index_name(&n).map(|i| (i, n)))
                        .collect();
                    cache_indices.sort();
                }
                Ok(None) => {}
                Err(reason) => log.item(
                    &format!("{CPU_DIR}/cpu{{}}/cache"),
                    &c.0.to_string(),
                    expected_count,
                    reason,
                ),
            }
        } else if expected(c) {
            log.item(
                &format!("{CPU_DIR}/cpu{{}}/cache"),
                &c.0.to_string(),
                expected_count,
                GapReason::Missing,
            );
        }
        dirs.push(CpuDir {
            cpu: c,
            has_topology,
            cache_indices,
        });
    }

    let with_topology = dirs.iter().filter(|d| d.has_topology).count();
    let mut per_index: BTreeMap<&str, usize> = BTreeMap::new();
    for d in &dirs {
        for (_, name) in &d.cache_indices {
            *per_index.entry(name.as_str()).or_default() += 1;
        }
    }
    for d in &dirs {
        let item = d.cpu.0.to_string();
        let mut t = CpuTopo::default();
        if d.has_topology {
            read_cpu_topology(
                root,
                log,
                Family {
                    item: &item,
                    universe: with_topology,
                },
                &mut t,
            );
        }
        for (_, index) in &d.cache_indices {
            let fam = Family {
                item: &item,
                universe: per_index.get(index.as_str()).copied().unwrap_or(0),
            };
            if let Some(cache) = read_cache(root, log, fam, index) {
                t.caches.push(cache);
            }
        }
        t.caches.sort_by_key(|c| (c.level, c.kind));
        topo.cpus.insert(d.cpu, t);
    }
    // Empty when unknown: `LinuxPlatform::machine` fills it from /proc/interrupts.
    topo.online = online.unwrap_or_default();
    read_nodes(root, log, &mut topo);
    topo
}

fn read_cpu_topology(root: &Root, log: &mut GapLog, fam: Family<'_>, t: &mut CpuTopo) {
    let base = format!("{CPU_DIR}/cpu{{}}/topology");
    let id = |log: &mut GapLog, file: &str| {
        fetch_item(
            root,
            log,
            fam,
            &format!("{base}/{file}"),
            cpu::parse_topology_id,
        )
        .flatten()
    };
    t.package = id(log, "physical_package_id");
    t.die = id(log, "die_id");
    t.cluster = id(log, "cluster_id").filter(|c| *c != X86_NO_CLUSTER);
    t.core = id(log, "core_id");
    // The newer names (5.x) first, the older ones still present for compatibility after.
    let list = |log: &mut GapLog, files: &[&str]| {
        let patterns: Vec<String> = files.iter().map(|f| format!("{base}/{f}")).collect();
        let sources: Vec<(&str, Parser<CpuSet>)> = patterns
            .iter()
            .map(|p| (p.as_str(), cpu::parse_cpulist as Parser<CpuSet>))
            .collect();
        fetch_first(root, log, fam, &sources)
    };
    t.thread_siblings = list(log, &["core_cpus_list", "thread_siblings_list"]);
    t.cluster_cpus = list(log, &["cluster_cpus_list"]);
    t.die_cpus = list(log, &["die_cpus_list"]);
    t.package_cpus = list(log, &["package_cpus_list", "core_siblings_list"]);
}

fn read_cache(root: &Root, log: &mut GapLog, fam: Family<'_>, index: &str) -> Option<Cache> {
    let base = format!("{CPU_DIR}/cpu{{}}/cache/{index}");
    // Read every file first so that each problem is logged, then require the essential ones.
    let level = fetch_item(
        root,
        log,
        fam,
        &format!("{base}/level"),
        cpu::parse_cache_level,
    );
    let kind = fetch_item(
        root,
        log,
        fam,
        &format!("{base}/type"),
        cpu::parse_cache_type,
    );
    let shared = fetch_item(
        root,
        log,
        fam,
        &format!("{base}/shared_cpu_list"),
        cpu::parse_cpulist,
    );
    let size_bytes = fetch_item(
        root,
        log,
        fam,
        &format!("{base}/size"),
        cpu::parse_cache_size,
    );
    let id = fetch_item(root, log, fam, &format!("{base}/id"), cpu::parse_cache_id);
    Some(Cache {
        level: level?,
        kind: kind?,
        size_bytes,
        shared_cpus: shared?,
        id,
    })
}

fn read_nodes(root: &Root, log: &mut GapLog, topo: &mut Topology) {
    let Some(entries) = list_single(root, log, NODE_DIR, true) else {
        return;
    };
    let nodes: Vec<_> = entries
        .iter()
        .filter_map(|n| cpu::parse_node_dir_name(n))
        .collect();
    for &node in &nodes {
        let item = node.0.to_string();
        let fam = Family {
            item: &item,
            universe: nodes.len(),
        };
        if let Some(cpus) = fetch_item(
            root,
            log,
            fam,
            &format!("{NODE_DIR}/node{{}}/cpulist"),
            cpu::parse_cpulist,
        ) {
            topo.nodes.insert(node, cpus);
        }
    }
    for (cpu, t) in topo.cpus.iter_mut() {
        t.node = topo
            .nodes
            .iter()
            .find(|(_, set): &(_, &CpuSet)| set.contains(*cpu))
            .map(|(n, _)| *n);
    }
}
