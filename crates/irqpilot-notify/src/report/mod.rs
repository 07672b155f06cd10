//! The result of a run: one row per mechanism × placement × gap (the JSON contract), the
//! environment, the target checks, and the text tables (absolute numbers and a table normalised
//! to the fastest mechanism, like the UINTR cover letter's, but per placement and next to the
//! absolute values, in [`render`]).

use crate::clock::TimerInfo;
use crate::config::BenchConfig;
use crate::environment::Environment;
use crate::histogram::RttSummary;
use crate::mechanism::uintr::UintrSupport;
use crate::mechanism::{Mechanism, Mode, WaitStyle};
use crate::placement::{Placement, PlacementKind};
use serde::Serialize;

pub mod render;

/// CPU time per round trip, split by side.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct SideCpu {
    /// The side that sends first and times (includes its sleeps between pings in gap variants).
    pub pinger: f64,
    /// The side that echoes.
    pub ponger: f64,
}

/// One mechanism measured (or not) in one placement and one gap variant.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ResultRow {
    /// The mechanism.
    pub mechanism: Mechanism,
    /// How its receiver waits.
    pub wait_style: WaitStyle,
    /// The placement kind.
    pub placement: PlacementKind,
    /// Pinger and ponger CPU.
    pub cpus: [u32; 2],
    /// Threads or processes.
    pub mode: Mode,
    /// Idle time between a reply and the next ping, ns (0 = back-to-back).
    pub gap_ns: u64,
    /// Whether the mechanism can run here at all.
    pub available: bool,
    /// Why not, when `available` is false.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Why an available mechanism produced no numbers (a failure, not an unavailability).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Measured round trips (warm-up excluded).
    pub round_trips: u64,
    /// RTT percentiles, ns; `null` without numbers.
    pub rtt_ns: Option<RttSummary>,
    /// CPU time of both sides together per round trip, ns (each side's thread CPU clock,
    /// `CLOCK_THREAD_CPUTIME_ID`, read before and after the measured round trips).
    pub cpu_ns_per_rtt: Option<f64>,
    /// The same, per side.
    pub cpu_ns_per_rtt_by_side: Option<SideCpu>,
}

impl ResultRow {
    pub(crate) fn new(
        mechanism: Mechanism,
        placement: &Placement,
        gap_ns: u64,
        mode: Mode,
    ) -> ResultRow {
        ResultRow {
            mechanism,
            wait_style: mechanism.wait_style(),
            placement: placement.kind,
            cpus: [placement.pinger.0, placement.ponger.0],
            mode,
            gap_ns,
            available: true,
            reason: None,
            error: None,
            round_trips: 0,
            rtt_ns: None,
            cpu_ns_per_rtt: None,
            cpu_ns_per_rtt_by_side: None,
        }
    }

    pub(crate) fn unavailable(mut self, reason: String) -> ResultRow {
        self.available = false;
        self.reason = Some(reason);
        self
    }

    pub(crate) fn failed(mut self, error: String) -> ResultRow {
        self.error = Some(error);
        self
    }

    fn p50(&self) -> Option<u64> {
        self.rtt_ns.map(|r| r.p50)
    }
}

/// One target of the issue, checked on this run's numbers.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TargetCheck {
    /// What is compared.
    pub target: &'static str,
    /// Where.
    pub placement: PlacementKind,
    /// Gap variant, ns.
    pub gap_ns: u64,
    /// The measured ratio.
    pub ratio: f64,
    /// The limit the ratio must not exceed.
    pub limit: f64,
    /// `ratio <= limit`.
    pub met: bool,
}

/// Everything a run produced. Serialises to the `bench notify --format json` contract:
/// `{"results": [...], ...}`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BenchReport {
    /// One row per mechanism × placement × gap variant.
    pub results: Vec<ResultRow>,
    /// The CPU pairs used.
    pub placements: Vec<Placement>,
    /// Placement kinds this machine (or this process's CPU set) does not have.
    pub placements_absent: Vec<PlacementKind>,
    /// The targets, checked on these numbers.
    pub targets: Vec<TargetCheck>,
    /// The machine.
    pub environment: Environment,
    /// The clock and its measured cost.
    pub timer: TimerInfo,
    /// The settings.
    pub config: BenchConfig,
    /// UINTR detection details.
    pub uintr: UintrSupport,
    /// Wall time of the whole run, ms.
    pub elapsed_ms: u64,
}

