//! `/proc/irq/N/*` and `/proc/irq/default_smp_affinity` (`kernel/irq/proc.c`).
//!
//! | file | kernel print | model |
//! |---|---|---|
//! | `smp_affinity`, `effective_affinity`, `affinity_hint`, `default_smp_affinity` | `%*pb\n` (`nr_cpu_ids` bits) | [`CpuSet`] |
//! | `smp_affinity_list`, `effective_affinity_list` | `%*pbl\n` | [`CpuSet`] |
//! | `node` | `%d\n`, `-1` when unknown | `Option<NodeId>` |
//!
//! `affinity_hint` prints an all-zero mask when the driver gave no hint, so an empty set reads as
//! "no hint".

use crate::error::ParseError;
use crate::format::value;
use irqpilot_core::{CpuSet, NodeId};

/// The per-IRQ files this module reads, relative to `/proc/irq/N/`.
pub const SMP_AFFINITY: &str = "smp_affinity";
/// Requested affinity as a cpulist.
pub const SMP_AFFINITY_LIST: &str = "smp_affinity_list";
/// Effective affinity as a mask (`CONFIG_GENERIC_IRQ_EFFECTIVE_AFF_MASK`, 4.13+).
pub const EFFECTIVE_AFFINITY: &str = "effective_affinity";
/// Effective affinity as a cpulist.
pub const EFFECTIVE_AFFINITY_LIST: &str = "effective_affinity_list";
/// Driver affinity hint (mask).
pub const AFFINITY_HINT: &str = "affinity_hint";
/// NUMA node of the IRQ descriptor.
pub const NODE: &str = "node";

/// Parses `smp_affinity`, `effective_affinity` or `default_smp_affinity` (hex mask).
pub fn parse_affinity_mask(text: &str) -> Result<CpuSet, ParseError> {
    value::parse_mask(text)
}

/// Renders a mask file `nr_cpu_ids` bits wide (`3\n` for CPUs 0-1 of 2).
pub fn render_affinity_mask(set: &CpuSet, nr_cpu_ids: u32) -> String {
    value::render_mask(set, nr_cpu_ids)
}

/// Parses `smp_affinity_list` or `effective_affinity_list`.
pub fn parse_affinity_list(text: &str) -> Result<CpuSet, ParseError> {
    value::parse_cpulist(text)
}

/// Renders a `_list` file (`0-1\n`).
pub fn render_affinity_list(set: &CpuSet) -> String {
    value::render_cpulist(set)
}

/// Parses `affinity_hint`: `None` when the mask is all zeros (no hint).
pub fn parse_affinity_hint(text: &str) -> Result<Option<CpuSet>, ParseError> {
    let set = value::parse_mask(text)?;
    Ok((!set.is_empty()).then_some(set))
}

/// Renders `affinity_hint`; no hint prints as an all-zero mask `nr_cpu_ids` bits wide.
pub fn render_affinity_hint(hint: Option<&CpuSet>, nr_cpu_ids: u32) -> String {
    value::render_mask(hint.unwrap_or(&CpuSet::new()), nr_cpu_ids)
}

/// Parses `node`: `None` for `-1` (no node).
pub fn parse_node(text: &str) -> Result<Option<NodeId>, ParseError> {
    Ok(value::parse_id_or_none(text)?.map(NodeId))
}

/// Renders `node` (`-1\n` for none).
pub fn render_node(node: Option<NodeId>) -> String {
    value::render_id_or_none(node.map(NodeId::get))
}

/// Parses a directory name under `/proc/irq` (or `/sys/kernel/irq`) as an IRQ number; other
/// entries (`default_smp_affinity`) give `None`.
pub fn parse_irq_dir_name(name: &str) -> Option<irqpilot_core::IrqNum> {
    if name.is_empty() || name.len() > 9 || !name.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    name.parse().ok().map(irqpilot_core::IrqNum)
}

#[cfg(test)]
mod tests {
    use super::*;
    use irqpilot_core::{CpuId, IrqNum};
    use proptest::prelude::*;

    fn l(s: &str) -> CpuSet {
        CpuSet::parse_list(s).unwrap()
    }

    #[test]
    fn real_two_cpu_files() {
        // Captured from a 2-vCPU Firecracker guest, IRQ 24.
        assert_eq!(parse_affinity_mask("3\n"), Ok(l("0-1")));
        assert_eq!(parse_affinity_list("0-1\n"), Ok(l("0-1")));
        assert_eq!(parse_affinity_mask("1\n"), Ok(l("0")));
        assert_eq!(parse_affinity_hint("0\n"), Ok(None));
        assert_eq!(parse_node("-1\n"), Ok(None));
        assert_eq!(render_affinity_mask(&l("0-1"), 2), "3\n");
        assert_eq!(render_affinity_hint(None, 2), "0\n");
        assert_eq!(render_node(None), "-1\n");
    }

    #[test]
    fn wide_machines() {
        let text = "00000000,00000000,00000000,00000000,00000000,00000000,00000000,00000000,\
                    00000000,00000000,00000000,00000000,00000000,00000000,00000000,00000000\n";
        assert_eq!(parse_affinity_hint(text), Ok(None));
        assert_eq!(render_affinity_hint(None, 512), text);
        assert_eq!(parse_node("1\n"), Ok(Some(NodeId(1))));
        assert_eq!(
            parse_affinity_mask("ff,ffffffff\n"),
            Ok(CpuSet::range(0, 39))
        );
        assert_eq!(
            render_affinity_mask(&l("4"), 40),
            "00,00000010\n",
            "first group only as wide as the leftover bits"
        );
    }

    #[test]
    fn malformed() {
        let e = parse_affinity_list("zz\n").unwrap_err();
        assert_eq!(e.line, 1);
        assert!(e.message.contains("zz"));
        assert!(parse_affinity_mask("g\n").is_err());
        assert!(parse_node("x\n").is_err());
        assert!(parse_node("-2\n").is_err());
        assert_eq!(parse_affinity_list("0\n1\n").unwrap_err().line, 2);
    }

    #[test]
    fn dir_names() {
        assert_eq!(parse_irq_dir_name("24"), Some(IrqNum(24)));
        assert_eq!(parse_irq_dir_name("default_smp_affinity"), None);
        assert_eq!(parse_irq_dir_name(""), None);
        assert_eq!(parse_irq_dir_name("99999999999"), None);
    }

    fn cpuset() -> impl Strategy<Value = CpuSet> {
        proptest::collection::btree_set(0u32..1100, 0..40)
            .prop_map(|v| v.into_iter().map(CpuId).collect())
    }

    proptest! {
        #[test]
        fn affinity_files_round_trip(set in cpuset(), extra in 0u32..64) {
            let nr = set.last().map_or(1, |c| c.0 + 1) + extra;
            let mask = render_affinity_mask(&set, nr);
            prop_assert_eq!(parse_affinity_mask(&mask), Ok(set.clone()));
            let list = render_affinity_list(&set);
            prop_assert_eq!(parse_affinity_list(&list), Ok(set.clone()));
            let hint = render_affinity_hint(Some(&set), nr);
            let back = parse_affinity_hint(&hint).unwrap();
            prop_assert_eq!(render_affinity_hint(back.as_ref(), nr), hint);
            prop_assert_eq!(back.is_none(), set.is_empty());
        }

        #[test]
        fn node_round_trip(node in proptest::option::of(0u32..1024)) {
            let node = node.map(NodeId);
            prop_assert_eq!(parse_node(&render_node(node)), Ok(node));
        }
    }
}
