//! `Topology`: which CPUs exist and how they share hardware (NUMA node, package, die, cluster,
//! core, SMT siblings, caches).
//!
//! Every per-CPU field is optional: old kernels lack `die_id`/`cluster_id`, containers hide
//! `/sys/devices/system/node`, and a missing fact must stay missing rather than be guessed.
//! Queries fall back to the narrowest honest answer (a CPU with no sibling information is its own
//! core).

use crate::cpuset::CpuSet;
use crate::ids::{CpuId, NodeId};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Kind of a cache (`cache/indexN/type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CacheKind {
    /// `Data`.
    Data,
    /// `Instruction`.
    Instruction,
    /// `Unified`.
    Unified,
}

/// One cache a CPU uses (`/sys/devices/system/cpu/cpuN/cache/indexK/`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cache {
    /// `level` (1 = L1).
    pub level: u8,
    /// `type`.
    pub kind: CacheKind,
    /// `size` in bytes (the file says e.g. `32K`).
    pub size_bytes: Option<u64>,
    /// `shared_cpu_list`: the CPUs sharing this cache.
    pub shared_cpus: CpuSet,
    /// `id`, where the kernel provides it.
    pub id: Option<u32>,
}

/// Topology facts of one logical CPU (`/sys/devices/system/cpu/cpuN/topology/`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuTopo {
    /// `physical_package_id`.
    pub package: Option<u32>,
    /// `die_id`.
    pub die: Option<u32>,
    /// `cluster_id`.
    pub cluster: Option<u32>,
    /// `core_id` (unique only within a package).
    pub core: Option<u32>,
    /// The NUMA node whose `cpulist` holds this CPU.
    pub node: Option<NodeId>,
    /// `thread_siblings_list` (a.k.a. `core_cpus_list`): SMT siblings including itself.
    pub thread_siblings: Option<CpuSet>,
    /// `cluster_cpus_list`.
    pub cluster_cpus: Option<CpuSet>,
    /// `die_cpus_list`.
    pub die_cpus: Option<CpuSet>,
    /// `package_cpus_list` (a.k.a. `core_siblings_list`).
    pub package_cpus: Option<CpuSet>,
    /// Caches, ascending by level.
    pub caches: Vec<Cache>,
}

/// How close two CPUs are, from nearest to farthest.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CpuRelation {
    /// The same logical CPU.
    SameCpu,
    /// Two hardware threads of one core.
    SmtSibling,
    /// Different cores that share a cache (the level is the lowest shared one).
    SharedCache(u8),
    /// Same package, no shared cache known.
    SamePackage,
    /// Same NUMA node, different package.
    SameNode,
    /// Different NUMA nodes, or nothing known.
    Remote,
}

/// The machine's CPUs and their sharing.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Topology {
    /// `/sys/devices/system/cpu/possible` (its last CPU + 1 is `nr_cpu_ids`, the mask width).
    pub possible: Option<CpuSet>,
    /// `/sys/devices/system/cpu/online`.
    pub online: CpuSet,
    /// Per-CPU facts for every CPU found under `/sys/devices/system/cpu/cpuN`.
    pub cpus: BTreeMap<CpuId, CpuTopo>,
    /// `/sys/devices/system/node/nodeN/cpulist`.
    pub nodes: BTreeMap<NodeId, CpuSet>,
}

impl Topology {
    /// Width of kernel masks (`nr_cpu_ids`): last possible CPU + 1, else last online CPU + 1.
    pub fn nr_cpu_ids(&self) -> u32 {
        let last = self
            .possible
            .as_ref()
            .and_then(CpuSet::last)
            .or_else(|| self.online.last());
        last.map_or(1, |c| c.0 + 1)
    }

    /// Facts of one CPU, if known.
    pub fn cpu(&self, cpu: CpuId) -> Option<&CpuTopo> {
        self.cpus.get(&cpu)
    }

    /// NUMA node of a CPU.
    pub fn node_of(&self, cpu: CpuId) -> Option<NodeId> {
        self.cpu(cpu).and_then(|t| t.node).or_else(|| {
            self.nodes
                .iter()
                .find(|(_, set)| set.contains(cpu))
                .map(|(n, _)| *n)
        })
    }

    /// SMT siblings of `cpu` (including it); `{cpu}` when unknown.
    pub fn smt_siblings(&self, cpu: CpuId) -> CpuSet {
        self.cpu(cpu)
            .and_then(|t| t.thread_siblings.clone())
            .unwrap_or_else(|| CpuSet::single(cpu))
    }

    /// CPUs of the package holding `cpu`; from `package_cpus`, else the CPUs with the same
    /// `physical_package_id`, else `{cpu}`.
    pub fn package_cpus(&self, cpu: CpuId) -> CpuSet {
        let Some(t) = self.cpu(cpu) else {
            return CpuSet::single(cpu);
        };
        if let Some(set) = &t.package_cpus {
            return set.clone();
        }
        match t.package {
            Some(p) => self
                .cpus
                .iter()
                .filter(|(_, o)| o.package == Some(p))
                .map(|(c, _)| *c)
                .collect(),
            None => CpuSet::single(cpu),
        }
    }

    /// The last-level cache shared by `cpu` (highest level data/unified cache), if known.
    pub fn llc(&self, cpu: CpuId) -> Option<&Cache> {
        self.cpu(cpu)?
            .caches
            .iter()
            .filter(|c| c.kind != CacheKind::Instruction)
            .max_by_key(|c| c.level)
    }

    /// A key naming the physical core of `cpu`: the lowest CPU among its SMT siblings.
    pub fn core_key(&self, cpu: CpuId) -> CpuId {
        self.smt_siblings(cpu).first().unwrap_or(cpu)
    }

    /// A key naming the package of `cpu`: `physical_package_id`, else the lowest CPU of the package.
    pub fn package_key(&self, cpu: CpuId) -> u32 {
        self.cpu(cpu)
            .and_then(|t| t.package)
            .unwrap_or_else(|| self.package_cpus(cpu).first().unwrap_or(cpu).0)
    }

    /// Physical cores among `cpus`: map from core key to the CPUs of that core in `cpus`.
    pub fn cores_in(&self, cpus: &CpuSet) -> BTreeMap<CpuId, CpuSet> {
        let mut cores: BTreeMap<CpuId, CpuSet> = BTreeMap::new();
        for c in cpus {
            cores.entry(self.core_key(c)).or_default().insert(c);
        }
        cores
    }

    /// How close `a` and `b` are.
    pub fn relation(&self, a: CpuId, b: CpuId) -> CpuRelation {
        if a == b {
            return CpuRelation::SameCpu;
        }
        if self.smt_siblings(a).contains(b) {
            return CpuRelation::SmtSibling;
        }
        if let Some(t) = self.cpu(a) {
            let shared = t
                .caches
                .iter()
                .filter(|c| c.kind != CacheKind::Instruction && c.shared_cpus.contains(b))
                .map(|c| c.level)
                .min();
            if let Some(level) = shared {
                return CpuRelation::SharedCache(level);
            }
        }
        if self.package_cpus(a).contains(b) && self.cpu(a).is_some() {
            return CpuRelation::SamePackage;
        }
        match (self.node_of(a), self.node_of(b)) {
            (Some(x), Some(y)) if x == y => CpuRelation::SameNode,
            _ => CpuRelation::Remote,
        }
    }

    /// A regular machine for tests and the simulator: `nodes` NUMA nodes, `packages` packages
    /// spread evenly over them, `cores` cores per package and `threads` SMT threads per core.
    /// CPUs are numbered the way x86 firmware usually does: first thread of every core, then the
    /// second threads. Each core has private L1d/L1i/L2, each package one shared L3.
    pub fn synthetic(nodes: u32, packages: u32, cores: u32, threads: u32) -> Topology {
        let (nodes, packages, cores, threads) =
            (nodes.max(1), packages.max(1), cores.max(1), threads.max(1));
        let per_thread = packages * cores;
        let total = per_thread * threads;
        let cpu_of = |p: u32, c: u32, t: u32| CpuId(t * per_thread + p * cores + c);
        let mut topo = Topology {
            possible: Some(CpuSet::range(0, total - 1)),
            online: CpuSet::range(0, total - 1),
            ..Topology::default()
        };
        let node_of_pkg = |p: u32| NodeId(p * nodes / packages);
        for p in 0..packages {
            let pkg_cpus: CpuSet = (0..cores)
                .flat_map(|c| (0..threads).map(move |t| cpu_of(p, c, t)))
                .collect();
            let node = node_of_pkg(p);
            topo.nodes.entry(node).or_default().extend(pkg_cpus.iter());
            for c in 0..cores {
                let siblings: CpuSet = (0..threads).map(|t| cpu_of(p, c, t)).collect();
                let private = |level, kind, size| Cache {
                    level,
                    kind,
                    size_bytes: Some(size),
                    shared_cpus: siblings.clone(),
                    id: Some(p * cores + c),
                };
                let caches = vec![
                    private(1, CacheKind::Data, 48 << 10),
                    private(1, CacheKind::Instruction, 32 << 10),
                    private(2, CacheKind::Unified, 2 << 20),
                    Cache {
                        level: 3,
                        kind: CacheKind::Unified,
                        size_bytes: Some(32 << 20),
                        shared_cpus: pkg_cpus.clone(),
                        id: Some(p),
                    },
                ];
                for t in 0..threads {
                    topo.cpus.insert(
                        cpu_of(p, c, t),
                        CpuTopo {
                            package: Some(p),
                            die: Some(0),
                            cluster: Some(p * cores + c),
                            core: Some(c),
                            node: Some(node),
                            thread_siblings: Some(siblings.clone()),
                            cluster_cpus: Some(siblings.clone()),
                            die_cpus: Some(pkg_cpus.clone()),
                            package_cpus: Some(pkg_cpus.clone()),
                            caches: caches.clone(),
                        },
                    );
                }
            }
        }
        topo
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn synthetic_shape() {
        let t = Topology::synthetic(2, 2, 4, 2);
        assert_eq!(t.online.len(), 16);
        assert_eq!(t.nr_cpu_ids(), 16);
        // cpu 0 and cpu 8 are the two threads of package 0 core 0.
        assert_eq!(t.smt_siblings(CpuId(0)).to_list_string(), "0,8");
        assert_eq!(t.package_cpus(CpuId(0)).to_list_string(), "0-3,8-11");
        assert_eq!(t.node_of(CpuId(4)), Some(NodeId(1)));
        assert_eq!(t.relation(CpuId(0), CpuId(8)), CpuRelation::SmtSibling);
        assert_eq!(t.relation(CpuId(0), CpuId(1)), CpuRelation::SharedCache(3));
        assert_eq!(t.relation(CpuId(0), CpuId(4)), CpuRelation::Remote);
        assert_eq!(t.relation(CpuId(3), CpuId(3)), CpuRelation::SameCpu);
        assert_eq!(t.cores_in(&t.online).len(), 8);
        assert_eq!(t.llc(CpuId(5)).map(|c| c.level), Some(3));
    }

    #[test]
    fn unknown_facts_stay_narrow() {
        let t = Topology {
            online: CpuSet::range(0, 3),
            ..Topology::default()
        };
        assert_eq!(t.smt_siblings(CpuId(2)), CpuSet::single(CpuId(2)));
        assert_eq!(t.relation(CpuId(0), CpuId(1)), CpuRelation::Remote);
        assert_eq!(t.node_of(CpuId(0)), None);
        assert_eq!(t.nr_cpu_ids(), 4);
    }
}
