//! Independent runs spread over the cores (`--compare`, `--table`, generated sweeps).
//!
//! Every run builds its own machine from its own scenario and seed and shares nothing with the
//! others, so each report is exactly that of a serial run; they come back in the order given,
//! whatever order they finish in.

use crate::config::Scenario;
use crate::error::SimError;
use crate::report::Report;
use crate::runner::run_scenario;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;

/// Runs at a time by default: one per CPU this process may use.
pub fn default_jobs() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// `f` over `items` on at most `jobs` threads (at least one); `done(i, &result)` is called on
/// the calling thread as item `i` finishes. Returns the results in the order of `items`.
pub fn map<T: Sync, R: Send>(
    items: &[T],
    jobs: usize,
    f: impl Fn(&T) -> R + Sync,
    mut done: impl FnMut(usize, &R),
) -> Vec<R> {
    let jobs = jobs.clamp(1, items.len().max(1));
    let next = AtomicUsize::new(0);
    let mut results: Vec<Option<R>> = items.iter().map(|_| None).collect();
    std::thread::scope(|scope| {
        let (tx, rx) = mpsc::channel();
        for _ in 0..jobs {
            let tx = tx.clone();
            let (next, f) = (&next, &f);
            scope.spawn(move || {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(item) = items.get(i) else { break };
                    // The receiver lives until every worker is done.
                    if tx.send((i, f(item))).is_err() {
                        break;
                    }
                }
            });
        }
        drop(tx);
        for (i, r) in rx {
            done(i, &r);
            results[i] = Some(r);
        }
    });
    // Every index was handed out once and its result sent before the scope ended.
    results.into_iter().flatten().collect()
}

/// Runs every scenario, at most `jobs` at a time (at least one); `done(i)` is called on the
/// calling thread as run `i` finishes. Returns the reports in the order of `scenarios`.
pub fn run_all(
    scenarios: Vec<Scenario>,
    jobs: usize,
    mut done: impl FnMut(usize),
) -> Vec<Result<Report, SimError>> {
    map(
        &scenarios,
        jobs,
        |sc| run_scenario(sc.clone(), |_| {}),
        |i, _| done(i),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenarios::builtin;

    fn short(name: &str, sets: &[(&str, &str)]) -> Scenario {
        let mut all = vec![
            ("duration_ms".to_string(), "20".to_string()),
            ("warmup_ms".to_string(), "5".to_string()),
        ];
        all.extend(sets.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        builtin(name)
            .and_then(Result::ok)
            .and_then(|s| s.with_sets(&all).ok())
            .unwrap_or_else(|| panic!("{name}"))
    }

    /// Two workers give the reports one worker gives, in the order asked, each finished run
    /// announced once.
    #[test]
    fn parallel_reports_are_the_serial_ones_in_order() {
        let scenarios = vec![
            short("nvme-8ssd-64q", &[]),
            short("aim-e1000-pingpong", &[("aim_mode", "2")]),
            short("nic-100g-32q-lowload", &[("moderation", "dim")]),
            short("aim-e1000-pingpong", &[("aim_mode", "0")]),
        ];
        let serial = run_all(scenarios.clone(), 1, |_| {});
        let mut seen = Vec::new();
        let parallel = run_all(scenarios, 2, |i| seen.push(i));
        seen.sort_unstable();
        assert_eq!(seen, vec![0, 1, 2, 3]);
        let ok = |runs: Vec<Result<Report, SimError>>| -> Vec<Report> {
            runs.into_iter().map(|r| r.unwrap()).collect()
        };
        let (serial, parallel) = (ok(serial), ok(parallel));
        assert_eq!(serial, parallel);
        assert_ne!(
            serial[1], serial[3],
            "different settings, different reports"
        );
        assert!(run_all(Vec::new(), 2, |_| {}).is_empty());
    }
}
