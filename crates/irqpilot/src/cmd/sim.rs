//! `irqpilot sim`: the digital twin. Runs a built-in scenario or a scenario file and reports
//! throughput, latency, interrupt rates and CPU time; `--compare` runs one scenario under several
//! values of a setting side by side; `--table` prints the README's result tables; `--bench`
//! measures the simulator itself.
//!
//! JSON (a contract scripts rely on): one object with at least `scenario`, `seed`, `duration_s`,
//! `interrupts_per_sec`, `throughput_gbps` (NIC scenarios), `iops` (NVMe scenarios),
//! `transactions_per_sec` (request/response scenarios), `latency_us` {`p50`, `p95`, `p99`,
//! `p999`} where there are requests, and `per_cpu` [{`cpu`, `interrupts_per_sec`,
//! `hardirq_pct`, `softirq_pct`}]; see `irqpilot_sim::report::Report` for every field.

use crate::Settings;
use crate::cli::{Format, SimArgs};
use crate::progress::Progress;
use crate::render::human;
use crate::render::table::{Align, Table};
use crate::report::twin;
use anyhow::{Context, Result, bail};
use irqpilot_sim::report::Report;
use irqpilot_sim::{Scenario, scenarios, tables};
use std::io::Write;
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// Runs `irqpilot sim`.
pub fn run(args: &SimArgs, settings: &Settings) -> Result<ExitCode> {
    let mut out = std::io::stdout().lock();
    if args.list {
        return list(settings, &mut out);
    }
    if let Some(n) = args.generate {
        return generate(
            n,
            args.seed.unwrap_or(tables::REPORT_SEED),
            args,
            settings,
            &mut out,
        );
    }
    if let Some(n) = args.sweep {
        return sweep(
            n,
            args.seed.unwrap_or(tables::REPORT_SEED),
            jobs(args),
            settings,
            &mut out,
        );
    }
    if args.keys {
        let table = irqpilot_sim::keys::reference_table().map_err(anyhow::Error::new)?;
        out.write_all(table.as_bytes())?;
        return Ok(ExitCode::SUCCESS);
    }
    if let Some(name) = &args.table {
        // The tables run a known set of scenarios whose count only they know: a spinner with
        // the runs done so far (they run on every core, `--jobs`).
        let progress = Progress::spinner(&format!("sim --table {name}"));
        let mut done = 0;
        let text = tables::table_with(
            name,
            args.machines.unwrap_or(tables::REPORT_MACHINES),
            args.seed.unwrap_or(tables::REPORT_SEED),
            jobs(args),
            |row| {
                done += 1;
                progress.message(format!("sim --table {name}: {done} done, last {row}"));
            },
        )
        .map_err(anyhow::Error::new);
        progress.finish();
        out.write_all(text?.as_bytes())?;
        return Ok(ExitCode::SUCCESS);
    }
    let Some(name) = &args.scenario else {
        return crate::usage(
            "name a scenario (irqpilot sim --list shows the built-ins) or a scenario file",
        );
    };
    let base = load(name)?;
    let mut sets = parse_sets(&args.set)?;
    if let Some(seed) = args.seed {
        sets.push(("seed".into(), seed.to_string()));
    }
    if let Some(d) = args.duration {
        // The same rule as the scenario's `duration_ms`: a positive whole number of ms.
        if d.is_zero() || d.subsec_nanos() % 1_000_000 != 0 {
            return crate::usage(format!(
                "--duration {}: the twin runs a positive whole number of milliseconds \
                 (duration_ms >= 1)",
                humantime::format_duration(d)
            ));
        }
        let ms = d.as_millis() as u64;
        sets.push(("duration_ms".into(), ms.to_string()));
        if base.warmup_ms >= ms {
            // Keep a warm-up, shorter than the run, rather than refusing a shorter run.
            sets.push(("warmup_ms".into(), (ms / 4).to_string()));
        }
    }
    if let Some(cmp) = &args.compare {
        return compare(
            &base,
            &sets,
            cmp,
            jobs(args),
            settings,
            args.report.as_deref(),
            &mut out,
        );
    }
    let sc = base.with_sets(&sets)?;
    let started = Instant::now();
    let report = match &args.export_root {
        Some(root) => run_exported(sc, root, args)?,
        None if args.report.is_some() || args.record.is_some() => {
            let s = twin::run(
                sc,
                &base.name,
                &settings.config.findings,
                args.report.is_some(),
                args.record.as_deref(),
            )?;
            let report = s.report.clone();
            if let Some(path) = &args.report {
                write_page(path, &twin::page(&base.name, "", &[(String::new(), s)])?)?;
            }
            report
        }
        None => run_with_progress(sc)?,
    };
    let wall = started.elapsed();
    if args.bench {
        return bench(&report, wall, settings, &mut out);
    }
    match settings.format {
        Format::Json => {
            serde_json::to_writer_pretty(&mut out, &report)?;
            writeln!(out)?;
        }
        Format::Table => write!(out, "{}", render_report(&report))?,
    }
    Ok(ExitCode::SUCCESS)
}

