//! Every mechanism's ping-pong delivers every token in order (the harness checks each reply
//! against the token sent and fails on a lost, duplicated or reordered one), in thread and in
//! process mode; unavailable mechanisms say why; the JSON report has the contract's shape.
//!
//! These are correctness tests, not timing tests: counts are small, time limits generous, and
//! the measurements run one at a time so that spinning tests do not starve each other on a
//! two-CPU machine.

#![allow(clippy::expect_used, clippy::unwrap_used)] // test helpers outside #[test] fns

use irqpilot_core::{CpuId, Topology};
use irqpilot_notify::cpu::allowed_cpus;
use irqpilot_notify::mechanism::uintr;
use irqpilot_notify::{
    BenchConfig, Mechanism, Mode, Placement, PlacementKind, ResultRow, WaitStyle, measure_one, run,
    select_placements,
};
use std::sync::Mutex;
use std::time::Duration;

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

/// The usable CPUs as a topology that knows nothing else (placements: same-cpu, other-core).
fn usable_topology() -> Topology {
    let allowed = allowed_cpus().expect("sched_getaffinity");
    Topology {
        online: allowed,
        ..Topology::default()
    }
}

fn placements() -> (Placement, Option<Placement>) {
    let p = select_placements(&usable_topology(), None);
    let same = p
        .iter()
        .find(|p| p.kind == PlacementKind::SameCpu)
        .cloned()
        .expect("a same-cpu placement always exists");
    let cross = p.into_iter().find(|p| p.kind != PlacementKind::SameCpu);
    (same, cross)
}

fn small_config(mode: Mode) -> BenchConfig {
    BenchConfig {
        iterations: 2_000,
        warmup: 100,
        gap_iterations: 20,
        gap_warmup: 2,
        timeout: Duration::from_secs(120),
        mode,
        ..BenchConfig::default()
    }
}

fn check_row(row: &ResultRow, expected: u64) {
    assert!(
        row.error.is_none(),
        "{} failed: {:?}",
        row.mechanism,
        row.error
    );
    assert!(
        row.available,
        "{} unavailable: {:?}",
        row.mechanism, row.reason
    );
    assert_eq!(row.round_trips, expected, "{}", row.mechanism);
    let rtt = row.rtt_ns.expect("numbers");
    assert_eq!(rtt.count, expected);
    assert!(rtt.min > 0 && rtt.min <= rtt.p50 && rtt.p50 <= rtt.p99 && rtt.p99 <= rtt.max);
    assert!(row.cpu_ns_per_rtt.is_some_and(|c| c >= 0.0));
}

fn every_mechanism_delivers_every_token(mode: Mode) {
    let _g = serial();
    let config = small_config(mode);
    let support = uintr::probe();
    let (same, cross) = placements();
    for m in Mechanism::ALL {
        if let Some(reason) = irqpilot_notify::machine_unavailability(m, &support) {
            eprintln!("{m}: unavailable here: {reason}");
            continue;
        }
        // Spinning receivers need a second CPU; blocking ones run on the same CPU too.
        let placement = match (m.wait_style(), &cross) {
            (WaitStyle::Spin, Some(c)) => c,
            (WaitStyle::Spin, None) => {
                eprintln!("{m}: skipped, only one usable CPU");
                continue;
            }
            (_, _) => &same,
        };
        // The seed's one-eventfd race livelocks for a scheduler time slice per round trip on one
        // CPU (that is the point of measuring it), so it gets a handful of round trips.
        let config = if m == Mechanism::EventfdShared {
            BenchConfig {
                iterations: 10,
                warmup: 2,
                ..config.clone()
            }
        } else {
            config.clone()
        };
        let row = measure_one(m, placement, Duration::ZERO, &config, &support);
        check_row(&row, config.iterations);
        if let Some(c) = &cross {
            if m.wait_style() != WaitStyle::Spin {
                let row = measure_one(m, c, Duration::ZERO, &config, &support);
                check_row(&row, config.iterations);
            }
        }
    }
}

#[test]
fn threads_every_mechanism_delivers_every_token() {
    every_mechanism_delivers_every_token(Mode::Threads);
}

#[test]
fn processes_every_mechanism_delivers_every_token() {
    every_mechanism_delivers_every_token(Mode::Processes);
}

#[test]
fn idle_gap_variant_counts_and_spaces_round_trips() {
    let _g = serial();
    let config = small_config(Mode::Threads);
    let support = uintr::probe();
    let (same, _) = placements();
    let gap = Duration::from_micros(200);
    for m in [Mechanism::Futex, Mechanism::Hybrid, Mechanism::Pipe] {
        let t0 = std::time::Instant::now();
        let row = measure_one(m, &same, gap, &config, &support);
        check_row(&row, 20);
        assert_eq!(row.gap_ns, 200_000);
        // 22 round trips, each preceded by a 200 us sleep.
        assert!(t0.elapsed() >= Duration::from_micros(200 * 22), "{m}");
    }
}

