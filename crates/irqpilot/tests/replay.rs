//! Recordings replay what was recorded.
//!
//! * 60 s of the twin's live tree (`sim --export-root --realtime 4`: 60 simulated seconds in
//!   15 wall seconds), recorded by `watch --record` sampling every 250 ms of wall time: the
//!   replay prints the very lines the live watch printed, and a replay at a coarser interval
//!   gives the averages of the live rates.
//! * `sim --record`: the rates a replay measures over the twin's measured interval are the
//!   interrupt rates the twin itself reports for each vector.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
use common::{ok, scratch_dir};
use serde_json::Value;
use std::collections::BTreeMap;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn lines(text: &str) -> Vec<Value> {
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// `watch --replay` of `rec` at full speed, every row, as JSON lines; `extra` flags added.
fn replay(rec: &std::path::Path, extra: &[&str]) -> Vec<Value> {
    let mut args = vec![
        "--format",
        "json",
        "watch",
        "--replay",
        rec.to_str().unwrap(),
        "--speed",
        "max",
        "--top",
        "0",
    ];
    args.extend_from_slice(extra);
    lines(&ok(&args))
}

/// IRQ -> total_per_sec of one watch JSON line.
fn rates(line: &Value) -> BTreeMap<String, f64> {
    line["irqs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            (
                i["irq"].as_str().unwrap().to_string(),
                i["total_per_sec"].as_f64().unwrap(),
            )
        })
        .collect()
}

#[test]
fn sixty_seconds_of_the_live_twin_replay_as_recorded() {
    let dir = scratch_dir();
    let root = dir.path().join("twin");
    let rec = dir.path().join("live.irqrec");
    let mut twin = Command::new(env!("CARGO_BIN_EXE_irqpilot"))
        .args([
            "sim",
            "isolation-rt-24cpu-lowload",
            // Longer than the watch needs however slowly a loaded machine runs it (the twin
            // is ended below): a twin that finished early would stop moving the tree.
            "--duration",
            "600s",
            "--realtime",
            "4",
        ])
        .arg("--export-root")
        .arg(&root)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Watched from the twin's second step on: the tree is whole and simulated time runs (the
    // files appear before the twin's first step, which a loaded machine can delay by more
    // than one watch interval).
    let deadline = Instant::now() + Duration::from_secs(30);
    let step = root.join(".irqpilot-twin-step");
    while std::fs::read_to_string(&step)
        .ok()
        .and_then(|t| t.trim().parse::<u64>().ok())
        .is_none_or(|n| n < 2)
        || !root.join(".irqpilot-twin-ready").exists()
    {
        assert!(Instant::now() < deadline, "the twin wrote no tree");
        std::thread::sleep(Duration::from_millis(20));
    }
    let live = ok(&[
        "--root",
        root.to_str().unwrap(),
        "--format",
        "json",
        "watch",
        "--interval",
        "250ms",
        "--count",
        "60",
        "--top",
        "0",
        "--record",
        rec.to_str().unwrap(),
    ]);
    // Only our own child, by its handle.
    let _ = twin.kill();
    let _ = twin.wait();
    let live = lines(&live);
    assert_eq!(live.len(), 60);
    assert!(
        live.iter().all(|l| !rates(l).is_empty()),
        "the twin did not move"
    );

    // Replayed at full speed: the same 60 lines, byte for byte in value.
    let replayed = replay(&rec, &[]);
    assert_eq!(replayed.len(), 60);
    for (k, (a, b)) in live.iter().zip(&replayed).enumerate() {
        assert_eq!(a, b, "line {k}");
    }

    // Every 1 s instead of 250 ms: each line averages four live ones (rounded to 0.1/s).
    let coarse = replay(&rec, &["--interval", "1s"]);
    assert!(coarse.len() >= 14, "{}", coarse.len());
    for (k, line) in coarse.iter().enumerate().take(14) {
        let t = line["t"].as_f64().unwrap();
        // The live lines this one spans: those ending after t - interval, up to t (times are
        // printed to the millisecond and live lines are 250 ms apart: a 100 ms guard tells
        // the boundary line apart).
        let span = line["interval_s"].as_f64().unwrap();
        let parts: Vec<&Value> = live
            .iter()
            .filter(|l| {
                let lt = l["t"].as_f64().unwrap();
                lt > t - span + 0.1 && lt <= t + 0.001
            })
            .collect();
        let covered: f64 = parts
            .iter()
            .map(|p| p["interval_s"].as_f64().unwrap())
            .sum();
        assert!(
            (covered - span).abs() < 0.005,
            "line {k}: {covered} of {span} s"
        );
        assert!(!parts.is_empty(), "line {k}");
        let mut want: BTreeMap<String, f64> = BTreeMap::new();
        for p in &parts {
            let w = p["interval_s"].as_f64().unwrap() / span;
            for (irq, r) in rates(p) {
                *want.entry(irq).or_default() += r * w;
            }
        }
        for (irq, r) in rates(line) {
            let w = want.get(&irq).copied().unwrap_or(0.0);
            assert!(
                (r - w).abs() <= 0.5 + 0.002 * w,
                "line {k} IRQ {irq}: replay {r}/s, live average {w}/s"
            );
        }
    }

    // Seeking: starting 5 s in, the first line is the live line there.
    let seek = replay(&rec, &["--seek", "5s", "--count", "3"]);
    let first_t = seek[0]["t"].as_f64().unwrap();
    let same = live
        .iter()
        .find(|l| (l["t"].as_f64().unwrap() - first_t).abs() < 1e-9)
        .unwrap();
    assert_eq!(&seek[0], same);
    assert!((5.0..5.6).contains(&first_t), "{first_t}");
}

#[test]
fn a_recorded_twin_run_replays_the_twins_own_rates() {
    let dir = scratch_dir();
    let rec = dir.path().join("sim.irqrec");
    let report: Value = serde_json::from_str(&ok(&[
        "--format",
        "json",
        "sim",
        "isolation-rt-24cpu",
        "--record",
        rec.to_str().unwrap(),
    ]))
    .unwrap();
    let warmup = report["warmup_s"].as_f64().unwrap();
    let measured = report["duration_s"].as_f64().unwrap();
    // One interval over exactly the twin's measured time.
    let line = replay(
        &rec,
        &[
            "--seek",
            &format!("{}ms", (warmup * 1000.0).round()),
            "--interval",
            &format!("{}ms", (measured * 1000.0).round()),
            "--count",
            "1",
        ],
    );
    assert_eq!(line.len(), 1);
    assert!((line[0]["interval_s"].as_f64().unwrap() - measured).abs() < 1e-6);
    let replayed = rates(&line[0]);
    let sources = report["per_source"].as_array().unwrap();
    assert!(sources.len() >= 20);
    for s in sources {
        let irq = s["irq"].as_u64().unwrap().to_string();
        let want = s["interrupts_per_sec"].as_f64().unwrap();
        let got = replayed.get(&irq).copied().unwrap_or(0.0);
        assert!(
            (got - want).abs() <= 0.5 + 1e-4 * want,
            "IRQ {irq}: replay {got}/s, twin {want}/s"
        );
    }
}
