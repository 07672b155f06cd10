//! [`Sampler`]: the sampling state `watch`, `top` and `report` share. Each sample swaps two
//! reused snapshots, refills the [`Rates`] in place, refreshes the names of rows whose
//! description changed, and computes the imbalance index: max / mean of device-IRQ
//! interrupts/s over the housekeeping CPUs (all numbered IRQs when no IRQ is known to belong to
//! a device). Once warm, a sample allocates nothing.

use anyhow::Result;
use irqpilot_core::{CpuSet, InterruptTable, IrqNum, Machine, Platform, Rates, Snapshot};
use irqpilot_linux::format::irq_desc::{TailLayout, infer_layout, parse_tail};
use std::collections::{BTreeMap, BTreeSet};

/// What the sampler knows about a numbered row, refreshed only when its text after the counts
/// (chip, hwirq, actions) changes.
#[derive(Debug, Clone)]
pub struct RowInfo {
    tail: String,
    /// The actions, joined as `/proc/interrupts` prints them.
    pub name: String,
    /// Whether the IRQ belongs to a device (its load counts towards the imbalance).
    pub device: bool,
}

/// Snapshots, rates and what is derived from them (see the module documentation).
#[derive(Debug)]
pub struct Sampler {
    prev: Snapshot,
    cur: Snapshot,
    rates: Rates,
    primed: bool,
    start: u64,
    origin: Option<u64>,
    layout: Option<TailLayout>,
    known_devices: BTreeSet<IrqNum>,
    housekeeping: CpuSet,
    info: BTreeMap<IrqNum, RowInfo>,
    /// Per column: device-IRQ load, and whether the CPU is housekeeping.
    loads: Vec<f64>,
    hk_columns: Vec<bool>,
    hk_cpus: Vec<irqpilot_core::CpuId>,
    hk_loads: Vec<f64>,
    imbalance: Option<f64>,
}

/// Device IRQs: owned by a device or recognised as a queue, or on a PCI MSI chip.
pub fn is_device(known: bool, chip: Option<&str>) -> bool {
    known || chip.is_some_and(|c| c.contains("PCI-MSI") || c.contains("ITS-MSI"))
}

impl Sampler {
    /// A sampler for `machine` (its device IRQs and housekeeping CPUs).
    pub fn new(machine: &Machine) -> Sampler {
        let mut s = Sampler {
            prev: Snapshot::default(),
            cur: Snapshot::default(),
            rates: Rates::default(),
            primed: false,
            start: 0,
            origin: None,
            layout: None,
            known_devices: BTreeSet::new(),
            housekeeping: CpuSet::default(),
            info: BTreeMap::new(),
            loads: Vec::new(),
            hk_columns: Vec::new(),
            hk_cpus: Vec::new(),
            hk_loads: Vec::new(),
            imbalance: None,
        };
        s.set_machine(machine);
        s
    }

    /// Takes a new inventory into account (IRQs came or went, isolation changed).
    pub fn set_machine(&mut self, machine: &Machine) {
        self.known_devices = machine
            .irqs
            .values()
            .filter(|i| is_device(i.is_device(), i.chip.as_deref()))
            .map(|i| i.irq)
            .collect();
        self.housekeeping = machine.housekeeping();
        // Device flags are derived from the inventory: recompute them.
        self.info.clear();
        self.hk_cpus.clear();
    }

    /// Takes a snapshot; returns whether rates are ready (not after the first snapshot, which
    /// only sets the baseline).
    pub fn sample<P: Platform + ?Sized>(&mut self, platform: &mut P) -> Result<bool> {
        std::mem::swap(&mut self.prev, &mut self.cur);
        platform.snapshot_into(&mut self.cur)?;
        if !self.primed {
            self.primed = true;
            self.start = self.origin.unwrap_or(self.cur.taken_at.0);
            return Ok(false);
        }
        self.rates.update(&self.prev, &self.cur)?;
        self.refresh_info();
        self.imbalance = self.compute_imbalance();
        Ok(true)
    }

    /// Forgets the previous snapshot: the next sample only sets a new baseline (after a seek
    /// in a replay, or a pause).
    pub fn reset(&mut self) {
        self.primed = false;
    }

    /// Moves the origin of [`Sampler::elapsed_s`] (a replay counts from the recording's start).
    pub fn set_origin(&mut self, ns: u64) {
        self.origin = Some(ns);
        self.start = ns;
    }

    /// The latest snapshot.
    pub fn snapshot(&self) -> &Snapshot {
        &self.cur
    }

    /// Rates over the last interval.
    pub fn rates(&self) -> &Rates {
        &self.rates
    }

    /// The imbalance index of the last interval, when there is device load.
    pub fn imbalance(&self) -> Option<f64> {
        self.imbalance
    }

    /// Device-IRQ interrupts/s per CPU column of the last interval.
    pub fn device_loads(&self) -> &[f64] {
        &self.loads
    }

    /// Housekeeping CPUs of the machine.
    pub fn housekeeping(&self) -> &CpuSet {
        &self.housekeeping
    }

    /// What is known about a numbered row.
    pub fn info(&self, irq: IrqNum) -> Option<&RowInfo> {
        self.info.get(&irq)
    }

    /// Seconds from the origin to the latest snapshot.
    pub fn elapsed_s(&self) -> f64 {
        self.cur.taken_at.0 as f64 / 1e9 - self.start as f64 / 1e9
    }

    /// Name of row `i` of the latest snapshot: its actions, or a named row's description.
    pub fn name(&self, i: usize) -> &str {
        let t: &InterruptTable = &self.cur.interrupts;
        let Some(row) = t.rows().get(i) else {
            return "";
        };
        match row.label.irq() {
            Some(n) => self.info.get(&n).map_or("", |x| x.name.as_str()),
            None => row.desc(),
        }
    }

    /// Whether row `i` of the latest snapshot is a device IRQ.
    pub fn is_device_row(&self, i: usize) -> bool {
        self.cur
            .interrupts
            .rows()
            .get(i)
            .and_then(|r| r.label.irq())
            .and_then(|n| self.info.get(&n))
            .is_some_and(|x| x.device)
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

    fn compute_imbalance(&mut self) -> Option<f64> {
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
}
