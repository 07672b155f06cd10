//! `irqpilot isolate --cpus 4-23 [--apply]`: what keeping those CPUs free of device interrupts
//! takes (docs/placement.md section 8): the IRQs that must leave, whether the housekeeping
//! CPUs have the vectors, NIC queue cuts where they do not, the new default affinity, and the
//! managed IRQs only a boot option steers, with the kernel command line.
//!
//! With `--apply`: channel cuts first (the driver re-creates its IRQs, so the placement is
//! planned again afterwards), then the affinity writes and the default affinity, all journaled.
//! On a fixture root there is no live interface: a channel cut is reported as planned but not
//! applied. A refused cut leaves its queues' IRQs in place, and so does a driver that keeps a
//! vector per queue whatever the channel count (virtio_net): they are moved to housekeeping
//! CPUs like every other IRQ (as far as vectors allow), a note says so, and `must_leave` says
//! where each IRQ went (`to` null: it stays, no free vector). Exit 3 when anything was refused.
//!
//! JSON: the plan (`isolate`, `housekeeping`, `must_leave`, `vectors`, `channels`,
//! `fits_after_channels`, `default_affinity`, `managed`, `boot`, `cmdline`, `plan`), and with
//! `--apply` an `applied` object as `irqpilot apply` prints it.

use super::apply::{ApplyOutput, output};
use super::placement_common::{EXIT_PARTIAL, journaled, platform, sample, take_root};
use crate::Settings;
use crate::cli::{Format, IsolateArgs};
use anyhow::Result;
use irqpilot_core::isolation::plan::{IsolationPlan, Leaving, plan_isolation};
use irqpilot_core::{Action, ApplyReport, IrqNum, Plan, Platform};
use irqpilot_linux::Root;
use serde::Serialize;
use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::io::Write;
use std::process::ExitCode;

#[derive(Serialize)]
struct IsolateOutput<'a> {
    #[serde(flatten)]
    plan: PlanView<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    applied: Option<ApplyOutput>,
}

/// The plan without the placement decision's bulk (per-CPU tables stay in `irqpilot plan`).
#[derive(Serialize)]
struct PlanView<'a> {
    isolate: &'a irqpilot_core::CpuSet,
    housekeeping: &'a irqpilot_core::CpuSet,
    must_leave: &'a [irqpilot_core::isolation::plan::Leaving],
    vectors: &'a irqpilot_core::isolation::plan::VectorCheck,
    channels: &'a [irqpilot_core::isolation::plan::ChannelAdvice],
    fits_after_channels: bool,
    default_affinity: &'a Option<irqpilot_core::CpuSet>,
    managed: &'a [irqpilot_core::isolation::plan::ManagedIrq],
    boot: &'a irqpilot_core::isolation::plan::BootParams,
    cmdline: &'a str,
    plan: &'a Plan,
}

fn view(p: &IsolationPlan) -> PlanView<'_> {
    PlanView {
        isolate: &p.isolate,
        housekeeping: &p.housekeeping,
        must_leave: &p.must_leave,
        vectors: &p.vectors,
        channels: &p.channels,
        fits_after_channels: p.fits_after_channels,
        default_affinity: &p.default_affinity,
        managed: &p.managed,
        boot: &p.boot,
        cmdline: &p.cmdline,
        plan: &p.plan,
    }
}