pub(crate) fn row(
    rows: &[ResultRow],
    m: Mechanism,
    p: PlacementKind,
    gap_ns: u64,
) -> Option<&ResultRow> {
    rows.iter()
        .find(|r| r.mechanism == m && r.placement == p && r.gap_ns == gap_ns)
}

/// Checks the targets wherever both sides of a comparison were measured:
/// * `spin` p50 RTT within 1.5x of `spin-raw` (back-to-back);
/// * `hybrid` p50 RTT within 1.5x of `spin` (back-to-back);
/// * `hybrid` CPU per RTT within 1.2x of `futex` at a 1 ms gap.
pub fn compute_targets(rows: &[ResultRow]) -> Vec<TargetCheck> {
    let mut out = Vec::new();
    let mut kinds: Vec<PlacementKind> = rows.iter().map(|r| r.placement).collect();
    kinds.sort();
    kinds.dedup();
    let mut check = |target, p, gap_ns, num: Option<f64>, den: Option<f64>, limit: f64| {
        if let (Some(n), Some(d)) = (num, den) {
            if d > 0.0 {
                let ratio = n / d;
                out.push(TargetCheck {
                    target,
                    placement: p,
                    gap_ns,
                    ratio,
                    limit,
                    met: ratio <= limit,
                });
            }
        }
    };
    let p50 = |m, p, g| {
        row(rows, m, p, g)
            .and_then(ResultRow::p50)
            .map(|v| v as f64)
    };
    let cpu = |m, p, g| row(rows, m, p, g).and_then(|r| r.cpu_ns_per_rtt);
    for &p in &kinds {
        check(
            "spin p50 RTT <= 1.5 x spin-raw p50 RTT (back-to-back)",
            p,
            0,
            p50(Mechanism::Spin, p, 0),
            p50(Mechanism::SpinRaw, p, 0),
            1.5,
        );
        check(
            "hybrid p50 RTT <= 1.5 x spin p50 RTT (back-to-back)",
            p,
            0,
            p50(Mechanism::Hybrid, p, 0),
            p50(Mechanism::Spin, p, 0),
            1.5,
        );
        check(
            "hybrid CPU/RTT <= 1.2 x futex CPU/RTT (1 ms gap)",
            p,
            1_000_000,
            cpu(Mechanism::Hybrid, p, 1_000_000),
            cpu(Mechanism::Futex, p, 1_000_000),
            1.2,
        );
    }
    out
}

