//! Reports and recordings of the digital twin: `irqpilot sim SCENARIO --report out.html`
//! (with `--compare`, the runs overlaid) and `--record FILE`. The twin is looked at while it
//! runs, through its `Platform` snapshots, by the same [`Sampler`] and report [`Builder`] a
//! recording goes through, so the per-CPU heat maps, device rates, imbalance and findings mean
//! the same on both; the twin adds what only it knows: throughput, interrupt rate and latency
//! percentiles of every run, overlaid.

use super::data::{Builder, ReportData};
use super::page::Page;
use super::{add_sections, plots};
use crate::live::Sampler;
use crate::live::recording::create_writer;
use crate::progress::Progress;
use anyhow::Result;
use irqpilot_core::findings::FindingsConfig;
use irqpilot_core::{Machine, Platform};
use irqpilot_record::Meta;
use irqpilot_sim::report::Report;
use irqpilot_sim::{Sampling, Scenario, SimError, SimPlatform, run_scenario_sampled};
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

/// Looks per run for a report: enough for ~300 heat map columns...
const REPORT_LOOKS: u64 = 300;
/// ...but not closer than `/proc/stat`'s 10 ms tick, or the interrupt time is all noise.
const MIN_REPORT_PERIOD_NS: u64 = 10_000_000;
/// Simulated time between samples of a twin recording (`sim --record`).
pub const RECORD_PERIOD_NS: u64 = 10_000_000;

/// One run looked at: the twin's report, and what the report plots.
#[derive(Debug)]
pub struct Sampled {
    /// The twin's own results.
    pub report: Report,
    /// The sampled data (when a report was asked for).
    pub data: Option<ReportData>,
    /// The simulated machine.
    pub machine: Machine,
}

/// Runs `sc`, sampling it for a report (`report`) and/or into a recording (`record`), with a
/// progress bar labelled `label`.
pub fn run(
    sc: Scenario,
    label: &str,
    config: &FindingsConfig,
    report: bool,
    record: Option<&Path>,
) -> Result<Sampled> {
    let total_ns = (sc.duration_ms + sc.warmup_ms)
        .saturating_mul(1_000_000)
        .max(1);
    let period = match (report, record) {
        (_, Some(_)) => RECORD_PERIOD_NS,
        _ => (total_ns / REPORT_LOOKS).max(MIN_REPORT_PERIOD_NS),
    };
    let name = sc.name.clone();
    let progress = Progress::timed(1000, label);
    let mut sampler: Option<Sampler> = None;
    let mut builder: Option<Builder> = None;
    let mut machine = Machine::default();
    let mut writer = None;
    let mut failure: Option<anyhow::Error> = None;
    let mut look = |p: &mut SimPlatform| -> Result<(), SimError> {
        let mut step = || -> Result<()> {
            if sampler.is_none() {
                machine = p.machine()?;
                sampler = Some(Sampler::new(&machine));
                if report {
                    builder = Some(Builder::new(
                        &machine,
                        config.clone(),
                        p.now().0,
                        total_ns,
                        period,
                    ));
                }
                if let Some(path) = record {
                    let mut meta =
                        Meta::new(&format!("sim {name}"), &format!("twin:{name}"), period);
                    meta.start_mono_ns = p.now().0;
                    meta.created_unix_ns = SystemTime::now()
                        .duration_since(UNIX_EPOCH)
                        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(0));
                    meta.hostname = Some(format!("twin {name}"));
                    writer = Some(create_writer(path, &meta, &machine)?);
                }
            }
            let Some(s) = sampler.as_mut() else {
                return Ok(());
            };
            let ready = s.sample(p)?;
            if let Some(w) = writer.as_mut() {
                w.push(s.snapshot())?;
            }
            if let (true, Some(b)) = (ready, builder.as_mut()) {
                b.add(s);
            }
            Ok(())
        };
        step().map_err(|e| {
            let text = crate::error_text(&e);
            failure = Some(e);
            SimError::Sampling(text)
        })
    };
    let report_out = run_scenario_sampled(
        sc,
        |f| progress.set((f * 1000.0) as u64),
        |_| {},
        Sampling {
            period_ns: period,
            look: &mut look,
        },
    );
    progress.finish();
    if let Some(e) = failure {
        return Err(e);
    }
    let report = report_out?;
    if let Some(w) = writer {
        w.finish()?;
    }
    Ok(Sampled {
        report,
        data: builder.map(Builder::finish),
        machine,
    })
}

/// A series of the twin's time series: the metric the scenario is about.
fn headline_series(r: &Report) -> (&'static str, Vec<(f64, f64)>) {
    let pts = |f: fn(&irqpilot_sim::SeriesPoint) -> f64| -> Vec<(f64, f64)> {
        r.series.iter().map(|p| (p.t_ms / 1000.0, f(p))).collect()
    };
    if r.iops.is_some() {
        ("I/Os per second", pts(|p| p.iops))
    } else if r.transactions_per_sec.is_some() {
        ("transactions per second", pts(|p| p.transactions_per_sec))
    } else {
        ("received Gb/s", pts(|p| p.throughput_gbps))
    }
}

