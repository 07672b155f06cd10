//! `Rates`: what happened between two snapshots, per IRQ per CPU per second, and per-CPU
//! hardirq/softirq time.
//!
//! Counters are matched by row label and CPU id, never by position, so IRQs that appear or vanish
//! and CPUs that go offline are handled (lsirq pairs rows by index and gets this wrong). A
//! counter that goes down is either a 32-bit wrap (the kernel's per-CPU IRQ counts are `unsigned
//! int`: one IRQ at 1 M/s wraps every 72 minutes) or a reset (the IRQ was freed and requested
//! again). It is taken as a wrap only when the wrapped difference implies a plausible rate
//! (at most [`MAX_PLAUSIBLE_RATE_PER_SEC`] on one CPU); otherwise the cell is a reset and its rate
//! is unknown (reported as 0 with the row marked). Never a negative rate.

use crate::cpuset::CpuSet;
use crate::ids::CpuId;
use crate::snapshot::{RowLabel, Snapshot};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// Highest per-CPU rate of one IRQ accepted when explaining a decreasing counter as a 32-bit
/// wrap. A CPU cannot take more than ~9 M interrupts/s even with posted MSI (costmodel.md 1.4),
/// so twice that is a safe bound.
pub const MAX_PLAUSIBLE_RATE_PER_SEC: f64 = 20_000_000.0;

/// How a row's counters relate to the previous snapshot.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RowStatus {
    /// Present in both, counters moved forward (possibly through a 32-bit wrap).
    Continuing,
    /// Not in the previous snapshot: no rate yet.
    New,
    /// A counter went down for no plausible wrap: the IRQ was re-created. Cells that went down
    /// have rate 0.
    Reset,
    /// The description (chip or actions) changed: the number was reused by another device.
    /// Cells are computed as for `Continuing`/`Reset`.
    Replaced,
}

/// Rates of one `/proc/interrupts` row.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RowRate {
    /// The row.
    pub label: RowLabel,
    /// Per-CPU rates aligned with [`Rates::cpus`]; empty for rows that are not per CPU.
    pub per_cpu_per_sec: Vec<f64>,
    /// Sum over CPUs (or the single value's rate for `ERR`/`MIS`).
    pub total_per_sec: f64,
    /// How the counters compared.
    pub status: RowStatus,
    /// Counters that were taken as having wrapped at 2^32.
    pub wraps: u32,
}

/// Rates of one CPU.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CpuRate {
    /// The CPU.
    pub cpu: CpuId,
    /// Interrupts/s from numbered IRQ rows (devices and platform IRQs).
    pub irq_per_sec: f64,
    /// Interrupts/s from named per-CPU rows (LOC, RES, CAL, IPIs, ...).
    pub arch_per_sec: f64,
    /// Share of time in hardirq (`irq` column of `/proc/stat`), 0-100; `None` without stat.
    pub hardirq_pct: Option<f64>,
    /// Share of time in softirq, 0-100.
    pub softirq_pct: Option<f64>,
}

/// One CPU's `/proc/stat` ticks between two snapshots: the raw material of an estimate of its
/// hardirq share that knows its own resolution (a tick is 10 ms at `USER_HZ` 100, so one short
/// interval's share reads 0% or 100%; see `moderation::global::hardirq`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuTickDelta {
    /// Ticks in the `irq` column (hardirq time).
    pub irq: u64,
    /// Ticks in every column together (all time the CPU accounted).
    pub total: u64,
}

/// Everything derived from two snapshots.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Rates {
    /// Time between the snapshots.
    pub interval_ns: u64,
    /// CPU columns (those of the later snapshot).
    pub cpus: Vec<CpuId>,
    /// CPUs of the later snapshot absent from the earlier one (their cells are 0).
    pub new_cpus: Vec<CpuId>,
    /// One entry per row of the later snapshot, in its order.
    pub rows: Vec<RowRate>,
    /// Rows of the earlier snapshot missing from the later one.
    pub vanished: Vec<RowLabel>,
    /// One entry per CPU column.
    pub per_cpu: Vec<CpuRate>,
    /// Softirq rates per type (`/proc/softirqs`), per CPU of that file's columns.
    pub softirqs: Vec<(String, Vec<f64>)>,
    /// Columns of [`Rates::softirqs`].
    pub softirq_cpus: Vec<CpuId>,
    /// `/proc/stat` tick deltas per CPU, aligned with [`Rates::per_cpu`] (`None` without both
    /// readings or an `irq` column).
    #[serde(default)]
    pub cpu_ticks: Vec<Option<CpuTickDelta>>,
    /// Per network interface (`/proc/net/dev`), when both snapshots have it.
    #[serde(default)]
    pub net: Vec<crate::devstats::NetRate>,
    /// Per block device (`/proc/diskstats`), when both snapshots have it.
    #[serde(default)]
    pub disks: Vec<crate::devstats::DiskRate>,
}

