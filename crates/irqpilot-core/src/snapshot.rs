//! `Snapshot`: raw counters at one instant, exactly as the kernel reported them.
//!
//! Derived values (rates, percentages) come later from [`crate::rates::Rates`]; a snapshot keeps
//! the raw text details needed to print the files back byte for byte (`lead`/`tail` of each
//! `/proc/interrupts` row, the header line), so recorded snapshots can be replayed and the
//! simulator can export a tree real tools read.

use crate::ids::{CpuId, IrqNum, MonoNs};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::ops::Range;

/// The label of a `/proc/interrupts` row: an IRQ number, or a named architecture row such as
/// `NMI`, `LOC`, `IPI0`, `ERR`, `I/O`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum RowLabel {
    /// A numbered IRQ.
    Irq(IrqNum),
    /// A named row.
    Named(String),
}

impl RowLabel {
    /// The IRQ number, for numbered rows.
    pub fn irq(&self) -> Option<IrqNum> {
        match self {
            RowLabel::Irq(n) => Some(*n),
            RowLabel::Named(_) => None,
        }
    }
}

impl fmt::Display for RowLabel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RowLabel::Irq(n) => write!(f, "{n}"),
            RowLabel::Named(s) => f.write_str(s),
        }
    }
}

/// One row of `/proc/interrupts`.
///
/// The kernel prints a row as `lead`, then the first count right-aligned in `first_width`
/// columns, then each further count as a space and a 10-column field, then `tail`. Keeping
/// `lead` and `tail` verbatim reproduces every kernel version's layout (`" 24: "`, `"IPI0:"`,
/// `"  ERR: "`) without knowing each one.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct InterruptRow {
    /// The row's label.
    pub label: RowLabel,
    /// Text before the first count field (label, colon, padding), verbatim.
    pub lead: String,
    /// Width of the first count field (10 in kernel output).
    pub first_width: u8,
    /// Text after the last count (or after `lead` when the row has none), verbatim, without the
    /// newline: chip, hwirq, trigger and action names for IRQs, a description for named rows.
    pub tail: String,
    counts: Range<u32>,
}

impl InterruptRow {
    /// The description after the counts, trimmed.
    pub fn desc(&self) -> &str {
        self.tail.trim()
    }
}

/// The parsed `/proc/interrupts`: CPU columns, rows in file order, counts.
///
/// Counts live in one flat vector; rows point into it. [`InterruptTable::clear`] keeps every
/// allocation (rows' strings included) so a sampler that parses into the same table again and
/// again stops allocating once it has seen the largest file.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct InterruptTable {
    /// The header line verbatim (without newline).
    pub header: String,
    /// CPU ids of the header's columns, in column order (online CPUs).
    pub cpus: Vec<CpuId>,
    /// Whether the text ended with a newline (the kernel's always does).
    pub final_newline: bool,
    rows: Vec<InterruptRow>,
    counts: Vec<u64>,
    #[serde(skip)]
    spare: Vec<InterruptRow>,
}

impl PartialEq for InterruptTable {
    fn eq(&self, other: &Self) -> bool {
        self.header == other.header
            && self.cpus == other.cpus
            && self.final_newline == other.final_newline
            && self.rows.len() == other.rows.len()
            && self.rows.iter().zip(&other.rows).all(|(a, b)| {
                a.label == b.label
                    && a.lead == b.lead
                    && a.first_width == b.first_width
                    && a.tail == b.tail
                    && self.counts(a) == other.counts(b)
            })
    }
}

impl Eq for InterruptTable {}

impl InterruptTable {
    /// An empty table with the header the kernel prints for these CPUs and IRQ label width
    /// (`prec`, see [`InterruptTable::kernel_prec`]).
    pub fn with_kernel_header(cpus: Vec<CpuId>, prec: usize) -> InterruptTable {
        let mut header = " ".repeat(prec + 8);
        for c in &cpus {
            header.push_str(&format!("CPU{:<8}", c.0));
        }
        InterruptTable {
            header,
            cpus,
            final_newline: true,
            ..InterruptTable::default()
        }
    }

