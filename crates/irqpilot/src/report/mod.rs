//! Reports: a recording (or a twin run) as one self-contained HTML page. [`data`] gathers what
//! is plotted sample by sample through the same [`crate::live::Sampler`] `watch` and `top` use;
//! [`plots`] draws it with plotters' SVG backend; [`page`] assembles the document. The
//! sections a recording gets: what was recorded, a summary, per-CPU heat maps of device
//! interrupts/s and of interrupt time, the rate of every device, the imbalance, the findings
//! with when they first and last held, and the affinity changes seen.

pub mod data;
pub mod page;
pub mod plots;
pub mod twin;

use data::ReportData;
use irqpilot_core::findings::Severity;
use irqpilot_core::{CpuSet, Machine};
use page::Page;

/// `H:MM:SS` of seconds.
pub fn hms(secs: f64) -> String {
    let s = secs.max(0.0).round() as u64;
    format!("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
}

/// `2026-01-01 12:00:05 UTC` of ns since the Unix epoch.
pub fn utc(unix_ns: u64) -> String {
    let t = std::time::UNIX_EPOCH + std::time::Duration::from_nanos(unix_ns);
    let s = humantime::format_rfc3339_seconds(t).to_string();
    format!("{} UTC", s.trim_end_matches('Z').replace('T', " "))
}

/// Means and peaks over a report, for its summary table.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Summary {
    /// Mean device interrupts/s over the whole time.
    pub device_mean: f64,
    /// Highest bin of device interrupts/s, and when (s).
    pub device_peak: (f64, f64),
    /// The CPU with the highest mean device interrupts/s, and that rate.
    pub busiest_cpu: Option<(u32, f64)>,
    /// The highest interrupt time of a CPU in a bin (%), the CPU, and when.
    pub hottest: Option<(f64, u32, f64)>,
    /// Mean and highest imbalance.
    pub imbalance: Option<(f64, f64)>,
}

/// The summary of `d`.
pub fn summarize(d: &ReportData) -> Summary {
    let mut s = Summary::default();
    let totals: Vec<f64> = d.cpu_rate.iter().map(|r| r.iter().sum()).collect();
    if !totals.is_empty() {
        s.device_mean = totals.iter().sum::<f64>() / totals.len() as f64;
        if let Some((k, v)) = totals.iter().enumerate().max_by(|a, b| a.1.total_cmp(b.1)) {
            s.device_peak = (*v, d.times_s.get(k).copied().unwrap_or(0.0));
        }
    }
    s.busiest_cpu = (0..d.cpus.len())
        .map(|j| {
            let mean =
                d.cpu_rate.iter().map(|r| r[j]).sum::<f64>() / d.cpu_rate.len().max(1) as f64;
            (d.cpus[j].0, mean)
        })
        .max_by(|a, b| a.1.total_cmp(&b.1));
    for (k, row) in d.cpu_time.iter().enumerate() {
        for (j, v) in row.iter().enumerate() {
            if let Some(v) = v {
                if s.hottest.is_none_or(|(h, _, _)| *v > h) {
                    s.hottest = Some((*v, d.cpus[j].0, d.times_s[k]));
                }
            }
        }
    }
    if !d.imbalance.is_empty() {
        let mean = d.imbalance.iter().map(|(_, v)| v).sum::<f64>() / d.imbalance.len() as f64;
        let max = d.imbalance.iter().map(|(_, v)| *v).fold(0.0, f64::max);
        s.imbalance = Some((mean, max));
    }
    s
}

