//! The descriptor at the end of a numbered `/proc/interrupts` row: chip, hardware IRQ, trigger,
//! flow handler and action names.
//!
//! What the kernel prints after the counts changed over the years, and the layout of one row
//! alone can be ambiguous (`sep4020 Timer Tick` is one action in 2.6.16, but would be a chip and
//! an action in a later layout), so [`parse_descs`] infers the layout once for the whole file
//! ([`infer_layout`]) and then reads each tail with [`parse_tail`]:
//!
//! * [`TailLayout::ActionsOnly`]: very old ARM (2.6.16): no chip column, the text is the action
//!   list (`   sep4020 Timer Tick`).
//! * [`TailLayout::FusedChipHandler`]: 2.6.x to 3.x: `" %8s-%-8s"` chip and flow-handler name
//!   fused into one token (`IR-IO-APIC-edge`, `PCI-MSI-edge`, `DMAR_MSI-edge`, Xen's
//!   `xen-pirq-ioapic-level`, `xen-percpu-virq`, `xen-dyn-event`), then the actions.
//! * [`TailLayout::Columns`]: everything since irq domains, and the architecture variants: the
//!   chip (`IO-APIC`, `IR-PCI-MSIX-0000:01:00.0`, `GICv3`, s390's `PCI-MSI`, Android's `-`), the
//!   hwirq when the IRQ has a domain (`%*lu`), ARM's `Level`/`Edge` column
//!   (`CONFIG_GENERIC_IRQ_SHOW_LEVEL`), `-handler` when the descriptor has a name (joined to the
//!   hwirq: `5-edge`; alone after a blank hwirq: `-event`), then the actions.
//!
//! Actions are separated by `", "` (an action name may contain spaces: `ib_mthca (comp)`). Fields
//! a layout does not print stay `None`: nothing is guessed (a `fasteoi` handler says nothing about
//! the trigger).
//!
//! [`kernel_tail`] goes the other way, printing a tail in kernel 6.x's layout for fixtures and the
//! simulator's exported tree.

use irqpilot_core::{InterruptTable, Irq, IrqNum, Trigger};

/// The parsed descriptor of one numbered row.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IrqDesc {
    /// Interrupt chip name (`IR-PCI-MSIX-0000:01:00.0`, `IO-APIC`, `GICv3`, `-` when the chip
    /// has no name). `None` when the layout has no chip column.
    pub chip: Option<String>,
    /// Hardware IRQ number in the chip's domain, when printed.
    pub hwirq: Option<u64>,
    /// Trigger, from ARM's `Level`/`Edge` column or an `edge`/`level` handler name.
    pub trigger: Option<Trigger>,
    /// Descriptor name, normally the flow handler (`edge`, `fasteoi`); Xen uses it for the event
    /// channel kind (`event`, `virq`, `ioapic-level`).
    pub handler: Option<String>,
    /// Action names in registration order; empty when the IRQ has no action.
    pub actions: Vec<String>,
}

impl IrqDesc {
    /// An [`Irq`] with the fields `/proc/interrupts` tells (the rest stay unknown).
    pub fn into_irq(self, irq: IrqNum) -> Irq {
        let mut out = Irq::new(irq);
        out.chip = self.chip;
        out.hwirq = self.hwirq;
        out.trigger = self.trigger;
        out.handler = self.handler;
        out.actions = self.actions;
        out
    }
}

/// How the tails of one file are laid out (see the module documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TailLayout {
    /// No chip column: the tail is the action list (Linux 2.6.16 ARM).
    ActionsOnly,
    /// Chip and handler fused into one token, `chip-handler` (2.6.x to 3.x).
    FusedChipHandler,
    /// Chip, optional hwirq, optional `Level`/`Edge`, optional `-handler`, actions.
    Columns,
}

