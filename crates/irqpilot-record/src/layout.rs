//! What the cells of a sample are. A snapshot's counters are flattened into one vector of
//! `u64` *cells*, in this order:
//!
//! 1. `/proc/interrupts`: every row's counts, row after row ([`InterruptTable::all_counts`]);
//! 2. `/proc/stat`, when read: the `cpu` line's fields, each `cpuN` line's fields, the `intr`
//!    line (sum, then each number), the `softirq` line (likewise), then each other line whose
//!    value is a plain number (`ctxt`, `processes`, ...);
//! 3. `/proc/softirqs`, when read: each row's per-CPU counts.
//!
//! The [`Layout`] holds everything else (row labels and text, CPU columns, field counts) and is
//! written once per key point, so a sample is only numbers. Replaying a layout and its cells
//! gives back a snapshot equal to the one recorded.

use crate::error::FormatError;
use crate::wire::{Input, put_str, put_u64};
use irqpilot_core::{CpuId, CpuTicks, IrqNum, ProcStat, RowLabel, Snapshot, SoftirqTable};

/// Largest count of anything (CPUs, rows, cells per row) a layout may declare; a corrupt
/// length beyond it is an error rather than an allocation.
const MAX_ITEMS: usize = 1 << 24;

#[derive(Clone, Debug, PartialEq, Eq)]
struct RowLayout {
    label: RowLabel,
    lead: String,
    first_width: u8,
    tail: String,
    len: u32,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct StatLayout {
    /// `fields` of the `cpu` line.
    total: Option<u8>,
    per_cpu: Vec<(CpuId, u8)>,
    intr: Option<u32>,
    softirq: Option<u32>,
    /// Other lines: the key, and the literal value when it is not a plain number.
    other: Vec<(String, Option<String>)>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct SoftirqLayout {
    cpus: Vec<CpuId>,
    rows: Vec<(String, u32)>,
}

/// The shape of a snapshot: what each cell of a sample means.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    header: String,
    cpus: Vec<CpuId>,
    final_newline: bool,
    rows: Vec<RowLayout>,
    stat: Option<StatLayout>,
    softirqs: Option<SoftirqLayout>,
    interrupt_cells: usize,
}

/// Cells a `/proc/stat` CPU line with `fields` fields takes (the parser keeps 4 to 10).
fn tick_cells(fields: u8) -> usize {
    usize::from(fields).clamp(4, 10)
}

fn ticks_to_cells(t: &CpuTicks, out: &mut Vec<u64>) {
    let all = [
        t.user,
        t.nice,
        t.system,
        t.idle,
        t.iowait.unwrap_or(0),
        t.irq.unwrap_or(0),
        t.softirq.unwrap_or(0),
        t.steal.unwrap_or(0),
        t.guest.unwrap_or(0),
        t.guest_nice.unwrap_or(0),
    ];
    out.extend_from_slice(&all[..tick_cells(t.fields)]);
}

fn ticks_from_cells(fields: u8, c: &[u64]) -> CpuTicks {
    let at = |i: usize| c.get(i).copied().unwrap_or(0);
    let opt = |i: usize| (i < c.len()).then(|| at(i));
    CpuTicks {
        user: at(0),
        nice: at(1),
        system: at(2),
        idle: at(3),
        iowait: opt(4),
        irq: opt(5),
        softirq: opt(6),
        steal: opt(7),
        guest: opt(8),
        guest_nice: opt(9),
        fields,
    }
}

/// A `/proc/stat` value kept as a cell: digits only, written the way `u64` prints them.
fn plain_number(v: &str) -> Option<u64> {
    if v.is_empty() || !v.bytes().all(|b| b.is_ascii_digit()) || (v.len() > 1 && v.starts_with('0'))
    {
        return None;
    }
    v.parse().ok()
}

impl Layout {
    /// The layout of `snap`.
    pub fn of(snap: &Snapshot) -> Layout {
        let t = &snap.interrupts;
        let rows: Vec<RowLayout> = t
            .rows()
            .iter()
            .map(|r| RowLayout {
                label: r.label.clone(),
                lead: r.lead.clone(),
                first_width: r.first_width,
                tail: r.tail.clone(),
                len: t.counts(r).len() as u32,
            })
            .collect();
        let stat = snap.stat.as_ref().map(|s| StatLayout {
            total: s.total.as_ref().map(|t| t.fields),
            per_cpu: s.per_cpu.iter().map(|(c, t)| (*c, t.fields)).collect(),
            intr: s.intr.as_ref().map(|(_, v)| v.len() as u32),
            softirq: s.softirq.as_ref().map(|(_, v)| v.len() as u32),
            other: s
                .other
                .iter()
                .map(|(k, v)| (k.clone(), plain_number(v).is_none().then(|| v.clone())))
                .collect(),
        });
        let softirqs = snap.softirqs.as_ref().map(|s| SoftirqLayout {
            cpus: s.cpus.clone(),
            rows: s
                .rows
                .iter()
                .map(|(n, v)| (n.clone(), v.len() as u32))
                .collect(),
        });
        Layout {
            header: t.header.clone(),
            cpus: t.cpus.clone(),
            final_newline: t.final_newline,
            interrupt_cells: t.all_counts().len(),
            rows,
            stat,
            softirqs,
        }
    }

