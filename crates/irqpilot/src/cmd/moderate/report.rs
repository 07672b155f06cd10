//! The data of `irqpilot moderate` ([`ModerateReport`], the stable JSON of `--format json`) and
//! its text rendering.

use super::Decision;
use crate::cmd::status::{GapEntry, gap_entry};
use crate::render::human::{rate, si};
use crate::render::table::{Align, Table};
use irqpilot_core::moderation::global::GlobalModerationConfig;
use irqpilot_core::moderation::knobs::{Knob, SoftModeration};
use irqpilot_core::{Action, ApplyError, ApplyReport, CpuSet, Irq, IrqNum, Machine, Rates};
use irqpilot_linux::moderation::read::is_moderation_gap;
use irqpilot_linux::moderation::restore::{render_cdw11, render_coalesce_params};
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// Everything `moderate` says, in the order it says it.
#[derive(Debug, Serialize)]
pub struct ModerateReport {
    /// The root directory read.
    pub root: String,
    /// `plan` or `apply`.
    pub mode: &'static str,
    /// Length of the measurement, seconds; `null` with `--sample 0`.
    pub interval_s: Option<f64>,
    /// The `[moderation]` parameters in force.
    pub targets: GlobalModerationConfig,
    /// What was measured; `null` with `--sample 0`.
    pub load: Option<ModerationLoad>,
    /// The kernel's software moderation (GSIM) and its parameters; `null` when the kernel has
    /// none.
    pub kernel_soft_moderation: Option<SoftModeration>,
    /// IRQs with a moderation knob, by IRQ number.
    pub sources: Vec<SourceEntry>,
    /// What the policies want changed, in order.
    pub actions: Vec<ActionEntry>,
    /// The policies' reasons.
    pub notes: Vec<String>,
    /// What applying did, one entry per action; `null` without `--apply`.
    pub outcomes: Option<Vec<OutcomeEntry>>,
    /// Moderation knobs that could not be read, and why.
    pub gaps: Vec<GapEntry>,
}

/// Measured load.
#[derive(Debug, Serialize)]
pub struct ModerationLoad {
    /// Interrupts/s of device IRQs (the rate the global target bounds).
    pub device_irq_per_sec: f64,
    /// The CPU with the largest hardirq share, and that share (percent); `null` without
    /// `/proc/stat`.
    pub max_hardirq: Option<CpuShare>,
}

/// One CPU's share of time.
#[derive(Debug, Serialize)]
pub struct CpuShare {
    /// CPU.
    pub cpu: u32,
    /// Percent.
    pub pct: f64,
}

/// An IRQ with a moderation knob.
#[derive(Debug, Serialize)]
pub struct SourceEntry {
    /// IRQ number.
    pub irq: u32,
    /// Action names.
    pub name: String,
    /// Where it is delivered.
    pub cpus: Option<CpuSet>,
    /// Measured interrupts/s; `null` without a measurement.
    pub rate_per_sec: Option<f64>,
    /// The knob and its current setting.
    pub knob: Knob,
    /// The knob in words.
    pub summary: String,
}

/// One action of the plan.
#[derive(Debug, Serialize)]
pub struct ActionEntry {
    /// The policy that wants it.
    pub policy: &'static str,
    /// The action.
    pub action: Action,
    /// The action in words.
    pub summary: String,
    /// IRQs it acts on (whose rates motivated it).
    pub irqs: Vec<u32>,
    /// Their measured interrupts/s together; `null` without a measurement.
    pub rate_per_sec: Option<f64>,
}

/// What applying one action did.
#[derive(Debug, Serialize)]
pub struct OutcomeEntry {
    /// The action in words.
    pub summary: String,
    /// The action.
    pub action: Action,
    /// The value it replaced (what `revert` restores).
    pub old: Option<String>,
    /// `written`, `already` or `refused`.
    pub result: &'static str,
    /// Why it was refused.
    pub error: Option<ApplyError>,
}

