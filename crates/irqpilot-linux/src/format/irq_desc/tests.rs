//! Unit tests of the descriptor parser: every layout of the corpus, and `kernel_tail` against
//! lines real kernels printed.

use super::*;
use crate::format::interrupts::{parse_interrupts, render_interrupts};
use irqpilot_core::{RowLabel, Trigger};

fn desc(
    chip: Option<&str>,
    hwirq: Option<u64>,
    trigger: Option<Trigger>,
    handler: Option<&str>,
    actions: &[&str],
) -> IrqDesc {
    IrqDesc {
        chip: chip.map(str::to_string),
        hwirq,
        trigger,
        handler: handler.map(str::to_string),
        actions: actions.iter().map(|a| a.to_string()).collect(),
    }
}

fn columns(tail: &str) -> IrqDesc {
    parse_tail(tail, TailLayout::Columns)
}

fn fused(tail: &str) -> IrqDesc {
    parse_tail(tail, TailLayout::FusedChipHandler)
}

const EDGE: Option<Trigger> = Some(Trigger::Edge);
const LEVEL: Option<Trigger> = Some(Trigger::Level);

#[test]
fn modern_x86_per_device_msi_domains() {
    assert_eq!(
        columns("  IR-PCI-MSIX-0000:01:00.0   16-edge      nvme0q16"),
        desc(
            Some("IR-PCI-MSIX-0000:01:00.0"),
            Some(16),
            EDGE,
            Some("edge"),
            &["nvme0q16"]
        )
    );
    assert_eq!(
        columns(" PCI-MSIX-0000:00:01.0   0-edge      virtio0-config"),
        desc(
            Some("PCI-MSIX-0000:00:01.0"),
            Some(0),
            EDGE,
            Some("edge"),
            &["virtio0-config"]
        )
    );
    assert_eq!(
        columns("  IR-IO-APIC  113-fasteoi   ELAN901C:00"),
        desc(
            Some("IR-IO-APIC"),
            Some(113),
            None,
            Some("fasteoi"),
            &["ELAN901C:00"]
        )
    );
}

#[test]
fn kernel_4x_chip_hwirq_handler() {
    assert_eq!(
        columns("  IR-PCI-MSI 512000-edge      ahci[0000:00:1f.2]"),
        desc(
            Some("IR-PCI-MSI"),
            Some(512000),
            EDGE,
            Some("edge"),
            &["ahci[0000:00:1f.2]"]
        )
    );
    assert_eq!(
        columns("   IO-APIC   9-fasteoi   acpi"),
        desc(Some("IO-APIC"), Some(9), None, Some("fasteoi"), &["acpi"])
    );
    assert_eq!(
        columns("  DMAR-MSI   0-edge      dmar0").chip.as_deref(),
        Some("DMAR-MSI")
    );
}

#[test]
fn fused_chip_handler_of_old_kernels() {
    let cases = [
        (
            "  IR-IO-APIC-edge      timer",
            "IR-IO-APIC",
            "edge",
            EDGE,
            "timer",
        ),
        ("   PCI-MSI-edge      eth1", "PCI-MSI", "edge", EDGE, "eth1"),
        (
            "   IO-APIC-fasteoi   acpi",
            "IO-APIC",
            "fasteoi",
            None,
            "acpi",
        ),
        (
            "  DMAR_MSI-edge      dmar0",
            "DMAR_MSI",
            "edge",
            EDGE,
            "dmar0",
        ),
        (
            "  xen-pirq-ioapic-level  uhci_hcd:usb1",
            "xen-pirq",
            "ioapic-level",
            LEVEL,
            "uhci_hcd:usb1",
        ),
        (
            "  xen-pirq-ioapic-edge  i8042",
            "xen-pirq",
            "ioapic-edge",
            EDGE,
            "i8042",
        ),
        (
            "  xen-percpu-virq      timer0",
            "xen-percpu",
            "virq",
            None,
            "timer0",
        ),
        (
            "  xen-percpu-ipi       resched0",
            "xen-percpu",
            "ipi",
            None,
            "resched0",
        ),
        (
            "   xen-dyn-event     xenbus",
            "xen-dyn",
            "event",
            None,
            "xenbus",
        ),
    ];
    for (tail, chip, handler, trigger, action) in cases {
        assert_eq!(
            fused(tail),
            desc(Some(chip), None, trigger, Some(handler), &[action]),
            "{tail}"
        );
    }
}