/// Runs `irqpilot isolate`.
pub fn run(args: &IsolateArgs, settings: &Settings) -> Result<ExitCode> {
    let cfg = &settings.config.placement;
    let mut linux = platform(settings)?;
    let _owner = if args.apply {
        Some(take_root(
            settings,
            "isolate --apply",
            args.journal.journal.as_deref(),
        )?)
    } else {
        None
    };
    let (machine, rates) = sample(&mut linux, args.sample)?;
    let mut plan = plan_isolation(&machine, &args.cpus, cfg, rates.as_ref())?;
    let applied = if args.apply {
        let mut p = journaled(settings, args.journal.journal.as_deref())?;
        let channels: Vec<Action> = plan
            .plan
            .actions
            .iter()
            .filter(|a| matches!(a, Action::SetChannels { .. }))
            .cloned()
            .collect();
        let mut report = ApplyReport::default();
        let mut rest = plan.plan.clone();
        rest.actions
            .retain(|a| !matches!(a, Action::SetChannels { .. }));
        let mut notes = Vec::new();
        let mut shown = None;
        if !channels.is_empty() {
            report = p.apply(&Plan {
                actions: channels,
                notes: Vec::new(),
            });
            let refused: Vec<String> = report
                .outcomes
                .iter()
                .filter_map(|o| match (&o.action, &o.result) {
                    (Action::SetChannels { device, .. }, Err(_)) => Some(device.clone()),
                    _ => None,
                })
                .collect();
            if report.written() > 0 || !refused.is_empty() {
                // New queue counts, new IRQs: plan the placement again on what is there now.
                let machine = p.machine()?;
                let again = plan_isolation(&machine, &args.cpus, cfg, None)?;
                // The IRQs a cut was to remove that are still there: the cut was refused, or
                // the driver keeps every queue's vector (virtio_net allocates them all at
                // probe and keeps them on `ethtool -L`).
                let kept: BTreeSet<IrqNum> = plan
                    .must_leave
                    .iter()
                    .filter(|l| l.removed && machine.irqs.contains_key(&l.irq))
                    .map(|l| l.irq)
                    .collect();
                if kept.is_empty() {
                    rest = again.plan;
                } else {
                    // Move them to housekeeping CPUs like every other IRQ, as far as vectors
                    // allow, and say where each leaving IRQ went.
                    notes.push(kept_irqs_note(&plan, &again, &refused, &kept));
                    shown = Some(carried_out(&plan, &again, &machine));
                    rest = again.decision.plan;
                }
                rest.actions
                    .retain(|a| !matches!(a, Action::SetChannels { .. }));
            }
        }
        let second = p.apply(&rest);
        report.outcomes.extend(second.outcomes);
        let journal = p.journal().path().display().to_string();
        if let Some(must_leave) = shown {
            plan.must_leave = must_leave;
        }
        Some(output(&Root::new(&settings.root), &journal, &report, notes))
    } else {
        None
    };
    let failed = applied.as_ref().is_some_and(|a| a.failed > 0);
    let mut out = std::io::stdout().lock();
    match settings.format {
        Format::Json => {
            serde_json::to_writer_pretty(
                &mut out,
                &IsolateOutput {
                    plan: view(&plan),
                    applied,
                },
            )?;
            out.write_all(b"\n")?;
        }
        Format::Table => {
            out.write_all(render(&plan).as_bytes())?;
            if let Some(a) = &applied {
                let mut s = String::from("applied:\n");
                s.push_str(&super::apply::render_outcomes(&a.outcomes, "  "));
                let _ = writeln!(
                    s,
                    "{} written, {} unchanged, {} refused; old values in {}",
                    a.written, a.unchanged, a.failed, a.journal
                );
                for n in &a.notes {
                    let _ = writeln!(s, "note: {n}");
                }
                out.write_all(s.as_bytes())?;
            }
        }
    }
    out.flush()?;
    Ok(if failed {
        ExitCode::from(EXIT_PARTIAL)
    } else {
        ExitCode::SUCCESS
    })
}

/// What happens to the IRQs a channel cut was to remove and did not (`kept`): refused, or
/// kept by the driver; they are moved to housekeeping CPUs instead. Names every IRQ the
/// placement without the cut leaves on the isolated CPUs for want of a free vector.
fn kept_irqs_note(
    first: &IsolationPlan,
    again: &IsolationPlan,
    refused: &[String],
    kept: &BTreeSet<IrqNum>,
) -> String {
    let moved = again
        .decision
        .plan
        .actions
        .iter()
        .filter(|a| matches!(a, Action::SetAffinity { irq, .. } if kept.contains(irq)))
        .count();
    let cut_devices: Vec<&str> = first.channels.iter().map(|c| c.device.as_str()).collect();
    let mut text = if refused.is_empty() {
        format!(
            "channels cut ({}), but the driver kept the {} IRQs of the cut queues (it holds a \
             vector per queue whatever the channel count, as virtio_net does): {moved} of them \
             are moved to housekeeping CPUs",
            cut_devices.join(", "),
            kept.len()
        )
    } else {
        format!(
            "channel cut refused ({}): the {} IRQs it would have removed stay, so {moved} of them \
             are moved to housekeeping CPUs instead",
            refused.join(", "),
            kept.len()
        )
    };
    let leaving: BTreeSet<IrqNum> = first.must_leave.iter().map(|l| l.irq).collect();
    let stuck: Vec<String> = again
        .decision
        .stuck
        .iter()
        .filter(|i| leaving.contains(i))
        .map(|i| i.0.to_string())
        .collect();
    if !stuck.is_empty() {
        let (what, verb) = match stuck.len() {
            1 => ("IRQ", "finds no free vector there and stays"),
            _ => ("IRQs", "find no free vector there and stay"),
        };
        let advice = if refused.is_empty() {
            "isolate fewer CPUs"
        } else {
            "isolate fewer CPUs, or cut the channels by hand: ethtool -L"
        };
        text.push_str(&format!(
            "; {what} {} {verb} on the isolated CPUs ({advice})",
            stuck.join(", ")
        ));
    }
    text
}

