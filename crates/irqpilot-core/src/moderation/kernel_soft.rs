//! Configuring the kernel's own software interrupt moderation (GSIM) where the kernel carries it.
//!
//! The GSIM-like targets of `[moderation]` ([`GlobalModerationConfig`]: `delay_us`, the latency
//! ceiling, `target_intr_rate`, `hardirq_percent`) are GSIM's own parameter names; on a kernel that has
//! GSIM ([`ModerationInventory::soft`] is present) this policy writes them into the kernel and
//! enables GSIM on each device IRQ that offers it ([`Knob::Soft`]). The kernel's per-CPU loops
//! then do the moderation; [`super::global::GlobalModerator`] leaves those IRQs alone.
//!
//! Values are clamped to the kernel's ranges (v3/v4 `param_names[]`: `delay_us` 0-500,
//! `target_intr_rate` 0-50,000,000, `hardirq_percent` 0-100). Pure and sticky: once the
//! inventory shows the values, the plan is empty. It never disables GSIM on an IRQ someone
//! enabled.
//!
//! [`ModerationInventory::soft`]: super::knobs::ModerationInventory::soft

use super::global::GlobalModerationConfig;
use super::knobs::Knob;
use crate::plan::{Action, Plan};
use crate::policy::{Policy, PolicyInput};

/// The policy. See the module documentation.
#[derive(Clone, Debug)]
pub struct KernelSoftModeration {
    cfg: GlobalModerationConfig,
}

impl KernelSoftModeration {
    /// A policy applying these targets.
    pub fn new(cfg: GlobalModerationConfig) -> KernelSoftModeration {
        KernelSoftModeration { cfg }
    }

    /// The kernel parameters wanted, clamped to the kernel's ranges, in write order
    /// (`delay_us` last: a non-zero delay switches GSIM on, so the targets are in place first).
    pub fn wanted(&self) -> [(&'static str, u64); 3] {
        let round = |v: f64, max: u64| -> u64 {
            if v.is_finite() && v > 0.0 {
                (v.round() as u64).min(max)
            } else {
                0
            }
        };
        [
            (
                "target_intr_rate",
                round(self.cfg.target_intr_rate, 50_000_000),
            ),
            ("hardirq_percent", round(self.cfg.hardirq_percent, 100)),
            ("delay_us", u64::from(self.cfg.delay_us).min(500)),
        ]
    }
}

impl Policy for KernelSoftModeration {
    fn name(&self) -> &'static str {
        "kernel-soft-moderation"
    }