/// Handler names the kernel joined to the chip in the fused layout (`IO-APIC-fasteoi`): the flow
/// handlers' names, i8259's `XT`, and the names Xen gives its event channels. Longest first, so
/// `xen-pirq-ioapic-level` splits as `xen-pirq` + `ioapic-level`. Case matters: `PCI-MSI` is a
/// chip, not `PCI` + `MSI`.
const FUSED_HANDLERS: &[&str] = &[
    "ioapic-level",
    "ioapic-edge",
    "percpu_devid",
    "edge_eoi",
    "fasteoi",
    "lateeoi",
    "percpu",
    "simple",
    "nested",
    "level",
    "event",
    "msi-x",
    "edge",
    "virq",
    "eoi",
    "ipi",
    "msi",
    "XT",
];

/// Splits `tok` into text before the first space and the rest.
fn split_token(s: &str) -> (&str, &str) {
    match s.find([' ', '\t']) {
        Some(n) => (&s[..n], &s[n..]),
        None => (s, ""),
    }
}

fn trim_spaces(s: &str) -> &str {
    s.trim_matches([' ', '\t'])
}

/// A chip-handler token split at a known handler name, e.g. `IR-IO-APIC-edge`.
fn split_fused(token: &str) -> Option<(&str, &str)> {
    FUSED_HANDLERS.iter().find_map(|h| {
        let chip = token.strip_suffix(h)?.strip_suffix('-')?;
        (!chip.is_empty()).then_some((chip, *h))
    })
}

/// `27` -> hwirq 27; `5-edge` -> hwirq 5 and handler `edge`; anything else -> `None`.
fn split_hwirq(token: &str) -> Option<(u64, Option<&str>)> {
    let digits = token.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 {
        return None;
    }
    let hwirq = token[..digits].parse().ok()?;
    match &token[digits..] {
        "" => Some((hwirq, None)),
        rest => {
            let handler = rest.strip_prefix('-').filter(|h| !h.is_empty())?;
            Some((hwirq, Some(handler)))
        }
    }
}

fn parse_trigger(column: &str) -> Option<Trigger> {
    match column {
        "Edge" => Some(Trigger::Edge),
        "Level" => Some(Trigger::Level),
        _ => None,
    }
}

/// The trigger a handler name implies: only `edge`/`level` (and Xen's `ioapic-edge`/`-level`)
/// do; `fasteoi`, `percpu`, ... may be either.
fn handler_trigger(handler: &str) -> Option<Trigger> {
    match handler {
        "edge" | "ioapic-edge" => Some(Trigger::Edge),
        "level" | "ioapic-level" => Some(Trigger::Level),
        _ => None,
    }
}

/// Actions: `", "`-separated names.
fn split_actions(s: &str) -> Vec<String> {
    let s = trim_spaces(s);
    if s.is_empty() {
        return Vec::new();
    }
    s.split(", ").map(str::to_string).collect()
}

/// Infers the layout of a file from the tails of its numbered rows.
///
/// `ActionsOnly` when every tail is the kernel's `"   name"` (three spaces, then text with no
/// column padding in it or after it); `FusedChipHandler` when more rows have a `chip-handler`
/// token and no column after it than rows with a hwirq, `Level`/`Edge` or `-handler` column;
/// otherwise `Columns`.
pub fn infer_layout<'a>(tails: impl IntoIterator<Item = &'a str>) -> TailLayout {
    let (mut rows, mut actions_only) = (0usize, true);
    let (mut fused, mut columns) = (0usize, 0usize);
    for tail in tails {
        rows += 1;
        let body = tail.trim_start_matches(' ');
        let indent = tail.len() - body.len();
        if indent != 3 || body.is_empty() || body.contains("  ") || body.ends_with([' ', '\t']) {
            actions_only = false;
        }
        let (first, rest) = split_token(trim_spaces(tail));
        let (second, _) = split_token(rest.trim_start_matches([' ', '\t']));
        if split_hwirq(second).is_some()
            || parse_trigger(second).is_some()
            || (second.len() > 1 && second.starts_with('-'))
        {
            columns += 1;
        } else if split_fused(first).is_some() {
            fused += 1;
        }
    }
    if rows > 0 && actions_only {
        TailLayout::ActionsOnly
    } else if fused > columns {
        TailLayout::FusedChipHandler
    } else {
        TailLayout::Columns
    }
}