    /// Removes every row but keeps the allocations for the next parse.
    pub fn clear(&mut self) {
        self.header.clear();
        self.cpus.clear();
        self.counts.clear();
        self.final_newline = true;
        // `drain` keeps the row vector's own buffer too (taking it would free it).
        self.spare.extend(self.rows.drain(..).rev());
    }

    /// Starts a new row (reusing a spare one's allocations); add its counts with
    /// [`InterruptTable::push_count`] and its tail with [`InterruptTable::set_last_tail`].
    pub fn begin_row(&mut self, label: RowLabel, lead: &str, first_width: u8) {
        let start = self.counts.len() as u32;
        let mut row = self.spare.pop().unwrap_or_else(|| InterruptRow {
            label: RowLabel::Irq(IrqNum(0)),
            lead: String::new(),
            first_width: 10,
            tail: String::new(),
            counts: 0..0,
        });
        row.label = label;
        row.lead.clear();
        row.lead.push_str(lead);
        row.first_width = first_width;
        row.tail.clear();
        row.counts = start..start;
        self.rows.push(row);
    }

    /// [`InterruptTable::begin_row`] for a named row, taking the label as `&str`: the spare row's
    /// label string is reused, so parsing the same file again allocates nothing for named rows.
    pub fn begin_named_row(&mut self, name: &str, lead: &str, first_width: u8) {
        let label = match self.spare.last_mut() {
            Some(InterruptRow {
                label: RowLabel::Named(s),
                ..
            }) => {
                let mut s = std::mem::take(s);
                s.clear();
                s.push_str(name);
                RowLabel::Named(s)
            }
            _ => RowLabel::Named(name.to_string()),
        };
        self.begin_row(label, lead, first_width);
    }

    /// Appends one count to the last row.
    #[inline]
    pub fn push_count(&mut self, value: u64) {
        self.counts.push(value);
        if let Some(row) = self.rows.last_mut() {
            row.counts.end = self.counts.len() as u32;
        }
    }

    /// Appends several counts to the last row (a parser's run of idle CPUs).
    #[inline]
    pub fn push_counts(&mut self, values: &[u64]) {
        self.counts.extend_from_slice(values);
        if let Some(row) = self.rows.last_mut() {
            row.counts.end = self.counts.len() as u32;
        }
    }

    /// Sets the last row's tail.
    pub fn set_last_tail(&mut self, tail: &str) {
        if let Some(row) = self.rows.last_mut() {
            row.tail.clear();
            row.tail.push_str(tail);
        }
    }

    /// Removes the last row (a parser that finds the row malformed after starting it).
    pub fn pop_row(&mut self) {
        if let Some(row) = self.rows.pop() {
            self.counts.truncate(row.counts.start as usize);
            self.spare.push(row);
        }
    }

    /// Appends a complete row. `lead` and `tail` are verbatim text (see [`InterruptRow`]).
    pub fn push_row(
        &mut self,
        label: RowLabel,
        lead: &str,
        first_width: u8,
        counts: &[u64],
        tail: &str,
    ) {
        self.begin_row(label, lead, first_width);
        for &c in counts {
            self.push_count(c);
        }
        self.set_last_tail(tail);
    }

    /// Appends a row in the kernel's own layout: label right-aligned in `prec` columns, `": "`,
    /// 10-column counts; `tail` is the text after the last count's digits (in kernel 6.x output:
    /// a space, the chip right-aligned in 8 columns, the hwirq, `-handler`, two spaces, actions).
    pub fn push_kernel_row(&mut self, label: RowLabel, prec: usize, counts: &[u64], tail: &str) {
        let lead = format!("{:>prec$}: ", label.to_string());
        self.push_row(label, &lead, 10, counts, tail);
    }

    /// Rows in file order.
    pub fn rows(&self) -> &[InterruptRow] {
        &self.rows
    }

    /// Counts of a row, aligned with [`InterruptTable::cpus`] for per-CPU rows. Single-value rows
    /// (`ERR`, `MIS`) have one count, rows such as `FIQ` none, and a few arch rows more than the
    /// header has CPUs (offline CPUs on old ARM kernels).
    pub fn counts(&self, row: &InterruptRow) -> &[u64] {
        self.counts
            .get(row.counts.start as usize..row.counts.end as usize)
            .unwrap_or(&[])
    }

