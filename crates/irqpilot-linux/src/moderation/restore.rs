//! The old values kept in [`Outcome::old`] for moderation actions, and the action that puts an
//! old value back (what `irqpilot revert` applies, newest change first).
//!
//! | action | `old` text | example |
//! |---|---|---|
//! | `SetCoalesce` | all six coalescing fields as they were, in `ethtool -C` syntax | `rx-usecs 8 rx-frames 32 tx-usecs 8 tx-frames 32 adaptive-rx on adaptive-tx off` |
//! | `SetNvmeCoalescing` | feature 08h CDW11 as `nvme set-feature -v` takes it | `0x0a03` |
//! | `SetNvmeVectorCoalescing` | feature 09h CDW11 (vector and CD) | `0x10005` |
//! | `SetSoftModeration` | the parameter's value | `100` |
//! | `SetIrqSoftModeration` | the per-IRQ file as read | `off` |

use super::nvme::{IrqCoalescing, IrqVectorConfig};
use super::soft::parse_irq_flag;
use crate::error::ParseError;
use irqpilot_core::{Action, ApplyError, CoalesceParams, Outcome};

/// `ethtool -C` syntax for the fields `p` names, in a fixed order.
pub fn render_coalesce_params(p: &CoalesceParams) -> String {
    p.describe()
}

/// Parses [`render_coalesce_params`]' output (any order; each name at most once).
pub fn parse_coalesce_params(text: &str) -> Result<CoalesceParams, ParseError> {
    let mut p = CoalesceParams::default();
    let mut words = text.split_whitespace();
    while let Some(name) = words.next() {
        let Some(val) = words.next() else {
            return Err(ParseError::new(1, format!("{name}: missing value")));
        };
        let num = || -> Result<u32, ParseError> {
            val.parse()
                .map_err(|_| ParseError::new(1, format!("{name}: not a number: {val:?}")))
        };
        let flag = || -> Result<bool, ParseError> {
            match val {
                "on" => Ok(true),
                "off" => Ok(false),
                _ => Err(ParseError::new(1, format!("{name}: not on/off: {val:?}"))),
            }
        };
        let slot_was_set = match name {
            "rx-usecs" => p.rx_usecs.replace(num()?).is_some(),
            "rx-frames" => p.rx_max_frames.replace(num()?).is_some(),
            "tx-usecs" => p.tx_usecs.replace(num()?).is_some(),
            "tx-frames" => p.tx_max_frames.replace(num()?).is_some(),
            "adaptive-rx" => p.use_adaptive_rx.replace(flag()?).is_some(),
            "adaptive-tx" => p.use_adaptive_tx.replace(flag()?).is_some(),
            _ => return Err(ParseError::new(1, format!("unknown field {name:?}"))),
        };
        if slot_was_set {
            return Err(ParseError::new(1, format!("{name} given twice")));
        }
    }
    Ok(p)
}

/// A CDW11 value as `nvme set-feature -v` takes it (`0x0a03`).
pub fn render_cdw11(v: u32) -> String {
    format!("{v:#06x}")
}

/// Parses [`render_cdw11`]' output (hex with `0x`, or decimal).
pub fn parse_cdw11(text: &str) -> Result<u32, ParseError> {
    let t = text.trim();
    let parsed = match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        Some(hex) => u32::from_str_radix(hex, 16),
        None => t.parse(),
    };
    parsed.map_err(|_| ParseError::new(1, format!("not a CDW11 value: {t:?}")))
}

/// Whether an outcome changed the machine (a refused write changed nothing, but a write the
/// kernel took differently did).
fn changed(o: &Outcome) -> bool {
    matches!(o.result, Ok(true) | Err(ApplyError::NotTaken { .. }))
}

/// The action that restores what `outcome` replaced: `Ok(None)` when it changed nothing, kept no
/// old value, or is not a moderation action (affinity is restored by the affinity journal).
pub fn restore_action(outcome: &Outcome) -> Result<Option<Action>, ParseError> {
    let (true, Some(old)) = (changed(outcome), outcome.old.as_deref()) else {
        return Ok(None);
    };
    restore_for(&outcome.action, old)
}

/// The action that sets `action`'s knob back to `old` (as [`super::apply`] reports old values
/// and [`super::apply::read_current`] reads them); `Ok(None)` for actions that are not about
/// moderation. Only the knob's identity is taken from `action` (device and queue, controller,
/// vector, parameter, IRQ), never its new value.
pub fn restore_for(action: &Action, old: &str) -> Result<Option<Action>, ParseError> {
    let action = match action {
        Action::SetCoalesce { device, queue, .. } => Action::SetCoalesce {
            device: device.clone(),
            queue: *queue,
            params: parse_coalesce_params(old)?,
        },
        Action::SetNvmeCoalescing { controller, .. } => {
            let v = IrqCoalescing::from_cdw11(parse_cdw11(old)?);
            Action::SetNvmeCoalescing {
                controller: controller.clone(),
                time_100us: v.time_100us,
                threshold: v.threshold,
            }
        }
        Action::SetNvmeVectorCoalescing { controller, .. } => {
            let v = IrqVectorConfig::from_cdw11(parse_cdw11(old)?);
            Action::SetNvmeVectorCoalescing {
                controller: controller.clone(),
                vector: v.vector,
                disable: v.coalescing_disabled,
            }
        }
        Action::SetSoftModeration { param, .. } => Action::SetSoftModeration {
            param: param.clone(),
            value: old
                .trim()
                .parse()
                .map_err(|_| ParseError::new(1, format!("{param}: not a number: {old:?}")))?,
        },
        Action::SetIrqSoftModeration { irq, .. } => Action::SetIrqSoftModeration {
            irq: *irq,
            enabled: parse_irq_flag(old)?,
        },
        Action::SetAffinity { .. }
        | Action::SetDefaultAffinity { .. }
        | Action::SetChannels { .. } => {
            return Ok(None);
        }
    };
    Ok(Some(action))
}

