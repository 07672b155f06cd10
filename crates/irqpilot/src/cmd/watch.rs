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
//! Rows are matched by label, not position ([`Rates`]), so IRQs appearing or vanishing never
//! produce wrong deltas. The loop reuses everything: the platform's read buffers, two
//! snapshots, the rates, the output buffer; after the first intervals a sample allocates
//! nothing (tested with a counting allocator), so memory stays flat however long it runs.

use crate::Settings;
use crate::cli::{Format, WatchArgs};
use crate::render::human::push_si;
use anyhow::Result;
use irqpilot_core::{CpuId, CpuSet, InterruptTable, IrqNum, Machine, Platform, Rates, Snapshot};
use irqpilot_linux::LinuxPlatform;
use irqpilot_linux::format::irq_desc::{TailLayout, infer_layout, parse_tail};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::io::Write as _;
use std::process::ExitCode;

/// Runs `irqpilot watch`.
pub fn run(args: &WatchArgs, settings: &Settings) -> Result<ExitCode> {
    let interval_ns = u64::try_from(args.interval.as_nanos()).unwrap_or(u64::MAX);
    if interval_ns == 0 {
        return crate::usage("--interval must be longer than 0");
    }
    let mut platform = LinuxPlatform::with_root(&settings.root);
    let machine = platform.machine()?;
    let mut watcher = Watcher::new(&machine, settings.format, args.top);
    let mut out = std::io::stdout().lock();
    watcher.sample(&mut platform)?;
    let start = platform.now().0;
    let mut k = 0u64;
    while args.count.is_none_or(|n| k < n) {
        k += 1;
        let now = platform.now().0;
        // Ticks are on a fixed grid from the start; after an overrun, skip to the next tick.
        k = k.max(now.saturating_sub(start) / interval_ns);
        let deadline = start.saturating_add(k.saturating_mul(interval_ns));
        if deadline > now {
            platform.sleep(deadline - now);
        }
        let text = watcher.sample(&mut platform)?;
        out.write_all(text.as_bytes())?;
        out.flush()?;
    }
    Ok(ExitCode::SUCCESS)
}

/// What the watcher knows about a numbered row, refreshed only when its text after the counts
/// (chip, hwirq, actions) changes.
#[derive(Debug)]
struct RowInfo {
    tail: String,
    name: String,
    device: bool,
}