    /// Whether `snap` has this layout (its cells can be diffed against the previous sample's).
    /// Allocates nothing.
    pub fn matches(&self, snap: &Snapshot) -> bool {
        let t = &snap.interrupts;
        if t.header != self.header
            || t.cpus != self.cpus
            || t.final_newline != self.final_newline
            || t.rows().len() != self.rows.len()
            || t.all_counts().len() != self.interrupt_cells
        {
            return false;
        }
        let rows_match = t.rows().iter().zip(&self.rows).all(|(r, l)| {
            r.label == l.label
                && r.tail == l.tail
                && r.lead == l.lead
                && r.first_width == l.first_width
                && t.counts(r).len() == l.len as usize
        });
        if !rows_match {
            return false;
        }
        let stat_match = match (&snap.stat, &self.stat) {
            (None, None) => true,
            (Some(s), Some(l)) => {
                s.total.as_ref().map(|t| t.fields) == l.total
                    && s.per_cpu.len() == l.per_cpu.len()
                    && s.per_cpu
                        .iter()
                        .zip(&l.per_cpu)
                        .all(|((c, t), (lc, lf))| c == lc && t.fields == *lf)
                    && s.intr.as_ref().map(|(_, v)| v.len() as u32) == l.intr
                    && s.softirq.as_ref().map(|(_, v)| v.len() as u32) == l.softirq
                    && s.other.len() == l.other.len()
                    && s.other.iter().zip(&l.other).all(|((k, v), (lk, lv))| {
                        k == lk
                            && match lv {
                                Some(text) => v == text,
                                None => plain_number(v).is_some(),
                            }
                    })
            }
            _ => false,
        };
        let soft_match = match (&snap.softirqs, &self.softirqs) {
            (None, None) => true,
            (Some(s), Some(l)) => {
                s.cpus == l.cpus
                    && s.rows.len() == l.rows.len()
                    && s.rows
                        .iter()
                        .zip(&l.rows)
                        .all(|((n, v), (ln, len))| n == ln && v.len() == *len as usize)
            }
            _ => false,
        };
        stat_match && soft_match
    }

    /// Cells of `/proc/interrupts` (they come first).
    pub fn interrupt_cells(&self) -> usize {
        self.interrupt_cells
    }

    /// All cells of a sample.
    pub fn cells(&self) -> usize {
        let stat = self.stat.as_ref().map_or(0, |s| {
            s.total.map_or(0, tick_cells)
                + s.per_cpu.iter().map(|(_, f)| tick_cells(*f)).sum::<usize>()
                + s.intr.map_or(0, |n| 1 + n as usize)
                + s.softirq.map_or(0, |n| 1 + n as usize)
                + s.other.iter().filter(|(_, v)| v.is_none()).count()
        });
        let soft = self
            .softirqs
            .as_ref()
            .map_or(0, |s| s.rows.iter().map(|(_, n)| *n as usize).sum());
        self.interrupt_cells + stat + soft
    }

