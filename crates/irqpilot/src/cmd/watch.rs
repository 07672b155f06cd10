//! `irqpilot watch [--interval 1s] [--count N] [--top N]`: interrupt rates per IRQ and per CPU,
//! interval by interval, and the imbalance index (max / mean device-IRQ load over the
//! housekeeping CPUs), so a heavy IRQ rotating between CPUs shows as a high index in every
//! interval even when cumulative counts look balanced.
//!
//! `--format json` prints one object per interval (JSON lines):
//! `{"t", "interval_s", "irqs": [{"irq", "name", "total_per_sec", "per_cpu": {"<cpu>": rate}}],
//! "cpus": [{"cpu", "irq_per_sec", "arch_per_sec", "hardirq_pct", "softirq_pct"}],
//! "imbalance"}`. `irqs` holds the `--top` busiest rows with a non-zero rate (all with
//! `--top 0`), `per_cpu` only the CPUs that took interrupts; `cpus` every CPU column.
//!
//! Rows are matched by label, not position ([`irqpilot_core::Rates`]), so IRQs appearing or
//! vanishing never produce wrong deltas. The loop reuses everything: the platform's read
//! buffers, two snapshots, the rates, the output buffer; after the first intervals a sample
//! allocates nothing (tested with a counting allocator), so memory stays flat however long it
//! runs.
//!
//! `--record FILE` writes every sample to a recording (docs/recording.md) and follows the
//! machine's affinity changes into it; Ctrl-C and SIGTERM then end the loop cleanly so the
//! last block reaches the file. `--replay FILE` reads the samples from a recording instead,
//! `--speed` times as fast (`max`: no waiting), from `--seek` into it, with times counted from
//! the recording's start.

use crate::Settings;
use crate::cli::{Format, WatchArgs};
use crate::live::Sampler;
use crate::live::recording::{Follower, meta_now, open_replay};
use crate::progress::Progress;
use crate::render::human::{self, push_si};
use crate::service::{Event, Events};
use anyhow::Result;
use irqpilot_core::{CpuId, Machine, Platform};
use irqpilot_linux::LinuxPlatform;
use irqpilot_record::Speed;
use std::fmt::Write as _;
use std::io::{IsTerminal, Write as _};
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

/// Runs `irqpilot watch`.
pub fn run(args: &WatchArgs, settings: &Settings) -> Result<ExitCode> {
    match &args.recording.replay {
        Some(path) => replay(args, settings, path),
        None => live(args, settings),
    }
}

fn interval_ns(d: Duration) -> Result<u64> {
    let ns = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
    if ns == 0 {
        return crate::usage("--interval must be longer than 0");
    }
    Ok(ns)
}