/// Parses one numbered row's tail (the text after its last count) in a known layout.
pub fn parse_tail(tail: &str, layout: TailLayout) -> IrqDesc {
    let mut desc = IrqDesc::default();
    let body = tail.trim_start_matches([' ', '\t']);
    match layout {
        TailLayout::ActionsOnly => desc.actions = split_actions(body),
        TailLayout::FusedChipHandler => {
            let (token, rest) = split_token(body);
            if token.is_empty() {
                return desc;
            }
            match split_fused(token) {
                Some((chip, handler)) => {
                    desc.chip = Some(chip.to_string());
                    desc.trigger = handler_trigger(handler);
                    desc.handler = Some(handler.to_string());
                }
                None => desc.chip = Some(token.to_string()),
            }
            desc.actions = split_actions(rest);
        }
        TailLayout::Columns => {
            let (chip, mut rest) = split_token(body);
            if chip.is_empty() {
                return desc;
            }
            desc.chip = Some(chip.to_string());
            let mut handler = None;
            let (token, after) = split_token(rest.trim_start_matches([' ', '\t']));
            if let Some((hwirq, h)) = split_hwirq(token) {
                desc.hwirq = Some(hwirq);
                handler = h;
                rest = after;
            }
            if handler.is_none() {
                let (token, after) = split_token(rest.trim_start_matches([' ', '\t']));
                if let Some(t) = parse_trigger(token) {
                    desc.trigger = Some(t);
                    rest = after;
                }
                let (token, after) = split_token(rest.trim_start_matches([' ', '\t']));
                if let Some(h) = token.strip_prefix('-').filter(|h| !h.is_empty()) {
                    handler = Some(h);
                    rest = after;
                }
            }
            if let Some(h) = handler {
                desc.trigger = desc.trigger.or(handler_trigger(h));
                desc.handler = Some(h.to_string());
            }
            desc.actions = split_actions(rest);
        }
    }
    desc
}

/// One descriptor per row of `table` (`None` for named rows), with the layout inferred once
/// from all numbered rows.
pub fn parse_descs(table: &InterruptTable) -> Vec<Option<IrqDesc>> {
    let rows = table.rows();
    let layout = infer_layout(
        rows.iter()
            .filter(|r| r.label.irq().is_some())
            .map(|r| r.tail.as_str()),
    );
    rows.iter()
        .map(|r| r.label.irq().map(|_| parse_tail(&r.tail, layout)))
        .collect()
}

/// The tail kernel 6.x prints after a numbered row's last count: a space, the chip as `%8s`,
/// the hwirq as ` %*lu` in `prec` columns (blank when the IRQ has no domain), `-%-8s` with the
/// handler name when the descriptor has one, then `  first` and `, next` per action.
///
/// `prec` is the IRQ label width ([`InterruptTable::kernel_prec`]).
pub fn kernel_tail(
    chip: &str,
    hwirq: Option<u64>,
    prec: usize,
    handler: Option<&str>,
    actions: &[&str],
) -> String {
    let mut s = format!(" {chip:>8} ");
    match hwirq {
        Some(h) => s.push_str(&format!("{h:>prec$}")),
        None => s.push_str(&" ".repeat(prec)),
    }
    if let Some(h) = handler {
        s.push_str(&format!("-{h:<8}"));
    }
    for (i, a) in actions.iter().enumerate() {
        s.push_str(if i == 0 { "  " } else { ", " });
        s.push_str(a);
    }
    s
}

#[cfg(test)]
mod tests;