/// The knob in words: `eth1 queue 3: rx-usecs 8 rx-frames 32 tx-usecs 8 tx-frames 32
/// adaptive-rx off adaptive-tx off`.
pub fn knob_summary(k: &Knob) -> String {
    match k {
        Knob::NicQueue {
            device,
            queue,
            per_queue,
            rx_usecs,
            rx_max_frames,
            adaptive_rx,
            tx_usecs,
            tx_max_frames,
            adaptive_tx,
            min_usecs,
        } => {
            let scope = if *per_queue {
                format!("queue {queue}")
            } else {
                "device-wide".into()
            };
            let onoff = |b: bool| if b { "on" } else { "off" };
            // Only worth saying where it constrains the moderator (Intel's ITR drivers).
            let floor = if *min_usecs > 1 {
                format!(" (least rx-usecs {min_usecs})")
            } else {
                String::new()
            };
            format!(
                "{device} {scope}: rx-usecs {rx_usecs} rx-frames {rx_max_frames} tx-usecs {tx_usecs} tx-frames {tx_max_frames} adaptive-rx {} adaptive-tx {}{floor}",
                onoff(*adaptive_rx),
                onoff(*adaptive_tx)
            )
        }
        Knob::NvmeController {
            controller,
            vector,
            time_100us,
            threshold,
        } => {
            let state = if *time_100us == 0 || *threshold <= 1 {
                " (off)"
            } else {
                ""
            };
            format!(
                "{controller} vector {vector}: time {}us threshold {threshold}{state}",
                u32::from(*time_100us) * 100
            )
        }
        Knob::Soft { enabled } => format!("kernel soft moderation {}", on_off(*enabled)),
    }
}

fn on_off(b: bool) -> &'static str {
    if b { "on" } else { "off" }
}

/// The action in words.
pub fn action_summary(a: &Action) -> String {
    match a {
        Action::SetCoalesce {
            device,
            queue,
            params,
        } => {
            let scope = queue.map_or("device-wide".to_string(), |q| format!("queue {q}"));
            format!("{device} {scope}: {}", render_coalesce_params(params))
        }
        Action::SetNvmeCoalescing {
            controller,
            time_100us,
            threshold,
        } => {
            let cdw11 = irqpilot_linux::moderation::nvme::IrqCoalescing {
                time_100us: *time_100us,
                threshold: *threshold,
            }
            .cdw11()
            .map_or_else(|| "invalid".to_string(), render_cdw11);
            format!(
                "{controller}: interrupt coalescing time {}us threshold {threshold} (08h {cdw11})",
                u32::from(*time_100us) * 100
            )
        }
        Action::SetNvmeVectorCoalescing {
            controller,
            vector,
            disable,
        } => format!(
            "{controller} vector {vector}: coalescing {} (09h)",
            on_off(!disable)
        ),
        Action::SetSoftModeration { param, value } => {
            format!("kernel soft moderation {param} = {value}")
        }
        Action::SetIrqSoftModeration { irq, enabled } => {
            format!("irq {irq}: kernel soft moderation {}", on_off(*enabled))
        }
        other => other.describe(),
    }
}

/// The IRQs an action acts on.
pub fn action_irqs(m: &Machine, a: &Action) -> Vec<IrqNum> {
    let knobs = &m.moderation.knobs;
    let pick = |f: &dyn Fn(&Knob) -> bool| -> Vec<IrqNum> {
        knobs
            .iter()
            .filter(|(_, k)| f(k))
            .map(|(n, _)| *n)
            .collect()
    };
    match a {
        Action::SetCoalesce { device, queue, .. } => pick(&|k| {
            matches!(k, Knob::NicQueue { device: d, queue: q, .. }
                if d == device && queue.is_none_or(|want| want == *q))
        }),
        Action::SetNvmeCoalescing { controller, .. } => {
            pick(&|k| matches!(k, Knob::NvmeController { controller: c, .. } if c == controller))
        }
        Action::SetNvmeVectorCoalescing {
            controller, vector, ..
        } => pick(&|k| {
            matches!(k, Knob::NvmeController { controller: c, vector: v, .. }
                if c == controller && v == vector)
        }),
        Action::SetSoftModeration { .. } => pick(&|k| matches!(k, Knob::Soft { .. })),
        Action::SetIrqSoftModeration { irq, .. } | Action::SetAffinity { irq, .. } => vec![*irq],
        Action::SetDefaultAffinity { .. } | Action::SetChannels { .. } => Vec::new(),
    }
}