fn live(args: &WatchArgs, settings: &Settings) -> Result<ExitCode> {
    let interval = args.interval.unwrap_or(Duration::from_secs(1));
    let interval_ns = interval_ns(interval)?;
    let mut platform = LinuxPlatform::with_root(&settings.root);
    let machine = platform.machine()?;
    let mut watcher = Watcher::new(&machine, settings.format, args.top);
    let record = args.recording.record.as_deref().map(|path| {
        let meta = meta_now("watch", &settings.root, interval, platform.now().0);
        (path, meta)
    });
    let mut follower = Follower::new(&settings.root, &machine, record)?;
    // While recording, Ctrl-C and SIGTERM end the loop so the last block reaches the file.
    let events = match follower.recording() {
        Some(_) => Some(Events::install()?),
        None => None,
    };
    let mut stopped = false;
    let mut out = std::io::stdout().lock();
    let looped = drive(
        &mut platform,
        &mut watcher,
        interval_ns,
        args.count,
        &mut |_| {
            while let Some(e) = events.as_ref().and_then(Events::try_next) {
                stopped |= matches!(e, Event::Terminate(_));
            }
            stopped
        },
        &mut |p, sampler, ready| follower.after_sample(p, sampler, ready).map(|_| ()),
        &mut |text| out.write_all(text.as_bytes()).and_then(|()| out.flush()),
    );
    // The recording is finished even when the loop failed (a closed pipe, a vanished root).
    let finished = follower.finish();
    looped?;
    if let Some((path, stats)) = finished? {
        if std::io::stderr().is_terminal() {
            eprintln!(
                "recorded {} samples to {} ({})",
                stats.samples,
                path.display(),
                human::bytes(stats.bytes)
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn replay(args: &WatchArgs, settings: &Settings, path: &Path) -> Result<ExitCode> {
    let r = &args.recording;
    let (rec, mut platform) = open_replay(path, Speed::from_factor(r.speed), r.seek)?;
    let meta = rec.meta();
    let interval = args
        .interval
        .unwrap_or(Duration::from_nanos(meta.interval_ns.max(1)));
    let interval_ns = interval_ns(interval)?;
    let machine = platform.machine()?;
    let mut watcher = Watcher::new(&machine, settings.format, args.top);
    let (first, last) = rec.span_ns().unwrap_or((0, 0));
    // Times count from the start of the recording, wherever the replay starts.
    watcher.sampler().set_origin(first);
    let progress = Progress::timed(last.saturating_sub(first) / 1_000_000, "replay");
    let mut out = std::io::stdout().lock();
    drive(
        &mut platform,
        &mut watcher,
        interval_ns,
        args.count,
        &mut |p| {
            progress.set(p.clock_ns().saturating_sub(first) / 1_000_000);
            p.finished().unwrap_or(true)
        },
        &mut |p, sampler, _| {
            // A new inventory recorded (IRQs came or went).
            if p.player().machine().irqs.len() != machine.irqs.len() {
                sampler.set_machine(p.player().machine());
            }
            Ok(())
        },
        &mut |text| progress.suspend(|| out.write_all(text.as_bytes()).and_then(|()| out.flush())),
    )?;
    progress.finish();
    Ok(ExitCode::SUCCESS)
}

/// The sampling loop: a first snapshot as the baseline, then one every `interval_ns` on a fixed
/// grid from the start (after an overrun it skips to the next tick), `count` times or until
/// `stop` says so. `after` sees every sample (ready: whether it produced rates); `emit` gets
/// the rendered text.
fn drive<P: Platform>(
    platform: &mut P,
    watcher: &mut Watcher,
    interval_ns: u64,
    count: Option<u64>,
    stop: &mut dyn FnMut(&mut P) -> bool,
    after: &mut dyn FnMut(&mut P, &mut Sampler, bool) -> Result<()>,
    emit: &mut dyn FnMut(&str) -> std::io::Result<()>,
) -> Result<()> {
    watcher.sample(platform)?;
    after(platform, watcher.sampler(), false)?;
    let start = platform.now().0;
    let mut k = 0u64;
    while count.is_none_or(|n| k < n) {
        k += 1;
        let now = platform.now().0;
        k = k.max(now.saturating_sub(start) / interval_ns);
        let deadline = start.saturating_add(k.saturating_mul(interval_ns));
        // Slept in slices, so a stop request ends the wait within a tenth of a second.
        loop {
            if stop(platform) {
                return Ok(());
            }
            let now = platform.now().0;
            if now >= deadline {
                break;
            }
            platform.sleep((deadline - now).min(100_000_000));
        }
        let text = watcher.sample(platform)?;
        emit(text)?;
        after(platform, watcher.sampler(), true)?;
    }
    Ok(())
}

/// The sampling state of `watch`, reusable by any [`Platform`].
#[derive(Debug)]
pub struct Watcher {
    format: Format,
    top: usize,
    sampler: Sampler,
    order: Vec<usize>,
    cpu_order: Vec<usize>,
    out: String,
}

impl Watcher {
    /// A watcher for `machine` (its device IRQs and housekeeping CPUs), printing `format`,
    /// `top` rows per interval (0 for all).
    pub fn new(machine: &Machine, format: Format, top: usize) -> Watcher {
        Watcher {
            format,
            top,
            sampler: Sampler::new(machine),
            order: Vec::new(),
            cpu_order: Vec::new(),
            out: String::new(),
        }
    }

    /// The sampler underneath (its latest snapshot feeds a recording).
    pub fn sampler(&mut self) -> &mut Sampler {
        &mut self.sampler
    }

    /// Takes a snapshot and returns the text for the interval since the previous one (empty
    /// for the first snapshot, which only sets the baseline).
    pub fn sample<P: Platform + ?Sized>(&mut self, platform: &mut P) -> Result<&str> {
        self.out.clear();
        if !self.sampler.sample(platform)? {
            return Ok(&self.out);
        }
        let imbalance = self.sampler.imbalance();
        self.rank_rows();
        match self.format {
            Format::Json => self.render_json(imbalance),
            Format::Table => self.render_table(imbalance),
        }
        Ok(&self.out)
    }

    /// Row indexes by rate (busiest first, file order on ties), non-zero rows only, cut to
    /// `top`; CPU columns likewise by numbered-IRQ rate.
    fn rank_rows(&mut self) {
        let rows = &self.sampler.rates().rows;
        self.order.clear();
        self.order
            .extend((0..rows.len()).filter(|&i| rows[i].total_per_sec > 0.0));
        let by_rate = |a: &usize, b: &usize| {
            rows[*b]
                .total_per_sec
                .total_cmp(&rows[*a].total_per_sec)
                .then(a.cmp(b))
        };
        if self.top > 0 && self.order.len() > self.top {
            self.order.select_nth_unstable_by(self.top - 1, by_rate);
            self.order.truncate(self.top);
        }
        self.order.sort_unstable_by(by_rate);

        // Only the table lists CPUs by load; JSON prints every CPU in column order.
        if self.format != Format::Table {
            return;
        }
        let cpus = &self.sampler.rates().per_cpu;
        self.cpu_order.clear();
        self.cpu_order
            .extend((0..cpus.len()).filter(|&j| cpus[j].irq_per_sec + cpus[j].arch_per_sec > 0.0));
        let by_load = |a: &usize, b: &usize| {
            let la = cpus[*a].irq_per_sec + cpus[*a].arch_per_sec;
            let lb = cpus[*b].irq_per_sec + cpus[*b].arch_per_sec;
            lb.total_cmp(&la).then(a.cmp(b))
        };
        if self.top > 0 && self.cpu_order.len() > self.top {
            self.cpu_order.select_nth_unstable_by(self.top - 1, by_load);
            self.cpu_order.truncate(self.top);
        }
        self.cpu_order.sort_unstable_by(by_load);
    }

    fn render_json(&mut self, imbalance: Option<f64>) {
        let mut out = std::mem::take(&mut self.out);
        let r = self.sampler.rates();
        let _ = write!(
            out,
            "{{\"t\":{:.3},\"interval_s\":{:.3},\"irqs\":[",
            self.sampler.elapsed_s(),
            r.interval_ns as f64 / 1e9
        );
        for (k, &i) in self.order.iter().enumerate() {
            let row = &r.rows[i];
            out.push_str(if k == 0 { "{\"irq\":" } else { ",{\"irq\":" });
            push_json_label(&mut out, &row.label);
            out.push_str(",\"name\":");
            push_json_str(&mut out, self.sampler.name(i));
            let _ = write!(
                out,
                ",\"total_per_sec\":{:.1},\"per_cpu\":{{",
                row.total_per_sec
            );
            let mut first = true;
            for (cpu, v) in r.cpus.iter().zip(&row.per_cpu_per_sec) {
                if *v > 0.0 {
                    let sep = if first { "" } else { "," };
                    let _ = write!(out, "{sep}\"{cpu}\":{v:.1}");
                    first = false;
                }
            }
            out.push_str("}}");
        }
        out.push_str("],\"cpus\":[");
        for (k, c) in r.per_cpu.iter().enumerate() {
            let sep = if k == 0 { "" } else { "," };
            let _ = write!(
                out,
                "{sep}{{\"cpu\":{},\"irq_per_sec\":{:.1},\"arch_per_sec\":{:.1},\"hardirq_pct\":",
                c.cpu, c.irq_per_sec, c.arch_per_sec
            );
            push_json_opt(&mut out, c.hardirq_pct, 2);
            out.push_str(",\"softirq_pct\":");
            push_json_opt(&mut out, c.softirq_pct, 2);
            out.push('}');
        }
        out.push_str("],\"imbalance\":");
        push_json_opt(&mut out, imbalance, 3);
        out.push_str("}\n");
        self.out = out;
    }

    fn render_table(&mut self, imbalance: Option<f64>) {
        let mut out = std::mem::take(&mut self.out);
        let r = self.sampler.rates();
        let (mut numbered, mut device, mut arch) = (0.0, 0.0, 0.0);
        for (i, row) in r.rows.iter().enumerate() {
            match row.label.irq() {
                Some(_) => {
                    numbered += row.total_per_sec;
                    if self.sampler.is_device_row(i) {
                        device += row.total_per_sec;
                    }
                }
                None => arch += row.total_per_sec,
            }
        }
        let _ = write!(out, "[{:8.2}s] ", self.sampler.elapsed_s());
        push_si(&mut out, device);
        out.push_str("/s device IRQs, ");
        push_si(&mut out, numbered);
        out.push_str("/s numbered, ");
        push_si(&mut out, arch);
        out.push_str("/s timer+IPI; imbalance ");
        match imbalance {
            Some(v) => {
                let _ = write!(out, "{v:.2}");
            }
            None => out.push('-'),
        }
        out.push_str(" (max/mean over housekeeping CPUs)\n");
        out.push_str("  IRQ        RATE/S  CPUS (share)           NAME\n");
        for &i in &self.order {
            let row = &r.rows[i];
            let start = out.len();
            let _ = write!(out, "  {}", row.label);
            pad(&mut out, start, 9);
            let start = out.len();
            push_si(&mut out, row.total_per_sec);
            let width = out.len() - start;
            // Right-align the rate in 8 columns.
            let fill = 8usize.saturating_sub(width);
            for _ in 0..fill {
                out.insert(start, ' ');
            }
            out.push_str("  ");
            let start = out.len();
            push_top_cpus(&mut out, &r.cpus, &row.per_cpu_per_sec, row.total_per_sec);
            pad(&mut out, start, 23);
            out.push_str(self.sampler.name(i));
            out.push('\n');
        }
        out.push_str("  CPU       IRQ/S   ARCH/S  HARDIRQ  SOFTIRQ\n");
        for &j in &self.cpu_order {
            let c = &r.per_cpu[j];
            let _ = write!(out, "  {:<6}", c.cpu.0);
            for v in [c.irq_per_sec, c.arch_per_sec] {
                let start = out.len();
                push_si(&mut out, v);
                let fill = 9usize.saturating_sub(out.len() - start);
                for _ in 0..fill {
                    out.insert(start, ' ');
                }
            }
            for p in [c.hardirq_pct, c.softirq_pct] {
                match p {
                    Some(v) => {
                        let _ = write!(out, "  {v:6.1}%");
                    }
                    None => out.push_str("        -"),
                }
            }
            out.push('\n');
        }
        self.out = out;
    }
}

fn pad(out: &mut String, start: usize, width: usize) {
    let used = out[start..].chars().count();
    for _ in used..width {
        out.push(' ');
    }
    out.push(' ');
}

/// Up to three CPUs that took most of a row's interrupts, with their share: `1:97% 0:3%`.
pub(crate) fn push_top_cpus(out: &mut String, cpus: &[CpuId], per_cpu: &[f64], total: f64) {
    let mut best: [(usize, f64); 3] = [(usize::MAX, 0.0); 3];
    for (j, &v) in per_cpu.iter().enumerate() {
        if v > best[2].1 {
            best[2] = (j, v);
            if best[2].1 > best[1].1 {
                best.swap(1, 2);
            }
            if best[1].1 > best[0].1 {
                best.swap(0, 1);
            }
        }
    }
    let mut first = true;
    for (j, v) in best {
        let Some(cpu) = cpus.get(j) else { break };
        if v <= 0.0 || total <= 0.0 {
            break;
        }
        let sep = if first { "" } else { " " };
        let _ = write!(out, "{sep}{cpu}:{:.0}%", v * 100.0 / total);
        first = false;
    }
    let shown = best
        .iter()
        .filter(|(j, v)| *j != usize::MAX && *v > 0.0)
        .count();
    let rest = per_cpu.iter().filter(|v| **v > 0.0).count();
    if rest > shown {
        let _ = write!(out, " +{}", rest - shown);
    }
}

fn push_json_label(out: &mut String, label: &irqpilot_core::RowLabel) {
    match label {
        irqpilot_core::RowLabel::Irq(n) => {
            let _ = write!(out, "\"{n}\"");
        }
        irqpilot_core::RowLabel::Named(s) => push_json_str(out, s),
    }
}

fn push_json_opt(out: &mut String, v: Option<f64>, decimals: usize) {
    match v.filter(|v| v.is_finite()) {
        Some(v) => {
            let _ = write!(out, "{v:.decimals$}");
        }
        None => out.push_str("null"),
    }
}

/// A JSON string literal (RFC 8259 escapes), appended without allocating.
fn push_json_str(out: &mut String, s: &str) {
    out.push('"');
    for ch in s.chars() {
        match ch {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_strings_escape() {
        let mut s = String::new();
        push_json_str(&mut s, "a\"b\\c\n\u{1}é");
        assert_eq!(s, "\"a\\\"b\\\\c\\n\\u0001é\"");
        let v: serde_json::Value = serde_json::from_str(&s).unwrap_or_default();
        assert_eq!(v, serde_json::json!("a\"b\\c\n\u{1}é"));
    }

    #[test]
    fn top_cpus() {
        let cpus: Vec<CpuId> = (0..5).map(CpuId).collect();
        let mut s = String::new();
        push_top_cpus(&mut s, &cpus, &[1.0, 0.0, 97.0, 1.0, 1.0], 100.0);
        assert_eq!(s, "2:97% 0:1% 3:1% +1");
        s.clear();
        push_top_cpus(&mut s, &cpus, &[0.0; 5], 0.0);
        assert_eq!(s, "");
    }
}
