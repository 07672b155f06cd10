//! The counters of the generated server: `/proc/interrupts` rows from each IRQ's place and
//! rate over the uptime, the architecture rows, `/proc/softirqs` and `/proc/stat` consistent
//! with them.

use super::{Builder, HZ, ISOLATED, Lcg, NR_IRQS, set};
use crate::format::irq_desc::kernel_tail;
use irqpilot_core::{
    CpuId, CpuSet, CpuTicks, InterruptTable, Machine, MonoNs, ProcStat, RowLabel, Snapshot,
    SoftirqTable,
};
use std::collections::BTreeMap;

/// Turns the specs into counts: the snapshot's three tables, and the machine's IRQ map.
pub(super) fn counters(mut b: Builder) -> (Machine, Snapshot) {
    let rng = &mut b.rng;
    let uptime_s = rng.range(3 * 86_400, 4 * 86_400);
    let cpus: Vec<CpuId> = b.machine.topology.online.iter().collect();
    let n = cpus.len();
    let isolated = set(ISOLATED);
    let prec = InterruptTable::kernel_prec(NR_IRQS);
    let mut table = InterruptTable::with_kernel_header(cpus.clone(), prec);
    let mut per_cpu_irqs = vec![0u64; n];
    let mut soft: BTreeMap<&str, Vec<u64>> = BTreeMap::new();
    let mut intr = vec![0u64; NR_IRQS as usize];
    b.specs.sort_by_key(|s| s.irq.irq);
    let mut counts = vec![0u64; n];
    for spec in &b.specs {
        counts.iter_mut().for_each(|c| *c = 0);
        let eff = spec
            .irq
            .effective
            .as_ref()
            .and_then(CpuSet::first)
            .map_or(0, |c| c.0 as usize);
        let rate = rng.range(spec.rate.0, spec.rate.1);
        // Kernel per-CPU counts are `unsigned int`.
        counts[eff] = (rate * uptime_s + rng.range(0, 999)).min(u64::from(u32::MAX));
        if spec.rate.1 > 0 && !isolated.contains(CpuId(eff as u32)) {
            // A few interrupts from before the driver or a script set the affinity.
            let boot = spec
                .irq
                .requested
                .as_ref()
                .and_then(CpuSet::first)
                .map_or(0, |c| c.0 as usize);
            if boot != eff {
                counts[boot] += rng.range(0, 40);
            }
        }
        for (slot, c) in per_cpu_irqs.iter_mut().zip(&counts) {
            *slot += c;
        }
        if let Some(kind) = spec.softirq {
            let v = soft.entry(kind).or_insert_with(|| vec![0; n]);
            for (slot, c) in v.iter_mut().zip(&counts) {
                *slot += c;
            }
        }
        let total: u64 = counts.iter().sum();
        if let Some(slot) = intr.get_mut(spec.irq.irq.0 as usize) {
            *slot = total;
        }
        let actions: Vec<&str> = spec.irq.actions.iter().map(String::as_str).collect();
        let tail = kernel_tail(
            spec.irq.chip.as_deref().unwrap_or("-"),
            spec.irq.hwirq,
            prec,
            spec.irq.handler.as_deref(),
            &actions,
        );
        table.push_kernel_row(RowLabel::Irq(spec.irq.irq), prec, &counts, &tail);
    }
    let arch = arch_rows(rng, &cpus, &isolated, uptime_s);
    for (name, counts, desc) in &arch {
        table.push_kernel_row(RowLabel::Named(name.to_string()), prec, counts, desc);
    }
    let arch_total: u64 = arch.iter().map(|(_, c, _)| c.iter().sum::<u64>()).sum();
    let softirqs = softirq_table(rng, &cpus, &isolated, uptime_s, &soft);
    let stat = proc_stat(
        rng,
        &cpus,
        &isolated,
        uptime_s,
        &per_cpu_irqs,
        &softirqs,
        intr,
        arch_total,
    );
    for spec in b.specs {
        b.machine.irqs.insert(spec.irq.irq, spec.irq);
    }
    let snapshot = Snapshot {
        taken_at: MonoNs(uptime_s * 1_000_000_000),
        interrupts: table,
        stat: Some(stat),
        softirqs: Some(softirqs),
        ..Snapshot::default()
    };
    (b.machine, snapshot)
}

type ArchRow = (&'static str, Vec<u64>, &'static str);

/// The x86 architecture rows (`arch_show_interrupts`), in the kernel's order.
fn arch_rows(rng: &mut Lcg, cpus: &[CpuId], isolated: &CpuSet, up: u64) -> Vec<ArchRow> {
    let mut per_cpu = |lo: u64, hi: u64, quiet: u64| -> Vec<u64> {
        cpus.iter()
            .map(|c| {
                let r = rng.range(lo, hi);
                // nohz_full CPUs run without the tick and are left alone by IPIs.
                let r = if isolated.contains(*c) {
                    r / quiet.max(1)
                } else {
                    r
                };
                (r * up / 100).min(u64::from(u32::MAX))
            })
            .collect()
    };
    let zeros = vec![0u64; cpus.len()];
    vec![
        ("NMI", per_cpu(40, 60, 1), "   Non-maskable interrupts"),
        (
            "LOC",
            per_cpu(24_000, 26_000, 250),
            "   Local timer interrupts",
        ),
        ("SPU", zeros.clone(), "   Spurious interrupts"),
        (
            "PMI",
            per_cpu(40, 60, 1),
            "   Performance monitoring interrupts",
        ),
        ("IWI", per_cpu(1, 30, 10), "   IRQ work interrupts"),
        ("RTR", zeros.clone(), "   APIC ICR read retries"),
        (
            "RES",
            per_cpu(500, 4_000, 100),
            "   Rescheduling interrupts",
        ),
        (
            "CAL",
            per_cpu(200, 2_000, 100),
            "   Function call interrupts",
        ),
        ("TLB", per_cpu(100, 1_500, 100), "   TLB shootdowns"),
        ("TRM", zeros.clone(), "   Thermal event interrupts"),
        ("THR", zeros.clone(), "   Threshold APIC interrupts"),
        ("DFR", zeros.clone(), "   Deferred Error APIC interrupts"),
        ("MCE", zeros.clone(), "   Machine check exceptions"),
        ("MCP", per_cpu(0, 1, 1), "   Machine check polls"),
        ("ERR", vec![0], ""),
        ("MIS", vec![0], ""),
        (
            "PIN",
            zeros.clone(),
            "   Posted-interrupt notification event",
        ),
        ("NPI", zeros.clone(), "   Nested posted-interrupt event"),
        ("PIW", zeros, "   Posted-interrupt wakeup event"),
    ]
}