/// The sampling state of `watch`, reusable by any [`Platform`].
#[derive(Debug)]
pub struct Watcher {
    format: Format,
    top: usize,
    prev: Snapshot,
    cur: Snapshot,
    rates: Rates,
    primed: bool,
    start: u64,
    layout: Option<TailLayout>,
    known_devices: BTreeSet<IrqNum>,
    housekeeping: CpuSet,
    info: BTreeMap<IrqNum, RowInfo>,
    /// Per column: device-IRQ load, and whether the CPU is housekeeping.
    loads: Vec<f64>,
    hk_columns: Vec<bool>,
    hk_cpus: Vec<CpuId>,
    hk_loads: Vec<f64>,
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
            prev: Snapshot::default(),
            cur: Snapshot::default(),
            rates: Rates::default(),
            primed: false,
            start: 0,
            layout: None,
            known_devices: machine
                .irqs
                .values()
                .filter(|i| is_device(i.is_device(), i.chip.as_deref()))
                .map(|i| i.irq)
                .collect(),
            housekeeping: machine.housekeeping(),
            info: BTreeMap::new(),
            loads: Vec::new(),
            hk_columns: Vec::new(),
            hk_cpus: Vec::new(),
            hk_loads: Vec::new(),
            order: Vec::new(),
            cpu_order: Vec::new(),
            out: String::new(),
        }
    }

    /// Takes a snapshot and returns the text for the interval since the previous one (empty
    /// for the first snapshot, which only sets the baseline).
    pub fn sample<P: Platform>(&mut self, platform: &mut P) -> Result<&str> {
        std::mem::swap(&mut self.prev, &mut self.cur);
        platform.snapshot_into(&mut self.cur)?;
        self.out.clear();
        if !self.primed {
            self.primed = true;
            self.start = self.cur.taken_at.0;
            return Ok(&self.out);
        }
        self.rates.update(&self.prev, &self.cur)?;
        self.refresh_info();
        let imbalance = self.imbalance();
        self.rank_rows();
        match self.format {
            Format::Json => self.render_json(imbalance),
            Format::Table => self.render_table(imbalance),
        }
        Ok(&self.out)
    }

    /// Names and device flags of numbered rows whose description is new or changed.
    fn refresh_info(&mut self) {
        let t = &self.cur.interrupts;
        let layout = *self.layout.get_or_insert_with(|| {
            infer_layout(
                t.rows()
                    .iter()
                    .filter(|r| r.label.irq().is_some())
                    .map(|r| r.tail.as_str()),
            )
        });
        for row in t.rows() {
            let Some(n) = row.label.irq() else { continue };
            // The raw tail is compared: no trimming for the unchanged rows.
            if self.info.get(&n).is_some_and(|i| i.tail == row.tail) {
                continue;
            }
            // A new IRQ, or its number reused by another device: read its description again.
            let d = parse_tail(&row.tail, layout);
            let queue = d
                .actions
                .iter()
                .any(|a| irqpilot_core::queue::recognise(a).is_some());
            let device = self.known_devices.contains(&n) || is_device(queue, d.chip.as_deref());
            self.info.insert(
                n,
                RowInfo {
                    tail: row.tail.clone(),
                    name: d.actions.join(", "),
                    device,
                },
            );
        }
    }

    /// max / mean of device-IRQ interrupts/s over the housekeeping CPUs (all numbered IRQs
    /// when no IRQ is known to belong to a device).
    fn imbalance(&mut self) -> Option<f64> {
        let t = &self.cur.interrupts;
        if self.hk_cpus != t.cpus {
            self.hk_cpus.clone_from(&t.cpus);
            let any = t.cpus.iter().any(|c| self.housekeeping.contains(*c));
            self.hk_columns.clear();
            self.hk_columns.extend(
                t.cpus
                    .iter()
                    .map(|c| !any || self.housekeeping.contains(*c)),
            );
        }
        let any_device = self.info.values().any(|i| i.device);
        self.loads.clear();
        self.loads.resize(t.cpus.len(), 0.0);
        for row in &self.rates.rows {
            let Some(n) = row.label.irq() else { continue };
            // Quiet rows (most of them, interval to interval) add nothing.
            if row.total_per_sec <= 0.0
                || (any_device && !self.info.get(&n).is_some_and(|i| i.device))
            {
                continue;
            }
            for (slot, v) in self.loads.iter_mut().zip(&row.per_cpu_per_sec) {
                if *v != 0.0 {
                    *slot += v;
                }
            }
        }
        self.hk_loads.clear();
        self.hk_loads.extend(
            self.loads
                .iter()
                .zip(&self.hk_columns)
                .filter(|(_, hk)| **hk)
                .map(|(v, _)| *v),
        );
        irqpilot_core::rates::imbalance(&self.hk_loads)
    }

    /// Row indexes by rate (busiest first, file order on ties), non-zero rows only, cut to
    /// `top`; CPU columns likewise by numbered-IRQ rate.
    fn rank_rows(&mut self) {
        let rows = &self.rates.rows;
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
        let cpus = &self.rates.per_cpu;
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

    fn elapsed_s(&self) -> f64 {
        self.cur.taken_at.0.saturating_sub(self.start) as f64 / 1e9
    }

    fn name<'a>(&'a self, t: &'a InterruptTable, i: usize) -> &'a str {
        let row = &t.rows()[i];
        match row.label.irq() {
            Some(n) => self.info.get(&n).map_or("", |x| x.name.as_str()),
            None => row.desc(),
        }
    }

    fn render_json(&mut self, imbalance: Option<f64>) {
        let mut out = std::mem::take(&mut self.out);
        let t = &self.cur.interrupts;
        let r = &self.rates;
        let _ = write!(
            out,
            "{{\"t\":{:.3},\"interval_s\":{:.3},\"irqs\":[",
            self.elapsed_s(),
            r.interval_ns as f64 / 1e9
        );
        for (k, &i) in self.order.iter().enumerate() {
            let row = &r.rows[i];
            out.push_str(if k == 0 { "{\"irq\":" } else { ",{\"irq\":" });
            push_json_label(&mut out, &row.label);
            out.push_str(",\"name\":");
            push_json_str(&mut out, self.name(t, i));
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
        let t = &self.cur.interrupts;
        let r = &self.rates;
        let (mut numbered, mut device, mut arch) = (0.0, 0.0, 0.0);
        for row in &r.rows {
            match row.label.irq() {
                Some(n) => {
                    numbered += row.total_per_sec;
                    if self.info.get(&n).is_some_and(|i| i.device) {
                        device += row.total_per_sec;
                    }
                }
                None => arch += row.total_per_sec,
            }
        }
        let _ = write!(out, "[{:8.2}s] ", self.elapsed_s());
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
            out.push_str(self.name(t, i));
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

/// Device IRQs: owned by a device or recognised as a queue, or on a PCI MSI chip.
fn is_device(known: bool, chip: Option<&str>) -> bool {
    known || chip.is_some_and(|c| c.contains("PCI-MSI") || c.contains("ITS-MSI"))
}

fn pad(out: &mut String, start: usize, width: usize) {
    let used = out[start..].chars().count();
    for _ in used..width {
        out.push(' ');
    }
    out.push(' ');
}

/// Up to three CPUs that took most of a row's interrupts, with their share: `1:97% 0:3%`.
fn push_top_cpus(out: &mut String, cpus: &[CpuId], per_cpu: &[f64], total: f64) {
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
