//! Carrying out the moderation actions of a plan, one at a time: read the old value (kept in the
//! outcome in the form [`super::restore`] turns back into an action), write only when it
//! differs, read back to verify. A refusal is that action's outcome; the caller goes on with
//! the next one.

use super::ethtool::MAX_NUM_QUEUE;
use super::ethtool_io::{
    CoalesceScope, get_coalesce, is_interface_name, read_coalesce, set_coalesce,
};
use super::nvme::{
    IrqCoalescing, IrqVectorConfig, NvmeFailure, get_irq_coalescing, get_vector_config,
    set_irq_coalescing, set_vector_config,
};
use super::nvme_dev::is_controller_name;
use super::restore::{render_cdw11, render_coalesce_params};
use super::{ModerationIo, errno_apply_error, soft, write_once};
use crate::root::Root;
use irqpilot_core::{Action, ApplyError, CoalesceParams, IrqNum};

/// The old value (when it could be read) and the result, as in [`irqpilot_core::Outcome`].
pub type Applied = (Option<String>, Result<bool, ApplyError>);

/// Applies one moderation action; `None` for actions that are not about moderation.
pub fn apply_moderation(root: &Root, io: &mut ModerationIo, action: &Action) -> Option<Applied> {
    Some(match action {
        Action::SetCoalesce {
            device,
            queue,
            params,
        } => set_nic_coalesce(io, device, *queue, params),
        Action::SetNvmeCoalescing {
            controller,
            time_100us,
            threshold,
        } => set_nvme_coalescing(
            io,
            controller,
            IrqCoalescing {
                time_100us: *time_100us,
                threshold: *threshold,
            },
        ),
        Action::SetNvmeVectorCoalescing {
            controller,
            vector,
            disable,
        } => set_nvme_vector(
            io,
            controller,
            IrqVectorConfig {
                vector: *vector,
                coalescing_disabled: *disable,
            },
        ),
        Action::SetSoftModeration { param, value } => set_soft_param(root, param, *value),
        Action::SetIrqSoftModeration { irq, enabled } => set_irq_soft(root, *irq, *enabled),
        Action::SetAffinity { .. }
        | Action::SetDefaultAffinity { .. }
        | Action::SetChannels { .. } => {
            return None;
        }
    })
}

/// The value `action` would replace, read without changing anything, in the form its outcome's
/// `old` takes: for journals that record before writing. `None` for actions that are not about
/// moderation, and where the value cannot be read (no live interface under this root, no NVMe
/// device node, no GSIM, no privilege).
pub fn read_current(root: &Root, io: &mut ModerationIo, action: &Action) -> Option<String> {
    match action {
        Action::SetCoalesce { device, queue, .. } => {
            let eth = io.ethtool.as_deref_mut()?;
            if !is_interface_name(device) {
                return None;
            }
            let (_, c) = read_coalesce(eth, device, *queue).ok()?;
            Some(render_coalesce_params(&c.project(&ALL_COALESCE_FIELDS)))
        }
        Action::SetNvmeCoalescing { controller, .. } => {
            let c = get_irq_coalescing(io.nvme.as_mut(), controller).ok()?;
            c.cdw11().map(render_cdw11)
        }
        Action::SetNvmeVectorCoalescing {
            controller, vector, ..
        } => {
            let v = get_vector_config(io.nvme.as_mut(), controller, *vector).ok()?;
            Some(render_cdw11(v.cdw11()))
        }
        Action::SetSoftModeration { param, .. } => {
            let layout = soft::detect(root).ok()??;
            let params = soft::read_params(root, &layout).ok()?;
            let value = params
                .get(param.as_str())
                .or_else(|| soft::alias(param).and_then(|a| params.get(a)))?;
            Some(value.to_string())
        }
        Action::SetIrqSoftModeration { irq, .. } => {
            let layout = soft::detect(root).ok()??;
            let text = root
                .read_optional(&soft::irq_flag_path(&layout, *irq))
                .ok()??;
            Some(text.trim_end().to_string())
        }
        Action::SetAffinity { .. }
        | Action::SetDefaultAffinity { .. }
        | Action::SetChannels { .. } => None,
    }
}

