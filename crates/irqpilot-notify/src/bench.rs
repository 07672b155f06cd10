//! Running the benchmark: every configured mechanism in every placement the topology has, back-
//! to-back and with each idle gap, one measurement at a time.

use crate::clock::measure_overhead;
use crate::config::BenchConfig;
use crate::cpu::allowed_cpus;
use crate::environment::Environment;
use crate::error::RunError;
use crate::harness::{self, Measured, RunSpec};
use crate::histogram::summarize;
use crate::hybrid::HybridConfig;
use crate::mechanism::signal::SignalWait;
use crate::mechanism::uintr::{self, UintrSupport};
use crate::mechanism::{Endpoint, Mechanism, Mode, Unavailable, fd, futex, msg_ring, signal, spin};
use crate::notifier::Strategy;
use crate::placement::{Placement, absent_kinds, select_placements};
use crate::report::{BenchReport, ResultRow, SideCpu, compute_targets};
use irqpilot_core::Topology;
use std::time::{Duration, Instant};

/// A mechanism of one gap variant while its rounds run: the merged result so far, or why it is
/// not measured.
type Pending = (Mechanism, Option<Result<Measured, Failure>>, Option<String>);

enum Failure {
    Unavailable(Unavailable),
    Run(RunError),
}

impl From<Unavailable> for Failure {
    fn from(u: Unavailable) -> Self {
        Failure::Unavailable(u)
    }
}

fn go<A, B>(pair: (A, B), spec: &RunSpec, mode: Mode) -> Result<Measured, Failure>
where
    A: Endpoint + 'static,
    B: Endpoint + 'static,
{
    harness::run(pair.0, pair.1, spec, mode).map_err(Failure::Run)
}

fn go_signal(wait: SignalWait, spec: &RunSpec, mode: Mode) -> Result<Measured, Failure> {
    let (a, b, session) = signal::pair(wait)?;
    let r = go((a, b), spec, mode);
    drop(session);
    r
}

fn measure(
    mechanism: Mechanism,
    spec: &RunSpec,
    mode: Mode,
    hybrid: HybridConfig,
    uintr: &UintrSupport,
) -> Result<Measured, Failure> {
    match mechanism {
        Mechanism::SpinRaw => go(spin::raw_pair()?, spec, mode),
        Mechanism::Spin => go(spin::doorbell_pair(Strategy::Spin, mode)?, spec, mode),
        Mechanism::Hybrid => go(
            spin::doorbell_pair(Strategy::Hybrid(hybrid), mode)?,
            spec,
            mode,
        ),
        Mechanism::Futex => go(futex::pair(mode)?, spec, mode),
        Mechanism::Eventfd => go(fd::eventfd_pair(false)?, spec, mode),
        Mechanism::EventfdPoll => go(fd::eventfd_pair(true)?, spec, mode),
        Mechanism::EventfdShared => go(fd::shared_eventfd_pair()?, spec, mode),
        Mechanism::Pipe => go(fd::pipe_pair()?, spec, mode),
        Mechanism::Socketpair => go(fd::socketpair_pair()?, spec, mode),
        Mechanism::Signal => go_signal(SignalWait::Sigwaitinfo, spec, mode),
        Mechanism::SignalHandler => go_signal(SignalWait::HandlerSuspend, spec, mode),
        Mechanism::SignalHandlerSpin => go_signal(SignalWait::HandlerSpin, spec, mode),
        Mechanism::MsgRing => go(msg_ring::pair(false)?, spec, mode),
        Mechanism::MsgRingPoll => go(msg_ring::pair(true)?, spec, mode),
        Mechanism::Uintr => Err(Failure::Unavailable(Unavailable(uintr.reason()))),
    }
}

/// Why `mechanism` cannot run at all on this machine (independent of placement), if it cannot.
pub fn machine_unavailability(mechanism: Mechanism, uintr: &UintrSupport) -> Option<String> {
    match mechanism {
        Mechanism::Uintr => Some(uintr.reason()),
        Mechanism::MsgRing | Mechanism::MsgRingPoll => msg_ring::availability().err().map(|u| u.0),
        _ => None,
    }
}