/// Why rates could not be computed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RatesError {
    /// The later snapshot is not later.
    #[error("snapshots are not in time order (interval {0} ns)")]
    NotLater(i128),
}

fn delta(prev: u64, cur: u64, secs: f64) -> (f64, bool, bool) {
    if cur >= prev {
        return ((cur - prev) as f64, false, false);
    }
    // Only 32-bit kernel counters can wrap; anything larger going down is a reset.
    if prev <= u32::MAX as u64 {
        let wrapped = (cur + (1u64 << 32) - prev) as f64;
        if wrapped <= MAX_PLAUSIBLE_RATE_PER_SEC * secs {
            return (wrapped, true, false);
        }
    }
    (0.0, false, true)
}

impl Rates {
    /// Rates from `prev` to `cur`.
    pub fn between(prev: &Snapshot, cur: &Snapshot) -> Result<Rates, RatesError> {
        let mut r = Rates::default();
        r.update(prev, cur)?;
        Ok(r)
    }

    /// Recomputes `self` from `prev` to `cur`, reusing its allocations (for long-running samplers).
    pub fn update(&mut self, prev: &Snapshot, cur: &Snapshot) -> Result<(), RatesError> {
        let ns = match cur.taken_at.since(prev.taken_at) {
            Some(ns) if ns > 0 => ns,
            _ => {
                return Err(RatesError::NotLater(
                    cur.taken_at.0 as i128 - prev.taken_at.0 as i128,
                ));
            }
        };
        let secs = ns as f64 / 1e9;
        self.interval_ns = ns;
        let (pt, ct) = (&prev.interrupts, &cur.interrupts);
        self.cpus.clear();
        self.cpus.extend_from_slice(&ct.cpus);
        // Column of each current CPU in the previous table. The columns are almost always the
        // same (CPU hotplug is rare), and then no lookup table is built: a sampler calling
        // `update` in steady state allocates nothing.
        let prev_col: Option<Vec<Option<usize>>> = (pt.cpus != ct.cpus).then(|| {
            ct.cpus
                .iter()
                .map(|c| pt.cpus.iter().position(|p| p == c))
                .collect()
        });
        let col = |j: usize| match &prev_col {
            None => Some(j),
            Some(cols) => cols.get(j).copied().flatten(),
        };
        self.new_cpus.clear();
        self.new_cpus.extend(
            ct.cpus
                .iter()
                .enumerate()
                .filter(|(j, _)| col(*j).is_none())
                .map(|(_, c)| *c),
        );

        let prow_index: Option<HashMap<&RowLabel, usize>> = {
            let same_order = pt.rows().len() == ct.rows().len()
                && pt
                    .rows()
                    .iter()
                    .zip(ct.rows())
                    .all(|(a, b)| a.label == b.label);
            (!same_order).then(|| {
                pt.rows()
                    .iter()
                    .enumerate()
                    .map(|(i, r)| (&r.label, i))
                    .collect()
            })
        };
        // Row entries are refilled in place (their vectors reused) and cut to length after.
        self.per_cpu.clear();
        self.per_cpu.extend(ct.cpus.iter().map(|&cpu| CpuRate {
            cpu,
            irq_per_sec: 0.0,
            arch_per_sec: 0.0,
            hardirq_pct: None,
            softirq_pct: None,
        }));
        for (i, row) in ct.rows().iter().enumerate() {
            let pi = match &prow_index {
                None => Some(i),
                Some(map) => map.get(&row.label).copied(),
            };
            if i == self.rows.len() {
                self.rows.push(RowRate {
                    label: row.label.clone(),
                    per_cpu_per_sec: Vec::new(),
                    total_per_sec: 0.0,
                    status: RowStatus::New,
                    wraps: 0,
                });
            }
            let rr = &mut self.rows[i];
            assign_label(&mut rr.label, &row.label);
            rr.per_cpu_per_sec.clear();
            rr.total_per_sec = 0.0;
            rr.wraps = 0;
            let cc = ct.counts(row);
            let per_cpu = ct.is_per_cpu(row);
            match pi.map(|pi| &pt.rows()[pi]) {
                None => {
                    rr.status = RowStatus::New;
                    if per_cpu {
                        rr.per_cpu_per_sec.resize(cc.len(), 0.0);
                    }
                }
                Some(prow) => {
                    let pc = pt.counts(prow);
                    let mut reset = false;
                    if per_cpu && prev_col.is_none() && pc.len() == cc.len() {
                        // Same columns (the usual case): compare cell by cell in one pass.
                        // Rows that did not move at all (most IRQs within 100 ms) are zeros.
                        if pc == cc {
                            rr.per_cpu_per_sec.resize(cc.len(), 0.0);
                        } else {
                            // Differences (and their integer sum) in one simple pass, then the
                            // division. A counter that went down is rare and redone cell by cell.
                            let mut down = false;
                            let mut sum = 0u64;
                            rr.per_cpu_per_sec.extend(pc.iter().zip(cc).map(|(&p, &c)| {
                                down |= c < p;
                                let d = c.wrapping_sub(p);
                                sum = sum.wrapping_add(d);
                                d as f64
                            }));
                            if down {
                                rr.per_cpu_per_sec.clear();
                                let mut total = 0.0;
                                for (&p, &c) in pc.iter().zip(cc) {
                                    let (d, wrapped, was_reset) = delta(p, c, secs);
                                    rr.wraps += wrapped as u32;
                                    reset |= was_reset;
                                    rr.per_cpu_per_sec.push(d / secs);
                                    total += d / secs;
                                }
                                rr.total_per_sec = total;
                            } else {
                                // Only moved cells need the (slow) division; most are zero.
                                for v in rr.per_cpu_per_sec.iter_mut().filter(|v| **v != 0.0) {
                                    *v /= secs;
                                }
                                rr.total_per_sec = sum as f64 / secs;
                            }
                        }
                    } else if per_cpu {
                        for (j, &c) in cc.iter().enumerate() {
                            let v = match col(j).and_then(|pj| pc.get(pj)) {
                                Some(&p) => {
                                    let (d, wrapped, was_reset) = delta(p, c, secs);
                                    rr.wraps += wrapped as u32;
                                    reset |= was_reset;
                                    d / secs
                                }
                                None => 0.0,
                            };
                            rr.per_cpu_per_sec.push(v);
                            rr.total_per_sec += v;
                        }
                    } else {
                        // Single-value or irregular rows: compare sums.
                        let (d, wrapped, was_reset) = delta(pc.iter().sum(), cc.iter().sum(), secs);
                        rr.wraps += wrapped as u32;
                        reset |= was_reset;
                        rr.total_per_sec = d / secs;
                    }
                    // Equal tails are the common case and need no trimming to compare.
                    let replaced = prow.tail != row.tail && prow.desc() != row.desc();
                    rr.status = if replaced && row.label.irq().is_some() {
                        RowStatus::Replaced
                    } else if reset {
                        RowStatus::Reset
                    } else {
                        RowStatus::Continuing
                    };
                }
            }
            // Rates are never negative: a row with a zero total adds nothing.
            if per_cpu && rr.total_per_sec > 0.0 {
                let numbered = row.label.irq().is_some();
                for (slot, &v) in self.per_cpu.iter_mut().zip(&rr.per_cpu_per_sec) {
                    // Most cells of a busy row are still zero (one CPU takes an IRQ).
                    if v == 0.0 {
                        continue;
                    }
                    if numbered {
                        slot.irq_per_sec += v;
                    } else {
                        slot.arch_per_sec += v;
                    }
                }
            }
        }
        self.rows.truncate(ct.rows().len());
        self.vanished.clear();
        let cur_labels: Option<std::collections::HashSet<&RowLabel>> = prow_index
            .as_ref()
            .map(|_| ct.rows().iter().map(|r| &r.label).collect());
        if let Some(cur_labels) = cur_labels {
            self.vanished.extend(
                pt.rows()
                    .iter()
                    .filter(|r| !cur_labels.contains(&r.label))
                    .map(|r| r.label.clone()),
            );
        }

        self.cpu_ticks.clear();
        self.cpu_ticks.resize(self.per_cpu.len(), None);
        if let (Some(ps), Some(cs)) = (&prev.stat, &cur.stat) {
            // `cpuN` lines are in CPU order and usually line up with the columns: try the same
            // index first, so 256 CPUs cost 256 lookups rather than 256 scans.
            let ticks =
                |st: &'_ crate::snapshot::ProcStat, i: usize, cpu: CpuId| match st.per_cpu.get(i) {
                    Some((c, t)) if *c == cpu => Some(*t),
                    _ => st.cpu(cpu).copied(),
                };
            for (i, slot) in self.per_cpu.iter_mut().enumerate() {
                let (Some(p), Some(c)) = (ticks(ps, i, slot.cpu), ticks(cs, i, slot.cpu)) else {
                    continue;
                };
                let Some(total) = c.total().checked_sub(p.total()).filter(|t| *t > 0) else {
                    continue;
                };
                let pct = |a: Option<u64>, b: Option<u64>| {
                    Some(b?.checked_sub(a?)? as f64 * 100.0 / total as f64)
                };
                slot.hardirq_pct = pct(p.irq, c.irq);
                slot.softirq_pct = pct(p.softirq, c.softirq);
                if let (Some(a), Some(b)) = (p.irq, c.irq) {
                    if let (Some(irq), Some(t)) = (b.checked_sub(a), self.cpu_ticks.get_mut(i)) {
                        *t = Some(CpuTickDelta { irq, total });
                    }
                }
            }
        }
        match (&prev.net, &cur.net) {
            (Some(p), Some(c)) => crate::devstats::net_rates(p, c, secs, &mut self.net),
            _ => self.net.clear(),
        }
        match (&prev.disks, &cur.disks) {
            (Some(p), Some(c)) => crate::devstats::disk_rates(p, c, secs, &mut self.disks),
            _ => self.disks.clear(),
        }