    /// The cells after the interrupt counts (`/proc/stat`, `/proc/softirqs`) of a snapshot
    /// that [`Layout::matches`], into `out` (cleared first).
    pub fn gather_rest(&self, snap: &Snapshot, out: &mut Vec<u64>) {
        out.clear();
        if let Some(s) = &snap.stat {
            if let Some(t) = &s.total {
                ticks_to_cells(t, out);
            }
            for (_, t) in &s.per_cpu {
                ticks_to_cells(t, out);
            }
            for (sum, v) in s.intr.iter().chain(&s.softirq) {
                out.push(*sum);
                out.extend_from_slice(v);
            }
            out.extend(s.other.iter().filter_map(|(_, v)| plain_number(v)));
        }
        if let Some(s) = &snap.softirqs {
            for (_, v) in &s.rows {
                out.extend_from_slice(v);
            }
        }
    }

    /// Builds the snapshot's tables for this layout, counters zero (the cells fill them).
    pub fn skeleton(&self, snap: &mut Snapshot) {
        let t = &mut snap.interrupts;
        t.clear();
        t.header.clone_from(&self.header);
        t.cpus.clone_from(&self.cpus);
        t.final_newline = self.final_newline;
        let zeros = vec![0u64; self.rows.iter().map(|r| r.len as usize).max().unwrap_or(0)];
        for r in &self.rows {
            t.push_row(
                r.label.clone(),
                &r.lead,
                r.first_width,
                &zeros[..r.len as usize],
                &r.tail,
            );
        }
        snap.stat = self.stat.as_ref().map(|l| ProcStat {
            total: l
                .total
                .map(|f| ticks_from_cells(f, &vec![0; tick_cells(f)])),
            per_cpu: l
                .per_cpu
                .iter()
                .map(|(c, f)| (*c, ticks_from_cells(*f, &vec![0; tick_cells(*f)])))
                .collect(),
            intr: l.intr.map(|n| (0, vec![0; n as usize])),
            softirq: l.softirq.map(|n| (0, vec![0; n as usize])),
            other: l
                .other
                .iter()
                .map(|(k, v)| (k.clone(), v.clone().unwrap_or_else(|| "0".into())))
                .collect(),
        });
        snap.softirqs = self.softirqs.as_ref().map(|l| SoftirqTable {
            cpus: l.cpus.clone(),
            rows: l
                .rows
                .iter()
                .map(|(n, len)| (n.clone(), vec![0; *len as usize]))
                .collect(),
        });
    }

    /// Writes the cells after the interrupt counts back into a snapshot built by
    /// [`Layout::skeleton`].
    pub fn scatter_rest(&self, rest: &[u64], snap: &mut Snapshot) {
        let mut it = rest;
        let mut take = |n: usize| {
            let (a, b) = it.split_at(n.min(it.len()));
            it = b;
            a
        };
        if let (Some(l), Some(s)) = (&self.stat, snap.stat.as_mut()) {
            if let (Some(f), Some(t)) = (l.total, s.total.as_mut()) {
                *t = ticks_from_cells(f, take(tick_cells(f)));
            }
            for ((_, f), (_, t)) in l.per_cpu.iter().zip(s.per_cpu.iter_mut()) {
                *t = ticks_from_cells(*f, take(tick_cells(*f)));
            }
            for (n, line) in [(l.intr, &mut s.intr), (l.softirq, &mut s.softirq)] {
                if let (Some(n), Some((sum, v))) = (n, line.as_mut()) {
                    *sum = take(1).first().copied().unwrap_or(0);
                    let src = take(n as usize);
                    v.clear();
                    v.extend_from_slice(src);
                }
            }
            for ((_, lv), (_, v)) in l.other.iter().zip(s.other.iter_mut()) {
                if lv.is_none() {
                    let n = take(1).first().copied().unwrap_or(0);
                    v.clear();
                    use std::fmt::Write as _;
                    let _ = write!(v, "{n}");
                }
            }
        }
        if let (Some(l), Some(s)) = (&self.softirqs, snap.softirqs.as_mut()) {
            for ((_, n), (_, v)) in l.rows.iter().zip(s.rows.iter_mut()) {
                let src = take(*n as usize);
                v.clear();
                v.extend_from_slice(src);
            }
        }
    }