fn irq_rates(r: &Rates) -> BTreeMap<IrqNum, f64> {
    r.rows
        .iter()
        .filter_map(|row| row.label.irq().map(|n| (n, row.total_per_sec)))
        .collect()
}

impl ModerateReport {
    /// Builds the report from a decision and, with `--apply`, what applying did.
    pub fn build(
        root: &str,
        targets: &GlobalModerationConfig,
        d: &Decision,
        applied: Option<&ApplyReport>,
    ) -> ModerateReport {
        let m = &d.machine;
        let rates = d.rates.as_ref().map(irq_rates);
        let rate_of = |n: IrqNum| rates.as_ref().map(|r| r.get(&n).copied().unwrap_or(0.0));
        let load = d.rates.as_ref().map(|r| ModerationLoad {
            device_irq_per_sec: m
                .irqs
                .values()
                .filter(|i| i.is_device())
                .filter_map(|i| rates.as_ref().and_then(|x| x.get(&i.irq)))
                .sum(),
            max_hardirq: r
                .per_cpu
                .iter()
                .filter_map(|c| c.hardirq_pct.map(|p| (c.cpu.0, p)))
                .max_by(|a, b| a.1.total_cmp(&b.1))
                .map(|(cpu, pct)| CpuShare { cpu, pct }),
        });
        let sources = m
            .moderation
            .knobs
            .iter()
            .map(|(n, k)| SourceEntry {
                irq: n.0,
                name: m.irqs.get(n).map(Irq::name).unwrap_or_default(),
                cpus: m.irqs.get(n).and_then(|i| i.delivered_to().cloned()),
                rate_per_sec: rate_of(*n),
                knob: k.clone(),
                summary: knob_summary(k),
            })
            .collect();
        let mut actions = Vec::new();
        let mut notes = Vec::new();
        for (policy, plan) in &d.plans {
            for a in &plan.actions {
                let irqs = action_irqs(m, a);
                actions.push(ActionEntry {
                    policy,
                    action: a.clone(),
                    summary: action_summary(a),
                    rate_per_sec: rates
                        .as_ref()
                        .map(|r| irqs.iter().filter_map(|n| r.get(n)).sum()),
                    irqs: irqs.iter().map(|n| n.0).collect(),
                });
            }
            notes.extend(plan.notes.iter().cloned());
        }
        let outcomes = applied.map(|rep| {
            rep.outcomes
                .iter()
                .map(|o| OutcomeEntry {
                    summary: action_summary(&o.action),
                    action: o.action.clone(),
                    old: o.old.clone(),
                    result: match &o.result {
                        Ok(true) => "written",
                        Ok(false) => "already",
                        Err(_) => "refused",
                    },
                    error: o.result.clone().err(),
                })
                .collect()
        });
        ModerateReport {
            root: root.to_string(),
            mode: if applied.is_some() { "apply" } else { "plan" },
            interval_s: d.rates.as_ref().map(|r| r.interval_ns as f64 / 1e9),
            targets: targets.clone(),
            load,
            kernel_soft_moderation: m.moderation.soft.clone(),
            sources,
            actions,
            notes,
            outcomes,
            gaps: m
                .gaps
                .iter()
                .filter(|g| is_moderation_gap(&g.path))
                .map(gap_entry)
                .collect(),
        }
    }

