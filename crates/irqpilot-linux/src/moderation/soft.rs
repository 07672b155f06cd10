//! The kernel's software interrupt moderation (GSIM, Luigi Rizzo's patches; not merged as of the
//! v4 posting of 2026-01-15), where a kernel carries it. Three procfs layouts exist:
//!
//! | layout | global parameters | per IRQ |
//! |---|---|---|
//! | v1-v3 | one file `/proc/irq/soft_moderation`: read = per-CPU stats table, then `name   value` lines; write `name=value` | `/proc/irq/N/soft_moderation` |
//! | v4 | directory `/proc/irq/soft_moderation/`: one file per parameter (read and write a plain number) and `stats` | `/proc/irq/N/soft_moderation` |
//! | later respin | directory `/proc/irq/sw_moderation/`, same files | `/proc/irq/N/allow_sw_moderation` |
//!
//! Per-IRQ files read `on`/`off` and take a kernel bool (`1`/`0`); enabling an IRQ the mechanism
//! cannot moderate (level-triggered, multi-target, slow-bus chip, other flow handler) fails with
//! EOPNOTSUPP. Global writes of an unknown name or a malformed number fail with EINVAL; v1-v4
//! clamp out-of-range values silently (the later respin answers ERANGE), so values are checked
//! against the kernel's ranges here before writing, and every write is read back. Sources:
//! `shared/research/moderation.md` sections 1.4-1.6 and the patches' `kernel/irq/irq_moderation.c`.

use crate::error::ParseError;
use crate::format::value;
use crate::root::Root;
use irqpilot_core::moderation::knobs::{SoftModeration, SoftModerationForm};
use irqpilot_core::{GapReason, IrqNum};
use std::collections::BTreeMap;
use std::ops::RangeInclusive;

/// Where one kernel keeps its soft-moderation files.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SoftLayout {
    /// Single file or directory.
    pub form: SoftModerationForm,
    /// The file or directory, relative to the root.
    pub path: &'static str,
    /// Name of the per-IRQ file under `proc/irq/N/`.
    pub irq_file: &'static str,
}

/// v1-v3: `/proc/irq/soft_moderation` is a file.
pub const SINGLE_FILE: SoftLayout = SoftLayout {
    form: SoftModerationForm::SingleFile,
    path: "proc/irq/soft_moderation",
    irq_file: "soft_moderation",
};
/// v4: `/proc/irq/soft_moderation/` is a directory.
pub const DIRECTORY: SoftLayout = SoftLayout {
    form: SoftModerationForm::Directory,
    path: "proc/irq/soft_moderation",
    irq_file: "soft_moderation",
};
/// The later respin: `/proc/irq/sw_moderation/` and `allow_sw_moderation`.
pub const SW_DIRECTORY: SoftLayout = SoftLayout {
    form: SoftModerationForm::Directory,
    path: "proc/irq/sw_moderation",
    irq_file: "allow_sw_moderation",
};

/// Global parameters the patches define (v1/v2 spell the rate `target_irq_rate`). Other lines
/// of the v1-v3 read-out (statistics, `enabled`, `enable_list`) stay out of the model.
pub const PARAMS: &[&str] = &[
    "delay_us",
    "target_intr_rate",
    "target_irq_rate",
    "hardirq_percent",
    "update_ms",
    "scale_cpus",
    "increase_factor",
    "timer_rounds",
    "decay_factor",
    "grow_factor",
];

/// The range the kernel accepts for a parameter (v3/v4 `param_names[]`), when known.
pub fn param_range(name: &str) -> Option<RangeInclusive<u64>> {
    Some(match name {
        "delay_us" => 0..=500,
        "target_intr_rate" | "target_irq_rate" => 0..=50_000_000,
        "hardirq_percent" => 0..=100,
        "update_ms" => 1..=100,
        "scale_cpus" => 50..=1000,
        "increase_factor" => 8..=128,
        _ => return None,
    })
}

/// The other spelling of a parameter across versions.
pub fn alias(name: &str) -> Option<&'static str> {
    match name {
        "target_intr_rate" => Some("target_irq_rate"),
        "target_irq_rate" => Some("target_intr_rate"),
        _ => None,
    }
}

/// Which layout the kernel under `root` uses; `Ok(None)` without soft moderation.
pub fn detect(root: &Root) -> Result<Option<SoftLayout>, GapReason> {
    for (path, dir_layout, file_layout) in [
        (DIRECTORY.path, DIRECTORY, Some(SINGLE_FILE)),
        (SW_DIRECTORY.path, SW_DIRECTORY, None),
    ] {
        match std::fs::metadata(root.join(path)) {
            Ok(m) if m.is_dir() => return Ok(Some(dir_layout)),
            Ok(_) => return Ok(file_layout),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
                return Err(GapReason::PermissionDenied);
            }
            Err(e) => return Err(GapReason::Unparsable(format!("{path}: {e}"))),
        }
    }
    Ok(None)
}