    /// Appends the layout record's body.
    pub fn encode(&self, out: &mut Vec<u8>) {
        put_str(out, &self.header);
        out.push(u8::from(self.final_newline));
        put_cpus(out, &self.cpus);
        put_u64(out, self.rows.len() as u64);
        for r in &self.rows {
            match &r.label {
                RowLabel::Irq(n) => {
                    out.push(0);
                    put_u64(out, u64::from(n.0));
                }
                RowLabel::Named(s) => {
                    out.push(1);
                    put_str(out, s);
                }
            }
            put_str(out, &r.lead);
            out.push(r.first_width);
            put_str(out, &r.tail);
            put_u64(out, u64::from(r.len));
        }
        match &self.stat {
            None => out.push(0),
            Some(s) => {
                out.push(1);
                put_opt_u8(out, s.total);
                put_u64(out, s.per_cpu.len() as u64);
                for (c, f) in &s.per_cpu {
                    put_u64(out, u64::from(c.0));
                    out.push(*f);
                }
                put_opt_len(out, s.intr);
                put_opt_len(out, s.softirq);
                put_u64(out, s.other.len() as u64);
                for (k, v) in &s.other {
                    put_str(out, k);
                    match v {
                        None => out.push(0),
                        Some(text) => {
                            out.push(1);
                            put_str(out, text);
                        }
                    }
                }
            }
        }
        match &self.softirqs {
            None => out.push(0),
            Some(s) => {
                out.push(1);
                put_cpus(out, &s.cpus);
                put_u64(out, s.rows.len() as u64);
                for (n, len) in &s.rows {
                    put_str(out, n);
                    put_u64(out, u64::from(*len));
                }
            }
        }
    }