    /// Sum of a row's counts.
    pub fn total(&self, row: &InterruptRow) -> u64 {
        self.counts(row).iter().sum()
    }

    /// Whether a row has one count per header CPU.
    pub fn is_per_cpu(&self, row: &InterruptRow) -> bool {
        row.counts.len() == self.cpus.len()
    }

    /// The row of a numbered IRQ.
    pub fn irq_row(&self, irq: IrqNum) -> Option<&InterruptRow> {
        self.rows.iter().find(|r| r.label == RowLabel::Irq(irq))
    }

    /// Every row's counts, concatenated in row order (recordings diff and restore them in one
    /// pass; [`InterruptTable::counts`] gives one row's slice of it).
    pub fn all_counts(&self) -> &[u64] {
        &self.counts
    }

    /// Mutable [`InterruptTable::all_counts`].
    pub fn all_counts_mut(&mut self) -> &mut [u64] {
        &mut self.counts
    }

    /// Mutable access to a row's counts (simulator and tests update counters in place).
    pub fn counts_mut(&mut self, index: usize) -> Option<&mut [u64]> {
        let r = self.rows.get(index)?.counts.clone();
        self.counts.get_mut(r.start as usize..r.end as usize)
    }

    /// The label width the kernel would use for this table: 3, or more for 1000+ IRQs.
    pub fn kernel_prec(max_irq_plus_one: u32) -> usize {
        let (mut prec, mut j) = (3usize, 1000u64);
        while prec < 10 && j <= max_irq_plus_one as u64 {
            prec += 1;
            j *= 10;
        }
        prec
    }
}

/// Per-CPU time counters of one `cpu` line of `/proc/stat`, in `USER_HZ` ticks. Fields after
/// `idle` are `None` on kernels that print fewer columns.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuTicks {
    /// `user` (includes guest time).
    pub user: u64,
    /// `nice`.
    pub nice: u64,
    /// `system`.
    pub system: u64,
    /// `idle`.
    pub idle: u64,
    /// `iowait`.
    pub iowait: Option<u64>,
    /// `irq`: hardirq time (0 without `CONFIG_IRQ_TIME_ACCOUNTING`).
    pub irq: Option<u64>,
    /// `softirq`.
    pub softirq: Option<u64>,
    /// `steal`.
    pub steal: Option<u64>,
    /// `guest`.
    pub guest: Option<u64>,
    /// `guest_nice`.
    pub guest_nice: Option<u64>,
    /// How many numbers the line had (4 to 10), to print it back the same way.
    pub fields: u8,
}

impl CpuTicks {
    /// All time the CPU accounted (guest time is already inside `user`/`nice`).
    pub fn total(&self) -> u64 {
        self.user
            + self.nice
            + self.system
            + self.idle
            + self.iowait.unwrap_or(0)
            + self.irq.unwrap_or(0)
            + self.softirq.unwrap_or(0)
            + self.steal.unwrap_or(0)
    }
}

/// `/proc/stat`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcStat {
    /// The aggregate `cpu` line.
    pub total: Option<CpuTicks>,
    /// `cpuN` lines (online CPUs only; the kernel omits offline ones).
    pub per_cpu: Vec<(CpuId, CpuTicks)>,
    /// `intr`: total, then one count per IRQ number starting at 0.
    pub intr: Option<(u64, Vec<u64>)>,
    /// `softirq`: total, then one count per softirq type.
    pub softirq: Option<(u64, Vec<u64>)>,
    /// Other lines (`ctxt`, `btime`, `processes`, `procs_running`, `procs_blocked`, `page`, ...)
    /// as key and verbatim rest, in file order, so the file prints back unchanged.
    pub other: Vec<(String, String)>,
}

impl ProcStat {
    /// Ticks of one CPU.
    pub fn cpu(&self, cpu: CpuId) -> Option<&CpuTicks> {
        self.per_cpu.iter().find(|(c, _)| *c == cpu).map(|(_, t)| t)
    }
}