/// The IRQs that must leave as the fallback placement moved them: each one's housekeeping
/// CPUs, or none where it stays (no free vector); only IRQs that are gone count as removed.
fn carried_out(
    first: &IsolationPlan,
    again: &IsolationPlan,
    machine: &irqpilot_core::Machine,
) -> Vec<Leaving> {
    first
        .must_leave
        .iter()
        .map(|l| {
            let gone = l.removed && !machine.irqs.contains_key(&l.irq);
            let to = again
                .decision
                .moves
                .iter()
                .find(|m| m.irq == l.irq)
                .map(|m| m.to.clone());
            Leaving {
                to: if gone { None } else { to },
                removed: gone,
                ..l.clone()
            }
        })
        .collect()
}

/// The table form.
fn render(p: &IsolationPlan) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "isolate CPUs {} (housekeeping {})",
        p.isolate, p.housekeeping
    );
    let moving = p.must_leave.iter().filter(|l| l.to.is_some()).count();
    let removed = p.must_leave.iter().filter(|l| l.removed).count();
    let _ = write!(
        s,
        "{} IRQs touch them; {moving} get a housekeeping CPU",
        p.must_leave.len()
    );
    if removed > 0 {
        let _ = write!(s, "; {removed} go away with the channel cuts below");
    }
    let _ = writeln!(s);
    for l in &p.must_leave {
        let to = match &l.to {
            Some(t) => t.to_list_string(),
            None if l.removed => "removed".to_string(),
            None => "STUCK".to_string(),
        };
        let mask = l
            .mask
            .as_ref()
            .map(|m| m.to_list_string())
            .unwrap_or_default();
        let _ = writeln!(s, "  IRQ {:>5}  {mask:>12} -> {to:<6} {}", l.irq.0, l.name);
    }
    let v = &p.vectors;
    let _ = writeln!(
        s,
        "vectors on housekeeping CPUs: {} now, {} needed, {} available ({} per CPU){}",
        v.used_now,
        v.needed,
        v.available,
        v.capacity_per_cpu,
        if v.fits { "" } else { ": DOES NOT FIT" }
    );
    if let Some((cpu, n)) = v.fullest {
        let _ = writeln!(s, "  fullest CPU after the plan: {cpu} with {n}");
    }
    for c in &p.channels {
        let kind = if c.combined { "combined" } else { "rx/tx" };
        let _ = writeln!(
            s,
            "channels: {} {kind} {} -> {} (ethtool -L {} {} {})",
            c.device,
            c.queues,
            c.recommended,
            c.device,
            if c.combined { "combined" } else { "rx" },
            c.recommended
        );
    }
    if !p.channels.is_empty() && !p.fits_after_channels {
        let _ = writeln!(
            s,
            "even with these cuts the vectors do not fit: isolate fewer CPUs"
        );
    }
    if let Some(d) = &p.default_affinity {
        let _ = writeln!(s, "default_smp_affinity -> {d}");
    }
    if !p.managed.is_empty() {
        let steerable = p.managed.iter().filter(|m| m.steerable).count();
        let _ = writeln!(
            s,
            "{} kernel-managed IRQs touch them ({steerable} steerable by isolcpus=managed_irq); \
             only a boot option moves them:",
            p.managed.len()
        );
        for m in &p.managed {
            let mask = m
                .mask
                .as_ref()
                .map(|x| x.to_list_string())
                .unwrap_or_default();
            let _ = writeln!(
                s,
                "  IRQ {:>5}  {mask:>12}  {}{}",
                m.irq.0,
                m.name,
                if m.steerable {
                    ""
                } else {
                    "  (mask all isolated: fires for I/O from those CPUs)"
                }
            );
        }
    }
    let _ = writeln!(s, "kernel command line: {}", p.cmdline);
    for n in &p.plan.notes {
        let _ = writeln!(s, "note: {n}");
    }
    s
}