/// Measures one mechanism in one placement with one gap (zero = back-to-back), using the
/// iteration counts, mode, timeout, time cap and hybrid tuning of `config`, in one round.
pub fn measure_one(
    mechanism: Mechanism,
    placement: &Placement,
    gap: Duration,
    config: &BenchConfig,
    uintr: &UintrSupport,
) -> ResultRow {
    let gap_ns = u64::try_from(gap.as_nanos()).unwrap_or(u64::MAX);
    let row = ResultRow::new(mechanism, placement, gap_ns, config.mode);
    match precheck(mechanism, placement, uintr) {
        Some(reason) => row.unavailable(reason),
        None => finish(
            row,
            measure_round(mechanism, placement, gap, config, uintr, (0, 1)),
        ),
    }
}

/// Why `mechanism` cannot be measured in `placement` at all, if it cannot.
fn precheck(mechanism: Mechanism, placement: &Placement, uintr: &UintrSupport) -> Option<String> {
    machine_unavailability(mechanism, uintr)
        .or_else(|| mechanism.unavailable_in(placement.kind).map(|u| u.0))
}

/// Round `round.0` of `round.1`: its share of the iterations (the rounds add up to exactly the
/// configured count), of the warm-up and of the time cap.
fn measure_round(
    mechanism: Mechanism,
    placement: &Placement,
    gap: Duration,
    config: &BenchConfig,
    uintr: &UintrSupport,
    round: (u32, u32),
) -> Result<Measured, Failure> {
    let rounds = u64::from(round.1.max(1));
    let total = config.iterations_for(gap);
    let iterations = total / rounds + u64::from(u64::from(round.0) < total % rounds);
    let cap_ns = config
        .max_measure_time
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
    let spec = RunSpec {
        pinger_cpu: placement.pinger,
        ponger_cpu: placement.ponger,
        warmup: config.warmup_for(gap).div_ceil(rounds),
        iterations,
        gap_ns: u64::try_from(gap.as_nanos()).unwrap_or(u64::MAX),
        timeout: config.timeout,
        max_time_ns: cap_ns / rounds,
    };
    measure(mechanism, &spec, config.mode, config.hybrid, uintr)
}

fn finish(row: ResultRow, result: Result<Measured, Failure>) -> ResultRow {
    match result {
        Ok(m) => with_numbers(row, &m),
        Err(Failure::Unavailable(u)) => row.unavailable(u.0),
        Err(Failure::Run(e)) => row.failed(e.to_string()),
    }
}

/// Adds one round's numbers to the total (samples appended, CPU times summed).
fn merge(
    total: Result<Measured, Failure>,
    round: Result<Measured, Failure>,
) -> Result<Measured, Failure> {
    match (total, round) {
        (Ok(mut t), Ok(r)) => {
            t.samples.extend_from_slice(&r.samples);
            t.pinger_cpu_ns += r.pinger_cpu_ns;
            t.ponger_cpu_ns += r.ponger_cpu_ns;
            Ok(t)
        }
        (Err(e), _) | (Ok(_), Err(e)) => Err(e),
    }
}

fn with_numbers(mut row: ResultRow, m: &Measured) -> ResultRow {
    let n = m.samples.len() as u64;
    row.round_trips = n;
    row.rtt_ns = summarize(&m.samples);
    if n > 0 {
        let per = |ns: u64| ns as f64 / n as f64;
        row.cpu_ns_per_rtt = Some(per(m.pinger_cpu_ns + m.ponger_cpu_ns));
        row.cpu_ns_per_rtt_by_side = Some(SideCpu {
            pinger: per(m.pinger_cpu_ns),
            ponger: per(m.ponger_cpu_ns),
        });
    }
    row
}

/// Runs the whole benchmark. See [`run_with_progress`].
pub fn run(config: &BenchConfig, topology: &Topology) -> BenchReport {
    run_with_progress(config, topology, |_, _| {})
}

/// How far a run is: rows done and rows planned (for a progress bar).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RowProgress {
    /// Rows reported so far, this one included.
    pub done: usize,
    /// Rows the run will report.
    pub planned: usize,
}

