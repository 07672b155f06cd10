//! The CPU panel's rows: one per CPU, or folded into one per NUMA node or package (a 256-CPU
//! server does not fit a screen), a folded group opening on Enter. Rows carry the figures of
//! the last interval; groups sum the interrupt rates and average the time shares.

use irqpilot_core::{CpuId, CpuSet, Machine, NodeId, Rates};
use std::collections::{BTreeMap, BTreeSet};

/// What a CPU is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CpuMeta {
    /// NUMA node.
    pub node: Option<NodeId>,
    /// Package (socket).
    pub package: Option<u32>,
    /// Isolated (`isolcpus=`, `nohz_full=`): device interrupts should stay away.
    pub isolated: bool,
    /// A housekeeping CPU for device interrupts.
    pub housekeeping: bool,
}

/// Every online CPU's [`CpuMeta`].
pub fn cpu_meta(machine: &Machine) -> BTreeMap<CpuId, CpuMeta> {
    let t = &machine.topology;
    let isolated = machine.isolation.isolated_cpus();
    let hk = machine.housekeeping();
    t.online
        .iter()
        .map(|c| {
            (
                c,
                CpuMeta {
                    node: t.node_of(c),
                    package: t.cpu(c).and_then(|x| x.package),
                    isolated: isolated.contains(c),
                    housekeeping: hk.contains(c),
                },
            )
        })
        .collect()
}

/// How CPUs are grouped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fold {
    /// One row per CPU.
    None,
    /// One group per NUMA node.
    Node,
    /// One group per package.
    Package,
}

impl Fold {
    /// The next fold (the `f` key).
    pub fn next(self) -> Fold {
        match self {
            Fold::None => Fold::Node,
            Fold::Node => Fold::Package,
            Fold::Package => Fold::None,
        }
    }

    /// Its name.
    pub fn name(self) -> &'static str {
        match self {
            Fold::None => "none",
            Fold::Node => "node",
            Fold::Package => "package",
        }
    }
}

/// One CPU's figures over the last interval.
#[derive(Clone, Debug, PartialEq)]
pub struct CpuFigures {
    /// The CPU.
    pub cpu: CpuId,
    /// Numbered IRQs per second.
    pub irq_per_sec: f64,
    /// Timer and IPIs per second.
    pub arch_per_sec: f64,
    /// Hardirq share of time, %.
    pub hardirq_pct: Option<f64>,
    /// Softirq share of time, %.
    pub softirq_pct: Option<f64>,
}

/// The sort of the CPU panel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CpuSort {
    /// By CPU number.
    Cpu,
    /// By IRQ/s.
    Irq,
    /// By hardirq %.
    Hard,
    /// By softirq %.
    Soft,
}

impl CpuSort {
    /// The next column (the `s` key).
    pub fn next(self) -> CpuSort {
        match self {
            CpuSort::Cpu => CpuSort::Irq,
            CpuSort::Irq => CpuSort::Hard,
            CpuSort::Hard => CpuSort::Soft,
            CpuSort::Soft => CpuSort::Cpu,
        }
    }

    /// The column's header.
    pub fn name(self) -> &'static str {
        match self {
            CpuSort::Cpu => "CPU",
            CpuSort::Irq => "IRQ/s",
            CpuSort::Hard => "HARDIRQ",
            CpuSort::Soft => "SOFTIRQ",
        }
    }
}

/// A row of the CPU panel.
#[derive(Clone, Debug, PartialEq)]
pub enum CpuRow {
    /// A group header: its key, CPUs, and summed / averaged figures.
    Group {
        /// `node0`, `package1`, `no node`.
        name: String,
        /// Its CPUs (after the filter).
        cpus: CpuSet,
        /// Isolated CPUs among them.
        isolated: usize,
        /// Whether its CPUs are listed below it.
        open: bool,
        /// Sum over the CPUs.
        irq_per_sec: f64,
        /// Mean hardirq %.
        hardirq_pct: Option<f64>,
        /// Highest hardirq %.
        hardirq_max: Option<f64>,
        /// Mean softirq %.
        softirq_pct: Option<f64>,
    },
    /// One CPU.
    Cpu(CpuFigures),
}

/// The figures of every CPU of `rates`.
pub fn figures(rates: &Rates) -> Vec<CpuFigures> {
    rates
        .per_cpu
        .iter()
        .map(|c| CpuFigures {
            cpu: c.cpu,
            irq_per_sec: c.irq_per_sec,
            arch_per_sec: c.arch_per_sec,
            hardirq_pct: c.hardirq_pct,
            softirq_pct: c.softirq_pct,
        })
        .collect()
}

fn sort(v: &mut [&CpuFigures], by: CpuSort, reverse: bool) {
    let key = |f: &CpuFigures| match by {
        CpuSort::Cpu => -(f64::from(f.cpu.0)),
        CpuSort::Irq => f.irq_per_sec,
        CpuSort::Hard => f.hardirq_pct.unwrap_or(-1.0),
        CpuSort::Soft => f.softirq_pct.unwrap_or(-1.0),
    };
    // Largest first (CPU number: smallest first); ties by CPU number.
    v.sort_by(|a, b| key(b).total_cmp(&key(a)).then(a.cpu.cmp(&b.cpu)));
    if reverse {
        v.reverse();
    }
}

