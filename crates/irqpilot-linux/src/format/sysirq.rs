//! `/sys/kernel/irq/N/*` (`kernel/irq/irqdesc.c`, `CONFIG_SPARSE_IRQ`), and the one fact irqpilot
//! takes from debugfs `/sys/kernel/debug/irq/irqs/N` (`kernel/irq/debugfs.c`).
//!
//! | file | kernel print | model |
//! |---|---|---|
//! | `chip_name` | `%s\n`; empty file when the chip has no name | `Option<String>` |
//! | `hwirq` | `%lu\n`; empty file when the IRQ has no domain | `Option<u64>` |
//! | `type` | `edge\n` or `level\n` | [`Trigger`] |
//! | `name` | flow handler name `%s\n` (`edge`, `fasteoi`); empty file when unset | `Option<String>` |
//! | `actions` | names joined by `,`, then `\n`; an empty file (no `\n`) without actions | `Vec<String>` |
//! | `per_cpu_count` | `%u` per *possible* CPU joined by `,`, then `\n` | `Vec<u64>` |
//! | `wakeup` | `enabled\n` or `disabled\n` | `bool` |
//!
//! Action names may hold spaces (`PCIe PME`) but the kernel joins them with a bare `,`, so a name
//! that itself holds a comma cannot be told apart; none is known.

use crate::error::ParseError;
use crate::format::value;
use irqpilot_core::Trigger;

/// Interrupt chip name.
pub const CHIP_NAME: &str = "chip_name";
/// Hardware IRQ number in the chip's domain.
pub const HWIRQ: &str = "hwirq";
/// Trigger type.
pub const TYPE: &str = "type";
/// Flow handler name.
pub const NAME: &str = "name";
/// Action names.
pub const ACTIONS: &str = "actions";
/// Per possible CPU counts.
pub const PER_CPU_COUNT: &str = "per_cpu_count";
/// Wakeup state.
pub const WAKEUP: &str = "wakeup";

fn render_optional_word(word: Option<&str>) -> String {
    word.map(|w| format!("{w}\n")).unwrap_or_default()
}

/// Parses `chip_name`; `None` for an empty file.
pub fn parse_chip_name(text: &str) -> Result<Option<String>, ParseError> {
    Ok(value::parse_word(text)?.map(str::to_string))
}

/// Renders `chip_name` (empty file for `None`).
pub fn render_chip_name(chip: Option<&str>) -> String {
    render_optional_word(chip)
}

/// Parses `hwirq`; `None` for an empty file (no IRQ domain).
pub fn parse_hwirq(text: &str) -> Result<Option<u64>, ParseError> {
    match value::parse_word(text)? {
        None => Ok(None),
        Some(_) => value::parse_unsigned(text).map(Some),
    }
}

/// Renders `hwirq` (empty file for `None`).
pub fn render_hwirq(hwirq: Option<u64>) -> String {
    hwirq.map(|h| format!("{h}\n")).unwrap_or_default()
}

/// Parses `type`.
pub fn parse_type(text: &str) -> Result<Trigger, ParseError> {
    match value::one_line(text)? {
        "edge" => Ok(Trigger::Edge),
        "level" => Ok(Trigger::Level),
        other => Err(ParseError::new(
            1,
            format!("unknown trigger type {other:?} (want edge or level)"),
        )),
    }
}

/// Renders `type`.
pub fn render_type(trigger: Trigger) -> String {
    match trigger {
        Trigger::Edge => "edge\n",
        Trigger::Level => "level\n",
    }
    .to_string()
}

/// Parses `name` (the flow handler); `None` for an empty file.
pub fn parse_handler_name(text: &str) -> Result<Option<String>, ParseError> {
    Ok(value::parse_word(text)?.map(str::to_string))
}

/// Renders `name` (empty file for `None`).
pub fn render_handler_name(name: Option<&str>) -> String {
    render_optional_word(name)
}

/// Parses `actions`; an empty file is no action.
pub fn parse_actions(text: &str) -> Result<Vec<String>, ParseError> {
    let line = value::one_line(text)?;
    if line.is_empty() {
        return Ok(Vec::new());
    }
    let names: Vec<String> = line.split(',').map(str::to_string).collect();
    if let Some(i) = names.iter().position(String::is_empty) {
        return Err(ParseError::new(
            1,
            format!("empty action name at position {} in {line:?}", i + 1),
        ));
    }
    Ok(names)
}

