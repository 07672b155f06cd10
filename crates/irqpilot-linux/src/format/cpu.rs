//! CPU and NUMA topology files under `/sys/devices/system/{cpu,node}` (`drivers/base/cpu.c`,
//! `drivers/base/topology.c`, `drivers/base/cacheinfo.c`, `drivers/base/node.c`).
//!
//! | file | kernel print | parser |
//! |---|---|---|
//! | `cpu/{online,possible,present,offline,isolated}` | `%*pbl\n` (an empty line for none) | [`parse_cpulist`] |
//! | `cpu/nohz_full` | `%*pbl\n`; `(null)\n` on kernels whose mask was never allocated | [`parse_nohz_full`] |
//! | `cpuN/topology/{physical_package_id,die_id,cluster_id,core_id}` | `%d\n`, `-1` on some architectures | [`parse_topology_id`] |
//! | `cpuN/topology/*_list` | `%*pbl\n` | [`parse_cpulist`] |
//! | `cpuN/cache/indexK/level`, `id` | `%u\n` | [`parse_cache_level`], [`parse_cache_id`] |
//! | `cpuN/cache/indexK/type` | `Data`, `Instruction`, `Unified` | [`parse_cache_type`] |
//! | `cpuN/cache/indexK/size` | `%uK\n` (always KiB) | [`parse_cache_size`] |
//! | `cpuN/cache/indexK/shared_cpu_list`, `node/nodeN/cpulist` | `%*pbl\n` | [`parse_cpulist`] |
//!
//! `cluster_id` on x86 prints 65535 (`BAD_APICID`) when the CPU reports no L2 cluster; the parser
//! returns the number as printed and leaves that interpretation to the reader.

use crate::error::ParseError;
use crate::format::value;
use irqpilot_core::{CacheKind, CpuId, CpuSet, NodeId};

pub use crate::format::value::{parse_cpulist, render_cpulist};

/// Parses `nohz_full`. Kernels built with `CPUMASK_OFFSTACK` whose nohz_full mask was never
/// allocated print `(null)`: that means no nohz_full CPU.
pub fn parse_nohz_full(text: &str) -> Result<CpuSet, ParseError> {
    if value::one_line(text)? == "(null)" {
        return Ok(CpuSet::new());
    }
    parse_cpulist(text)
}

/// Parses a topology id (`physical_package_id`, `die_id`, `cluster_id`, `core_id`): `None` for
/// `-1`.
pub fn parse_topology_id(text: &str) -> Result<Option<u32>, ParseError> {
    value::parse_id_or_none(text)
}

/// Renders a topology id (`-1\n` for `None`).
pub fn render_topology_id(id: Option<u32>) -> String {
    value::render_id_or_none(id)
}

/// Parses `cache/indexK/level`.
pub fn parse_cache_level(text: &str) -> Result<u8, ParseError> {
    let v = value::parse_unsigned(text)?;
    u8::try_from(v).map_err(|_| ParseError::new(1, format!("cache level out of range: {v}")))
}

/// Renders `cache/indexK/level`.
pub fn render_cache_level(level: u8) -> String {
    format!("{level}\n")
}

/// Parses `cache/indexK/type`.
pub fn parse_cache_type(text: &str) -> Result<CacheKind, ParseError> {
    match value::one_line(text)? {
        "Data" => Ok(CacheKind::Data),
        "Instruction" => Ok(CacheKind::Instruction),
        "Unified" => Ok(CacheKind::Unified),
        other => Err(ParseError::new(1, format!("unknown cache type {other:?}"))),
    }
}

/// Renders `cache/indexK/type`.
pub fn render_cache_type(kind: CacheKind) -> String {
    match kind {
        CacheKind::Data => "Data\n",
        CacheKind::Instruction => "Instruction\n",
        CacheKind::Unified => "Unified\n",
    }
    .to_string()
}

/// Parses `cache/indexK/size` into bytes. The kernel prints KiB with a `K` suffix; `M`, `G` and
/// a bare byte count are accepted too, for hand-written trees.
pub fn parse_cache_size(text: &str) -> Result<u64, ParseError> {
    let line = value::one_line(text)?;
    let (digits, shift) = match line.as_bytes().last() {
        Some(b'K') => (&line[..line.len() - 1], 10),
        Some(b'M') => (&line[..line.len() - 1], 20),
        Some(b'G') => (&line[..line.len() - 1], 30),
        _ => (line, 0),
    };
    if digits.is_empty() || digits.len() > 12 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(ParseError::new(1, format!("bad cache size {line:?}")));
    }
    digits
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(1 << shift))
        .ok_or_else(|| ParseError::new(1, format!("cache size out of range {line:?}")))
}

/// Renders `cache/indexK/size` the way the kernel does (`%uK\n`, whole KiB).
pub fn render_cache_size(bytes: u64) -> String {
    format!("{}K\n", bytes >> 10)
}

/// Parses `cache/indexK/id`.
pub fn parse_cache_id(text: &str) -> Result<u32, ParseError> {
    let v = value::parse_unsigned(text)?;
    u32::try_from(v).map_err(|_| ParseError::new(1, format!("cache id out of range: {v}")))
}