fn mean(v: impl Iterator<Item = Option<f64>>) -> (Option<f64>, Option<f64>) {
    let (mut sum, mut n, mut max) = (0.0, 0usize, None::<f64>);
    for x in v.flatten() {
        sum += x;
        n += 1;
        max = Some(max.map_or(x, |m| m.max(x)));
    }
    ((n > 0).then(|| sum / n as f64), max)
}

/// The panel's rows: CPUs passing `only`, sorted, folded by `fold` with the `open` groups
/// listing their CPUs.
pub fn rows(
    figs: &[CpuFigures],
    meta: &BTreeMap<CpuId, CpuMeta>,
    only: Option<&CpuSet>,
    fold: Fold,
    open: &BTreeSet<String>,
    by: CpuSort,
    reverse: bool,
) -> Vec<CpuRow> {
    let shown: Vec<&CpuFigures> = figs
        .iter()
        .filter(|f| only.is_none_or(|s| s.contains(f.cpu)))
        .collect();
    if fold == Fold::None {
        let mut v = shown;
        sort(&mut v, by, reverse);
        return v.into_iter().cloned().map(CpuRow::Cpu).collect();
    }
    let mut groups: BTreeMap<(u32, String), Vec<&CpuFigures>> = BTreeMap::new();
    for f in shown {
        let m = meta.get(&f.cpu);
        let (order, name) = match fold {
            Fold::Node => match m.and_then(|m| m.node) {
                Some(n) => (n.0, format!("node{n}")),
                None => (u32::MAX, "no node".to_string()),
            },
            _ => match m.and_then(|m| m.package) {
                Some(p) => (p, format!("package{p}")),
                None => (u32::MAX, "no package".to_string()),
            },
        };
        groups.entry((order, name)).or_default().push(f);
    }
    let mut out = Vec::new();
    for ((_, name), mut members) in groups {
        let (hard, hard_max) = mean(members.iter().map(|f| f.hardirq_pct));
        let (soft, _) = mean(members.iter().map(|f| f.softirq_pct));
        let is_open = open.contains(&name);
        out.push(CpuRow::Group {
            cpus: members.iter().map(|f| f.cpu).collect(),
            isolated: members
                .iter()
                .filter(|f| meta.get(&f.cpu).is_some_and(|m| m.isolated))
                .count(),
            open: is_open,
            irq_per_sec: members.iter().map(|f| f.irq_per_sec).sum(),
            hardirq_pct: hard,
            hardirq_max: hard_max,
            softirq_pct: soft,
            name,
        });
        if is_open {
            sort(&mut members, by, reverse);
            out.extend(members.into_iter().cloned().map(CpuRow::Cpu));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fig(cpu: u32, irq: f64) -> CpuFigures {
        CpuFigures {
            cpu: CpuId(cpu),
            irq_per_sec: irq,
            arch_per_sec: 0.0,
            hardirq_pct: Some(irq / 100.0),
            softirq_pct: None,
        }
    }

    #[test]
    fn folding_by_node_sums_and_opens() {
        let figs: Vec<CpuFigures> = (0..4).map(|c| fig(c, f64::from(c) * 100.0)).collect();
        let meta: BTreeMap<CpuId, CpuMeta> = (0..4)
            .map(|c| {
                (
                    CpuId(c),
                    CpuMeta {
                        node: Some(NodeId(c / 2)),
                        package: Some(0),
                        isolated: c == 3,
                        housekeeping: c != 3,
                    },
                )
            })
            .collect();
        let mut open = BTreeSet::new();
        let r = rows(&figs, &meta, None, Fold::Node, &open, CpuSort::Irq, false);
        assert_eq!(r.len(), 2);
        match &r[1] {
            CpuRow::Group {
                name,
                irq_per_sec,
                isolated,
                hardirq_max,
                ..
            } => {
                assert_eq!(name, "node1");
                assert_eq!(*irq_per_sec, 500.0);
                assert_eq!(*isolated, 1);
                assert_eq!(*hardirq_max, Some(3.0));
            }
            CpuRow::Cpu(_) => panic!("a group"),
        }
        open.insert("node1".to_string());
        let r = rows(&figs, &meta, None, Fold::Node, &open, CpuSort::Irq, false);
        assert_eq!(r.len(), 4);
        assert_eq!(r[2], CpuRow::Cpu(fig(3, 300.0)));
        // A CPU filter keeps only its CPUs, in every fold.
        let only = CpuSet::parse_list("1").unwrap_or_default();
        let r = rows(
            &figs,
            &meta,
            Some(&only),
            Fold::None,
            &open,
            CpuSort::Cpu,
            false,
        );
        assert_eq!(r, vec![CpuRow::Cpu(fig(1, 100.0))]);
    }
}
