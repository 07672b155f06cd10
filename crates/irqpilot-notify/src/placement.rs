//! Where the two ends of a ping-pong run: a pure function of the [`Topology`] (and the CPUs this
//! process may use), so it is tested on synthetic machines.
//!
//! Kinds are mutually exclusive and follow [`Topology::relation`], nearest first:
//!
//! | kind            | relation of the two CPUs                                        |
//! |-----------------|-----------------------------------------------------------------|
//! | `same-cpu`      | one logical CPU (blocking variants measure a context switch)    |
//! | `smt-sibling`   | two hardware threads of one core                                |
//! | `same-cache`    | different cores that share a data/unified cache (L2 cluster, L3/LLC) |
//! | `other-core`    | same package, no shared cache known (e.g. AMD across CCXs), or nothing known |
//! | `other-package` | different packages (sockets)                                    |
//!
//! A machine gets the kinds it has: a regular Intel server with a package-wide L3 has no
//! `other-core` pair (every pair of cores shares the L3), a VM whose guest topology shows no
//! caches has `same-cpu` and `other-core`. Each chosen pair uses the lowest usable CPU as the
//! pinger when it can, so rows differ only in where the ponger sits.

use irqpilot_core::{CpuId, CpuRelation, CpuSet, Topology};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// A class of CPU pairs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PlacementKind {
    /// Both ends on one logical CPU.
    SameCpu,
    /// Two SMT threads of one core.
    SmtSibling,
    /// Different cores sharing a cache.
    SameCache,
    /// Different cores of one package without a shared cache (or with nothing known).
    OtherCore,
    /// Different packages.
    OtherPackage,
}

impl PlacementKind {
    /// All kinds, nearest first.
    pub const ALL: [PlacementKind; 5] = [
        PlacementKind::SameCpu,
        PlacementKind::SmtSibling,
        PlacementKind::SameCache,
        PlacementKind::OtherCore,
        PlacementKind::OtherPackage,
    ];

    /// The name used in JSON and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            PlacementKind::SameCpu => "same-cpu",
            PlacementKind::SmtSibling => "smt-sibling",
            PlacementKind::SameCache => "same-cache",
            PlacementKind::OtherCore => "other-core",
            PlacementKind::OtherPackage => "other-package",
        }
    }

    /// The kind of the pair `(a, b)` on `topology`.
    pub fn classify(topology: &Topology, a: CpuId, b: CpuId) -> PlacementKind {
        match topology.relation(a, b) {
            CpuRelation::SameCpu => PlacementKind::SameCpu,
            CpuRelation::SmtSibling => PlacementKind::SmtSibling,
            CpuRelation::SharedCache(_) => PlacementKind::SameCache,
            CpuRelation::SamePackage => PlacementKind::OtherCore,
            CpuRelation::SameNode | CpuRelation::Remote => {
                let pkg = |c: CpuId| topology.cpu(c).and_then(|t| t.package);
                let pkg_set = topology.cpu(a).and_then(|t| t.package_cpus.as_ref());
                match (pkg(a), pkg(b), pkg_set) {
                    (Some(x), Some(y), _) if x != y => PlacementKind::OtherPackage,
                    (_, _, Some(set)) if !set.contains(b) => PlacementKind::OtherPackage,
                    // Nothing says they are in different packages: the honest common case.
                    _ => PlacementKind::OtherCore,
                }
            }
        }
    }
}

impl fmt::Display for PlacementKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An unknown placement name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown placement {0:?} (expected one of same-cpu, smt-sibling, same-cache, other-core, other-package)"
)]
pub struct UnknownPlacement(pub String);

impl FromStr for PlacementKind {
    type Err = UnknownPlacement;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        PlacementKind::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| UnknownPlacement(s.to_string()))
    }
}

