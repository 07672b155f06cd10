//! The range of every number in a scenario. A negative cost, a NaN or an infinite rate would
//! run without complaint and give numbers that mean nothing, so each is refused, naming its key
//! the way `--set` spells it (`costs.hardirq_us`, `workload.1.think_us`). Whole numbers are
//! refused by their type below 0 (serde; `explain` says so with the range below) and by
//! [`WHOLE`] out of a narrower range.

use super::schema::{Scenario, WorkloadCfg};
use serde_json::Value;

/// The range a number must lie in.
#[derive(Clone, Copy)]
enum Range {
    /// `>= 0`.
    NonNegative,
    /// `> 0`.
    Positive,
    /// `>= 1`: a slowdown factor (below 1 the "slower" case would be faster).
    Factor,
    /// `[0, 1]`.
    Fraction,
    /// `(0, 1]`.
    PositiveFraction,
}

impl Range {
    fn holds(self, v: f64) -> bool {
        v.is_finite()
            && match self {
                Range::NonNegative => v >= 0.0,
                Range::Positive => v > 0.0,
                Range::Factor => v >= 1.0,
                Range::Fraction => (0.0..=1.0).contains(&v),
                Range::PositiveFraction => v > 0.0 && v <= 1.0,
            }
    }

    fn says(self) -> &'static str {
        match self {
            Range::NonNegative => "a number >= 0",
            Range::Positive => "a number > 0",
            Range::Factor => "a factor >= 1",
            Range::Fraction => "a number in [0, 1]",
            Range::PositiveFraction => "a number in (0, 1]",
        }
    }
}

/// A key out of range: the key (dotted, as `--set` spells it) and the message naming it.
pub(crate) type OutOfRange = (String, String);

fn check(key: &str, v: f64, r: Range) -> Result<(), OutOfRange> {
    if r.holds(v) {
        Ok(())
    } else {
        Err((
            key.to_string(),
            format!("{key} = {v}: must be {}", r.says()),
        ))
    }
}

/// Whole-number keys whose range is narrower than their type's: the least value and, where there
/// is one, the greatest (`N`: any position in a list). A key not here may take any value of its
/// type (`u32`: 0-4294967295).
const WHOLE: &[(&str, u64, Option<u64>)] = &[
    ("duration_ms", 1, None),
    ("costs.napi_weight", 1, None),
    ("costs.netdev_budget", 1, None),
    ("machine.packages", 1, None),
    ("machine.cores_per_package", 1, None),
    ("machine.threads_per_core", 1, None),
    ("machine.vectors_per_cpu", 1, None),
    ("placement.rotate_interval_ms", 1, None),
    ("nic.N.queues", 1, None),
    ("nic.N.ring_size", 1, None),
    ("nic.N.mtu_bytes", 64, None),
    ("nic.N.aim_mode", 0, Some(2)),
    ("nic.N.vms", 1, None),
    ("nvme.N.drives", 1, None),
    ("nvme.N.queues_per_drive", 1, None),
    ("nvme.N.coalesce_threshold", 1, Some(256)),
    ("workload.N.clients", 1, None),
    ("workload.N.tso_kb", 1, None),
    ("workload.N.iodepth", 1, None),
    ("workload.N.jobs", 1, None),
    ("workload.N.block_kb", 1, None),
];

/// The range of the whole-number key `pattern` (`nic.N.queues`) whose type holds at most
/// `type_max`, as an error says it.
pub(crate) fn whole_says(pattern: &str, type_max: u64) -> String {
    let (least, most) = WHOLE
        .iter()
        .find(|(k, _, _)| *k == pattern)
        .map_or((0, None), |(_, lo, hi)| (*lo, *hi));
    says_whole(least, most.or((type_max < u64::MAX).then_some(type_max)))
}

fn says_whole(least: u64, most: Option<u64>) -> String {
    match most {
        Some(most) => format!("must be a whole number in {least}-{most}"),
        None => format!("must be a whole number >= {least}"),
    }
}