/// Every field a [`CoalesceParams`] can name: the old value of a coalescing change records all
/// of them, so whatever a later action changes on the same knob, the first record restores it.
pub const ALL_COALESCE_FIELDS: CoalesceParams = CoalesceParams {
    rx_usecs: Some(0),
    rx_max_frames: Some(0),
    tx_usecs: Some(0),
    tx_max_frames: Some(0),
    use_adaptive_rx: Some(false),
    use_adaptive_tx: Some(false),
};

/// NIC coalescing, read-modify-write, on the queue's own setting or (when the driver has no
/// per-queue coalescing) the device-wide one. The old value lists all six fields.
pub fn set_nic_coalesce(
    io: &mut ModerationIo,
    device: &str,
    queue: Option<u32>,
    params: &CoalesceParams,
) -> Applied {
    let Some(eth) = io.ethtool.as_deref_mut() else {
        tracing::warn!(
            device,
            "network interfaces are not reachable under this root"
        );
        return (None, Err(ApplyError::Unsupported));
    };
    if !is_interface_name(device) || queue.is_some_and(|q| q >= MAX_NUM_QUEUE) {
        return (None, Err(ApplyError::Invalid));
    }
    let (scope, cur) = match read_coalesce(eth, device, queue) {
        Ok(x) => x,
        Err(e) => {
            tracing::warn!(device, error = %e, "cannot read coalescing");
            return (None, Err(e.apply_error()));
        }
    };
    let old = Some(render_coalesce_params(&cur.project(&ALL_COALESCE_FIELDS)));
    if cur.satisfies(params) {
        return (old, Ok(false));
    }
    if queue.is_some() && scope == CoalesceScope::Device {
        tracing::info!(
            device,
            "driver has no per-queue coalescing: setting it device-wide"
        );
    }
    // The kernel refuses a whole set (EOPNOTSUPP) when a member the driver lacks is non-zero:
    // e1000, igb, ice and i40e have no frame counts, e1000 no tx-usecs. The delay is what
    // matters, so the fields paired with it are dropped until the driver takes the rest.
    let mut written = params.clone();
    loop {
        match set_coalesce(eth, device, scope, &cur.with(&written)) {
            Ok(()) => break,
            Err(e) => match fewer_fields(&written).filter(|_| e.is_unsupported()) {
                Some(next) => {
                    tracing::info!(device, error = %e, "retrying without the fields the driver lacks");
                    written = next;
                }
                None => {
                    tracing::warn!(device, error = %e, "coalescing refused");
                    return (old, Err(e.apply_error()));
                }
            },
        }
    }
    if written != *params {
        tracing::info!(
            device,
            set = render_coalesce_params(&written).as_str(),
            "the driver has no knob for the other fields asked for"
        );
    }
    let result = match get_coalesce(eth, device, scope) {
        Ok(back) if back.satisfies(&written) => Ok(true),
        Ok(back) => Err(ApplyError::NotTaken {
            readback: render_coalesce_params(&back.project(&written)),
        }),
        Err(e) => Err(e.apply_error()),
    };
    (old, result)
}

/// `params` with fewer fields after an EOPNOTSUPP: first without the frame counts, then
/// without `tx-usecs` too. `None` when nothing is left to drop (`rx-usecs` and the adaptive
/// switches, which an off value never trips).
fn fewer_fields(params: &CoalesceParams) -> Option<CoalesceParams> {
    params.rx_usecs?;
    if params.rx_max_frames.is_some() || params.tx_max_frames.is_some() {
        return Some(CoalesceParams {
            rx_max_frames: None,
            tx_max_frames: None,
            ..params.clone()
        });
    }
    params.tx_usecs.map(|_| CoalesceParams {
        tx_usecs: None,
        ..params.clone()
    })
}