#[test]
fn spinning_on_one_cpu_and_uintr_are_reported_unavailable_with_a_reason() {
    let _g = serial();
    let config = small_config(Mode::Threads);
    let support = uintr::probe();
    let (same, _) = placements();
    for m in [
        Mechanism::SpinRaw,
        Mechanism::Spin,
        Mechanism::EventfdPoll,
        Mechanism::MsgRingPoll,
        Mechanism::SignalHandlerSpin,
    ] {
        let row = measure_one(m, &same, Duration::ZERO, &config, &support);
        assert!(!row.available, "{m}");
        assert!(
            row.reason
                .as_deref()
                .is_some_and(|r| r.contains("same CPU")),
            "{m}"
        );
        assert!(row.rtt_ns.is_none() && row.cpu_ns_per_rtt.is_none());
    }
    // No delivery backend exists, so UINTR is unavailable on every machine, with both facts.
    let row = measure_one(Mechanism::Uintr, &same, Duration::ZERO, &config, &support);
    assert!(!row.available);
    let reason = row.reason.unwrap();
    assert!(
        reason.contains("CPU:") && reason.contains("kernel:"),
        "{reason}"
    );
}

#[test]
fn pinning_to_a_cpu_outside_the_allowed_set_is_an_error_not_a_hang() {
    let _g = serial();
    let config = BenchConfig {
        timeout: Duration::from_secs(60),
        ..small_config(Mode::Threads)
    };
    let support = uintr::probe();
    let bad = Placement {
        kind: PlacementKind::OtherCore,
        pinger: CpuId(4000),
        ponger: CpuId(4001),
        detail: "not a CPU".into(),
    };
    let row = measure_one(Mechanism::Futex, &bad, Duration::ZERO, &config, &support);
    assert!(row.available);
    let err = row.error.expect("pinning must fail");
    assert!(err.contains("pinning to CPU 400"), "{err}");
}

#[test]
fn json_report_has_the_contract_shape() {
    let _g = serial();
    let config = BenchConfig {
        iterations: 300,
        warmup: 30,
        gaps: vec![Duration::from_micros(100)],
        gap_iterations: 10,
        gap_warmup: 1,
        mechanisms: vec![
            Mechanism::SpinRaw,
            Mechanism::Futex,
            Mechanism::Hybrid,
            Mechanism::Uintr,
        ],
        ..small_config(Mode::Threads)
    };
    let report = run(&config, &usable_topology());
    let v = serde_json::to_value(&report).unwrap();
    let results = v["results"].as_array().unwrap();
    assert!(!results.is_empty());
    let names = ["spin-raw", "futex", "hybrid", "uintr"];
    for r in results {
        let m = r["mechanism"].as_str().unwrap();
        assert!(names.contains(&m), "{m}");
        assert!(r["placement"].is_string());
        assert!(r["cpu_ns_per_rtt"].is_number() || r["cpu_ns_per_rtt"].is_null());
        match r["available"].as_bool().unwrap() {
            false => {
                assert!(r["reason"].as_str().is_some_and(|s| !s.is_empty()), "{r}");
                assert!(r["rtt_ns"].is_null());
            }
            true => {
                assert!(r.get("error").is_none(), "{r}");
                for k in ["p50", "p99", "p999", "max"] {
                    assert!(r["rtt_ns"][k].is_u64(), "{k} in {r}");
                }
                assert!(r["cpu_ns_per_rtt"].is_number());
            }
        }
    }
    // futex runs in every placement and variant; uintr appears once per placement, unavailable.
    let placements = report.placements.len();
    let futex = results.iter().filter(|r| r["mechanism"] == "futex").count();
    assert_eq!(futex, placements * 2);
    // Three interleaved rounds of 100 merge into the 300 asked for.
    for r in results
        .iter()
        .filter(|r| r["mechanism"] == "futex" && r["gap_ns"] == 0)
    {
        assert_eq!(r["round_trips"], 300, "{r}");
    }
    let uintr_rows = results.iter().filter(|r| r["mechanism"] == "uintr").count();
    assert_eq!(uintr_rows, placements);
    assert!(v["environment"]["kernel"].is_string());
    assert!(v["timer"]["overhead_median_ns"].is_u64());
    let text = report.render_table();
    assert!(text.contains("futex"));
    assert!(text.contains("normalised"));
}