/// The values at `pattern` (dotted, `N` for every element of a list) in `v`, each with its key.
fn at<'v>(v: &'v Value, pattern: &str) -> Vec<(String, &'v Value)> {
    let mut found = vec![(String::new(), v)];
    for part in pattern.split('.') {
        let mut next = Vec::new();
        for (key, v) in found {
            let join = |p: &str| {
                if key.is_empty() {
                    p.to_string()
                } else {
                    format!("{key}.{p}")
                }
            };
            if part == "N" {
                for (i, x) in v.as_array().into_iter().flatten().enumerate() {
                    next.push((join(&i.to_string()), x));
                }
            } else if let Some(x) = v.get(part) {
                next.push((join(part), x));
            }
        }
        found = next;
    }
    found
}

/// Checks the keys of [`WHOLE`] (in the scenario as serialized, where every key has its value).
fn check_whole(sc: &Scenario) -> Result<(), OutOfRange> {
    let v = serde_json::to_value(sc).map_err(|e| (String::new(), e.to_string()))?;
    for (pattern, least, most) in WHOLE {
        for (key, x) in at(&v, pattern) {
            let Some(n) = x.as_u64() else { continue };
            if n < *least || most.is_some_and(|m| n > m) {
                return Err((
                    key.clone(),
                    format!("{key} = {n}: {}", says_whole(*least, *most)),
                ));
            }
        }
    }
    Ok(())
}