/// `/proc/softirqs`: per softirq type (`HI`, `TIMER`, `NET_TX`, `NET_RX`, ...), per CPU counts.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SoftirqTable {
    /// CPU columns (the kernel prints every *possible* CPU here).
    pub cpus: Vec<CpuId>,
    /// Rows in file order: type name and one count per column.
    pub rows: Vec<(String, Vec<u64>)>,
}

impl SoftirqTable {
    /// Counts of one softirq type.
    pub fn row(&self, name: &str) -> Option<&[u64]> {
        self.rows
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_slice())
    }
}

/// Raw counters at one instant.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Snapshot {
    /// When the counters were read.
    pub taken_at: MonoNs,
    /// `/proc/interrupts`.
    pub interrupts: InterruptTable,
    /// `/proc/stat`, when readable.
    pub stat: Option<ProcStat>,
    /// `/proc/softirqs`, when readable.
    pub softirqs: Option<SoftirqTable>,
    /// `/proc/net/dev`, when readable: per interface packets and bytes.
    #[serde(default)]
    pub net: Option<Vec<crate::devstats::NetDevCounters>>,
    /// `/proc/diskstats`, when readable: per block device I/Os and time.
    #[serde(default)]
    pub disks: Option<Vec<crate::devstats::DiskCounters>>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_prec() {
        assert_eq!(InterruptTable::kernel_prec(44), 3);
        assert_eq!(InterruptTable::kernel_prec(999), 3);
        assert_eq!(InterruptTable::kernel_prec(1000), 4);
        assert_eq!(InterruptTable::kernel_prec(1161), 4);
        assert_eq!(InterruptTable::kernel_prec(10000), 5);
    }

    #[test]
    fn rows_and_counts() {
        let mut t = InterruptTable::with_kernel_header(vec![CpuId(0), CpuId(1)], 3);
        assert_eq!(t.header, "           CPU0       CPU1       ");
        t.push_kernel_row(
            RowLabel::Irq(IrqNum(24)),
            3,
            &[1, 0],
            "  IO-APIC   5-edge      ACPI:Ged",
        );
        t.push_kernel_row(RowLabel::Named("ERR".into()), 3, &[0], "");
        let r = &t.rows()[0];
        assert_eq!(r.lead, " 24: ");
        assert_eq!(t.counts(r), &[1, 0]);
        assert!(t.is_per_cpu(r));
        assert!(!t.is_per_cpu(&t.rows()[1]));
        assert_eq!(
            t.irq_row(IrqNum(24)).map(|r| r.desc()),
            Some("IO-APIC   5-edge      ACPI:Ged")
        );
        t.counts_mut(0).unwrap()[1] = 7;
        assert_eq!(t.total(&t.rows()[0]), 8);
        let copy = t.clone();
        t.clear();
        assert!(t.rows().is_empty());
        t.push_kernel_row(
            RowLabel::Irq(IrqNum(24)),
            3,
            &[1, 7],
            "  IO-APIC   5-edge      ACPI:Ged",
        );
        t.push_kernel_row(RowLabel::Named("ERR".into()), 3, &[0], "");
        t.header = copy.header.clone();
        t.cpus = copy.cpus.clone();
        assert_eq!(t, copy);
        t.pop_row();
        assert_eq!(t.rows().len(), 1);
    }

    #[test]
    fn begin_named_row_reuses_label() {
        let mut t = InterruptTable::default();
        t.begin_named_row("NMI", "NMI:", 10);
        t.push_count(3);
        t.clear();
        t.begin_named_row("LOC", "LOC:", 10);
        t.push_count(4);
        t.begin_named_row("ERR", "ERR:", 10);
        assert_eq!(t.rows()[0].label, RowLabel::Named("LOC".into()));
        assert_eq!(t.rows()[1].label, RowLabel::Named("ERR".into()));
        assert_eq!(t.counts(&t.rows()[0]), &[4]);
        assert!(t.counts(&t.rows()[1]).is_empty());
    }

    #[test]
    fn ticks_total() {
        let t = CpuTicks {
            user: 1,
            nice: 2,
            system: 3,
            idle: 4,
            irq: Some(5),
            fields: 6,
            ..Default::default()
        };
        assert_eq!(t.total(), 15);
    }
}