#[test]
fn fused_without_action_or_handler() {
    // 13-16: IRQ 3 has no action, only the handler padding.
    assert_eq!(
        fused("   IO-APIC-edge    "),
        desc(Some("IO-APIC"), None, EDGE, Some("edge"), &[])
    );
    // A chip whose descriptor has no name stays whole: `PCI-MSI` is not `PCI` + `MSI`.
    assert_eq!(
        fused("   PCI-MSI  foo"),
        desc(Some("PCI-MSI"), None, None, None, &["foo"])
    );
}

#[test]
fn arm_level_edge_column() {
    assert_eq!(
        columns("     GICv3  27 Level     arch_timer"),
        desc(Some("GICv3"), Some(27), LEVEL, None, &["arch_timer"])
    );
    assert_eq!(
        columns("   ITS-MSI 65536 Edge      nvme0q0"),
        desc(Some("ITS-MSI"), Some(65536), EDGE, None, &["nvme0q0"])
    );
    assert_eq!(
        columns("  ARMCTRL-level  35 Edge      timer"),
        desc(Some("ARMCTRL-level"), Some(35), EDGE, None, &["timer"])
    );
    assert_eq!(
        columns("  ARMH0061:00   3 Edge      ACPI:Event"),
        desc(Some("ARMH0061:00"), Some(3), EDGE, None, &["ACPI:Event"])
    );
}

#[test]
fn hwirq_without_trigger_or_handler() {
    // 20: the GPIO chip prints no handler name after the hwirq.
    assert_eq!(
        columns("  intel-gpio  139  ELAN06DA:00"),
        desc(Some("intel-gpio"), Some(139), None, None, &["ELAN06DA:00"])
    );
}

#[test]
fn s390_chip_and_action_only() {
    assert_eq!(
        columns("   PCI-MSI  mlx5_comp0@pci:0002:00:00.0"),
        desc(
            Some("PCI-MSI"),
            None,
            None,
            None,
            &["mlx5_comp0@pci:0002:00:00.0"]
        )
    );
    // An action named by a PCI address starts with digits but is no hwirq.
    assert_eq!(
        columns("   PCI-MSI  0000:00:00.0").actions,
        vec!["0000:00:00.0".to_string()]
    );
}

#[test]
fn android_nameless_chip() {
    assert_eq!(
        columns("         -  timer"),
        desc(Some("-"), None, None, None, &["timer"])
    );
    assert_eq!(
        columns("         -  mt_emi_mpu, spc, mt6577_devapc").actions,
        vec!["mt_emi_mpu", "spc", "mt6577_devapc"]
    );
}

#[test]
fn xen_arm64_blank_hwirq_trigger_and_handler() {
    assert_eq!(
        columns("   xen-dyn     Edge    -event     xenbus"),
        desc(Some("xen-dyn"), None, EDGE, Some("event"), &["xenbus"])
    );
    assert_eq!(
        columns("  xen-dyn-lateeoi     Edge    -event     evtchn:xenstored"),
        desc(
            Some("xen-dyn-lateeoi"),
            None,
            EDGE,
            Some("event"),
            &["evtchn:xenstored"]
        )
    );
    assert_eq!(
        columns("  RC-Event  10 Level     NONFATAL"),
        desc(Some("RC-Event"), Some(10), LEVEL, None, &["NONFATAL"])
    );
}

#[test]
fn actions_only_layout_of_2_6_16() {
    assert_eq!(
        parse_tail("   sep4020 Timer Tick", TailLayout::ActionsOnly),
        desc(None, None, None, None, &["sep4020 Timer Tick"])
    );
}