        self.softirq_cpus.clear();
        // Entries are refilled in place (names and vectors reused), then cut to length.
        let mut used = 0usize;
        if let (Some(ps), Some(cs)) = (&prev.softirqs, &cur.softirqs) {
            self.softirq_cpus.extend_from_slice(&cs.cpus);
            let cols: Option<Vec<Option<usize>>> = (ps.cpus != cs.cpus).then(|| {
                cs.cpus
                    .iter()
                    .map(|c| ps.cpus.iter().position(|p| p == c))
                    .collect()
            });
            let col = |j: usize| match &cols {
                None => Some(j),
                Some(cols) => cols.get(j).copied().flatten(),
            };
            for (i, (name, cur_counts)) in cs.rows.iter().enumerate() {
                let prev_counts = match ps.rows.get(i) {
                    Some((n, counts)) if n == name => counts.as_slice(),
                    _ => match ps.row(name) {
                        Some(counts) => counts,
                        None => continue,
                    },
                };
                if used == self.softirqs.len() {
                    self.softirqs.push((String::new(), Vec::new()));
                }
                let (slot_name, v) = &mut self.softirqs[used];
                used += 1;
                slot_name.clone_from(name);
                v.clear();
                v.extend(cur_counts.iter().enumerate().map(|(j, &c)| {
                    match col(j).and_then(|pj| prev_counts.get(pj)) {
                        Some(&p) => delta(p, c, secs).0 / secs,
                        None => 0.0,
                    }
                }));
            }
        }
        self.softirqs.truncate(used);
        Ok(())
    }

    /// Total numbered-IRQ interrupts/s over all CPUs.
    pub fn total_irq_per_sec(&self) -> f64 {
        self.per_cpu.iter().map(|c| c.irq_per_sec).sum()
    }

    /// Imbalance index of numbered-IRQ load over `cpus`: max / mean interrupts/s. 1.0 is perfect
    /// balance; `None` when no CPU of `cpus` is a column or none took an interrupt.
    pub fn imbalance_index(&self, cpus: &CpuSet) -> Option<f64> {
        let loads: Vec<f64> = self
            .per_cpu
            .iter()
            .filter(|c| cpus.contains(c.cpu))
            .map(|c| c.irq_per_sec)
            .collect();
        imbalance(&loads)
    }
}