    /// The report as text.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let t = &self.targets;
        let _ = write!(out, "moderation of {}", self.root);
        match (&self.load, self.interval_s) {
            (Some(l), Some(s)) => {
                let _ = write!(
                    out,
                    " over {s:.2}s: device interrupts {} (target {})",
                    rate(l.device_irq_per_sec),
                    rate(t.target_intr_rate)
                );
                match &l.max_hardirq {
                    Some(h) => {
                        let _ = write!(
                            out,
                            "; hardirq up to {:.1}% on CPU {} (limit {:.0}%)",
                            h.pct, h.cpu, t.hardirq_percent
                        );
                    }
                    None => out.push_str("; hardirq time unknown (no /proc/stat)"),
                }
                out.push('\n');
            }
            _ => out.push_str(": not measured (--sample 0)\n"),
        }
        match &self.kernel_soft_moderation {
            Some(s) => {
                let params: Vec<String> =
                    s.params.iter().map(|(k, v)| format!("{k}={v}")).collect();
                let _ = writeln!(out, "kernel soft moderation: {}", params.join(" "));
            }
            None => out.push_str("kernel soft moderation: not in this kernel\n"),
        }
        if self.sources.is_empty() {
            out.push_str("knobs: none readable (no NIC queue with coalescing, NVMe controller or GSIM IRQ)\n");
        } else {
            out.push_str("knobs:\n");
            let mut tab = Table::new(&[
                ("IRQ", Align::Right),
                ("NAME", Align::Left),
                ("CPUS", Align::Left),
                ("RATE/S", Align::Right),
                ("KNOB", Align::Left),
            ])
            .indent(2);
            for s in &self.sources {
                tab.row(vec![
                    s.irq.to_string(),
                    s.name.clone(),
                    s.cpus.as_ref().map_or("-".into(), CpuSet::to_list_string),
                    s.rate_per_sec.map_or("-".into(), si),
                    s.summary.clone(),
                ]);
            }
            out.push_str(&tab.render());
        }
        if self.actions.is_empty() {
            out.push_str("plan: nothing to change\n");
        } else {
            let n = self.actions.len();
            let _ = writeln!(out, "plan ({n} action{}):", if n == 1 { "" } else { "s" });
            let mut tab = Table::new(&[
                ("POLICY", Align::Left),
                ("ACTION", Align::Left),
                ("RATE/S", Align::Right),
                ("IRQS", Align::Left),
            ])
            .indent(2);
            for a in &self.actions {
                let irqs: Vec<String> = a.irqs.iter().map(u32::to_string).collect();
                tab.row(vec![
                    a.policy.to_string(),
                    a.summary.clone(),
                    a.rate_per_sec.map_or("-".into(), si),
                    if irqs.is_empty() {
                        "-".into()
                    } else {
                        irqs.join(",")
                    },
                ]);
            }
            out.push_str(&tab.render());
        }
        if !self.notes.is_empty() {
            out.push_str("why:\n");
            for n in &self.notes {
                let _ = writeln!(out, "  {n}");
            }
        }
        if let Some(outcomes) = &self.outcomes {
            let count = |r: &str| outcomes.iter().filter(|o| o.result == r).count();
            let _ = writeln!(
                out,
                "applied: {} written, {} already so, {} refused",
                count("written"),
                count("already"),
                count("refused")
            );
            let mut tab = Table::new(&[
                ("ACTION", Align::Left),
                ("OLD", Align::Left),
                ("RESULT", Align::Left),
            ])
            .indent(2);
            for o in outcomes {
                let result = match &o.error {
                    Some(e) => format!("refused: {e}"),
                    None => o.result.to_string(),
                };
                tab.row(vec![
                    o.summary.clone(),
                    o.old.clone().unwrap_or_else(|| "-".into()),
                    result,
                ]);
            }
            if !outcomes.is_empty() {
                out.push_str(&tab.render());
            }
        }
        if !self.gaps.is_empty() {
            out.push_str("not readable:\n");
            for g in &self.gaps {
                let _ = writeln!(out, "  {}: {} ({})", g.path, g.reason, g.why);
            }
        }
        out
    }
}