/// Checks the range of every number of `sc`; the first one out of range is the error.
pub(crate) fn check_ranges(sc: &Scenario) -> Result<(), OutOfRange> {
    use Range::*;
    let c = &sc.costs;
    for (k, v, r) in [
        ("hardirq_us", c.hardirq_us, NonNegative),
        ("indirect_us", c.indirect_us, NonNegative),
        ("indirect_full_gap_us", c.indirect_full_gap_us, Positive),
        ("napi_poll_us", c.napi_poll_us, NonNegative),
        ("rx_packet_ns", c.rx_packet_ns, NonNegative),
        ("rx_copy_ns_per_byte", c.rx_copy_ns_per_byte, NonNegative),
        ("tx_completion_ns", c.tx_completion_ns, NonNegative),
        ("nvme_cqe_us", c.nvme_cqe_us, NonNegative),
        ("nvme_io_app_us", c.nvme_io_app_us, NonNegative),
        ("netdev_budget_us", c.netdev_budget_us, Positive),
        ("mask_unmask_us", c.mask_unmask_us, NonNegative),
        ("migration_penalty_us", c.migration_penalty_us, NonNegative),
        (
            "remote_node_penalty_us",
            c.remote_node_penalty_us,
            NonNegative,
        ),
        ("migration_cold_factor", c.migration_cold_factor, Factor),
        (
            "remote_node_packet_factor",
            c.remote_node_packet_factor,
            Factor,
        ),
        ("smt_slowdown", c.smt_slowdown, Factor),
        ("wakeup_ipi_us", c.wakeup_ipi_us, NonNegative),
        ("remote_cache_us", c.remote_cache_us, NonNegative),
        ("remote_node_app_us", c.remote_node_app_us, NonNegative),
        ("rx_driver_ns", c.rx_driver_ns, NonNegative),
    ] {
        check(&format!("costs.{k}"), v, r)?;
    }
    let p = &sc.platform;
    for (k, v, r) in [
        ("limited_knee_per_sec", p.limited_knee_per_sec, Positive),
        ("healthy_knee_per_sec", p.healthy_knee_per_sec, Positive),
        ("gamma", p.gamma, NonNegative),
        ("min_efficiency", p.min_efficiency, PositiveFraction),
        ("msi_latency_us", p.msi_latency_us, NonNegative),
        ("rate_window_us", p.rate_window_us, Positive),
    ] {
        check(&format!("platform.{k}"), v, r)?;
    }
    for (i, n) in sc.nic.iter().enumerate() {
        check(&format!("nic.{i}.link_gbps"), n.link_gbps, Positive)?;
        check(&format!("nic.{i}.vm_exit_us"), n.vm_exit_us, NonNegative)?;
    }
    for (i, d) in sc.nvme.iter().enumerate() {
        check(&format!("nvme.{i}.max_iops"), d.max_iops, Positive)?;
        check(&format!("nvme.{i}.latency_us"), d.latency_us, NonNegative)?;
    }
    for (i, w) in sc.workload.iter().enumerate() {
        let key = |k: &str| format!("workload.{i}.{k}");
        match w {
            WorkloadCfg::Bulk {
                load,
                window_kb,
                chunk_kb,
                wire_rtt_us,
                jitter_us,
                hot_fraction,
                probe_per_sec,
                ..
            } => {
                check(&key("load"), *load, Positive)?;
                check(&key("window_kb"), *window_kb, Positive)?;
                check(&key("chunk_kb"), *chunk_kb, Positive)?;
                check(&key("wire_rtt_us"), *wire_rtt_us, NonNegative)?;
                check(&key("jitter_us"), *jitter_us, NonNegative)?;
                check(&key("hot_fraction"), *hot_fraction, Fraction)?;
                check(&key("probe_per_sec"), *probe_per_sec, NonNegative)?;
            }
            WorkloadCfg::BulkTx {
                load,
                probe_per_sec,
                ..
            } => {
                check(&key("load"), *load, Positive)?;
                check(&key("probe_per_sec"), *probe_per_sec, NonNegative)?;
            }
            WorkloadCfg::Poisson {
                rate_per_sec,
                service_us,
                ..
            } => {
                check(&key("rate_per_sec"), *rate_per_sec, Positive)?;
                check(&key("service_us"), *service_us, NonNegative)?;
            }
            WorkloadCfg::Rpc {
                think_us,
                service_us,
                wire_rtt_us,
                ..
            } => {
                check(&key("think_us"), *think_us, NonNegative)?;
                check(&key("service_us"), *service_us, NonNegative)?;
                check(&key("wire_rtt_us"), *wire_rtt_us, NonNegative)?;
            }
            WorkloadCfg::Fio { rate_iops, .. } => {
                check(&key("rate_iops"), *rate_iops, NonNegative)?;
            }
        }
    }
    check_whole(sc)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIN: &str = r#"
name = "t"
[machine]
cores_per_package = 2
[[nic]]
name = "eth0"
link_gbps = 10
queues = 2
[[workload]]
kind = "rpc"
nic = "eth0"
clients = 4
"#;

    fn err(set: (&str, &str)) -> String {
        let sc = Scenario::from_toml(MIN, "t").unwrap();
        sc.with_sets(&[(set.0.to_string(), set.1.to_string())])
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn negative_costs_and_odd_numbers_are_refused_naming_the_key() {
        assert!(
            err(("costs.hardirq_us", "-1"))
                .contains("costs.hardirq_us = -1: must be a number >= 0"),
            "{}",
            err(("costs.hardirq_us", "-1"))
        );
        assert!(err(("costs.rx_packet_ns", "-0.5")).contains("costs.rx_packet_ns"));
        assert!(err(("costs.smt_slowdown", "0.5")).contains("a factor >= 1"));
        assert!(err(("platform.min_efficiency", "0")).contains("(0, 1]"));
        assert!(err(("workload.0.think_us", "-3")).contains("workload.0.think_us"));
        assert!(err(("workload.0.clients", "0")).contains("workload.0.clients = 0"));
        assert!(err(("nic.0.vm_exit_us", "-1")).contains("nic.0.vm_exit_us"));
        assert!(err(("costs.hardirq_us", "nan")).contains("costs.hardirq_us = NaN"));
        // In range: accepted.
        let sc = Scenario::from_toml(MIN, "t").unwrap();
        assert!(
            sc.with_sets(&[("costs.hardirq_us".into(), "0".into())])
                .is_ok()
        );
    }

    #[test]
    fn errors_in_a_file_name_their_line_and_column() {
        let text = MIN.replace("clients = 4", "clients = 4\nthink_us = -2");
        let e = Scenario::from_toml(&text, "f.toml")
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "scenario f.toml:13:1: workload.0.think_us = -2: must be a number >= 0"
        );
        let e = Scenario::from_toml(
            &MIN.replace("queues = 2", "queues = 2\nspeed = 1"),
            "f.toml",
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.starts_with("scenario f.toml:9:1: ") && e.contains("speed"),
            "{e}"
        );
        // A wrong type: the key's place, not the value's (it used to be 8:10).
        let e = Scenario::from_toml(&MIN.replace("queues = 2", "queues = \"two\""), "f.toml")
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "scenario f.toml:8:1: nic.0.queues = \"two\": must be a whole number in 1-4294967295"
        );
    }
}