/// One concrete pair of CPUs for a placement kind.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Placement {
    /// The class of the pair.
    pub kind: PlacementKind,
    /// The pinger's CPU (it sends first and times the round trip).
    pub pinger: CpuId,
    /// The ponger's CPU.
    pub ponger: CpuId,
    /// What the topology says about the pair, in words.
    pub detail: String,
}

fn describe(topology: &Topology, a: CpuId, b: CpuId) -> String {
    match topology.relation(a, b) {
        CpuRelation::SameCpu => "one logical CPU".to_string(),
        CpuRelation::SmtSibling => "SMT siblings of one core".to_string(),
        CpuRelation::SharedCache(level) => format!("different cores sharing L{level}"),
        CpuRelation::SamePackage => "same package, no shared cache".to_string(),
        CpuRelation::SameNode => "different packages, same NUMA node".to_string(),
        CpuRelation::Remote => match PlacementKind::classify(topology, a, b) {
            PlacementKind::OtherPackage => "different packages".to_string(),
            _ => "different CPUs, sharing unknown".to_string(),
        },
    }
}

/// Chooses one pair per placement kind present among `online ∩ allowed` (allowed = `None`
/// means every online CPU). Pure: no I/O.
pub fn select_placements(topology: &Topology, allowed: Option<&CpuSet>) -> Vec<Placement> {
    let usable: Vec<CpuId> = topology
        .online
        .iter()
        .filter(|c| allowed.is_none_or(|set| set.contains(*c)))
        .collect();
    let mut found: Vec<Placement> = Vec::new();
    let has = |found: &Vec<Placement>, k: PlacementKind| found.iter().any(|p| p.kind == k);
    'anchors: for &a in &usable {
        for &b in &usable {
            if b < a {
                continue;
            }
            let kind = PlacementKind::classify(topology, a, b);
            if !has(&found, kind) {
                found.push(Placement {
                    kind,
                    pinger: a,
                    ponger: b,
                    detail: describe(topology, a, b),
                });
                if found.len() == PlacementKind::ALL.len() {
                    break 'anchors;
                }
            }
        }
    }
    found.sort_by_key(|p| p.kind);
    found
}