/// A parameter name as the patches spell them: lower case and `_`, at most 32 bytes (the v1-v3
/// write buffer holds 39 bytes of `name=value`).
pub fn is_param_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 32
        && name.bytes().all(|b| b.is_ascii_lowercase() || b == b'_')
        && name != "stats"
}

/// Parses the v1-v3 read-out: keeps `name value` (also `name=value`, `name: value`) lines whose
/// name is in [`PARAMS`] and whose value is one unsigned number; skips everything else (the
/// per-CPU table, statistics, `enabled yes`, `enable_list '...'`, blank lines).
pub fn parse_single_file(text: &str) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let line = line.trim();
        let split = line
            .split_once('=')
            .or_else(|| line.split_once(':'))
            .or_else(|| line.split_once(char::is_whitespace));
        let Some((name, rest)) = split else {
            continue;
        };
        let (name, rest) = (name.trim(), rest.trim());
        if !PARAMS.contains(&name) || rest.is_empty() || !rest.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        if let Ok(v) = rest.parse() {
            out.insert(name.to_string(), v);
        }
    }
    out
}

/// `(path, text)` of the write that sets `name` to `value`: `name=value\n` into the single file,
/// or `value\n` into the parameter's own file.
pub fn render_param_write(layout: &SoftLayout, name: &str, value: u64) -> (String, String) {
    match layout.form {
        SoftModerationForm::SingleFile => (layout.path.to_string(), format!("{name}={value}\n")),
        SoftModerationForm::Directory => (format!("{}/{name}", layout.path), format!("{value}\n")),
    }
}

/// `proc/irq/N/<irq_file>`.
pub fn irq_flag_path(layout: &SoftLayout, irq: IrqNum) -> String {
    format!("proc/irq/{irq}/{}", layout.irq_file)
}

/// Parses a per-IRQ file: the kernel prints `on`/`off`; any `kstrtobool` spelling is accepted.
pub fn parse_irq_flag(text: &str) -> Result<bool, ParseError> {
    let line = value::one_line(text)?.trim();
    match line.to_ascii_lowercase().as_str() {
        "on" | "1" | "y" | "yes" | "true" => Ok(true),
        "off" | "0" | "n" | "no" | "false" => Ok(false),
        _ => Err(ParseError::new(1, format!("not on/off: {line:?}"))),
    }
}

/// The per-IRQ write: `1\n` or `0\n`.
pub fn render_irq_flag(enabled: bool) -> &'static str {
    if enabled { "1\n" } else { "0\n" }
}

/// Reads the current global parameters of `layout`.
pub fn read_params(root: &Root, layout: &SoftLayout) -> Result<BTreeMap<String, u64>, GapReason> {
    let read = |rel: &str| -> Result<Option<String>, GapReason> {
        root.read_optional(rel).map_err(|r| match r {
            GapReason::Unparsable(m) => GapReason::Unparsable(format!("{rel}: {m}")),
            other => other,
        })
    };
    match layout.form {
        SoftModerationForm::SingleFile => match read(layout.path)? {
            Some(text) => Ok(parse_single_file(&text)),
            None => Err(GapReason::Missing),
        },
        SoftModerationForm::Directory => {
            let names = root.list_dir(layout.path)?.ok_or(GapReason::Missing)?;
            let mut out = BTreeMap::new();
            for name in names.iter().filter(|n| is_param_name(n)) {
                let rel = format!("{}/{name}", layout.path);
                // A write-only entry answers EINVAL or EACCES on read: not a parameter to model.
                let Ok(Some(text)) = read(&rel) else {
                    continue;
                };
                match value::parse_unsigned(text.trim_end()) {
                    Ok(v) => {
                        out.insert(name.clone(), v);
                    }
                    Err(e) => {
                        return Err(GapReason::Unparsable(format!(
                            "{rel}:{}: {}",
                            e.line, e.message
                        )));
                    }
                }
            }
            Ok(out)
        }
    }
}

/// The kernel's soft moderation under `root`: `Ok(None)` when the kernel has none.
pub fn read_soft(root: &Root) -> Result<Option<SoftModeration>, GapReason> {
    let Some(layout) = detect(root)? else {
        return Ok(None);
    };
    Ok(Some(SoftModeration {
        form: layout.form,
        params: read_params(root, &layout)?,
    }))
}

#[cfg(test)]
pub(crate) mod tests;