fn softirq_table(
    rng: &mut Lcg,
    cpus: &[CpuId],
    isolated: &CpuSet,
    up: u64,
    device: &BTreeMap<&str, Vec<u64>>,
) -> SoftirqTable {
    let names = [
        "HI", "TIMER", "NET_TX", "NET_RX", "BLOCK", "IRQ_POLL", "TASKLET", "SCHED", "HRTIMER",
        "RCU",
    ];
    let mut rows = Vec::new();
    for name in names {
        let counts: Vec<u64> = cpus
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let quiet = isolated.contains(*c);
                let from_device = |k: &str| device.get(k).map_or(0, |v| v[i]);
                match name {
                    "TIMER" if quiet => rng.range(1, 3) * up,
                    "TIMER" => rng.range(80, 120) * up,
                    "NET_RX" => from_device("NET_RX") / 2 + rng.range(0, 99),
                    "NET_TX" => from_device("NET_RX") / 20,
                    "BLOCK" => from_device("BLOCK") / 8,
                    "SCHED" if quiet => rng.range(0, 1) * up,
                    "SCHED" => rng.range(20, 90) * up,
                    "RCU" if quiet => rng.range(0, 999),
                    "RCU" => rng.range(10, 60) * up,
                    "HRTIMER" => rng.range(0, 5) * up / 10,
                    "HI" | "TASKLET" => rng.range(0, 500),
                    _ => 0,
                }
            })
            .collect();
        rows.push((name.to_string(), counts));
    }
    SoftirqTable {
        cpus: cpus.to_vec(),
        rows,
    }
}

#[allow(clippy::too_many_arguments)]
fn proc_stat(
    rng: &mut Lcg,
    cpus: &[CpuId],
    isolated: &CpuSet,
    up: u64,
    per_cpu_irqs: &[u64],
    softirqs: &SoftirqTable,
    intr: Vec<u64>,
    arch_total: u64,
) -> ProcStat {
    let ticks_total = up * HZ;
    let net = softirqs.row("NET_RX").unwrap_or(&[]);
    let mut per_cpu = Vec::with_capacity(cpus.len());
    let mut total = CpuTicks {
        fields: 10,
        ..CpuTicks::default()
    };
    for (i, c) in cpus.iter().enumerate() {
        // ~1.5 us per hardirq and ~4 us of softirq per received batch, in 10 ms ticks.
        let irq = per_cpu_irqs.get(i).copied().unwrap_or(0) * 3 / 2 / 10_000;
        let softirq = net.get(i).copied().unwrap_or(0) * 4 / 10_000;
        let busy = if isolated.contains(*c) { 90 } else { 25 };
        let user = ticks_total * rng.range(busy - 10, busy) / 100;
        let system = ticks_total * rng.range(2, 6) / 100;
        let iowait = ticks_total * rng.range(0, 2) / 100;
        let used = user + system + iowait + irq + softirq;
        let t = CpuTicks {
            user,
            nice: rng.range(0, 500),
            system,
            idle: ticks_total.saturating_sub(used),
            iowait: Some(iowait),
            irq: Some(irq),
            softirq: Some(softirq),
            steal: Some(0),
            guest: Some(0),
            guest_nice: Some(0),
            fields: 10,
        };
        total.user += t.user;
        total.nice += t.nice;
        total.system += t.system;
        total.idle += t.idle;
        for (sum, v) in [
            (&mut total.iowait, t.iowait),
            (&mut total.irq, t.irq),
            (&mut total.softirq, t.softirq),
            (&mut total.steal, t.steal),
            (&mut total.guest, t.guest),
            (&mut total.guest_nice, t.guest_nice),
        ] {
            *sum = Some(sum.unwrap_or(0) + v.unwrap_or(0));
        }
        per_cpu.push((*c, t));
    }
    let intr_total = intr.iter().sum::<u64>() + arch_total;
    let soft_sums: Vec<u64> = softirqs.rows.iter().map(|(_, v)| v.iter().sum()).collect();
    let btime = 1_767_225_600 - up;
    ProcStat {
        total: Some(total),
        per_cpu,
        intr: Some((intr_total, intr)),
        softirq: Some((soft_sums.iter().sum(), soft_sums)),
        other: vec![
            ("ctxt".into(), (up * rng.range(40_000, 90_000)).to_string()),
            ("btime".into(), btime.to_string()),
            ("processes".into(), rng.range(100_000, 900_000).to_string()),
            ("procs_running".into(), rng.range(1, 40).to_string()),
            ("procs_blocked".into(), "0".into()),
        ],
    }
}
