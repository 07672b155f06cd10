//! Text and Markdown tables of a [`BenchReport`]: absolute numbers per placement and gap, the
//! p50 RTT normalised to the fastest mechanism per placement, and the target checks.

use super::{BenchReport, ResultRow, gap_label, row};
use crate::mechanism::{Mechanism, Mode};
use std::fmt::Write as _;

fn fmt_opt_f(v: Option<f64>) -> String {
    v.map_or_else(|| "-".to_string(), |v| format!("{v:.0}"))
}

/// One table: a placement and gap, its rows, the fastest p50 among them.
struct Section<'a> {
    placement: &'a super::Placement,
    gap: u64,
    rows: Vec<&'a ResultRow>,
    best: Option<u64>,
}

impl BenchReport {
    fn gaps(&self) -> Vec<u64> {
        let mut g: Vec<u64> = self.results.iter().map(|r| r.gap_ns).collect();
        g.sort_unstable();
        g.dedup();
        g
    }

    /// The result tables both renderers print: per placement and gap, its rows and the fastest
    /// p50 among them.
    fn sections(&self) -> Vec<Section<'_>> {
        let mut out = Vec::new();
        for placement in &self.placements {
            for gap in self.gaps() {
                let rows: Vec<&ResultRow> = self
                    .results
                    .iter()
                    .filter(|r| r.placement == placement.kind && r.gap_ns == gap)
                    .collect();
                if !rows.is_empty() {
                    let best = rows.iter().filter_map(|r| r.p50()).min();
                    out.push(Section {
                        placement,
                        gap,
                        rows,
                        best,
                    });
                }
            }
        }
        out
    }

    fn header(&self) -> String {
        let e = &self.environment;
        let mut s = String::new();
        let _ = writeln!(
            s,
            "CPU: {} ({}) | kernel {} | {} | mode: {}",
            e.cpu_model.as_deref().unwrap_or("unknown"),
            e.cpu_family_model.as_deref().unwrap_or("family unknown"),
            e.kernel.as_deref().unwrap_or("unknown"),
            if e.virtual_machine {
                "virtual machine"
            } else {
                "no hypervisor flag"
            },
            match self.config.mode {
                Mode::Threads => "threads",
                Mode::Processes => "processes",
            }
        );
        let _ = writeln!(
            s,
            "mitigations: {} | SMT: {} | online CPUs: {} | governor: {} | load average: {}",
            if e.mitigations.is_empty() {
                "kernel defaults".to_string()
            } else {
                e.mitigations.join(" ")
            },
            e.smt.as_deref().unwrap_or("unknown"),
            e.online_cpus.as_deref().unwrap_or("unknown"),
            e.governor.as_deref().unwrap_or("not exposed"),
            e.load_average.as_deref().unwrap_or("unknown"),
        );
        let _ = writeln!(
            s,
            "timer: {}, {} ns per read (median; included in every RTT, not subtracted), clocksource {}",
            self.timer.clock,
            self.timer.overhead_median_ns,
            self.timer.clocksource.as_deref().unwrap_or("unknown"),
        );
        s
    }

    /// Plain-text tables: per placement and gap the absolute numbers (p50/p99/p99.9/max RTT ns,
    /// CPU ns per RTT, p50 relative to the fastest available mechanism there), then the p50 RTT
    /// of every mechanism normalised to the fastest one per placement (back-to-back), then the
    /// target checks.
    pub fn render_table(&self) -> String {
        let mut s = self.header();
        for Section {
            placement: p,
            gap,
            rows,
            best,
        } in self.sections()
        {
            let _ = writeln!(
                s,
                "\n== {} (CPUs {},{}: {}), {} ==",
                p.kind,
                p.pinger,
                p.ponger,
                p.detail,
                gap_label(gap),
            );
            let _ = writeln!(
                s,
                "{:<20} {:<6} {:>6} {:>9} {:>9} {:>9} {:>10} {:>11} {:>8}",
                "mechanism",
                "style",
                "n",
                "p50 ns",
                "p99 ns",
                "p99.9 ns",
                "max ns",
                "cpu ns/rtt",
                "x best"
            );
            let mut missing = Vec::new();
            for r in &rows {
                match (&r.rtt_ns, &r.error, &r.reason) {
                    (Some(t), _, _) => {
                        let rel = best.map_or_else(
                            || "-".to_string(),
                            |b| format!("{:.2}", t.p50 as f64 / b.max(1) as f64),
                        );
                        let _ = writeln!(
                            s,
                            "{:<20} {:<6} {:>6} {:>9} {:>9} {:>9} {:>10} {:>11} {:>8}",
                            r.mechanism.name(),
                            r.wait_style.name(),
                            r.round_trips,
                            t.p50,
                            t.p99,
                            t.p999,
                            t.max,
                            fmt_opt_f(r.cpu_ns_per_rtt),
                            rel
                        );
                    }
                    (None, Some(err), _) => {
                        let _ = writeln!(
                            s,
                            "{:<20} {:<6} failed: {err}",
                            r.mechanism.name(),
                            r.wait_style.name()
                        );
                    }
                    (None, None, Some(reason)) => {
                        missing.push(format!("  {}: {reason}", r.mechanism.name()))
                    }
                    (None, None, None) => {}
                }
            }
            if !missing.is_empty() {
                let _ = writeln!(s, "unavailable:");
                for m in missing {
                    let _ = writeln!(s, "{m}");
                }
            }
        }
        s.push_str(&self.render_normalised());
        if !self.placements_absent.is_empty() {
            let names: Vec<&str> = self.placements_absent.iter().map(|k| k.name()).collect();
            let _ = writeln!(
                s,
                "\nplacements this machine does not have: {}",
                names.join(", ")
            );
        }
        if !self.targets.is_empty() {
            let _ = writeln!(s, "\ntargets:");
            for t in &self.targets {
                let _ = writeln!(
                    s,
                    "  [{}] {} on {}: {:.2} (limit {:.1})",
                    if t.met { "met" } else { "MISSED" },
                    t.target,
                    t.placement,
                    t.ratio,
                    t.limit
                );
            }
        }
        s
    }

    /// The RFC-style table: back-to-back p50 RTT of each mechanism divided by the fastest
    /// available mechanism's in the same placement ("-" where not measured).
    pub fn render_normalised(&self) -> String {
        let mut s = String::new();
        if self.placements.is_empty() {
            return s;
        }
        let _ = writeln!(
            s,
            "\n== p50 RTT normalised to the fastest mechanism per placement (back-to-back; absolute numbers above) =="
        );
        let _ = write!(s, "{:<20} {:<6}", "mechanism", "style");
        for p in &self.placements {
            let _ = write!(s, " {:>13}", p.kind.name());
        }
        let _ = writeln!(s);
        let best: Vec<Option<u64>> = self
            .placements
            .iter()
            .map(|p| {
                self.results
                    .iter()
                    .filter(|r| r.placement == p.kind && r.gap_ns == 0)
                    .filter_map(ResultRow::p50)
                    .min()
            })
            .collect();
        let mut mechs: Vec<Mechanism> = Vec::new();
        for r in &self.results {
            if !mechs.contains(&r.mechanism) {
                mechs.push(r.mechanism);
            }
        }
        for m in mechs {
            let _ = write!(s, "{:<20} {:<6}", m.name(), m.wait_style().name());
            for (p, b) in self.placements.iter().zip(&best) {
                let cell = match (row(&self.results, m, p.kind, 0).and_then(ResultRow::p50), b) {
                    (Some(v), Some(b)) => format!("{:.1}", v as f64 / (*b).max(1) as f64),
                    _ => "-".to_string(),
                };
                let _ = write!(s, " {cell:>13}");
            }
            let _ = writeln!(s);
        }
        s
    }
}