/// The kinds missing from `placements`, in order.
pub fn absent_kinds(placements: &[Placement]) -> Vec<PlacementKind> {
    PlacementKind::ALL
        .into_iter()
        .filter(|k| !placements.iter().any(|p| p.kind == *k))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use irqpilot_core::{Cache, CacheKind, CpuTopo};

    fn kinds(t: &Topology) -> Vec<(PlacementKind, u32, u32)> {
        select_placements(t, None)
            .into_iter()
            .map(|p| (p.kind, p.pinger.0, p.ponger.0))
            .collect()
    }

    #[test]
    fn two_sockets_of_intel_like_cores() {
        // 2 packages x 4 cores x 2 threads, one L3 per package: every pair of cores in a
        // package shares the L3, so there is no other-core pair.
        let t = Topology::synthetic(2, 2, 4, 2);
        assert_eq!(
            kinds(&t),
            vec![
                (PlacementKind::SameCpu, 0, 0),
                (PlacementKind::SmtSibling, 0, 8),
                (PlacementKind::SameCache, 0, 1),
                (PlacementKind::OtherPackage, 0, 4),
            ]
        );
    }

    /// 2 packages x 4 cores x 2 threads with the L3 split into two 2-core CCXs per package
    /// (AMD-like): all five kinds.
    fn two_sockets_of_ccxs() -> Topology {
        let mut t = Topology::synthetic(2, 2, 4, 2);
        let ccx_of = |cpu: u32| (cpu % 8) / 2; // cores 0-1, 2-3 of package 0, 4-5, 6-7 of package 1
        let members =
            |ccx: u32| -> CpuSet { (0..16).filter(|c| ccx_of(*c) == ccx).map(CpuId).collect() };
        for (cpu, topo) in t.cpus.iter_mut() {
            for cache in topo.caches.iter_mut().filter(|c| c.level == 3) {
                cache.shared_cpus = members(ccx_of(cpu.0));
                cache.id = Some(ccx_of(cpu.0));
            }
        }
        t
    }

    #[test]
    fn two_sockets_of_ccxs_gives_all_five() {
        let t = two_sockets_of_ccxs();
        assert_eq!(
            kinds(&t),
            vec![
                (PlacementKind::SameCpu, 0, 0),
                (PlacementKind::SmtSibling, 0, 8),
                (PlacementKind::SameCache, 0, 1),
                (PlacementKind::OtherCore, 0, 2),
                (PlacementKind::OtherPackage, 0, 4),
            ]
        );
        assert!(absent_kinds(&select_placements(&t, None)).is_empty());
    }

    fn two_vcpus(with_l3: bool) -> Topology {
        let mut t = Topology {
            online: CpuSet::range(0, 1),
            ..Topology::default()
        };
        for c in 0..2 {
            let caches = if with_l3 {
                vec![Cache {
                    level: 3,
                    kind: CacheKind::Unified,
                    size_bytes: None,
                    shared_cpus: CpuSet::range(0, 1),
                    id: Some(0),
                }]
            } else {
                vec![]
            };
            t.cpus.insert(
                CpuId(c),
                CpuTopo {
                    package: Some(0),
                    thread_siblings: Some(CpuSet::single(CpuId(c))),
                    package_cpus: Some(CpuSet::range(0, 1)),
                    caches,
                    ..CpuTopo::default()
                },
            );
        }
        t
    }

    #[test]
    fn two_vcpu_vm() {
        // Guest topology without caches: same-cpu and other-core only.
        assert_eq!(
            kinds(&two_vcpus(false)),
            vec![
                (PlacementKind::SameCpu, 0, 0),
                (PlacementKind::OtherCore, 0, 1)
            ]
        );
        // A Firecracker guest that reports a shared L3 (like the machine the docs were made on).
        let t = two_vcpus(true);
        assert_eq!(
            kinds(&t),
            vec![
                (PlacementKind::SameCpu, 0, 0),
                (PlacementKind::SameCache, 0, 1)
            ]
        );
        assert_eq!(
            select_placements(&t, None)[1].detail,
            "different cores sharing L3"
        );
        // Nothing known at all: still other-core, never a guessed other-package.
        let bare = Topology {
            online: CpuSet::range(0, 1),
            ..Topology::default()
        };
        assert_eq!(
            kinds(&bare),
            vec![
                (PlacementKind::SameCpu, 0, 0),
                (PlacementKind::OtherCore, 0, 1)
            ]
        );
    }

    #[test]
    fn allowed_cpus_restrict_the_choice() {
        let t = Topology::synthetic(2, 2, 4, 2);
        let only_one = CpuSet::single(CpuId(3));
        assert_eq!(
            select_placements(&t, Some(&only_one))
                .iter()
                .map(|p| (p.kind, p.pinger.0))
                .collect::<Vec<_>>(),
            vec![(PlacementKind::SameCpu, 3)]
        );
        // Without CPU 0 the anchor moves to CPU 1.
        let no_zero = t.online.difference(&CpuSet::single(CpuId(0)));
        let p = select_placements(&t, Some(&no_zero));
        assert_eq!(p[0].pinger, CpuId(1));
        assert_eq!(p.len(), 4);
        let single = Topology::synthetic(1, 1, 1, 1);
        assert_eq!(kinds(&single), vec![(PlacementKind::SameCpu, 0, 0)]);
        assert_eq!(absent_kinds(&select_placements(&single, None)).len(), 4);
    }

    #[test]
    fn names_round_trip() {
        for k in PlacementKind::ALL {
            assert_eq!(k.name().parse::<PlacementKind>().unwrap(), k);
            assert_eq!(
                serde_json::to_string(&k).unwrap(),
                format!("\"{}\"", k.name())
            );
        }
        assert!("far-away".parse::<PlacementKind>().is_err());
    }
}
