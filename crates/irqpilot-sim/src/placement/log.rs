//! What placement did during a run, counted for the report.

use irqpilot_core::{Action, ApplyError, ApplyReport, CpuSet, IrqNum};
use std::collections::BTreeMap;

/// A stable name for a refusal, as counted in [`crate::report::PlacementReport::refused`].
pub fn refusal_name(e: &ApplyError) -> &'static str {
    e.kind_name()
}

/// Counts what placement did, for the report.
#[derive(Clone, Debug, Default)]
pub(crate) struct PlacementLog {
    pub rounds: u64,
    pub writes: u64,
    pub refused: BTreeMap<String, u64>,
    /// IRQs whose affinity writes were refused with ENOSPC.
    pub enospc_irqs: Vec<IrqNum>,
    /// Channel counts set, by interface.
    pub channels: BTreeMap<String, u32>,
}

impl PlacementLog {
    /// Records the affinity outcomes of one applied plan.
    pub(crate) fn record(&mut self, report: &ApplyReport) {
        let mut any = false;
        for o in &report.outcomes {
            if let (
                Action::SetChannels {
                    device,
                    combined: Some(n),
                    ..
                },
                Ok(true),
            ) = (&o.action, &o.result)
            {
                self.channels.insert(device.clone(), *n);
            }
            let Action::SetAffinity { irq, .. } = &o.action else {
                continue;
            };
            any = true;
            match &o.result {
                Ok(true) => self.writes += 1,
                Ok(false) => {}
                Err(e) => {
                    *self.refused.entry(refusal_name(e).into()).or_default() += 1;
                    if *e == ApplyError::NoVectorSpace && !self.enospc_irqs.contains(irq) {
                        self.enospc_irqs.push(*irq);
                    }
                }
            }
        }
        if any {
            self.rounds += 1;
        }
    }

    /// Records affinity writes made by an outside tool through the exported tree.
    pub(crate) fn record_outside(&mut self, writes: &[crate::export::OutsideWrite]) {
        if writes.is_empty() {
            return;
        }
        let outcomes = writes
            .iter()
            .filter_map(|w| {
                let irq = w
                    .file
                    .strip_prefix("proc/irq/")?
                    .split('/')
                    .next()?
                    .parse()
                    .ok()?;
                Some(irqpilot_core::Outcome {
                    action: Action::SetAffinity {
                        irq: IrqNum(irq),
                        cpus: CpuSet::new(),
                    },
                    old: None,
                    result: w.result.clone(),
                })
            })
            .collect();
        self.record(&ApplyReport { outcomes });
    }
}