impl BenchReport {
    /// The same content as [`render_table`](Self::render_table) as Markdown tables (for
    /// `docs/benchmarks.md`).
    pub fn render_markdown(&self) -> String {
        let mut s = format!("```text\n{}```\n", self.header());
        for Section {
            placement: p,
            gap,
            rows,
            best,
        } in self.sections()
        {
            let _ = writeln!(
                s,
                "\n**{}** (CPUs {},{}: {}), {}\n",
                p.kind,
                p.pinger,
                p.ponger,
                p.detail,
                gap_label(gap),
            );
            let _ = writeln!(
                s,
                "| mechanism | style | n | p50 ns | p99 ns | p99.9 ns | max ns | CPU ns/RTT (pinger + ponger) | p50 / best |"
            );
            let _ = writeln!(s, "|---|---|--:|--:|--:|--:|--:|--:|--:|");
            for r in &rows {
                match (&r.rtt_ns, &r.error, &r.reason) {
                    (Some(t), _, _) => {
                        let sides = r.cpu_ns_per_rtt_by_side.map_or_else(String::new, |c| {
                            format!(" ({:.0} + {:.0})", c.pinger, c.ponger)
                        });
                        let rel = best.map_or_else(
                            || "-".to_string(),
                            |b| format!("{:.2}", t.p50 as f64 / b.max(1) as f64),
                        );
                        let _ = writeln!(
                            s,
                            "| {} | {} | {} | {} | {} | {} | {} | {}{} | {} |",
                            r.mechanism.name(),
                            r.wait_style.name(),
                            r.round_trips,
                            t.p50,
                            t.p99,
                            t.p999,
                            t.max,
                            fmt_opt_f(r.cpu_ns_per_rtt),
                            sides,
                            rel
                        );
                    }
                    (None, Some(err), _) => {
                        let _ = writeln!(
                            s,
                            "| {} | {} | | failed: {err} | | | | | |",
                            r.mechanism.name(),
                            r.wait_style.name()
                        );
                    }
                    (None, None, Some(reason)) => {
                        let _ = writeln!(
                            s,
                            "| {} | {} | | unavailable: {reason} | | | | | |",
                            r.mechanism.name(),
                            r.wait_style.name()
                        );
                    }
                    (None, None, None) => {}
                }
            }
        }
        if !self.placements.is_empty() {
            let _ = writeln!(
                s,
                "\n**p50 RTT normalised to the fastest mechanism per placement** (back-to-back)\n"
            );
            let _ = write!(s, "| mechanism | style |");
            for p in &self.placements {
                let _ = write!(s, " {} |", p.kind.name());
            }
            let _ = writeln!(s);
            let _ = write!(s, "|---|---|");
            for _ in &self.placements {
                let _ = write!(s, "--:|");
            }
            let _ = writeln!(s);
            let mut mechs: Vec<Mechanism> = Vec::new();
            for r in &self.results {
                if !mechs.contains(&r.mechanism) {
                    mechs.push(r.mechanism);
                }
            }
            for m in mechs {
                let _ = write!(s, "| {} | {} |", m.name(), m.wait_style().name());
                for p in &self.placements {
                    let best = self
                        .results
                        .iter()
                        .filter(|r| r.placement == p.kind && r.gap_ns == 0)
                        .filter_map(ResultRow::p50)
                        .min();
                    let cell = match (
                        row(&self.results, m, p.kind, 0).and_then(ResultRow::p50),
                        best,
                    ) {
                        (Some(v), Some(b)) => format!("{:.1}", v as f64 / b.max(1) as f64),
                        _ => "-".to_string(),
                    };
                    let _ = write!(s, " {cell} |");
                }
                let _ = writeln!(s);
            }
        }
        if !self.targets.is_empty() {
            let _ = writeln!(s, "\n| target | placement | ratio | limit | verdict |");
            let _ = writeln!(s, "|---|---|--:|--:|---|");
            for t in &self.targets {
                let _ = writeln!(
                    s,
                    "| {} | {} | {:.2} | {:.1} | {} |",
                    t.target,
                    t.placement,
                    t.ratio,
                    t.limit,
                    if t.met { "met" } else { "missed" }
                );
            }
        }
        s
    }
}