/// Runs at a time for --compare and --table.
fn jobs(args: &SimArgs) -> usize {
    args.jobs
        .map_or_else(irqpilot_sim::sweep::default_jobs, usize::from)
}

/// A built-in scenario by name, or a TOML file.
fn load(name: &str) -> Result<Scenario> {
    if let Some(sc) = scenarios::builtin(name) {
        return Ok(sc?);
    }
    let path = std::path::Path::new(name);
    if path.exists() {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading scenario {name}"))?;
        return Ok(Scenario::from_toml(&text, name)?);
    }
    bail!("no built-in scenario or file named {name:?} (irqpilot sim --list shows the built-ins)")
}

/// `key=value` pairs; a pair without `=` names itself in the error.
fn parse_sets(raw: &[String]) -> Result<Vec<(String, String)>> {
    raw.iter()
        .map(|s| match s.split_once('=') {
            Some((k, v)) if !k.is_empty() => Ok((k.trim().to_string(), v.trim().to_string())),
            _ => crate::usage(format!("--set {s:?}: expected key=value")),
        })
        .collect()
}

/// Runs a scenario, with a progress bar when stderr is a terminal.
fn run_with_progress(sc: Scenario) -> Result<Report> {
    let progress = Progress::timed(1000, &sc.name);
    // With -v, what each policy decided and why, at the simulated time it did (the daemon's
    // "decided" lines).
    let report = irqpilot_sim::run_scenario_observed(
        sc,
        |f| progress.set((f * 1000.0) as u64),
        |step| {
            for (name, plan) in &step.plans {
                for n in &plan.notes {
                    tracing::debug!(
                        at_ms = step.at.0 as f64 / 1e6,
                        policy = *name,
                        note = n.as_str(),
                        "decided"
                    );
                }
            }
        },
    )
    .map_err(anyhow::Error::new);
    progress.finish();
    report
}

/// Runs a scenario with its machine exported as a live tree under `root`; every write an outside
/// tool made to it is logged with what the simulated kernel did with it.
fn run_exported(sc: Scenario, root: &std::path::Path, args: &SimArgs) -> Result<Report> {
    if args.realtime.is_some_and(|s| !(s.is_finite() && s > 0.0)) {
        return crate::usage("--realtime: the scale must be a positive number");
    }
    let opts = irqpilot_sim::export::ExportOptions {
        scale: args.realtime,
        hold_until: args.hold_until.clone(),
        ..Default::default()
    };
    let (report, writes) =
        irqpilot_sim::run_scenario_exported(sc, root, opts, |_| {}).map_err(anyhow::Error::new)?;
    for w in &writes {
        let result = match &w.result {
            Ok(true) => "taken".to_string(),
            Ok(false) => "already so".to_string(),
            Err(e) => format!("refused: {e}"),
        };
        tracing::info!(
            at_ms = w.at_ns as f64 / 1e6,
            file = %w.file,
            text = %w.text,
            result,
            "outside write"
        );
    }
    Ok(report)
}