/// The page of one or more runs of a scenario: `key` names what differs between them (empty
/// for a single run), each run labelled by its value.
pub fn page(scenario: &str, key: &str, runs: &[(String, Sampled)]) -> Result<String> {
    let title = if key.is_empty() {
        format!("Twin: {scenario}")
    } else {
        format!("Twin: {scenario}, comparing {key}")
    };
    let mut page = Page::new(&title);
    let first = runs.first().map(|(_, s)| &s.report);
    let mut rows: Vec<(String, Vec<String>)> = Vec::new();
    if let Some(r) = first {
        rows.push(("".into(), vec!["scenario".into(), r.scenario.clone()]));
        rows.push(("".into(), vec!["seed".into(), r.seed.to_string()]));
        rows.push((
            "".into(),
            vec![
                "simulated".into(),
                format!(
                    "{:.3} s measured after {:.3} s warm-up",
                    r.duration_s, r.warmup_s
                ),
            ],
        ));
    }
    if !key.is_empty() {
        rows.push((
            "".into(),
            vec![
                key.to_string(),
                runs.iter()
                    .map(|(v, _)| v.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
            ],
        ));
    }
    page.table("run", &["", ""], &rows);

    // The runs side by side.
    page.section("results", "Results");
    let mut header = vec!["".to_string()];
    header.extend(runs.iter().map(|(v, _)| {
        if v.is_empty() {
            "run".into()
        } else {
            v.clone()
        }
    }));
    let metric = |f: &dyn Fn(&Report) -> Option<String>| -> Vec<String> {
        runs.iter()
            .map(|(_, s)| f(&s.report).unwrap_or_else(|| "-".into()))
            .collect()
    };
    let mut table: Vec<(String, Vec<String>)> = Vec::new();
    let mut push = |name: &str, vals: Vec<String>| {
        if vals.iter().any(|v| v != "-") {
            let mut row = vec![name.to_string()];
            row.extend(vals);
            table.push((String::new(), row));
        }
    };
    push(
        "interrupts/s",
        metric(&|r| Some(plots::short(r.interrupts_per_sec))),
    );
    push(
        "throughput, Gb/s",
        metric(&|r| r.throughput_gbps.map(|g| format!("{g:.2}"))),
    );
    push("I/Os per second", metric(&|r| r.iops.map(plots::short)));
    push(
        "transactions/s",
        metric(&|r| r.transactions_per_sec.map(plots::short)),
    );
    push(
        "latency p50, us",
        metric(&|r| r.latency_us.as_ref().map(|l| format!("{:.1}", l.p50))),
    );
    push(
        "latency p99, us",
        metric(&|r| r.latency_us.as_ref().map(|l| format!("{:.1}", l.p99))),
    );
    push(
        "latency p99.9, us",
        metric(&|r| r.latency_us.as_ref().map(|l| format!("{:.1}", l.p999))),
    );
    push("migrations", metric(&|r| Some(r.migrations.to_string())));
    let header_refs: Vec<&str> = header.iter().map(String::as_str).collect();
    page.table("results-table", &header_refs, &table);

    let label = |v: &String| {
        if v.is_empty() {
            scenario.to_string()
        } else {
            format!("{key}={v}")
        }
    };
    if let Some(r) = first {
        let (what, _) = headline_series(r);
        let series: Vec<(String, Vec<(f64, f64)>)> = runs
            .iter()
            .map(|(v, s)| (label(v), headline_series(&s.report).1))
            .collect();
        page.section("throughput", &format!("{what} over time"));
        page.figure(
            "throughput-over-time",
            &plots::lines(&format!("{what} over time"), what, &series, None)?,
            "The twin's own time series (warm-up included), one line per run.",
        );
        let series: Vec<(String, Vec<(f64, f64)>)> = runs
            .iter()
            .map(|(v, s)| {
                (
                    label(v),
                    s.report
                        .series
                        .iter()
                        .map(|p| (p.t_ms / 1000.0, p.interrupts_per_sec))
                        .collect(),
                )
            })
            .collect();
        page.section("interrupt-rate", "Interrupt rate over time");
        page.figure(
            "interrupts-over-time",
            &plots::lines(
                "interrupts/s over time (all vectors)",
                "interrupts/s",
                &series,
                None,
            )?,
            "Every vector of the machine together.",
        );
    }
    let with_latency: Vec<(String, Vec<f64>)> = runs
        .iter()
        .filter_map(|(v, s)| {
            s.report
                .latency_us
                .as_ref()
                .map(|l| (label(v), vec![l.p50, l.p95, l.p99, l.p999]))
        })
        .collect();
    if !with_latency.is_empty() {
        page.section("latency", "Latency percentiles");
        page.figure(
            "latency-percentiles",
            &plots::bars(
                "request / I/O latency",
                "microseconds",
                &["p50", "p95", "p99", "p99.9"],
                &with_latency,
            )?,
            "Measured after the warm-up, at the client (requests) or the submitter (I/O).",
        );
    } else {
        page.section("latency", "Latency percentiles");
        page.note(
            "No latency: this scenario's workloads measure none (bulk flows carry no latency \
             probe; set `probe_per_sec` on a bulk workload, or use an RPC or fio workload).",
        );
    }
    for (i, (v, s)) in runs.iter().enumerate() {
        let Some(d) = &s.data else { continue };
        let heading = if v.is_empty() {
            "The machine while it ran".to_string()
        } else {
            format!("The machine with {key}={v}")
        };
        page.raw(&format!(
            "<details{}><summary>{}</summary>\n",
            if i == 0 { " open" } else { "" },
            super::page::escape(&heading)
        ));
        add_sections(&mut page, d, &s.machine, &format!("run{i}-"), None)?;
        page.raw("</details>\n");
    }
    Ok(page.finish(&format!(
        "irqpilot sim {scenario} --report (irqpilot {})",
        env!("CARGO_PKG_VERSION")
    )))
}