/// Renders `actions`: names joined by `,` and `\n`, or an empty file (the kernel prints no
/// newline when there is no action).
pub fn render_actions(actions: &[String]) -> String {
    if actions.is_empty() {
        return String::new();
    }
    let mut s = actions.join(",");
    s.push('\n');
    s
}

/// Parses `per_cpu_count`: one count per possible CPU, in CPU order.
pub fn parse_per_cpu_count(text: &str) -> Result<Vec<u64>, ParseError> {
    let line = value::one_line(text)?;
    if line.is_empty() {
        return Ok(Vec::new());
    }
    line.split(',')
        .enumerate()
        .map(|(i, tok)| {
            if tok.is_empty() || !tok.bytes().all(|b| b.is_ascii_digit()) {
                return Err(ParseError::new(
                    1,
                    format!("count {} is not a number: {tok:?}", i + 1),
                ));
            }
            tok.parse()
                .map_err(|_| ParseError::new(1, format!("count {} out of range: {tok:?}", i + 1)))
        })
        .collect()
}

/// Renders `per_cpu_count`.
pub fn render_per_cpu_count(counts: &[u64]) -> String {
    let mut s = String::with_capacity(counts.len() * 4);
    for (i, c) in counts.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        s.push_str(&c.to_string());
    }
    s.push('\n');
    s
}

/// Parses `wakeup`: whether the IRQ may wake the system.
pub fn parse_wakeup(text: &str) -> Result<bool, ParseError> {
    match value::one_line(text)? {
        "enabled" => Ok(true),
        "disabled" => Ok(false),
        other => Err(ParseError::new(
            1,
            format!("unknown wakeup state {other:?} (want enabled or disabled)"),
        )),
    }
}

/// Renders `wakeup`.
pub fn render_wakeup(enabled: bool) -> String {
    if enabled { "enabled\n" } else { "disabled\n" }.to_string()
}

/// The `IRQD_*` state names debugfs lists under `dstate:` for one IRQ
/// (`/sys/kernel/debug/irq/irqs/N`, root only, `CONFIG_GENERIC_IRQ_DEBUGFS`).
///
/// The kernel prints `dstate:   0x%08x` and then one indented line per set bit, by name:
///
/// ```text
/// dstate:   0x31600200
///             IRQD_ACTIVATED
///             IRQD_IRQ_STARTED
///             IRQD_AFFINITY_MANAGED
/// node:     0
/// ```
///
/// Names rather than the hex value are used because bit positions change between kernels. This
/// is an extraction, not a full parser: the rest of the file (handler, domain hierarchy, vector
/// state) is not modelled, so there is no renderer.
pub fn parse_debugfs_dstate(text: &str) -> Result<Vec<String>, ParseError> {
    let mut lines = text.lines().enumerate();
    let Some((start, header)) = lines.find(|(_, l)| l.starts_with("dstate:")) else {
        return Err(ParseError::new(0, "no `dstate:` line"));
    };
    let hex = header["dstate:".len()..].trim();
    let digits = hex.strip_prefix("0x").unwrap_or("");
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(ParseError::new(
            start + 1,
            format!("bad dstate value {hex:?}"),
        ));
    }
    let mut names = Vec::new();
    for (_, line) in lines {
        // State names are indented; the next `key:` line starts in column 0.
        if !line.starts_with(' ') {
            break;
        }
        let name = line.trim();
        if name.starts_with("IRQD_") {
            names.push(name.to_string());
        }
    }
    Ok(names)
}