#[test]
fn action_lists() {
    assert_eq!(
        columns("  IR-IO-APIC  16-fasteoi   ehci_hcd:usb1, mmc0").actions,
        vec!["ehci_hcd:usb1", "mmc0"]
    );
    assert_eq!(
        fused("  IR-PCI-MSI-edge      ib_mthca (comp)").actions,
        vec!["ib_mthca (comp)"]
    );
    assert_eq!(
        columns("  PCI-MSIX-0000:00:02.0   0-edge      PCIe PME, aerdrv").actions,
        vec!["PCIe PME", "aerdrv"]
    );
    assert!(columns("  IO-APIC   3-edge      ").actions.is_empty());
    assert_eq!(columns(""), IrqDesc::default());
    assert_eq!(fused("   "), IrqDesc::default());
}

#[test]
fn layout_inference() {
    let modern = ["  IO-APIC   2-edge      timer", "  PCI-MSI 1-edge      x"];
    assert_eq!(infer_layout(modern), TailLayout::Columns);
    let old = [
        "   IO-APIC-edge      timer",
        "  xen-pirq-ioapic-edge  i8042",
        "   IO-APIC-edge    ",
    ];
    assert_eq!(infer_layout(old), TailLayout::FusedChipHandler);
    let arm = [
        "  ARMCTRL-level  35 Edge      timer",
        "  ARMCTRL-level   1 Edge      x",
    ];
    assert_eq!(infer_layout(arm), TailLayout::Columns);
    let s390 = [
        "   PCI-MSI  mlx5_async@pci:0002:00:00.0",
        "   PCI-MSI  0000:00:00.0",
    ];
    assert_eq!(infer_layout(s390), TailLayout::Columns);
    let android = ["         -  debug-signal", "         -  SGX ISR"];
    assert_eq!(infer_layout(android), TailLayout::Columns);
    let sep4020 = ["   4020KEY", "   sep4020 Timer Tick", "   eth0"];
    assert_eq!(infer_layout(sep4020), TailLayout::ActionsOnly);
    // A chip column with no action looks like `   IO-APIC` but carries padding.
    assert_eq!(infer_layout(["   XT-PIC  timer"]), TailLayout::Columns);
    assert_eq!(infer_layout(std::iter::empty()), TailLayout::Columns);
}

#[test]
fn descs_follow_the_rows() {
    let text = "           CPU0\n 27:      18210   sep4020 Timer Tick\n 28:      12055   eth0\nErr:          0\n";
    let t = parse_interrupts(text).unwrap();
    let d = parse_descs(&t);
    assert_eq!(d.len(), 3);
    assert_eq!(
        d[0],
        Some(desc(None, None, None, None, &["sep4020 Timer Tick"]))
    );
    assert_eq!(d[2], None);
}

#[test]
fn into_irq_copies_the_known_fields() {
    let irq = columns("  IO-APIC   9-fasteoi   acpi").into_irq(IrqNum(9));
    assert_eq!(irq.irq, IrqNum(9));
    assert_eq!(irq.chip.as_deref(), Some("IO-APIC"));
    assert_eq!(
        (irq.hwirq, irq.handler.as_deref()),
        (Some(9), Some("fasteoi"))
    );
    assert_eq!(irq.name(), "acpi");
    assert_eq!(irq.device, None);
}