/// Renders `cache/indexK/id`.
pub fn render_cache_id(id: u32) -> String {
    format!("{id}\n")
}

fn numbered(name: &str, prefix: &str) -> Option<u32> {
    let digits = name.strip_prefix(prefix)?;
    if digits.is_empty() || digits.len() > 9 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// `cpu12` -> CPU 12; other entries of `/sys/devices/system/cpu` (`cpufreq`, `online`) -> `None`.
pub fn parse_cpu_dir_name(name: &str) -> Option<CpuId> {
    numbered(name, "cpu").map(CpuId)
}

/// `node1` -> node 1; other entries of `/sys/devices/system/node` -> `None`.
pub fn parse_node_dir_name(name: &str) -> Option<NodeId> {
    numbered(name, "node").map(NodeId)
}

/// `index3` -> 3; other entries of `cpuN/cache` (`uevent`) -> `None`.
pub fn parse_cache_index_name(name: &str) -> Option<u32> {
    numbered(name, "index")
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn real_files() {
        // A 2-vCPU Firecracker guest on an x86 host.
        assert_eq!(parse_cpulist("0-1\n"), Ok(CpuSet::range(0, 1)));
        assert_eq!(parse_cpulist("\n"), Ok(CpuSet::new()), "isolated, offline");
        assert_eq!(parse_topology_id("0\n"), Ok(Some(0)));
        assert_eq!(parse_topology_id("65535\n"), Ok(Some(65535)));
        assert_eq!(parse_cache_level("3\n"), Ok(3));
        assert_eq!(
            parse_cache_type("Instruction\n"),
            Ok(CacheKind::Instruction)
        );
        assert_eq!(parse_cache_size("48K\n"), Ok(48 << 10));
        assert_eq!(parse_cache_size("32768K\n"), Ok(32 << 20));
        assert_eq!(render_cache_size(1 << 20), "1024K\n");
        assert_eq!(parse_cache_id("0\n"), Ok(0));
    }

    #[test]
    fn nohz_full_quirk() {
        assert_eq!(parse_nohz_full("(null)\n"), Ok(CpuSet::new()));
        assert_eq!(parse_nohz_full("2-7\n"), Ok(CpuSet::range(2, 7)));
        assert!(parse_nohz_full("null\n").is_err());
    }

    #[test]
    fn ids_and_names() {
        assert_eq!(parse_topology_id("-1\n"), Ok(None));
        assert_eq!(render_topology_id(None), "-1\n");
        assert!(parse_topology_id("-3\n").is_err());
        assert_eq!(parse_cpu_dir_name("cpu12"), Some(CpuId(12)));
        assert_eq!(parse_cpu_dir_name("cpufreq"), None);
        assert_eq!(parse_cpu_dir_name("cpu"), None);
        assert_eq!(parse_node_dir_name("node1"), Some(NodeId(1)));
        assert_eq!(parse_node_dir_name("has_cpu"), None);
        assert_eq!(parse_cache_index_name("index3"), Some(3));
        assert_eq!(parse_cache_index_name("uevent"), None);
    }

    #[test]
    fn malformed() {
        assert!(parse_cache_type("Trace\n").is_err());
        assert!(parse_cache_size("K\n").is_err());
        assert!(parse_cache_size("12Q\n").is_err());
        assert!(parse_cache_size("9999999999999999K\n").is_err());
        assert!(parse_cache_level("300\n").is_err());
        assert_eq!(parse_cache_size("512M\n"), Ok(512 << 20));
        assert_eq!(parse_cache_size("4096\n"), Ok(4096));
        assert!(parse_cache_size("999999999999G\n").is_err());
    }

    proptest! {
        #[test]
        fn cache_files_round_trip(kib in 0u64..(1 << 32), level in 1u8..5, id in any::<u32>(), k in 0usize..3) {
            let text = render_cache_size(kib << 10);
            prop_assert_eq!(parse_cache_size(&text), Ok(kib << 10));
            prop_assert_eq!(parse_cache_level(&render_cache_level(level)), Ok(level));
            prop_assert_eq!(parse_cache_id(&render_cache_id(id)), Ok(id));
            let kind = [CacheKind::Data, CacheKind::Instruction, CacheKind::Unified][k];
            prop_assert_eq!(parse_cache_type(&render_cache_type(kind)), Ok(kind));
        }

        #[test]
        fn topology_lists_round_trip(cpus in proptest::collection::btree_set(0u32..4096, 0..32)) {
            let set: CpuSet = cpus.into_iter().map(CpuId).collect();
            let text = render_cpulist(&set);
            prop_assert_eq!(parse_cpulist(&text), Ok(set.clone()));
            prop_assert_eq!(parse_nohz_full(&text), Ok(set));
        }

        #[test]
        fn topology_id_round_trip(id in proptest::option::of(0u32..=i32::MAX as u32)) {
            prop_assert_eq!(parse_topology_id(&render_topology_id(id)), Ok(id));
        }
    }
}