/// Sets `dst` to `src`, reusing the name's buffer when both are named rows (`clone_from` on the
/// enum would allocate a new `String` for every named row on every update).
fn assign_label(dst: &mut RowLabel, src: &RowLabel) {
    match (dst, src) {
        (RowLabel::Named(d), RowLabel::Named(s)) => d.clone_from(s),
        (dst, src) => *dst = src.clone(),
    }
}

/// max / mean of non-negative loads; `None` for no loads or a zero mean.
pub fn imbalance(loads: &[f64]) -> Option<f64> {
    if loads.is_empty() {
        return None;
    }
    let mean = loads.iter().sum::<f64>() / loads.len() as f64;
    let max = loads.iter().copied().fold(0.0, f64::max);
    (mean > 0.0).then(|| max / mean)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::{IrqNum, MonoNs};
    use crate::snapshot::{CpuTicks, InterruptTable, ProcStat};

    fn snap(at_ms: u64, cpus: &[u32], rows: &[(RowLabel, Vec<u64>, &str)]) -> Snapshot {
        let mut t = InterruptTable::with_kernel_header(cpus.iter().map(|&c| CpuId(c)).collect(), 3);
        for (label, counts, tail) in rows {
            t.push_kernel_row(label.clone(), 3, counts, tail);
        }
        Snapshot {
            taken_at: MonoNs(at_ms * 1_000_000),
            interrupts: t,
            ..Snapshot::default()
        }
    }

    fn irq(n: u32) -> RowLabel {
        RowLabel::Irq(IrqNum(n))
    }

    #[test]
    fn simple_rates() {
        let a = snap(
            0,
            &[0, 1],
            &[
                (irq(5), vec![100, 0], " eth0"),
                (RowLabel::Named("LOC".into()), vec![0, 0], " t"),
            ],
        );
        let b = snap(
            500,
            &[0, 1],
            &[
                (irq(5), vec![600, 50], " eth0"),
                (RowLabel::Named("LOC".into()), vec![10, 10], " t"),
            ],
        );
        let r = Rates::between(&a, &b).unwrap();
        assert_eq!(r.rows[0].per_cpu_per_sec, vec![1000.0, 100.0]);
        assert_eq!(r.rows[0].total_per_sec, 1100.0);
        assert_eq!(r.rows[0].status, RowStatus::Continuing);
        assert_eq!(r.per_cpu[0].irq_per_sec, 1000.0);
        assert_eq!(r.per_cpu[1].arch_per_sec, 20.0);
        assert_eq!(r.total_irq_per_sec(), 1100.0);
        let all = CpuSet::range(0, 1);
        assert!((r.imbalance_index(&all).unwrap() - 1000.0 / 550.0).abs() < 1e-9);
    }

    #[test]
    fn wrap_reset_new_vanished() {
        let max = u32::MAX as u64;
        let a = snap(
            0,
            &[0],
            &[
                (irq(1), vec![max - 9], " a"),
                (irq(2), vec![3_000_000_000], " b"),
                (irq(3), vec![7], " c"),
            ],
        );
        let b = snap(
            1000,
            &[0],
            &[
                (irq(1), vec![10], " a"),
                (irq(2), vec![5], " b"),
                (irq(4), vec![1], " d"),
            ],
        );
        let r = Rates::between(&a, &b).unwrap();
        assert_eq!(r.rows[0].per_cpu_per_sec, vec![20.0]);
        assert_eq!(r.rows[0].wraps, 1);
        assert_eq!(r.rows[0].status, RowStatus::Continuing);
        // 1.29e9 in one second is not plausible: a reset, never a negative or huge rate.
        assert_eq!(r.rows[1].status, RowStatus::Reset);
        assert_eq!(r.rows[1].per_cpu_per_sec, vec![0.0]);
        assert_eq!(r.rows[2].status, RowStatus::New);
        assert_eq!(r.vanished, vec![irq(3)]);
    }

    #[test]
    fn replaced_and_cpu_changes() {
        let a = snap(0, &[0, 1], &[(irq(30), vec![5, 5], " nvme0q1")]);
        let b = snap(1000, &[0, 2], &[(irq(30), vec![6, 9], " eth3-TxRx-0")]);
        let r = Rates::between(&a, &b).unwrap();
        assert_eq!(r.rows[0].status, RowStatus::Replaced);
        assert_eq!(r.rows[0].per_cpu_per_sec, vec![1.0, 0.0]);
        assert_eq!(r.new_cpus, vec![CpuId(2)]);
    }

    #[test]
    fn time_must_advance() {
        let a = snap(5, &[0], &[]);
        assert!(Rates::between(&a, &a).is_err());
    }

    #[test]
    fn hardirq_percent_from_stat() {
        let ticks = |busy: u64, irq: u64| CpuTicks {
            user: busy,
            idle: 100 - busy - irq,
            irq: Some(irq),
            softirq: Some(0),
            fields: 7,
            ..Default::default()
        };
        let mut a = snap(0, &[0], &[]);
        let mut b = snap(1000, &[0], &[]);
        a.stat = Some(ProcStat {
            per_cpu: vec![(CpuId(0), ticks(0, 0))],
            ..Default::default()
        });
        let mut t = ticks(10, 25);
        t.idle += 100; // 100 more ticks elapsed
        t.user = 10;
        b.stat = Some(ProcStat {
            per_cpu: vec![(CpuId(0), t)],
            ..Default::default()
        });
        let r = Rates::between(&a, &b).unwrap();
        assert!((r.per_cpu[0].hardirq_pct.unwrap() - 25.0).abs() < 1e-9);
        assert_eq!(r.per_cpu[0].softirq_pct, Some(0.0));
        assert_eq!(
            r.cpu_ticks,
            vec![Some(CpuTickDelta {
                irq: 25,
                total: 100
            })]
        );
        // Device counters ride along when both snapshots have them.
        use crate::devstats::NetDevCounters;
        let dev = |rx: u64| NetDevCounters {
            name: "eth0".into(),
            fields: [rx, rx / 1000, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
        };
        a.net = Some(vec![dev(1_000)]);
        b.net = Some(vec![dev(5_000)]);
        let r = Rates::between(&a, &b).unwrap();
        assert_eq!(r.net.len(), 1);
        assert_eq!(r.net[0].rx_bytes_per_sec, 4_000.0);
        assert_eq!(r.net[0].rx_packets_per_sec, 4.0);
        assert!(r.disks.is_empty());
    }

    #[test]
    fn update_reuses_and_matches_between() {
        let a = snap(0, &[0, 1], &[(irq(5), vec![1, 2], " x")]);
        let b = snap(100, &[0, 1], &[(irq(5), vec![11, 2], " x")]);
        let mut r =
            Rates::between(&b, &snap(200, &[0, 1], &[(irq(5), vec![21, 2], " x")])).unwrap();
        r.update(&a, &b).unwrap();
        assert_eq!(r, Rates::between(&a, &b).unwrap());
    }

    #[test]
    fn update_reuse_covers_softirqs_named_rows_and_column_changes() {
        use crate::snapshot::SoftirqTable;
        let soft = |cpus: &[u32], rows: &[(&str, Vec<u64>)]| SoftirqTable {
            cpus: cpus.iter().map(|&c| CpuId(c)).collect(),
            rows: rows
                .iter()
                .map(|(n, v)| (n.to_string(), v.clone()))
                .collect(),
        };
        let mut a = snap(
            0,
            &[0, 1],
            &[(RowLabel::Named("LOC".into()), vec![1, 2], " t")],
        );
        a.softirqs = Some(soft(
            &[0, 1],
            &[("TIMER", vec![0, 0]), ("NET_RX", vec![5, 5])],
        ));
        let mut b = snap(
            1000,
            &[0, 1],
            &[(RowLabel::Named("LOC".into()), vec![3, 2], " t")],
        );
        b.softirqs = Some(soft(
            &[0, 1],
            &[("TIMER", vec![4, 1]), ("NET_RX", vec![6, 9])],
        ));
        // Columns changed (CPU 1 went away, CPU 2 came) and rows reordered / renamed.
        let mut c = snap(
            2000,
            &[0, 2],
            &[(RowLabel::Named("RES".into()), vec![3, 2], " r")],
        );
        c.softirqs = Some(soft(
            &[0, 2],
            &[("NET_RX", vec![8, 1]), ("BLOCK", vec![1, 1])],
        ));
        let mut r = Rates::default();
        for (p, q) in [(&a, &b), (&b, &c), (&a, &b), (&b, &c)] {
            r.update(p, q).unwrap();
            assert_eq!(r, Rates::between(p, q).unwrap());
        }
        assert_eq!(r.softirqs, vec![("NET_RX".to_string(), vec![2.0, 0.0])]);
        assert_eq!(r.new_cpus, vec![CpuId(2)]);
        r.update(&a, &b).unwrap();
        assert_eq!(r.softirqs[0], ("TIMER".to_string(), vec![4.0, 1.0]));
        assert_eq!(r.rows[0].label, RowLabel::Named("LOC".into()));
    }

    #[test]
    fn imbalance_edges() {
        assert_eq!(imbalance(&[]), None);
        assert_eq!(imbalance(&[0.0, 0.0]), None);
        assert_eq!(imbalance(&[4.0, 0.0, 0.0, 0.0]), Some(4.0));
    }
}