/// NVMe refusals; a missing device node (fixture roots) is "unsupported here".
fn nvme_refusal(e: &super::NvmeError) -> ApplyError {
    tracing::warn!(controller = e.controller.as_str(), error = %e, "NVMe feature refused");
    match &e.failure {
        NvmeFailure::Os(os) if os.raw_os_error() == Some(libc::ENOENT) => ApplyError::Unsupported,
        _ => e.apply_error(),
    }
}

/// Feature 08h.
pub fn set_nvme_coalescing(
    io: &mut ModerationIo,
    controller: &str,
    want: IrqCoalescing,
) -> Applied {
    if !is_controller_name(controller) || want.cdw11().is_none() {
        return (None, Err(ApplyError::Invalid));
    }
    let nvme = io.nvme.as_mut();
    let cur = match get_irq_coalescing(nvme, controller) {
        Ok(c) => c,
        Err(e) => return (None, Err(nvme_refusal(&e))),
    };
    let old = cur.cdw11().map(render_cdw11);
    if cur == want {
        return (old, Ok(false));
    }
    if let Err(e) = set_irq_coalescing(nvme, controller, want) {
        return (old, Err(nvme_refusal(&e)));
    }
    let result = match get_irq_coalescing(nvme, controller) {
        Ok(back) if back == want => Ok(true),
        Ok(back) => Err(ApplyError::NotTaken {
            readback: back.cdw11().map(render_cdw11).unwrap_or_default(),
        }),
        Err(e) => Err(nvme_refusal(&e)),
    };
    (old, result)
}

/// Feature 09h for one vector.
pub fn set_nvme_vector(io: &mut ModerationIo, controller: &str, want: IrqVectorConfig) -> Applied {
    if !is_controller_name(controller) {
        return (None, Err(ApplyError::Invalid));
    }
    let nvme = io.nvme.as_mut();
    let cur = match get_vector_config(nvme, controller, want.vector) {
        Ok(c) => c,
        Err(e) => return (None, Err(nvme_refusal(&e))),
    };
    let old = Some(render_cdw11(cur.cdw11()));
    if cur == want {
        return (old, Ok(false));
    }
    if let Err(e) = set_vector_config(nvme, controller, want) {
        return (old, Err(nvme_refusal(&e)));
    }
    let result = match get_vector_config(nvme, controller, want.vector) {
        Ok(back) if back == want => Ok(true),
        Ok(back) => Err(ApplyError::NotTaken {
            readback: render_cdw11(back.cdw11()),
        }),
        Err(e) => Err(nvme_refusal(&e)),
    };
    (old, result)
}

fn layout(root: &Root) -> Result<soft::SoftLayout, ApplyError> {
    match soft::detect(root) {
        Ok(Some(l)) => Ok(l),
        Ok(None) => {
            tracing::warn!(root = %root.dir().display(), "the kernel has no soft interrupt moderation");
            Err(ApplyError::Unsupported)
        }
        Err(irqpilot_core::GapReason::PermissionDenied) => Err(ApplyError::PermissionDenied),
        Err(reason) => Err(ApplyError::Other {
            message: format!(
                "{}: {}",
                soft::DIRECTORY.path,
                match reason {
                    irqpilot_core::GapReason::Unparsable(why) => why,
                    _ => "unreadable".to_string(),
                }
            ),
        }),
    }
}

fn gap_refusal(reason: irqpilot_core::GapReason) -> ApplyError {
    match reason {
        irqpilot_core::GapReason::Missing => ApplyError::Unsupported,
        irqpilot_core::GapReason::PermissionDenied => ApplyError::PermissionDenied,
        irqpilot_core::GapReason::Unparsable(message) => ApplyError::Other { message },
    }
}