/// The plots and tables of one sampled run into `page`: heat maps, devices, imbalance,
/// findings, changes. `ids` prefixes element ids (several runs on one page); `wall` turns
/// seconds from the start into a wall-clock time, when there is one.
pub fn add_sections(
    page: &mut Page,
    d: &ReportData,
    machine: &Machine,
    ids: &str,
    wall: Option<&dyn Fn(f64) -> String>,
) -> anyhow::Result<()> {
    let isolated: CpuSet = machine.isolation.isolated_cpus();
    let sm = summarize(d);
    page.section(&format!("{ids}summary"), "Summary");
    let mut rows: Vec<(String, Vec<String>)> = vec![
        (
            String::new(),
            vec![
                "device interrupts/s, mean".into(),
                plots::short(sm.device_mean),
            ],
        ),
        (
            String::new(),
            vec![
                "device interrupts/s, highest".into(),
                format!(
                    "{} at +{}",
                    plots::short(sm.device_peak.0),
                    hms(sm.device_peak.1)
                ),
            ],
        ),
    ];
    if let Some((cpu, v)) = sm.busiest_cpu {
        rows.push((
            String::new(),
            vec![
                "busiest CPU (mean device interrupts/s)".into(),
                format!("CPU {cpu}: {}", plots::short(v)),
            ],
        ));
    }
    if let Some((v, cpu, t)) = sm.hottest {
        rows.push((
            String::new(),
            vec![
                "most time in interrupts (hardirq + softirq)".into(),
                format!("{v:.1}% on CPU {cpu} at +{}", hms(t)),
            ],
        ));
    }
    if let Some((mean, max)) = sm.imbalance {
        rows.push((
            String::new(),
            vec![
                "imbalance (max/mean over housekeeping CPUs)".into(),
                format!("mean {mean:.2}, highest {max:.2}"),
            ],
        ));
    }
    let warnings = d
        .findings
        .iter()
        .filter(|f| f.severity == Severity::Warning)
        .count();
    rows.push((
        String::new(),
        vec![
            "findings".into(),
            format!("{warnings} warnings, {} info", d.findings.len() - warnings),
        ],
    ));
    page.table(&format!("{ids}summary-table"), &["", ""], &rows);

    page.section(&format!("{ids}per-cpu"), "Interrupts per CPU over time");
    let rate: Vec<Vec<Option<f64>>> = d
        .cpu_rate
        .iter()
        .map(|r| r.iter().map(|v| Some(*v)).collect())
        .collect();
    let svg = plots::heatmap(
        "device interrupts/s per CPU",
        "interrupts/s",
        &d.times_s,
        d.bin_s,
        &d.cpus,
        &rate,
        &isolated,
        true,
    )?;
    page.figure(
        &format!("{ids}heatmap-rate"),
        &svg,
        &format!(
            "Each row a CPU, each column {:.3} s; colour on a log scale; grey: none. The strip on the left marks isolated CPUs ({}).",
            d.bin_s,
            if isolated.is_empty() { "none".to_string() } else { isolated.to_string() }
        ),
    );
    if d.cpu_time.iter().flatten().any(Option::is_some) {
        let svg = plots::heatmap(
            "hardirq + softirq time per CPU",
            "% of time",
            &d.times_s,
            d.bin_s,
            &d.cpus,
            &d.cpu_time,
            &isolated,
            false,
        )?;
        page.figure(
            &format!("{ids}heatmap-time"),
            &svg,
            "From /proc/stat's irq and softirq ticks (10 ms each: short intervals are coarse). White: not known.",
        );
    }

    page.section(&format!("{ids}devices"), "Interrupt rate per device");
    let series: Vec<(String, Vec<(f64, f64)>)> = d
        .devices
        .iter()
        .map(|(n, v)| {
            (
                n.clone(),
                d.times_s.iter().copied().zip(v.iter().copied()).collect(),
            )
        })
        .collect();
    if series.is_empty() {
        page.note("No device interrupts were recorded.");
    } else {
        let svg = plots::lines("interrupts/s per device", "interrupts/s", &series, None)?;
        page.figure(
            &format!("{ids}device-rates"),
            &svg,
            "All of a device's queues together, averaged over each bin.",
        );
    }

    page.section(&format!("{ids}imbalance-over-time"), "Imbalance over time");
    if d.imbalance.is_empty() {
        page.note("No device load: the imbalance index is undefined.");
    } else {
        let svg = plots::lines(
            "imbalance (max/mean device interrupts/s over housekeeping CPUs)",
            "max / mean",
            &[(String::new(), d.imbalance.clone())],
            Some(1.0),
        )?;
        page.figure(
            &format!("{ids}imbalance"),
            &svg,
            "Every sample: 1.00 is an even spread; N means the busiest housekeeping CPU takes N times the mean.",
        );
    }

    page.section(&format!("{ids}findings"), "Findings");
    page.note(&format!(
        "Checked every {:.1} s of the recording; a finding is listed once, with when it first and last held.",
        d.findings_every_s
    ));
    let when = |s: f64| match wall {
        Some(w) => format!("+{} ({})", hms(s), w(s)),
        None => format!("+{}", hms(s)),
    };
    let rows: Vec<(String, Vec<String>)> = d
        .findings
        .iter()
        .map(|f| {
            let sev = match f.severity {
                Severity::Warning => "warning",
                Severity::Info => "info",
            };
            (
                sev.to_string(),
                vec![
                    sev.to_string(),
                    when(f.first_s),
                    when(f.last_s),
                    f.text.clone(),
                ],
            )
        })
        .collect();
    if rows.is_empty() {
        page.note("None.");
    } else {
        page.table(
            &format!("{ids}findings-table"),
            &["severity", "first seen", "last seen", "finding"],
            &rows,
        );
    }
    page.section(&format!("{ids}changes"), "Affinity changes");
    if d.changes.is_empty() {
        page.note("None seen while recording.");
    } else {
        let rows: Vec<(String, Vec<String>)> = d
            .changes
            .iter()
            .map(|(t, c)| (String::new(), vec![when(*t), c.clone()]))
            .collect();
        page.table(&format!("{ids}changes-table"), &["when", "change"], &rows);
    }
    Ok(())
}