/// A gap in words.
pub fn gap_label(gap_ns: u64) -> String {
    if gap_ns == 0 {
        "back-to-back".to_string()
    } else if gap_ns % 1_000_000 == 0 {
        format!("{} ms gap", gap_ns / 1_000_000)
    } else if gap_ns % 1_000 == 0 {
        format!("{} us gap", gap_ns / 1_000)
    } else {
        format!("{gap_ns} ns gap")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use irqpilot_core::CpuId;

    fn placement(kind: PlacementKind) -> Placement {
        Placement {
            kind,
            pinger: CpuId(0),
            ponger: CpuId(1),
            detail: "test".to_string(),
        }
    }

    fn measured(m: Mechanism, p50: u64, cpu: f64, gap_ns: u64) -> ResultRow {
        let mut r = ResultRow::new(
            m,
            &placement(PlacementKind::SameCache),
            gap_ns,
            Mode::Threads,
        );
        r.round_trips = 100;
        r.rtt_ns = Some(RttSummary {
            count: 100,
            min: p50 / 2,
            p50,
            p90: p50,
            p99: p50 * 2,
            p999: p50 * 3,
            max: p50 * 10,
            mean: p50 as f64,
        });
        r.cpu_ns_per_rtt = Some(cpu);
        r.cpu_ns_per_rtt_by_side = Some(SideCpu {
            pinger: cpu / 2.0,
            ponger: cpu / 2.0,
        });
        r
    }

    pub(crate) fn sample_report() -> BenchReport {
        let results = vec![
            measured(Mechanism::SpinRaw, 100, 200.0, 0),
            measured(Mechanism::Spin, 120, 240.0, 0),
            measured(Mechanism::Hybrid, 130, 260.0, 0),
            measured(Mechanism::Futex, 10_000, 9_000.0, 0),
            ResultRow::new(
                Mechanism::Uintr,
                &placement(PlacementKind::SameCache),
                0,
                Mode::Threads,
            )
            .unavailable("CPU: no UINTR".to_string()),
            measured(Mechanism::Futex, 12_000, 8_000.0, 1_000_000),
            measured(Mechanism::Hybrid, 12_500, 8_800.0, 1_000_000),
        ];
        BenchReport {
            targets: compute_targets(&results),
            results,
            placements: vec![placement(PlacementKind::SameCache)],
            placements_absent: vec![PlacementKind::SmtSibling],
            environment: Environment::default(),
            timer: TimerInfo {
                clock: "test",
                overhead_min_ns: 20,
                overhead_median_ns: 25,
                clocksource: None,
            },
            config: BenchConfig::default(),
            uintr: UintrSupport {
                cpu: false,
                kernel_flag: false,
                syscall_471: Err(libc::ENOSYS),
            },
            elapsed_ms: 1,
        }
    }

    #[test]
    fn targets_from_rows() {
        let r = sample_report();
        let t: Vec<(&str, f64, bool)> = r
            .targets
            .iter()
            .map(|t| (t.target, (t.ratio * 100.0).round() / 100.0, t.met))
            .collect();
        assert_eq!(t.len(), 3);
        assert_eq!((t[0].1, t[0].2), (1.2, true));
        assert_eq!((t[1].1, t[1].2), (1.08, true));
        assert_eq!((t[2].1, t[2].2), (1.1, true));
    }

    #[test]
    fn json_matches_the_contract() {
        let v = serde_json::to_value(sample_report()).unwrap();
        let results = v["results"].as_array().unwrap();
        assert_eq!(results.len(), 7);
        for r in results {
            for key in [
                "mechanism",
                "placement",
                "available",
                "rtt_ns",
                "cpu_ns_per_rtt",
            ] {
                assert!(r.get(key).is_some(), "missing {key} in {r}");
            }
            if r["available"] == false {
                assert!(r["reason"].as_str().is_some_and(|s| !s.is_empty()));
                assert!(r["rtt_ns"].is_null());
            } else {
                assert!(r.get("reason").is_none());
                for key in ["p50", "p99", "p999", "max"] {
                    assert!(r["rtt_ns"][key].as_u64().is_some(), "rtt_ns.{key} in {r}");
                }
                assert!(r["cpu_ns_per_rtt"].as_f64().is_some());
            }
        }
        assert_eq!(results[0]["mechanism"], "spin-raw");
        assert_eq!(results[0]["placement"], "same-cache");
        assert_eq!(results[0]["wait_style"], "spin");
        assert_eq!(results[4]["mechanism"], "uintr");
        assert_eq!(results[4]["available"], false);
        assert!(v["environment"].is_object());
        assert!(v["timer"]["overhead_median_ns"].is_u64());
        assert_eq!(v["config"]["gaps_us"], serde_json::json!([100, 1000]));
        assert_eq!(v["placements_absent"], serde_json::json!(["smt-sibling"]));
    }

    #[test]
    fn tables_show_absolute_and_normalised_numbers() {
        let t = sample_report().render_table();
        assert!(
            t.contains("same-cache (CPUs 0,1: test), back-to-back =="),
            "{t}"
        );
        assert!(t.contains("spin-raw"), "{t}");
        assert!(t.contains("uintr: CPU: no UINTR"), "{t}");
        assert!(t.contains("1 ms gap"), "{t}");
        assert!(t.contains("normalised"), "{t}");
        // futex p50 10_000 / best 100 = 100.0
        assert!(
            t.lines()
                .any(|l| l.starts_with("futex") && l.trim_end().ends_with("100.0")),
            "{t}"
        );
        assert!(t.contains("[met] hybrid CPU/RTT"), "{t}");
        assert!(
            t.contains("placements this machine does not have: smt-sibling"),
            "{t}"
        );
    }

    #[test]
    fn markdown_has_the_same_rows() {
        let md = sample_report().render_markdown();
        assert!(
            md.contains(
                "| spin-raw | spin | 100 | 100 | 200 | 300 | 1000 | 200 (100 + 100) | 1.00 |"
            ),
            "{md}"
        );
        assert!(
            md.contains("| uintr | spin | | unavailable: CPU: no UINTR |"),
            "{md}"
        );
        assert!(md.contains("| futex | block | 100.0 |"), "{md}");
        assert!(md.contains("| met |"), "{md}");
    }

    #[test]
    fn gap_labels() {
        assert_eq!(gap_label(0), "back-to-back");
        assert_eq!(gap_label(100_000), "100 us gap");
        assert_eq!(gap_label(2_000_000), "2 ms gap");
        assert_eq!(gap_label(1_500), "1500 ns gap");
    }
}
