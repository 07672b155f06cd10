//! Kernel-managed interrupts (the NVMe I/O queue vectors) as Linux sets them up, our reading of
//! the kernel's code (balancing.md 5.2, 5.4, 5.6):
//!
//! 1. **Spread at allocation** (`irq_create_affinity_masks` -> `group_cpus_evenly`,
//!    `lib/group_cpus.c`): a device's queue vectors get masks that cover its CPUs once, NUMA
//!    nodes first (each node with CPUs gets at least one group, the others in proportion to
//!    their CPUs, smaller nodes first), then consecutive CPUs of a node with their SMT siblings
//!    kept together; the first groups of a node take one CPU more when the division leaves some.
//! 2. **Reserved on every CPU of the mask** (`irq_matrix_reserve_managed`): a managed vector
//!    holds a slot on each CPU of its mask, so those slots are gone for other IRQs.
//! 3. **Effective CPU** (`assign_managed_vector` -> `irq_matrix_alloc_managed`): the online CPU
//!    of the mask with the fewest managed vectors allocated; on equal counts the last one in
//!    mask order (`matrix_find_best_cpu_managed` skips only strictly larger counts).
//! 4. **`isolcpus=managed_irq`** (`irq_do_set_affinity`, `kernel/irq/manage.c`): the search is
//!    limited to the mask's housekeeping CPUs when one of them is online; a mask that holds
//!    only isolated CPUs keeps them all, and its interrupts fire there (they come only for I/O
//!    submitted from those CPUs).
//! 5. **User space cannot move them** (`write_irq_affinity`, `kernel/irq/proc.c`): a write to
//!    `smp_affinity` or `smp_affinity_list` fails with EPERM (EIO before 6.12) and changes
//!    nothing (`vectors.rs`).
//! 6. **Submission picks the queue** (`blk_mq_map_hw_queues`): I/O submitted on CPU `c` goes to
//!    the queue whose mask holds `c`, so its completion interrupt comes on that queue's vector.
//!    The fio workload keeps `iodepth` reads in flight on every queue, as if a job ran on the
//!    CPUs of each queue's mask.
//!
//! Deviation, stated: when nodes have equal CPU counts the kernel's heap sort leaves their order
//! unspecified; here equal nodes go in node order.

use irqpilot_core::{CpuId, CpuSet, NodeId, Topology};
use std::collections::BTreeMap;

/// Rule 1: `groups` masks over `cpus` (`group_cpus_evenly`). With more groups than CPUs the
/// extra groups are empty (drivers never ask for that: NVMe makes at most one I/O queue per
/// CPU; the scenario check refuses it).
pub(crate) fn spread(topo: &Topology, cpus: &CpuSet, groups: u32) -> Vec<CpuSet> {
    let mut masks = vec![CpuSet::new(); groups as usize];
    if groups == 0 || cpus.is_empty() {
        return masks;
    }
    // CPUs of `cpus` per node; CPUs of no known node form node u32::MAX.
    let mut per_node: BTreeMap<NodeId, CpuSet> = BTreeMap::new();
    for c in cpus {
        let n = topo.node_of(c).unwrap_or(NodeId(u32::MAX));
        per_node.entry(n).or_default().insert(c);
    }
    if groups as usize <= per_node.len() {
        // Fewer groups than nodes: whole nodes, dealt round the groups.
        for (i, set) in per_node.values().enumerate() {
            let m = &mut masks[i % groups as usize];
            *m = m.union(set);
        }
        return masks;
    }
    // Groups per node: the node with the fewest CPUs first, each at least one, the rest in
    // proportion to what remains.
    let mut order: Vec<(usize, NodeId)> = per_node.iter().map(|(n, s)| (s.len(), *n)).collect();
    order.sort();
    let mut remaining_cpus: usize = cpus.len();
    let mut remaining_groups = (groups as usize).min(remaining_cpus);
    let mut next = 0usize;
    for (ncpus, node) in order {
        let share = (remaining_groups * ncpus / remaining_cpus.max(1)).max(1);
        remaining_cpus -= ncpus;
        remaining_groups = remaining_groups.saturating_sub(share);
        let mut left = per_node.get(&node).cloned().unwrap_or_default();
        let per = ncpus / share;
        let mut extra = ncpus - share * per;
        for _ in 0..share {
            let mut want = per + usize::from(extra > 0);
            extra = extra.saturating_sub(1);
            let Some(mask) = masks.get_mut(next) else {
                break;
            };
            next += 1;
            // Consecutive CPUs, each with its SMT siblings first.
            while want > 0 {
                let Some(c) = left.first() else { break };
                for s in std::iter::once(c).chain(topo.smt_siblings(c).iter()) {
                    if want > 0 && left.remove(s) {
                        mask.insert(s);
                        want -= 1;
                    }
                }
            }
        }
    }
    masks
}