fn list(settings: &Settings, out: &mut impl Write) -> Result<ExitCode> {
    let all = scenarios::list();
    match settings.format {
        Format::Json => {
            let v: Vec<serde_json::Value> = all
                .iter()
                .map(|(n, d)| serde_json::json!({ "name": n, "description": d }))
                .collect();
            serde_json::to_writer_pretty(&mut *out, &v)?;
            writeln!(out)?;
        }
        Format::Table => {
            let mut t = Table::new(&[("SCENARIO", Align::Left), ("DESCRIPTION", Align::Left)]);
            for (n, d) in all {
                let short: String = d.chars().take(110).collect();
                t.row(vec![
                    n.to_string(),
                    if short.len() < d.len() {
                        format!("{short}...")
                    } else {
                        short
                    },
                ]);
            }
            write!(out, "{}", t.render())?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Label and value of the headline metrics of a report.
fn headline(r: &Report) -> Vec<(&'static str, String)> {
    let mut v = vec![("interrupts/s", human::rate(r.interrupts_per_sec))];
    if let Some(g) = r.throughput_gbps {
        v.push(("throughput", format!("{g:.2} Gb/s")));
    }
    if let Some(g) = r.tx_gbps {
        v.push(("transmit", format!("{g:.2} Gb/s")));
    }
    if let Some(i) = r.iops {
        v.push(("IOPS", human::si(i)));
    }
    if let Some(t) = r.transactions_per_sec {
        v.push(("transactions/s", human::si(t)));
    }
    if let Some(l) = &r.latency_us {
        v.push((
            "latency p50/p95/p99/p99.9",
            format!(
                "{:.1} / {:.1} / {:.1} / {:.1} us",
                l.p50, l.p95, l.p99, l.p999
            ),
        ));
    }
    if let Some(f) = &r.fairness {
        v.push((
            "fairness (Jain, min/max)",
            format!("{:.3}, {:.3} over {}", f.jain, f.min_over_max, f.units),
        ));
    }
    if let Some(g) = &r.gsim {
        v.push((
            "GSIM delay mean/max",
            format!("{:.1} / {:.1} us", g.mean_delay_us, g.max_delay_us),
        ));
    }
    v.push((
        "platform MSI/s (knee)",
        format!(
            "{} ({})",
            human::rate(r.platform.msi_per_sec),
            human::rate(r.platform.knee_per_sec)
        ),
    ));
    v.push(("dropped packets", r.drops.nic_packets.to_string()));
    v
}

fn render_report(r: &Report) -> String {
    let mut s = format!(
        "scenario {} (seed {}), {:.3} s measured after {:.3} s warm-up\n\n",
        r.scenario, r.seed, r.duration_s, r.warmup_s
    );
    let mut t = Table::new(&[("METRIC", Align::Left), ("VALUE", Align::Right)]);
    for (k, v) in headline(r) {
        t.row(vec![k.to_string(), v]);
    }
    s.push_str(&t.render());
    // The busiest CPUs by interrupt rate: on big machines all of them would drown the table.
    let mut cpus: Vec<_> = r.per_cpu.iter().collect();
    cpus.sort_by(|a, b| {
        b.interrupts_per_sec
            .total_cmp(&a.interrupts_per_sec)
            .then(a.cpu.cmp(&b.cpu))
    });
    s.push_str(&format!("\nbusiest CPUs (of {}):\n", r.per_cpu.len()));
    let mut c = Table::new(&[
        ("CPU", Align::Right),
        ("IRQ/s", Align::Right),
        ("HARDIRQ%", Align::Right),
        ("SOFTIRQ%", Align::Right),
        ("APP%", Align::Right),
    ]);
    for p in cpus.iter().take(8) {
        c.row(vec![
            p.cpu.to_string(),
            human::rate(p.interrupts_per_sec),
            format!("{:.1}", p.hardirq_pct),
            format!("{:.1}", p.softirq_pct),
            format!("{:.1}", p.app_pct),
        ]);
    }
    s.push_str(&c.render());
    s
}

/// Writes a report page.
fn write_page(path: &std::path::Path, html: &str) -> Result<()> {
    std::fs::write(path, html).with_context(|| format!("writing {}", path.display()))
}

fn compare(
    base: &Scenario,
    sets: &[(String, String)],
    cmp: &str,
    jobs: usize,
    settings: &Settings,
    page: Option<&std::path::Path>,
    out: &mut impl Write,
) -> Result<ExitCode> {
    let Some((key, values)) = cmp.split_once('=') else {
        return crate::usage(format!("--compare {cmp:?}: expected key=v1,v2,..."));
    };
    let values: Vec<&str> = values
        .split(',')
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .collect();
    if values.is_empty() {
        return crate::usage(format!("--compare {cmp:?}: no values"));
    }
    let mut reports = Vec::new();
    let mut skipped: Vec<(String, String)> = Vec::new();
    let mut ran: Vec<&str> = Vec::new();
    let mut scenarios = Vec::new();
    for v in &values {
        let mut s = sets.to_vec();
        s.push((key.to_string(), v.to_string()));
        match base.with_sets(&s) {
            Ok(sc) => {
                scenarios.push(sc);
                ran.push(v);
            }
            // A policy that does not apply to this machine (DIM without a NIC) is skipped.
            Err(e @ irqpilot_sim::ConfigError::NotApplicable { .. }) => {
                skipped.push((v.to_string(), e.to_string()));
            }
            Err(e) => return Err(e.into()),
        }
    }
    if let Some(path) = page {
        // A page samples each run as it goes: one after another.
        let mut sampled = Vec::new();
        for (v, sc) in ran.iter().zip(scenarios) {
            let run = twin::run(
                sc,
                &format!("{key}={v}"),
                &settings.config.findings,
                true,
                None,
            )?;
            reports.push(run.report.clone());
            sampled.push((v.to_string(), run));
        }
        write_page(path, &twin::page(&base.name, key, &sampled)?)?;
    } else {
        // Independent runs on every core (`--jobs`); the reports are a serial run's.
        let progress = Progress::spinner(&format!("sim --compare {key}"));
        let mut done = 0;
        let runs = irqpilot_sim::sweep::run_all(scenarios, jobs, |i| {
            done += 1;
            progress.message(format!(
                "sim --compare {key}: {done} of {} done, last {key}={}",
                ran.len(),
                ran[i]
            ));
        });
        progress.finish();
        for r in runs {
            reports.push(r.map_err(anyhow::Error::new)?);
        }
    }
    let values = ran;
    match settings.format {
        Format::Json => {
            let mut runs: Vec<serde_json::Value> = values
                .iter()
                .zip(&reports)
                .map(|(v, r)| serde_json::json!({ "value": v, "report": r }))
                .collect();
            runs.extend(
                skipped
                    .iter()
                    .map(|(v, why)| serde_json::json!({ "value": v, "skipped": why })),
            );
            serde_json::to_writer_pretty(
                &mut *out,
                &serde_json::json!({ "scenario": base.name, "compare": key, "runs": runs }),
            )?;
            writeln!(out)?;
        }
        Format::Table => {
            let mut cols = vec![(key, Align::Left)];
            cols.extend(values.iter().map(|v| (*v, Align::Right)));
            let mut t = Table::new(&cols);
            let heads: Vec<Vec<(&str, String)>> = reports.iter().map(headline).collect();
            // Metrics in first-seen order across the runs (GSIM's row exists only with GSIM).
            let mut labels: Vec<&str> = Vec::new();
            for h in &heads {
                for (label, _) in h {
                    if !labels.contains(label) {
                        labels.push(label);
                    }
                }
            }
            for label in labels {
                let mut row = vec![label.to_string()];
                row.extend(heads.iter().map(|h| {
                    h.iter()
                        .find(|(l, _)| *l == label)
                        .map_or("-".into(), |(_, v)| v.clone())
                }));
                t.row(row);
            }
            writeln!(out, "scenario {}, comparing {key}\n", base.name)?;
            write!(out, "{}", t.render())?;
            for (v, why) in &skipped {
                writeln!(out, "skipped {key}={v}: {why}")?;
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `--generate N`: the held-out machines of `seed`, listed or written as scenario files.
fn generate(
    n: usize,
    seed: u64,
    args: &SimArgs,
    settings: &Settings,
    out: &mut impl Write,
) -> Result<ExitCode> {
    let machines = irqpilot_sim::heldout::generate(n, seed).map_err(anyhow::Error::new)?;
    if let Some(dir) = &args.out {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        for g in &machines {
            let path = dir.join(format!("{}.toml", g.scenario.name));
            std::fs::write(&path, &g.toml)
                .with_context(|| format!("writing {}", path.display()))?;
        }
    }
    match settings.format {
        Format::Json => {
            let v: Vec<serde_json::Value> = machines
                .iter()
                .map(|g| {
                    serde_json::json!({
                        "name": g.scenario.name,
                        "load": g.load,
                        "description": g.scenario.description,
                        "toml": g.toml,
                    })
                })
                .collect();
            serde_json::to_writer_pretty(&mut *out, &v)?;
            writeln!(out)?;
        }
        Format::Table => {
            let mut t = Table::new(&[
                ("MACHINE", Align::Left),
                ("LOAD", Align::Left),
                ("DESCRIPTION", Align::Left),
            ]);
            for g in &machines {
                t.row(vec![
                    g.scenario.name.clone(),
                    g.load.name().to_string(),
                    g.scenario.description.clone(),
                ]);
            }
            write!(out, "{}", t.render())?;
            if let Some(dir) = &args.out {
                writeln!(
                    out,
                    "wrote {} scenario files to {}",
                    machines.len(),
                    dir.display()
                )?;
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `--sweep N`: issue 10's targets on the held-out machines of `seed` (`jobs` machines at a
/// time), one line per machine as it finishes (stderr), then the distribution of each target.
fn sweep(
    n: usize,
    seed: u64,
    jobs: usize,
    settings: &Settings,
    out: &mut impl Write,
) -> Result<ExitCode> {
    use irqpilot_sim::targets;
    let generated = irqpilot_sim::heldout::generate(n, seed).map_err(anyhow::Error::new)?;
    let mut written = Ok(());
    let progress = Progress::counted(generated.len() as u64, &format!("sim --sweep, seed {seed}"));
    let results = targets::evaluate_all(&generated, jobs, |r, took| {
        progress.inc();
        if settings.format != Format::Table || written.is_err() {
            return;
        }
        let values: Vec<String> = r
            .values
            .iter()
            .map(|(t, v)| {
                format!(
                    "{}={v:.3}{}",
                    t.name(),
                    if t.pass(*v) { "" } else { " (missed)" }
                )
            })
            .collect();
        written = progress.suspend(|| {
            writeln!(
                out,
                "{} ({:.0} s): {}\n    {}",
                r.name,
                took.as_secs_f64(),
                r.description,
                values.join(", ")
            )
            .and_then(|()| out.flush())
        });
    })
    .map_err(anyhow::Error::new)?;
    progress.finish();
    written?;
    let summary = targets::summarize(&results);
    match settings.format {
        Format::Json => {
            serde_json::to_writer_pretty(
                &mut *out,
                &serde_json::json!({ "seed": seed, "machines": results, "summary": summary }),
            )?;
            writeln!(out)?;
        }
        Format::Table => {
            writeln!(out, "\n{} machines of seed {seed}:\n", results.len())?;
            write!(out, "{}", targets::markdown(&summary))?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn bench(
    r: &Report,
    wall: Duration,
    settings: &Settings,
    out: &mut impl Write,
) -> Result<ExitCode> {
    let simulated = r.duration_s + r.warmup_s;
    let secs = wall.as_secs_f64().max(1e-9);
    let events_per_sec = r.sim.events as f64 / secs;
    let packets_per_sec = r.sim.packets as f64 / secs;
    let speed = simulated / secs;
    match settings.format {
        Format::Json => {
            serde_json::to_writer_pretty(
                &mut *out,
                &serde_json::json!({
                    "scenario": r.scenario,
                    "simulated_s": simulated,
                    "wall_s": secs,
                    "events": r.sim.events,
                    "events_per_sec": events_per_sec,
                    "simulated_packets_per_sec": packets_per_sec,
                    "simulated_seconds_per_wall_second": speed,
                }),
            )?;
            writeln!(out)?;
        }
        Format::Table => writeln!(
            out,
            "{}: {:.3} s simulated in {:.3} s wall ({:.2}x real time); {} events ({} events/s); {} packets simulated ({} packets/s, aggregated in trains)",
            r.scenario,
            simulated,
            secs,
            speed,
            r.sim.events,
            human::si(events_per_sec),
            r.sim.packets,
            human::si(packets_per_sec)
        )?,
    }
    Ok(ExitCode::SUCCESS)
}