    /// Reads a layout record's body.
    pub fn decode(inp: &mut Input<'_>) -> Result<Layout, FormatError> {
        let header = inp.str("interrupts header")?.to_string();
        let final_newline = inp.u8("final newline flag")? != 0;
        let cpus = get_cpus(inp)?;
        let n = inp.len("row count", MAX_ITEMS)?;
        let mut rows = Vec::with_capacity(n.min(4096));
        let mut interrupt_cells = 0usize;
        for _ in 0..n {
            let label = match inp.u8("row label kind")? {
                0 => RowLabel::Irq(IrqNum(inp.u32("IRQ number")?)),
                1 => RowLabel::Named(inp.str("row name")?.to_string()),
                k => return Err(FormatError::new(format!("unknown row label kind {k}"))),
            };
            let lead = inp.str("row lead")?.to_string();
            let first_width = inp.u8("row first width")?;
            let tail = inp.str("row tail")?.to_string();
            let len = inp.len("row cell count", MAX_ITEMS)?;
            interrupt_cells += len;
            if interrupt_cells > MAX_ITEMS * 4 {
                return Err(FormatError::new("layout declares too many cells"));
            }
            rows.push(RowLayout {
                label,
                lead,
                first_width,
                tail,
                len: len as u32,
            });
        }
        let stat = match inp.u8("stat flag")? {
            0 => None,
            _ => {
                let total = get_opt_u8(inp)?;
                let n = inp.len("stat CPU count", MAX_ITEMS)?;
                let mut per_cpu = Vec::with_capacity(n.min(4096));
                for _ in 0..n {
                    per_cpu.push((CpuId(inp.u32("stat CPU")?), inp.u8("stat fields")?));
                }
                let intr = get_opt_len(inp)?;
                let softirq = get_opt_len(inp)?;
                let n = inp.len("stat line count", MAX_ITEMS)?;
                let mut other = Vec::with_capacity(n.min(64));
                for _ in 0..n {
                    let k = inp.str("stat key")?.to_string();
                    let v = match inp.u8("stat value kind")? {
                        0 => None,
                        _ => Some(inp.str("stat value")?.to_string()),
                    };
                    other.push((k, v));
                }
                Some(StatLayout {
                    total,
                    per_cpu,
                    intr,
                    softirq,
                    other,
                })
            }
        };
        let softirqs = match inp.u8("softirqs flag")? {
            0 => None,
            _ => {
                let cpus = get_cpus(inp)?;
                let n = inp.len("softirq row count", MAX_ITEMS)?;
                let mut rows = Vec::with_capacity(n.min(64));
                for _ in 0..n {
                    let name = inp.str("softirq name")?.to_string();
                    rows.push((name, inp.len("softirq cells", MAX_ITEMS)? as u32));
                }
                Some(SoftirqLayout { cpus, rows })
            }
        };
        Ok(Layout {
            header,
            cpus,
            final_newline,
            rows,
            stat,
            softirqs,
            interrupt_cells,
        })
    }
}

fn put_cpus(out: &mut Vec<u8>, cpus: &[CpuId]) {
    put_u64(out, cpus.len() as u64);
    for c in cpus {
        put_u64(out, u64::from(c.0));
    }
}

fn get_cpus(inp: &mut Input<'_>) -> Result<Vec<CpuId>, FormatError> {
    let n = inp.len("CPU count", MAX_ITEMS)?;
    let mut v = Vec::with_capacity(n.min(4096));
    for _ in 0..n {
        v.push(CpuId(inp.u32("CPU id")?));
    }
    Ok(v)
}

fn put_opt_u8(out: &mut Vec<u8>, v: Option<u8>) {
    match v {
        None => out.push(0),
        Some(f) => {
            out.push(1);
            out.push(f);
        }
    }
}

fn get_opt_u8(inp: &mut Input<'_>) -> Result<Option<u8>, FormatError> {
    Ok(match inp.u8("flag")? {
        0 => None,
        _ => Some(inp.u8("fields")?),
    })
}

fn put_opt_len(out: &mut Vec<u8>, v: Option<u32>) {
    match v {
        None => out.push(0),
        Some(n) => {
            out.push(1);
            put_u64(out, u64::from(n));
        }
    }
}

fn get_opt_len(inp: &mut Input<'_>) -> Result<Option<u32>, FormatError> {
    Ok(match inp.u8("flag")? {
        0 => None,
        _ => Some(inp.len("length", MAX_ITEMS)? as u32),
    })
}

/// The table a layout describes, for tests.
#[cfg(test)]
pub(crate) fn table_of(l: &Layout) -> irqpilot_core::InterruptTable {
    let mut s = Snapshot::default();
    l.skeleton(&mut s);
    s.interrupts
}

#[cfg(test)]
mod tests {
    use super::*;
    use irqpilot_core::InterruptTable;

    #[test]
    fn plain_numbers_only() {
        assert_eq!(plain_number("0"), Some(0));
        assert_eq!(plain_number("123"), Some(123));
        assert_eq!(plain_number("0123"), None);
        assert_eq!(plain_number("+1"), None);
        assert_eq!(plain_number("1 2"), None);
    }

    #[test]
    fn layout_round_trips_through_bytes() {
        let mut snap = Snapshot {
            interrupts: InterruptTable::with_kernel_header(vec![CpuId(0), CpuId(2)], 3),
            ..Snapshot::default()
        };
        snap.interrupts.push_kernel_row(
            RowLabel::Irq(IrqNum(24)),
            3,
            &[5, 6],
            "  IR-PCI-MSIX-0000:00:03.0  0-edge  eth0-rx-0",
        );
        snap.interrupts
            .push_kernel_row(RowLabel::Named("ERR".into()), 3, &[1], "");
        let l = Layout::of(&snap);
        let mut out = Vec::new();
        l.encode(&mut out);
        let back = Layout::decode(&mut Input::new(&out)).unwrap();
        assert_eq!(back, l);
        assert_eq!(back.cells(), 3);
        let t = table_of(&back);
        assert_eq!(t.rows().len(), 2);
        assert_eq!(t.counts(&t.rows()[0]), &[0, 0]);
    }
}