/// Rules 3 and 4: the CPU a managed vector with `mask` is programmed to, given the managed
/// vectors already allocated per CPU and the housekeeping CPUs of `isolcpus=managed_irq`
/// (`None` without it). `None` when the mask holds no online CPU.
pub(crate) fn effective_cpu(
    mask: &CpuSet,
    online: &CpuSet,
    managed_irq_housekeeping: Option<&CpuSet>,
    allocated: &[u32],
) -> Option<CpuId> {
    let usable = mask.intersection(online);
    let search = match managed_irq_housekeeping {
        Some(hk) => {
            let within = usable.intersection(hk);
            if within.is_empty() { usable } else { within }
        }
        None => usable,
    };
    let count = |c: CpuId| allocated.get(c.0 as usize).copied().unwrap_or(0);
    let mut best: Option<CpuId> = None;
    for c in &search {
        // Equal counts: the later CPU wins, as in the kernel's scan.
        if best.is_none_or(|b| count(c) <= count(b)) {
            best = Some(c);
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(s: &CpuSet) -> String {
        s.to_list_string()
    }

    /// Rule 1 (`group_cpus_evenly`): every CPU in exactly one mask, no mask across nodes, SMT
    /// siblings together, groups per node in proportion to its CPUs.
    #[test]
    fn spread_covers_each_cpu_once_by_node_with_siblings_together() {
        // 2 nodes x 4 cores x 2 threads: node 0 = 0-3,8-11; siblings (0,8), (1,9), ...
        let t = Topology::synthetic(2, 2, 4, 2);
        let m = spread(&t, &t.online, 4);
        let lists: Vec<String> = m.iter().map(list).collect();
        assert_eq!(
            lists,
            vec!["0-1,8-9", "2-3,10-11", "4-5,12-13", "6-7,14-15"]
        );
        // One per CPU: each CPU its own mask, in CPU order within a node.
        let m = spread(&t, &t.online, 16);
        assert!(m.iter().all(|s| s.len() == 1));
        let mut all: Vec<u32> = m.iter().filter_map(CpuSet::first).map(|c| c.0).collect();
        all.sort();
        assert_eq!(all, (0..16).collect::<Vec<_>>());
        assert_eq!(list(&m[0]), "0");
        assert_eq!(list(&m[1]), "1");
        // Uneven: 3 groups on 2 equal nodes: node 0 gets 1 (3 * 8 / 16), node 1 the other 2.
        let m = spread(&t, &t.online, 3);
        let lists: Vec<String> = m.iter().map(list).collect();
        assert_eq!(lists, vec!["0-3,8-11", "4-5,12-13", "6-7,14-15"]);
        // Fewer groups than nodes: whole nodes.
        let m = spread(&t, &t.online, 1);
        assert_eq!(list(&m[0]), "0-15");
        // Rounding: 3 groups over 4 CPUs of one node: 2 + 1 + 1.
        let t1 = Topology::synthetic(1, 1, 4, 1);
        let lists: Vec<String> = spread(&t1, &t1.online, 3).iter().map(list).collect();
        assert_eq!(lists, vec!["0-1", "2", "3"]);
    }

    /// Rule 3 (`matrix_find_best_cpu_managed`): fewest managed vectors, ties to the last CPU.
    #[test]
    fn effective_cpu_takes_the_least_loaded_and_the_last_on_ties() {
        let online = CpuSet::range(0, 7);
        let mask = CpuSet::range(0, 3);
        assert_eq!(effective_cpu(&mask, &online, None, &[0; 8]), Some(CpuId(3)));
        assert_eq!(
            effective_cpu(&mask, &online, None, &[1, 0, 1, 1, 0, 0, 0, 0]),
            Some(CpuId(1))
        );
        // Offline CPUs are never chosen; a mask without an online CPU has none.
        let online = CpuSet::range(0, 1);
        assert_eq!(effective_cpu(&mask, &online, None, &[0; 8]), Some(CpuId(1)));
        let far = CpuSet::range(4, 5);
        assert_eq!(effective_cpu(&far, &online, None, &[0; 8]), None);
    }

    /// Rule 4 (`irq_do_set_affinity` with `HK_TYPE_MANAGED_IRQ`): housekeeping CPUs of the mask
    /// when there are any online; otherwise the mask as it is, isolated CPUs included.
    #[test]
    fn managed_irq_keeps_housekeeping_cpus_of_the_mask_and_all_isolated_masks_stay() {
        let online = CpuSet::range(0, 7);
        let hk = CpuSet::range(0, 1);
        let mixed = CpuSet::range(1, 3);
        assert_eq!(
            effective_cpu(&mixed, &online, Some(&hk), &[0; 8]),
            Some(CpuId(1))
        );
        let isolated_only = CpuSet::range(4, 5);
        assert_eq!(
            effective_cpu(&isolated_only, &online, Some(&hk), &[0; 8]),
            Some(CpuId(5))
        );
    }
}