/// A global GSIM parameter.
pub fn set_soft_param(root: &Root, param: &str, value: u64) -> Applied {
    let layout = match layout(root) {
        Ok(l) => l,
        Err(e) => return (None, Err(e)),
    };
    if !soft::is_param_name(param) {
        return (None, Err(ApplyError::Invalid));
    }
    if soft::param_range(param).is_some_and(|r| !r.contains(&value)) {
        tracing::warn!(
            param,
            value,
            "outside the kernel's range (it would clamp it)"
        );
        return (None, Err(ApplyError::Invalid));
    }
    let params = match soft::read_params(root, &layout) {
        Ok(p) => p,
        Err(reason) => return (None, Err(gap_refusal(reason))),
    };
    // v1/v2 spell the rate target_irq_rate.
    let name = match soft::alias(param) {
        Some(a) if !params.contains_key(param) && params.contains_key(a) => a,
        _ => param,
    };
    let Some(&cur) = params.get(name) else {
        tracing::warn!(
            param,
            "parameter not offered by this kernel's soft moderation"
        );
        return (None, Err(ApplyError::Unsupported));
    };
    let old = Some(cur.to_string());
    if cur == value {
        return (old, Ok(false));
    }
    let (rel, text) = soft::render_param_write(&layout, name, value);
    let path = root.join(&rel);
    if let Err(e) = write_once(&path, &text) {
        let what = format!("{}: {e}", path.display());
        tracing::warn!(param = name, error = what.as_str(), "write refused");
        return (old, Err(errno_apply_error(&e, &what)));
    }
    let result = match soft::read_params(root, &layout) {
        Ok(p) if p.get(name) == Some(&value) => Ok(true),
        Ok(p) => Err(ApplyError::NotTaken {
            readback: p.get(name).map(u64::to_string).unwrap_or_default(),
        }),
        Err(reason) => Err(gap_refusal(reason)),
    };
    (old, result)
}

/// GSIM on one IRQ.
pub fn set_irq_soft(root: &Root, irq: IrqNum, enabled: bool) -> Applied {
    let layout = match layout(root) {
        Ok(l) => l,
        Err(e) => return (None, Err(e)),
    };
    let rel = soft::irq_flag_path(&layout, irq);
    let old_text = match root.read_optional(&rel) {
        Ok(Some(t)) => t,
        Ok(None) => {
            // The IRQ is gone, or (later respin) has no file because it cannot be moderated.
            let gone = !root.join(&format!("proc/irq/{irq}")).exists();
            return (
                None,
                Err(if gone {
                    ApplyError::Vanished
                } else {
                    ApplyError::Unsupported
                }),
            );
        }
        Err(reason) => return (None, Err(gap_refusal(reason))),
    };
    let old = Some(old_text.trim_end().to_string());
    match soft::parse_irq_flag(&old_text) {
        Ok(cur) if cur == enabled => return (old, Ok(false)),
        Ok(_) => {}
        Err(e) => {
            return (
                old,
                Err(ApplyError::Other {
                    message: format!("{rel}: {e}"),
                }),
            );
        }
    }
    let path = root.join(&rel);
    if let Err(e) = write_once(&path, soft::render_irq_flag(enabled)) {
        let what = format!("{}: {e}", path.display());
        tracing::warn!(
            irq = irq.0,
            error = what.as_str(),
            "soft moderation refused"
        );
        return (old, Err(errno_apply_error(&e, &what)));
    }
    let result = match root.read_optional(&rel) {
        Ok(Some(t)) if soft::parse_irq_flag(&t) == Ok(enabled) => Ok(true),
        Ok(t) => Err(ApplyError::NotTaken {
            readback: t.unwrap_or_default().trim_end().to_string(),
        }),
        Err(reason) => Err(gap_refusal(reason)),
    };
    (old, result)
}

#[cfg(test)]
mod tests;