/// Runs the whole benchmark, calling `on_row` after each row with how far the run is (for
/// progress output).
///
/// Placements come from [`select_placements`] over the CPUs this process may use. For each
/// placement, back-to-back first and then each gap, every configured mechanism is measured in
/// turn. Rows that say a mechanism is unavailable (machine-wide or in this placement) appear
/// once per placement, in the back-to-back variant.
pub fn run_with_progress(
    config: &BenchConfig,
    topology: &Topology,
    mut on_row: impl FnMut(&ResultRow, RowProgress),
) -> BenchReport {
    let start = Instant::now();
    let environment = Environment::detect();
    let timer = measure_overhead(10_000);
    let allowed = allowed_cpus();
    let all = select_placements(topology, allowed.as_ref());
    let placements_absent = absent_kinds(&all);
    let placements: Vec<Placement> = all
        .into_iter()
        .filter(|p| config.placements.contains(&p.kind))
        .collect();
    let uintr = uintr::probe();
    let mut variants = vec![Duration::ZERO];
    for g in &config.gaps {
        if !g.is_zero() && !variants.contains(g) {
            variants.push(*g);
        }
    }
    let mut config = config.clone();
    if config.max_measure_time.is_none() {
        if let Some(budget) = config.time_budget {
            let planned = placements
                .iter()
                .map(|p| {
                    let per_variant = config
                        .mechanisms
                        .iter()
                        .filter(|m| {
                            machine_unavailability(**m, &uintr).is_none()
                                && m.unavailable_in(p.kind).is_none()
                        })
                        .count();
                    per_variant * variants.len()
                })
                .sum::<usize>()
                .max(1);
            config.max_measure_time = Some(budget / u32::try_from(planned).unwrap_or(u32::MAX));
        }
    }
    let config = &config;
    let rounds = config.rounds.max(1);
    // The rows the loop below reports: every mechanism per placement and gap, except that an
    // unavailable one appears only in the back-to-back variant.
    let planned: usize = placements
        .iter()
        .map(|p| {
            variants
                .iter()
                .map(|gap| {
                    config
                        .mechanisms
                        .iter()
                        .filter(|m| gap.is_zero() || precheck(**m, p, &uintr).is_none())
                        .count()
                })
                .sum::<usize>()
        })
        .sum();
    let mut results = Vec::new();
    for p in &placements {
        for &gap in &variants {
            let gap_ns = u64::try_from(gap.as_nanos()).unwrap_or(u64::MAX);
            // Unavailable rows once per placement (back-to-back variant only).
            let mut rows: Vec<Pending> = Vec::new();
            for &m in &config.mechanisms {
                match precheck(m, p, &uintr) {
                    Some(_) if !gap.is_zero() => {}
                    Some(reason) => rows.push((m, None, Some(reason))),
                    None => rows.push((m, None, None)),
                }
            }
            // Rounds interleave the mechanisms, so slow drifts of machine load (other work on a
            // shared machine) fall on all of them alike.
            for round in 0..rounds {
                for (m, acc, unavailable) in rows.iter_mut() {
                    if unavailable.is_some() || matches!(acc, Some(Err(_))) {
                        continue;
                    }
                    let result = measure_round(*m, p, gap, config, &uintr, (round, rounds));
                    *acc = Some(match acc.take() {
                        None => result,
                        Some(total) => merge(total, result),
                    });
                }
            }
            for (m, acc, unavailable) in rows {
                let row = ResultRow::new(m, p, gap_ns, config.mode);
                let row = match (unavailable, acc) {
                    (Some(reason), _) => row.unavailable(reason),
                    (None, Some(result)) => finish(row, result),
                    (None, None) => continue,
                };
                results.push(row);
                if let Some(row) = results.last() {
                    on_row(
                        row,
                        RowProgress {
                            done: results.len(),
                            planned: planned.max(results.len()),
                        },
                    );
                }
            }
        }
    }
    BenchReport {
        targets: compute_targets(&results),
        results,
        placements,
        placements_absent,
        environment,
        timer,
        config: config.clone(),
        uintr,
        elapsed_ms: u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX),
    }
}