/// Whether debugfs state names mark the IRQ's affinity as kernel-managed.
pub fn dstate_is_managed(names: &[String]) -> bool {
    names.iter().any(|n| n == "IRQD_AFFINITY_MANAGED")
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn real_files() {
        // /sys/kernel/irq/27 on a Firecracker guest: an allocated IO-APIC line with no action.
        assert_eq!(parse_chip_name("IO-APIC\n"), Ok(Some("IO-APIC".into())));
        assert_eq!(parse_hwirq("1\n"), Ok(Some(1)));
        assert_eq!(parse_type("edge\n"), Ok(Trigger::Edge));
        assert_eq!(parse_handler_name("edge\n"), Ok(Some("edge".into())));
        assert_eq!(parse_actions(""), Ok(vec![]));
        assert_eq!(render_actions(&[]), "");
        assert_eq!(parse_per_cpu_count("0,0\n"), Ok(vec![0, 0]));
        assert_eq!(parse_wakeup("disabled\n"), Ok(false));
        assert_eq!(
            parse_chip_name("PCI-MSIX-0000:00:01.0\n"),
            Ok(Some("PCI-MSIX-0000:00:01.0".into()))
        );
    }

    #[test]
    fn empty_means_unknown() {
        assert_eq!(parse_chip_name(""), Ok(None));
        assert_eq!(parse_hwirq(""), Ok(None));
        assert_eq!(parse_handler_name(""), Ok(None));
        assert_eq!(render_hwirq(None), "");
        assert_eq!(render_chip_name(None), "");
        assert_eq!(render_handler_name(None), "");
    }

    #[test]
    fn actions_with_spaces_and_sharing() {
        let a = parse_actions("PCIe PME,aerdrv\n").unwrap();
        assert_eq!(a, vec!["PCIe PME".to_string(), "aerdrv".to_string()]);
        assert_eq!(render_actions(&a), "PCIe PME,aerdrv\n");
        assert!(parse_actions("a,,b\n").is_err());
        assert!(parse_actions("a\nb\n").is_err());
    }

    #[test]
    fn malformed() {
        assert!(parse_type("rising\n").is_err());
        assert!(parse_wakeup("on\n").is_err());
        assert!(parse_hwirq("0x10\n").is_err());
        let e = parse_per_cpu_count("1,x\n").unwrap_err();
        assert!(e.message.contains("count 2"), "{e}");
        assert!(parse_per_cpu_count("1,\n").is_err());
    }

    #[test]
    fn debugfs_managed() {
        let text = "handler:  handle_edge_irq\n\
                    device:   0000:00:02.0\n\
                    status:   0x00000000\n\
                    istate:   0x00000000\n\
                    ddepth:   0\n\
                    wdepth:   0\n\
                    dstate:   0x31600200\n\
                    \x20           IRQD_ACTIVATED\n\
                    \x20           IRQD_IRQ_STARTED\n\
                    \x20           IRQD_SINGLE_TARGET\n\
                    \x20           IRQD_AFFINITY_SET\n\
                    \x20           IRQD_AFFINITY_MANAGED\n\
                    node:     0\n\
                    affinity: 1\n\
                    effectiv: 1\n\
                    domain:  PCI-MSIX-0000:00:02.0-12\n\
                    \x20hwirq:   0x1\n";
        let names = parse_debugfs_dstate(text).unwrap();
        assert_eq!(names.len(), 5);
        assert!(dstate_is_managed(&names));
        let plain = text.replace("            IRQD_AFFINITY_MANAGED\n", "");
        assert!(!dstate_is_managed(&parse_debugfs_dstate(&plain).unwrap()));
        assert_eq!(parse_debugfs_dstate("handler: x\n").unwrap_err().line, 0);
        assert_eq!(
            parse_debugfs_dstate("a: 1\ndstate:   zz\n")
                .unwrap_err()
                .line,
            2
        );
    }

    proptest! {
        #[test]
        fn per_cpu_count_round_trip(counts in proptest::collection::vec(0u64..u32::MAX as u64, 1..300)) {
            let text = render_per_cpu_count(&counts);
            prop_assert_eq!(parse_per_cpu_count(&text), Ok(counts));
        }

        #[test]
        fn actions_round_trip(names in proptest::collection::vec("[a-zA-Z0-9_.:@ -]{1,20}", 0..5)) {
            let text = render_actions(&names);
            prop_assert_eq!(parse_actions(&text), Ok(names));
        }

        #[test]
        fn words_round_trip(hwirq in proptest::option::of(any::<u64>()), edge in any::<bool>(), wake in any::<bool>()) {
            prop_assert_eq!(parse_hwirq(&render_hwirq(hwirq)), Ok(hwirq));
            let t = if edge { Trigger::Edge } else { Trigger::Level };
            prop_assert_eq!(parse_type(&render_type(t)), Ok(t));
            prop_assert_eq!(parse_wakeup(&render_wakeup(wake)), Ok(wake));
        }

        #[test]
        fn never_panics(text in "\\PC*") {
            let _ = parse_actions(&text);
            let _ = parse_per_cpu_count(&text);
            let _ = parse_debugfs_dstate(&text);
            let _ = parse_hwirq(&text);
        }
    }
}
