//! Unit tests of the `/proc/interrupts` parser and renderer: one focused test per oddity listed in
//! the corpus index, and every error path.

use super::*;
use irqpilot_core::{CpuId, InterruptTable, IrqNum, RowLabel};

/// Parses, checks that rendering gives the text back byte for byte, returns the table.
fn exact(text: &str) -> InterruptTable {
    let t = parse_interrupts(text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert_eq!(render_interrupts(&t), text);
    t
}

fn named(s: &str) -> RowLabel {
    RowLabel::Named(s.to_string())
}

fn err(text: &str) -> crate::ParseError {
    match parse_interrupts(text) {
        Ok(t) => panic!("expected an error, parsed {t:?}"),
        Err(e) => e,
    }
}

const X86_6X: &str = "           CPU0       CPU1       
 24:          1          0  IO-APIC   5-edge      ACPI:Ged
 28:          0          0 PCI-MSIX-0000:00:01.0   0-edge      virtio0-config
NMI:          0          0   Non-maskable interrupts
ERR:          0
MIS:          0
PIN:          0          0   Posted-interrupt notification event
";

#[test]
fn kernel_6x_layout() {
    let t = exact(X86_6X);
    assert_eq!(t.cpus, vec![CpuId(0), CpuId(1)]);
    assert!(t.final_newline);
    let r = &t.rows()[0];
    assert_eq!(r.label, RowLabel::Irq(IrqNum(24)));
    assert_eq!((r.lead.as_str(), r.first_width), (" 24: ", 10));
    assert_eq!(r.tail, "  IO-APIC   5-edge      ACPI:Ged");
    assert_eq!(t.counts(r), &[1, 0]);
    assert_eq!(
        t.rows()[1].tail,
        " PCI-MSIX-0000:00:01.0   0-edge      virtio0-config"
    );
    let nmi = &t.rows()[2];
    assert_eq!(
        (nmi.label.clone(), nmi.lead.as_str()),
        (named("NMI"), "NMI: ")
    );
    assert_eq!(nmi.tail, "   Non-maskable interrupts");
}

#[test]
fn err_and_mis_carry_one_count_and_an_empty_tail() {
    let t = exact(X86_6X);
    let err_row = &t.rows()[3];
    assert_eq!(err_row.label, named("ERR"));
    assert_eq!(t.counts(err_row), &[0]);
    assert_eq!(err_row.tail, "");
    assert!(!t.is_per_cpu(err_row));
}

#[test]
fn blank_line_is_skipped() {
    // 01: an empty line between MIS and PIN; the kernel never prints one, so it cannot come back.
    let text = X86_6X.replace("MIS:          0\n", "MIS:          0\n\n");
    let t = parse_interrupts(&text).unwrap();
    assert_eq!(t, parse_interrupts(X86_6X).unwrap());
    assert_eq!(render_interrupts(&t), X86_6X);
}

#[test]
fn whitespace_only_last_line_is_skipped() {
    // 03: the last line is 78 spaces.
    let text = format!("{X86_6X}{}\n", " ".repeat(78));
    let t = parse_interrupts(&text).unwrap();
    assert_eq!(t.rows().len(), 6);
    assert!(t.final_newline);
    assert_eq!(render_interrupts(&t), X86_6X);
}

#[test]
fn final_newline_belongs_to_the_last_row_not_to_trailing_blanks() {
    // Blank trailing lines are dropped; whether the last row had its newline is what is kept.
    let t = parse_interrupts(&format!("{X86_6X}   ")).unwrap();
    assert!(t.final_newline);
    assert_eq!(render_interrupts(&t), X86_6X);
    let cut = X86_6X.trim_end_matches('\n');
    let t = parse_interrupts(cut).unwrap();
    assert!(!t.final_newline);
    assert!(parse_interrupts("      CPU0\n\n\n").unwrap().final_newline);
    assert!(!parse_interrupts("      CPU0").unwrap().final_newline);
}

#[test]
fn missing_final_newline_round_trips() {
    // 19-22: no newline at the end of the file.
    let text = X86_6X.trim_end_matches('\n');
    let t = exact(text);
    assert!(!t.final_newline);
}

#[test]
fn header_only() {
    let t = exact("           CPU0       CPU1");
    assert!(t.rows().is_empty());
    let t = exact("           CPU0\n");
    assert_eq!(t.cpus, vec![CpuId(0)]);
}

#[test]
fn rows_without_device_name() {
    // 13-16: `IO-APIC-edge` and nothing after it but the handler padding.
    let text = "           CPU0       CPU1       \n  3:          0          1   IO-APIC-edge    \n 17:          0          0   IO-APIC-fasteoi \n";
    let t = exact(text);
    assert_eq!(t.rows()[0].tail, "   IO-APIC-edge    ");
    assert_eq!(t.rows()[1].tail, "   IO-APIC-fasteoi ");
}

#[test]
fn row_without_counts() {
    // 21-23: ARM's FIQ row has no counts.
    let text = "          CPU0       \n27:     120102  ARMCTRL-level  35 Edge      timer\nFIQ:              usb_fiq\nErr:          0";
    let t = exact(text);
    let fiq = &t.rows()[1];
    assert_eq!(fiq.label, named("FIQ"));
    assert!(t.counts(fiq).is_empty());
    assert_eq!(
        (fiq.lead.as_str(), fiq.tail.as_str()),
        ("FIQ:", "              usb_fiq")
    );
    // 21: de-indented rows (`27:`) and `Err:` one column right of the others, all verbatim.
    assert_eq!(t.rows()[0].lead, "27: ");
    assert_eq!(t.rows()[2].lead, "Err: ");
    assert_eq!(t.header, "          CPU0       ");
}

#[test]
fn named_rows_may_have_more_counts_than_the_header() {
    // 23: CPUs 1-3 were unplugged; the header and numbered rows show CPU0 only, IPI rows all 4.
    let text = "           CPU0       \n 29:      85682         -  timer\nIPI1:      75373     107711      43906      30716  Rescheduling interrupts\nErr:          0\n";
    let t = exact(text);
    let ipi = &t.rows()[1];
    assert_eq!(t.counts(ipi), &[75373, 107711, 43906, 30716]);
    assert_eq!(ipi.tail, "  Rescheduling interrupts");
    assert_eq!(t.rows()[0].tail, "         -  timer");
}

#[test]
fn no_numbered_rows_and_named_rows_first() {
    // 06: header and two s390 summary rows; 05: those rows come before the numbered rows.
    let t = exact(
        "           CPU0       CPU1\nEXT:      31903      57022\nI/O:       6989      33457\n",
    );
    assert_eq!(t.rows()[1].label, named("I/O"));
    let text = "           CPU0       CPU1       \nEXT:      30368       5872 \n  3:          6          4   PCI-MSI  mlx5_async@pci:0002:00:00.0\nCMS:          0          0   [EXT] CPU-Measurement: Sampling\nC15:          0          0   [I/O] 3215\n";
    let t = exact(text);
    assert_eq!(t.rows()[0].tail, " ");
    assert_eq!(t.rows()[1].label, RowLabel::Irq(IrqNum(3)));
    assert_eq!(t.rows()[2].tail, "   [EXT] CPU-Measurement: Sampling");
    assert_eq!(t.rows()[3].label, named("C15"));
}

#[test]
fn ten_digit_count_right_after_the_colon() {
    // 03: `IPI0:2768808080`, counts near 2^32, and a header with 10 leading spaces.
    let text = "          CPU0       CPU1       \n 10: 3287008667 3310445093     GICv3  27 Level     arch_timer\nIPI0:2768808080 2844211768       Rescheduling interrupts\nIPI1: 357815098  213258177       Function call interrupts\nErr:          0\n";
    let t = exact(text);
    let ipi0 = &t.rows()[1];
    assert_eq!((ipi0.lead.as_str(), ipi0.first_width), ("IPI0:", 10));
    assert_eq!(t.counts(ipi0), &[2768808080, 2844211768]);
    assert_eq!(t.counts(&t.rows()[0]), &[3287008667, 3310445093]);
    assert_eq!(t.rows()[3].label, named("Err"));
}

#[test]
fn counts_beyond_32_bits() {
    let text = "           CPU0       CPU1\n  1: 4294967295 18446744073709551615  x\nLOC:12345678901          7  y\n";
    let t = exact(text);
    assert_eq!(t.counts(&t.rows()[0]), &[u32::MAX as u64, u64::MAX]);
    assert_eq!(t.counts(&t.rows()[1]), &[12345678901, 7]);
    assert_eq!(t.rows()[1].lead, "LOC:");
}

#[test]
fn label_widths_two_to_five() {
    // 21: `17:` (width 2), 04: `1000:` and `  NMI:` (width 5).
    let text = "             CPU0       CPU1       \n    0:         18          0  IR-IO-APIC     2-edge      timer\n 1066:          0          1  IR-PCI-MSI 102242305-edge      i40e-enp195s0f3-TxRx-0\n  NMI:          4          5   Non-maskable interrupts\n";
    let t = exact(text);
    assert_eq!(t.rows()[1].label, RowLabel::Irq(IrqNum(1066)));
    assert_eq!(t.rows()[1].lead, " 1066: ");
    assert_eq!(t.rows()[2].lead, "  NMI: ");
    let t = exact("          CPU0\n17:       3380  ARMCTRL-level   1 Edge      2000b880.mailbox\n");
    assert_eq!(t.rows()[0].lead, "17: ");
}

#[test]
fn names_with_spaces_brackets_and_commas_stay_verbatim() {
    let text = "           CPU0       \n 63:          5  IR-PCI-MSI-edge      ib_mthca (comp)\n 24:          0  PCI-MSIX-0000:00:02.0   0-edge      PCIe PME, aerdrv\n 29:          1  PCI-MSI 512000-edge      ahci[0000:00:1f.2]\n 27:      18210   sep4020 Timer Tick\n";
    let t = exact(text);
    assert_eq!(t.rows()[0].desc(), "IR-PCI-MSI-edge      ib_mthca (comp)");
    assert_eq!(t.rows()[3].desc(), "sep4020 Timer Tick");
}

#[test]
fn action_name_starting_with_digits_after_the_counts() {
    // 24: `4020KEY` follows the single count of a 1-CPU 2.6.16 machine.
    let t = exact("           CPU0\n  1:          0   4020KEY\n");
    assert_eq!(t.rows()[0].tail, "   4020KEY");
}

#[test]
fn first_field_narrower_than_ten_columns() {
    // Text the kernel never printed still round-trips: the field is as wide as the text allows.
    let t = exact("      CPU0       CPU1\nX:   12          3 z\n");
    let r = &t.rows()[0];
    assert_eq!((r.lead.as_str(), r.first_width), ("X:", 5));
    let t = exact("      CPU0\nY:7\n");
    assert_eq!(
        (t.rows()[0].lead.as_str(), t.rows()[0].first_width),
        ("Y:", 1)
    );
}

#[test]
fn irregular_spacing_is_parsed_but_only_semantically_round_trips() {
    let text = "           CPU0       CPU1\n  1:     5     6  chip  a\n";
    let t = parse_interrupts(text).unwrap();
    assert_eq!(t.counts(&t.rows()[0]), &[5, 6]);
    let back = render_interrupts(&t);
    assert_ne!(back, text);
    assert_eq!(parse_interrupts(&back).unwrap(), t);
}

#[test]
fn tabs_separate_like_spaces() {
    let t = parse_interrupts("\tCPU0\tCPU1\n  1:\t5\t6\tchip\n").unwrap();
    assert_eq!(t.counts(&t.rows()[0]), &[5, 6]);
    assert_eq!(t.rows()[0].tail, "\tchip");
}

#[test]
fn parse_into_reuses_and_replaces() {
    let mut t = parse_interrupts(X86_6X).unwrap();
    let small = "      CPU3\n  9:          1  x\n";
    parse_interrupts_into(small, &mut t).unwrap();
    assert_eq!(t, parse_interrupts(small).unwrap());
    assert_eq!(t.cpus, vec![CpuId(3)]);
    parse_interrupts_into(X86_6X, &mut t).unwrap();
    assert_eq!(t, parse_interrupts(X86_6X).unwrap());
    // A failed parse leaves the table empty, not half filled.
    assert!(parse_interrupts_into("      CPU0\n  1:          1  x\n  2: 5 6\n", &mut t).is_err());
    assert!(t.rows().is_empty() && t.cpus.is_empty() && t.header.is_empty());
}

#[test]
fn render_into_clears_and_reuses() {
    let t = parse_interrupts(X86_6X).unwrap();
    let mut out = String::from("stale text");
    render_interrupts_into(&t, &mut out);
    assert_eq!(out, X86_6X);
    render_interrupts_into(&t, &mut out);
    assert_eq!(out, X86_6X);
}

#[test]
fn render_of_a_built_table() {
    let mut t = InterruptTable::with_kernel_header(vec![CpuId(0), CpuId(2)], 4);
    t.push_kernel_row(RowLabel::Irq(IrqNum(1000)), 4, &[7, 12345678901], "  x");
    t.push_row(named("FIQ"), "FIQ:", 10, &[], "  fiq_glue");
    t.push_row(named("W"), "W:", 25, &[3], "");
    let text = render_interrupts(&t);
    assert_eq!(
        text,
        "            CPU0       CPU2       \n1000:          7 12345678901  x\nFIQ:  fiq_glue\nW:                        3\n"
    );
    let back = parse_interrupts(&text).unwrap();
    assert_eq!(back.counts(&back.rows()[0]), &[7, 12345678901]);
    assert_eq!(back.rows()[2].lead, "W:               ");
}

#[test]
fn live_proc_interrupts_round_trips() {
    let Ok(text) = std::fs::read_to_string("/proc/interrupts") else {
        eprintln!("no /proc/interrupts here: skipped");
        return;
    };
    let t = exact(&text);
    assert!(!t.cpus.is_empty());
    assert!(
        t.rows()
            .iter()
            .any(|r| r.label == named("LOC") || r.label.irq().is_some())
    );
}

// ---- errors -------------------------------------------------------------------------------------

#[test]
fn empty_text_has_no_header() {
    for text in ["", "\n\n", "   \n"] {
        let e = err(text);
        assert_eq!(e.line, 0);
        assert!(e.message.contains("no CPU header"), "{e}");
    }
}

#[test]
fn first_line_must_be_the_header() {
    let e = err("  0:         49          0   IO-APIC   2-edge      timer\n");
    assert_eq!(e.line, 1);
    assert!(
        e.message.contains("no CPU header") && e.message.contains("`0:`"),
        "{e}"
    );
    assert!(err("CPUx\n").message.contains("`CPUx`"));
    assert!(
        err("  CPU0 CPU99999999999\n")
            .message
            .contains("no CPU header")
    );
    assert!(err("CPU+1\n").message.contains("no CPU header"));
}

#[test]
fn control_garbage_is_an_error() {
    let e = err("\0\0\0\x01");
    assert!(e.message.contains("no CPU header"), "{e}");
    let e = err("      CPU0\n\x01\x02: 5\n");
    assert_eq!(e.line, 2);
    assert!(e.message.contains("invalid character"), "{e}");
    let e = err("      CPU0\n  1:          5  chip\x07name\n");
    assert!(e.message.contains("control character"), "{e}");
    let e = err("      CPU0\nNMI:          5  a\r\n");
    assert!(e.message.contains("control character"), "{e}");
    assert!(err("      CPU0\n  1:\x005\n").message.contains("before"));
}

#[test]
fn numbered_row_with_more_counts_than_cpus() {
    let e = err(
        "           CPU0       CPU1\n  0:          1          2          3   IO-APIC   2-edge      timer\n",
    );
    assert_eq!(e.line, 2);
    assert!(
        e.message.contains("more columns than the header") && e.message.contains("`3`"),
        "{e}"
    );
}

#[test]
fn truncated_numbered_row() {
    let e = err("           CPU0       CPU1       CPU2\n 24:          1          0\n");
    assert_eq!(e.line, 2);
    assert!(
        e.message.contains("truncated") && e.message.contains("2 of 3"),
        "{e}"
    );
    let e = err("           CPU0\n 24:");
    assert!(e.message.contains("0 of 1"), "{e}");
}

#[test]
fn numbered_row_with_fewer_counts_then_text() {
    // Real kernels print every online CPU for a numbered row, so this is a mangled file.
    let e = err("           CPU0       CPU1\n 24:          1   IO-APIC   5-edge      ACPI:Ged\n");
    assert_eq!(e.line, 2);
    assert!(e.message.contains("1 counts before `IO-APIC`"), "{e}");
}

#[test]
fn non_numeric_count() {
    for text in [
        "           CPU0       CPU1\n 24:       12a4          0  x\n",
        "           CPU0       CPU1\nLOC:       12a4          0  x\n",
    ] {
        let e = err(text);
        assert_eq!(e.line, 2);
        assert!(e.message.contains("invalid count `12a4`"), "{e}");
    }
}

#[test]
fn count_out_of_range() {
    let e = err("      CPU0\n  1: 18446744073709551616  x\n");
    assert!(e.message.contains("out of range"), "{e}");
    let e = err("      CPU0\n  1: 000000000000000000001  x\n");
    assert!(e.message.contains("out of range"), "{e}");
    let e = err("      CPU0\n99999999999:          1  x\n");
    assert!(e.message.contains("IRQ number"), "{e}");
}

#[test]
fn line_without_colon() {
    let e = err("           CPU0\n 24          1  x\n");
    assert_eq!(e.line, 2);
    assert!(
        e.message.contains("no `:`") && e.message.contains("`24`"),
        "{e}"
    );
    assert!(err("      CPU0\ngarbage\n").message.contains("`garbage`"));
    assert!(
        err("      CPU0\n   :  5\n")
            .message
            .contains("without a label")
    );
}

#[test]
fn error_line_numbers_count_skipped_lines() {
    let e = err("\n      CPU0\n\n  1:          1  x\n  2:\n");
    assert_eq!(e.line, 5);
}

#[test]
fn long_tokens_are_cut_in_messages() {
    let e = err(&format!("      CPU0\n{}\n", "a".repeat(500)));
    assert!(e.message.len() < 120, "{e}");
    assert!(e.message.contains('…'));
}

// ---- the word-at-a-time scanners ----------------------------------------------------------------

#[test]
fn digit_scanner_matches_std_for_every_length_and_position() {
    use super::parse::scan_digits_for_test as scan;
    for len in 1..=20usize {
        for lead in ["", " ", "   "] {
            let digits: String = (0..len).map(|i| char::from(b'1' + (i % 9) as u8)).collect();
            let want: u64 = digits.parse().unwrap();
            for tail in ["", " ", "\n", "a", "          x"] {
                let text = format!("{lead}{digits}{tail}");
                assert_eq!(
                    scan(&text, lead.len()),
                    Some((want, lead.len() + len)),
                    "{text:?}"
                );
            }
        }
    }
    assert_eq!(scan("18446744073709551615", 0), Some((u64::MAX, 20)));
    assert_eq!(scan("18446744073709551616", 0), None);
    assert_eq!(scan("000000000000000000001", 0), None);
    assert_eq!(scan("00000007/", 0), Some((7, 8)));
    assert_eq!(scan("9:9", 0), Some((9, 1)));
}

#[test]
fn space_skipper_handles_tabs_and_the_end() {
    use super::parse::skip_spaces_for_test as skip;
    assert_eq!(skip("", 0), 0);
    assert_eq!(skip("   ", 0), 3);
    assert_eq!(skip(&" ".repeat(17), 0), 17);
    assert_eq!(
        skip(&format!("{}\t  {}x", " ".repeat(9), " ".repeat(8)), 0),
        20
    );
    assert_eq!(skip("          \n", 0), 10);
    assert_eq!(skip("ab   c", 2), 5);
}

#[test]
fn repeated_rows_and_columns_are_errors_at_their_line() {
    let head = "           CPU0       CPU1\n";
    let e = err(&format!(
        "{head} 24:          1          2   PCI-MSI 1-edge      a\n 25:          1          2   PCI-MSI 2-edge      b\n 24:          3          4   PCI-MSI 1-edge      a\n"
    ));
    assert_eq!((e.line, e.message.as_str()), (4, "IRQ 24 is listed twice"));
    let e = err(&format!(
        "{head}NMI:          0          0   Non-maskable interrupts\nLOC:          1          1   Local timer interrupts\nNMI:          0          0   Non-maskable interrupts\n"
    ));
    assert_eq!(
        (e.line, e.message.as_str()),
        (4, "row `NMI` is listed twice")
    );
    let e = err("           CPU0       CPU1       CPU0\n");
    assert_eq!(
        (e.line, e.message.as_str()),
        (1, "CPU0 appears twice in the header")
    );
    // Out of order but distinct: accepted (captures are sometimes edited by hand).
    let t = parse_interrupts(&format!(
        "{head} 30:          1          2   PCI-MSI 1-edge      a\n 24:          1          2   PCI-MSI 2-edge      b\n"
    ))
    .unwrap();
    assert_eq!(t.rows().len(), 2);
}

#[test]
fn counts_the_kernel_never_prints_are_named_as_counts() {
    let head = "           CPU0       CPU1\n";
    for bad in ["-5", "+5", "１２"] {
        let e = err(&format!(
            "{head} 24:          1 {bad:>10}   PCI-MSI 1-edge      a\n"
        ));
        assert_eq!(e.line, 2, "{bad}");
        assert!(
            e.message.starts_with(&format!("invalid count `{bad}`")),
            "{bad}: {}",
            e.message
        );
    }
    let e = err(&format!(
        "{head} 24:          1 18446744073709551616   PCI-MSI 1-edge      a\n"
    ));
    assert!(e.message.contains("out of range"), "{}", e.message);
}