#[test]
fn kernel_tail_reproduces_kernel_6x_lines() {
    // Lines a 6.18 kernel printed.
    assert_eq!(
        kernel_tail("IO-APIC", Some(5), 3, Some("edge"), &["ACPI:Ged"]),
        "  IO-APIC   5-edge      ACPI:Ged"
    );
    assert_eq!(
        kernel_tail(
            "PCI-MSIX-0000:00:01.0",
            Some(0),
            3,
            Some("edge"),
            &["virtio0-config"]
        ),
        " PCI-MSIX-0000:00:01.0   0-edge      virtio0-config"
    );
    assert_eq!(
        kernel_tail(
            "IR-PCI-MSIX-0000:41:00.0",
            Some(100),
            4,
            Some("edge"),
            &["a", "b"]
        ),
        " IR-PCI-MSIX-0000:41:00.0  100-edge      a, b"
    );
    // No domain: a blank hwirq; no descriptor name: no `-handler`; no action: nothing more.
    assert_eq!(
        kernel_tail("xen-dyn", None, 3, Some("event"), &[]),
        "  xen-dyn    -event   "
    );
    assert_eq!(kernel_tail("-", None, 3, None, &["x"]), "        -      x");
}

#[test]
fn kernel_tail_parses_back() {
    for (chip, hwirq, handler, actions) in [
        ("IO-APIC", Some(5), Some("edge"), vec!["ACPI:Ged"]),
        ("IR-PCI-MSI", Some(67633152), Some("edge"), vec!["smartpqi"]),
        ("xen-dyn", None, Some("event"), vec!["xenbus"]),
        ("intel-gpio", Some(139), None, vec!["ELAN06DA:00"]),
        ("PCI-MSI", None, None, vec!["PCIe PME", "aerdrv"]),
        ("IO-APIC", Some(3), Some("edge"), vec![]),
    ] {
        let tail = kernel_tail(chip, hwirq, 3, handler, &actions);
        let d = columns(&tail);
        assert_eq!(d.chip.as_deref(), Some(chip), "{tail}");
        assert_eq!((d.hwirq, d.handler.as_deref()), (hwirq, handler), "{tail}");
        assert_eq!(d.actions, actions, "{tail}");
    }
}

/// Rebuilds this machine's `/proc/interrupts` from parsed descriptors with `kernel_tail` and the
/// kernel header/row helpers; the text must come back unchanged. Skipped where the file has
/// ARM's `Level`/`Edge` column, which `kernel_tail` does not print.
#[test]
fn kernel_tail_matches_the_live_file() {
    let Ok(text) = std::fs::read_to_string("/proc/interrupts") else {
        eprintln!("no /proc/interrupts here: skipped");
        return;
    };
    let live = parse_interrupts(&text).unwrap();
    let descs = parse_descs(&live);
    if descs
        .iter()
        .flatten()
        .any(|d| d.hwirq.is_some() && d.trigger.is_some() && d.handler.is_none())
    {
        eprintln!("/proc/interrupts has the Level/Edge column: skipped");
        return;
    }
    let prec = live.header.len() - live.header.trim_start().len() - 8;
    let tail_of = |d: &IrqDesc| {
        let actions: Vec<&str> = d.actions.iter().map(String::as_str).collect();
        let chip = d.chip.as_deref().unwrap_or("None");
        kernel_tail(chip, d.hwirq, prec, d.handler.as_deref(), &actions)
    };
    // Kernels before the 6.x count layout print one more space before the chip: decided by
    // any numbered row, then required of all.
    let old_layout = live.rows().iter().zip(&descs).any(|(r, d)| {
        d.as_ref()
            .is_some_and(|d| r.tail.strip_prefix(' ') == Some(tail_of(d).as_str()))
    });
    let mut rebuilt = InterruptTable::with_kernel_header(live.cpus.clone(), prec);
    rebuilt.header = live.header.clone();
    for (row, desc) in live.rows().iter().zip(&descs) {
        let counts = live.counts(row);
        match (row.label.irq(), desc) {
            (Some(n), Some(d)) => {
                let mut tail = tail_of(d);
                if old_layout {
                    tail.insert(0, ' ');
                }
                rebuilt.push_kernel_row(RowLabel::Irq(n), prec, counts, &tail);
            }
            _ => rebuilt.push_row(
                row.label.clone(),
                &row.lead,
                row.first_width,
                counts,
                &row.tail,
            ),
        }
    }
    assert_eq!(render_interrupts(&rebuilt), text);
}
