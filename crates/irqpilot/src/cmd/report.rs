//! `irqpilot report RECORDING --out report.html [--from T] [--to T] [--title TEXT]`: a
//! recording as one self-contained HTML page (see [`crate::report`]): what was recorded and
//! when, per-CPU heat maps over time, the interrupt rate of each device, the imbalance, the
//! findings with the time they appeared, the affinity changes. Prints one line saying what it
//! wrote.

use crate::Settings;
use crate::cli::ReportArgs;
use crate::live::Sampler;
use crate::live::recording::{open_replay, replayed_changes};
use crate::progress::Progress;
use crate::render::human;
use crate::report::data::Builder;
use crate::report::page::Page;
use crate::report::{add_sections, hms, utc};
use anyhow::{Context, Result, bail};
use irqpilot_core::Platform;
use irqpilot_record::Speed;
use std::io::Write;
use std::process::ExitCode;

/// Most rate windows a report computes (see `run`).
const MAX_WINDOWS: u64 = 1800;

/// Runs `irqpilot report`.
pub fn run(args: &ReportArgs, settings: &Settings) -> Result<ExitCode> {
    let (rec, mut platform) = open_replay(&args.file, Speed::Max, args.from)?;
    let meta = rec.meta().clone();
    let (first, last) = rec.span_ns().unwrap_or((0, 0));
    let start = platform.clock_ns();
    let end = args
        .to
        .map_or(last, |d| {
            first.saturating_add(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
        })
        .min(last);
    if end <= start {
        bail!("--to must come after --from (and after the first sample)");
    }
    let mut machine = platform.machine()?;
    let mut sampler = Sampler::new(&machine);
    let mut b = Builder::new(
        &machine,
        settings.config.findings.clone(),
        start,
        end - start,
        meta.interval_ns,
    );
    // Rates over windows of a few samples when there are many: every sample's counts still
    // reach the bins (rates are differences of counters), and the imbalance and findings get
    // at most MAX_WINDOWS points, which a plot 1000 pixels wide cannot show more of anyway.
    let share = (end - start) as f64 / (last.saturating_sub(first)).max(1) as f64;
    let samples = (rec.samples() as f64 * share).ceil().max(1.0) as u64;
    let stride = samples.div_ceil(MAX_WINDOWS).max(1);
    let window_ns = if stride > 1 {
        (end - start) / samples * stride
    } else {
        0
    };
    let progress = Progress::timed((end - start) / 1_000_000, "reading the recording");
    sampler.sample(&mut platform)?;
    while !platform.finished()? {
        platform.sleep(window_ns);
        let ready = sampler.sample(&mut platform)?;
        let t = sampler.snapshot().taken_at.0;
        if t > end {
            break;
        }
        let player = platform.player();
        if player.machine().irqs.len() != machine.irqs.len() {
            machine = player.machine().clone();
            sampler.set_machine(&machine);
            b.machine(&machine, t);
        }
        let changes = replayed_changes(&platform, &machine);
        if !changes.is_empty() {
            b.affinity(&changes);
            machine = player.machine().clone();
        }
        if ready {
            b.add(&sampler);
        }
        progress.set(t.saturating_sub(start) / 1_000_000);
    }
    progress.finish();
    let decoded = platform.player().samples_read();
    let data = b.finish();
    let who = meta.hostname.clone().unwrap_or_else(|| meta.root.clone());
    let title = args.title.clone().unwrap_or_else(|| {
        format!(
            "Interrupts of {who}, {} ({})",
            utc(meta.wall_ns(start)),
            hms(data.span_s)
        )
    });
    let mut page = Page::new(&title);
    let t = &machine.topology;
    let mut rows: Vec<(String, Vec<String>)> = vec![
        (
            "".into(),
            vec!["recording".into(), args.file.display().to_string()],
        ),
        (
            "".into(),
            vec![
                "recorded by".into(),
                format!(
                    "irqpilot {} {} of {}",
                    meta.irqpilot, meta.source, meta.root
                ),
            ],
        ),
        ("".into(), vec!["host".into(), who.clone()]),
        (
            "".into(),
            vec![
                "from / to".into(),
                format!("{} / {}", utc(meta.wall_ns(start)), utc(meta.wall_ns(end))),
            ],
        ),
        (
            "".into(),
            vec![
                "samples".into(),
                format!(
                    "{} over {} (asked every {})",
                    data.samples,
                    hms(data.span_s),
                    humantime::format_duration(std::time::Duration::from_nanos(meta.interval_ns))
                ),
            ],
        ),
        (
            "".into(),
            vec![
                "CPUs".into(),
                format!(
                    "{} online ({}), {} NUMA node{}",
                    t.online.len(),
                    t.online,
                    t.nodes.len().max(1),
                    if t.nodes.len() > 1 { "s" } else { "" }
                ),
            ],
        ),
        (
            "".into(),
            vec![
                "isolated / housekeeping".into(),
                format!(
                    "{} / {}",
                    human::cpus(&machine.isolation.isolated_cpus(), 60),
                    human::cpus(&machine.housekeeping(), 60)
                ),
            ],
        ),
    ];
    if let Some(k) = &machine.kernel_release {
        rows.push(("".into(), vec!["kernel".into(), k.clone()]));
    }
    if let Some(d) = rec.damage() {
        rows.push(("".into(), vec!["damage".into(), d.to_string()]));
    }
    page.table("recording", &["", ""], &rows);
    let wall = |s: f64| {
        let ns = start.saturating_add((s * 1e9) as u64);
        utc(meta.wall_ns(ns))
    };
    add_sections(&mut page, &data, &machine, "", Some(&wall))?;
    let html = page.finish(&format!(
        "irqpilot report {} (irqpilot {})",
        args.file.display(),
        env!("CARGO_PKG_VERSION")
    ));
    std::fs::write(&args.out, &html).with_context(|| format!("writing {}", args.out.display()))?;
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "wrote {} ({}): {} samples, {} of {} by irqpilot {}",
        args.out.display(),
        human::bytes(html.len() as u64),
        decoded,
        hms(data.span_s),
        who,
        meta.source
    )?;
    Ok(ExitCode::SUCCESS)
}