    fn decide(&mut self, input: &PolicyInput<'_>) -> Plan {
        let mut plan = Plan::default();
        let inv = &input.machine.moderation;
        let Some(soft) = &inv.soft else {
            return plan;
        };
        if !self.cfg.kernel_soft {
            plan.notes.push(
                "kernel soft moderation present but left alone (moderation.kernel_soft = false)"
                    .to_string(),
            );
            return plan;
        }
        for (name, value) in self.wanted() {
            // v1/v2 kernels spell the rate target_irq_rate; the actuator maps the name.
            let cur = soft.params.get(name).or_else(|| {
                (name == "target_intr_rate")
                    .then(|| soft.params.get("target_irq_rate"))
                    .flatten()
            });
            match cur {
                Some(&c) if c == value => {}
                Some(&c) => {
                    plan.notes.push(format!(
                        "kernel soft moderation {name}: {c} -> {value} (from [moderation])"
                    ));
                    plan.actions.push(Action::SetSoftModeration {
                        param: name.to_string(),
                        value,
                    });
                }
                None => plan
                    .notes
                    .push(format!("kernel soft moderation has no {name} parameter")),
            }
        }
        let mut enabled = 0usize;
        for (irq, knob) in &inv.knobs {
            let device = input.machine.irqs.get(irq).is_some_and(|i| i.is_device())
                && !self.cfg.excludes(input.machine, *irq, knob);
            if let (Knob::Soft { enabled: false }, true) = (knob, device) {
                plan.actions.push(Action::SetIrqSoftModeration {
                    irq: *irq,
                    enabled: true,
                });
                enabled += 1;
            }
        }
        if enabled > 0 {
            plan.notes.push(format!(
                "kernel soft moderation enabled on {enabled} device IRQ(s) that offer it"
            ));
        }
        plan
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::{IrqNum, MonoNs};
    use crate::irq::Irq;
    use crate::machine::Machine;
    use crate::moderation::knobs::{SoftModeration, SoftModerationForm};
    use crate::queue;

    fn machine(delay: u64, rate_name: &str) -> Machine {
        let mut m = Machine::default();
        let mut dev = Irq::new(IrqNum(40));
        dev.queue = queue::recognise("nvme0q1");
        m.irqs.insert(dev.irq, dev);
        m.irqs.insert(IrqNum(2), Irq::new(IrqNum(2)));
        m.moderation.soft = Some(SoftModeration {
            form: SoftModerationForm::Directory,
            params: [
                ("delay_us".to_string(), delay),
                (rate_name.to_string(), 0),
                ("hardirq_percent".to_string(), 0),
                ("update_ms".to_string(), 5),
            ]
            .into_iter()
            .collect(),
        });
        m.moderation
            .knobs
            .insert(IrqNum(40), Knob::Soft { enabled: false });
        m.moderation
            .knobs
            .insert(IrqNum(2), Knob::Soft { enabled: false });
        m
    }

    fn decide(p: &mut KernelSoftModeration, m: &Machine) -> Plan {
        p.decide(&PolicyInput {
            machine: m,
            rates: None,
            now: MonoNs(0),
        })
    }

    #[test]
    fn configures_then_holds() {
        let mut p = KernelSoftModeration::new(GlobalModerationConfig::default());
        let mut m = machine(0, "target_intr_rate");
        let plan = decide(&mut p, &m);
        assert_eq!(
            plan.actions,
            vec![
                Action::SetSoftModeration {
                    param: "target_intr_rate".into(),
                    value: 1_000_000
                },
                Action::SetSoftModeration {
                    param: "hardirq_percent".into(),
                    value: 70
                },
                Action::SetSoftModeration {
                    param: "delay_us".into(),
                    value: 250
                },
                Action::SetIrqSoftModeration {
                    irq: IrqNum(40),
                    enabled: true
                },
            ],
            "IRQ 2 is not a device IRQ"
        );
        // After applying, the inventory shows the values: nothing more to do.
        if let Some(s) = m.moderation.soft.as_mut() {
            s.params.insert("target_intr_rate".into(), 1_000_000);
            s.params.insert("hardirq_percent".into(), 70);
            s.params.insert("delay_us".into(), 250);
        }
        m.moderation
            .knobs
            .insert(IrqNum(40), Knob::Soft { enabled: true });
        assert!(decide(&mut p, &m).is_empty());
    }

    #[test]
    fn old_spelling_clamping_and_no_gsim() {
        let cfg = GlobalModerationConfig {
            delay_us: 900,
            hardirq_percent: 250.0,
            target_intr_rate: f64::NAN,
            ..Default::default()
        };
        let mut p = KernelSoftModeration::new(cfg);
        assert_eq!(
            p.wanted(),
            [
                ("target_intr_rate", 0),
                ("hardirq_percent", 100),
                ("delay_us", 500)
            ]
        );
        let m = machine(500, "target_irq_rate");
        let plan = decide(&mut p, &m);
        assert_eq!(
            plan.actions[0],
            Action::SetSoftModeration {
                param: "hardirq_percent".into(),
                value: 100
            },
            "target_irq_rate already 0, delay already 500"
        );
        let bare = Machine::default();
        assert!(decide(&mut p, &bare).is_empty());
    }

    #[test]
    fn opt_out_and_excluded_devices() {
        let m = machine(0, "target_intr_rate");
        let mut off = KernelSoftModeration::new(GlobalModerationConfig {
            kernel_soft: false,
            ..Default::default()
        });
        let plan = decide(&mut off, &m);
        assert!(plan.actions.is_empty(), "{plan:?}");
        assert!(plan.notes[0].contains("kernel_soft = false"), "{plan:?}");
        let mut excl = KernelSoftModeration::new(GlobalModerationConfig {
            exclude: vec!["nvme*".into()],
            ..Default::default()
        });
        let plan = decide(&mut excl, &m);
        assert!(
            !plan
                .actions
                .iter()
                .any(|a| matches!(a, Action::SetIrqSoftModeration { .. })),
            "nvme0's IRQ is excluded: {plan:?}"
        );
        assert_eq!(plan.actions.len(), 3, "the targets are still written");
    }
}