#[cfg(test)]
mod tests {
    use super::*;
    use irqpilot_core::IrqNum;

    #[test]
    fn coalesce_params_round_trip() {
        let p = CoalesceParams {
            rx_usecs: Some(8),
            rx_max_frames: Some(32),
            tx_usecs: None,
            tx_max_frames: Some(0),
            use_adaptive_rx: Some(true),
            use_adaptive_tx: Some(false),
        };
        let s = render_coalesce_params(&p);
        assert_eq!(
            s,
            "rx-usecs 8 rx-frames 32 tx-frames 0 adaptive-rx on adaptive-tx off"
        );
        assert_eq!(parse_coalesce_params(&s), Ok(p));
        assert_eq!(render_coalesce_params(&CoalesceParams::default()), "");
        assert_eq!(parse_coalesce_params(""), Ok(CoalesceParams::default()));
        for bad in [
            "rx-usecs",
            "rx-usecs x",
            "adaptive-rx yes",
            "rx-usecs 1 rx-usecs 2",
            "foo 1",
        ] {
            assert!(parse_coalesce_params(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn cdw11_text() {
        assert_eq!(render_cdw11(0x0a03), "0x0a03");
        assert_eq!(render_cdw11(0x10005), "0x10005");
        assert_eq!(parse_cdw11("0x0a03"), Ok(0x0a03));
        assert_eq!(parse_cdw11("2563"), Ok(0x0a03));
        assert!(parse_cdw11("0xzz").is_err());
    }

    fn outcome(action: Action, old: &str, result: Result<bool, ApplyError>) -> Outcome {
        Outcome {
            action,
            old: Some(old.into()),
            result,
        }
    }

    #[test]
    fn restores_each_moderation_action() {
        let o = outcome(
            Action::SetCoalesce {
                device: "eth1".into(),
                queue: Some(3),
                params: CoalesceParams {
                    rx_usecs: Some(50),
                    ..Default::default()
                },
            },
            "rx-usecs 8",
            Ok(true),
        );
        assert_eq!(
            restore_action(&o),
            Ok(Some(Action::SetCoalesce {
                device: "eth1".into(),
                queue: Some(3),
                params: CoalesceParams {
                    rx_usecs: Some(8),
                    ..Default::default()
                },
            }))
        );
        let o = outcome(
            Action::SetNvmeCoalescing {
                controller: "nvme0".into(),
                time_100us: 1,
                threshold: 8,
            },
            "0x0a03",
            Ok(true),
        );
        assert_eq!(
            restore_action(&o),
            Ok(Some(Action::SetNvmeCoalescing {
                controller: "nvme0".into(),
                time_100us: 10,
                threshold: 4
            }))
        );
        let o = outcome(
            Action::SetNvmeVectorCoalescing {
                controller: "nvme0".into(),
                vector: 5,
                disable: false,
            },
            "0x10005",
            Ok(true),
        );
        assert_eq!(
            restore_action(&o),
            Ok(Some(Action::SetNvmeVectorCoalescing {
                controller: "nvme0".into(),
                vector: 5,
                disable: true
            }))
        );
        let o = outcome(
            Action::SetSoftModeration {
                param: "delay_us".into(),
                value: 50,
            },
            "100",
            Err(ApplyError::NotTaken {
                readback: "40".into(),
            }),
        );
        assert_eq!(
            restore_action(&o),
            Ok(Some(Action::SetSoftModeration {
                param: "delay_us".into(),
                value: 100
            }))
        );
        let o = outcome(
            Action::SetIrqSoftModeration {
                irq: IrqNum(45),
                enabled: true,
            },
            "off",
            Ok(true),
        );
        assert_eq!(
            restore_action(&o),
            Ok(Some(Action::SetIrqSoftModeration {
                irq: IrqNum(45),
                enabled: false
            }))
        );
    }

    #[test]
    fn nothing_to_restore() {
        let a = Action::SetSoftModeration {
            param: "delay_us".into(),
            value: 50,
        };
        assert_eq!(
            restore_action(&outcome(a.clone(), "50", Ok(false))),
            Ok(None)
        );
        assert_eq!(
            restore_action(&outcome(a.clone(), "50", Err(ApplyError::Invalid))),
            Ok(None)
        );
        let no_old = Outcome {
            action: a.clone(),
            old: None,
            result: Ok(true),
        };
        assert_eq!(restore_action(&no_old), Ok(None));
        assert!(restore_action(&outcome(a, "fifty", Ok(true))).is_err());
        let aff = Action::SetDefaultAffinity {
            cpus: irqpilot_core::CpuSet::default(),
        };
        assert_eq!(restore_action(&outcome(aff, "3", Ok(true))), Ok(None));
    }
}
