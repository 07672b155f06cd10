//! Property tests: the parser never panics, any text it accepts survives a render/parse cycle,
//! and generated kernel-layout tables (with `kernel_tail` descriptors) round-trip exactly.

use super::*;
use crate::format::irq_desc::{IrqDesc, kernel_tail, parse_descs};
use irqpilot_core::{CpuId, InterruptTable, IrqNum, RowLabel, Trigger};
use proptest::prelude::*;

/// For text the parser accepts, printing and parsing again gives the same table.
fn accepted_text_is_stable(text: &str) -> Result<(), TestCaseError> {
    if let Ok(t) = parse_interrupts(text) {
        let once = render_interrupts(&t);
        let again = parse_interrupts(&once);
        prop_assert_eq!(again.as_ref(), Ok(&t), "text {:?}", text);
        prop_assert_eq!(render_interrupts(&t), once);
    }
    Ok(())
}

/// Characters `/proc/interrupts` is made of, plus a few that must be rejected.
fn interrupts_like() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        4 => Just(" ".to_string()),
        2 => Just("          ".to_string()),
        2 => "[0-9]{1,11}",
        1 => Just("\n".to_string()),
        1 => Just(":".to_string()),
        1 => "[A-Za-z/_.-]{1,6}",
        1 => Just("CPU".to_string()),
        1 => Just(", ".to_string()),
        1 => prop::sample::select(vec!["\t", "\r", "\0", "\u{7f}", "é", "-edge", "IPI0:"])
            .prop_map(str::to_string),
    ];
    prop::collection::vec(piece, 0..80).prop_map(|v| v.concat())
}

/// One numbered row's descriptor, restricted to what the text can tell back unambiguously.
#[derive(Clone, Debug)]
struct GenDesc {
    chip: String,
    hwirq: Option<u64>,
    handler: Option<String>,
    actions: Vec<String>,
}

fn gen_desc() -> impl Strategy<Value = GenDesc> {
    let chip = prop_oneof![
        prop::sample::select(vec![
            "IO-APIC",
            "IR-IO-APIC",
            "PCI-MSI",
            "IR-PCI-MSIX-0000:01:00.0",
            "PCI-MSIX-0000:00:01.0",
            "DMAR-MSI",
            "GICv3",
            "ITS-MSI",
            "xen-dyn",
            "-",
        ])
        .prop_map(str::to_string),
        // Random chips, minus names ending in a handler the fused layout would split off.
        "[A-Za-z][A-Za-z0-9:._]{0,20}",
    ];
    let handler = prop::option::of(prop_oneof![
        prop::sample::select(vec!["edge", "fasteoi", "level", "event", "simple"])
            .prop_map(str::to_string),
        "[a-z][a-z_]{0,10}",
    ]);
    let action = "[a-zA-Z][a-zA-Z0-9_:.\\[\\]@-]{0,18}( \\([a-z]{1,5}\\))?";
    (
        chip,
        prop::option::of(prop_oneof![0u64..4096, any::<u32>().prop_map(u64::from)]),
        handler,
        prop::collection::vec(action, 1..4),
    )
        .prop_map(|(chip, hwirq, handler, actions)| GenDesc {
            chip,
            hwirq,
            handler,
            actions,
        })
}

/// A named row: label, how many counts (relative to the CPUs), description.
#[derive(Clone, Debug)]
enum GenNamed {
    PerCpu(String, String),
    Single(String),
    NoCounts(String, String),
    Wider(String, usize, String),
}

fn gen_named() -> impl Strategy<Value = GenNamed> {
    let label = "[A-Z][A-Za-z0-9/]{1,4}";
    let text = "[A-Z][a-z]{1,8}( [a-z()]{1,8}){0,3}";
    prop_oneof![
        4 => (label, text).prop_map(|(l, d)| GenNamed::PerCpu(l, d)),
        1 => label.prop_map(GenNamed::Single),
        1 => (label, text).prop_map(|(l, d)| GenNamed::NoCounts(l, d)),
        1 => (label, 1usize..4, text).prop_map(|(l, n, d)| GenNamed::Wider(l, n, d)),
    ]
}

fn count() -> impl Strategy<Value = u64> {
    prop_oneof![
        4 => 0u64..1000,
        4 => any::<u32>().prop_map(u64::from),
        1 => any::<u64>(),
    ]
}

/// A table in the kernel's layout, with the descriptors its numbered rows were made from.
fn gen_table() -> impl Strategy<Value = (InterruptTable, Vec<Option<GenDesc>>)> {
    let cpus = prop::collection::vec(1u32..4, 1..64).prop_map(|gaps| {
        let mut id = 0u32;
        gaps.into_iter()
            .map(|g| {
                id += g - 1;
                let c = CpuId(id);
                id += 1;
                c
            })
            .collect::<Vec<_>>()
    });
    let irqs = prop::collection::vec((1u32..300, gen_desc()), 0..24);
    // The kernel prints each named row once: repeated labels are dropped.
    let named = prop::collection::vec(gen_named(), 0..8).prop_map(|v| {
        let mut seen = std::collections::BTreeSet::new();
        v.into_iter()
            .filter(|g| {
                let (GenNamed::PerCpu(l, _)
                | GenNamed::Single(l)
                | GenNamed::NoCounts(l, _)
                | GenNamed::Wider(l, _, _)) = g;
                seen.insert(l.clone())
            })
            .collect::<Vec<_>>()
    });
    let before = any::<bool>();
    (cpus, irqs, named, before)
        .prop_flat_map(|(cpus, irqs, named, before)| {
            let n = cpus.len();
            let counts = prop::collection::vec(count(), (irqs.len() + named.len() + 1) * (n + 4));
            (Just(cpus), Just(irqs), Just(named), Just(before), counts)
        })
        .prop_map(|(cpus, irqs, named, named_first, pool)| {
            let n = cpus.len();
            let mut pool = pool.into_iter();
            let mut irq = 0u32;
            let numbered: Vec<(u32, GenDesc)> = irqs
                .into_iter()
                .map(|(gap, d)| {
                    irq += gap;
                    (irq, d)
                })
                .collect();
            let prec = InterruptTable::kernel_prec(irq + 1);
            let mut t = InterruptTable::with_kernel_header(cpus, prec);
            let mut descs = Vec::new();
            if named_first {
                push_named(&mut t, &mut descs, &named, prec, n, &mut pool);
            }
            for (irq, d) in numbered {
                let actions: Vec<&str> = d.actions.iter().map(String::as_str).collect();
                let tail = kernel_tail(&d.chip, d.hwirq, prec, d.handler.as_deref(), &actions);
                t.push_kernel_row(RowLabel::Irq(IrqNum(irq)), prec, &take(&mut pool, n), &tail);
                descs.push(Some(d));
            }
            if !named_first {
                push_named(&mut t, &mut descs, &named, prec, n, &mut pool);
            }
            (t, descs)
        })
}

fn take(pool: &mut std::vec::IntoIter<u64>, k: usize) -> Vec<u64> {
    pool.by_ref().take(k).collect()
}

/// Appends the generated named rows (`n` CPUs, label width `prec`).
fn push_named(
    t: &mut InterruptTable,
    descs: &mut Vec<Option<GenDesc>>,
    named: &[GenNamed],
    prec: usize,
    n: usize,
    pool: &mut std::vec::IntoIter<u64>,
) {
    for row in named {
        match row {
            GenNamed::PerCpu(l, d) => t.push_kernel_row(
                RowLabel::Named(l.clone()),
                prec,
                &take(pool, n),
                &format!("   {d}"),
            ),
            GenNamed::Single(l) => {
                t.push_kernel_row(RowLabel::Named(l.clone()), prec, &take(pool, 1), "")
            }
            GenNamed::NoCounts(l, d) => t.push_row(
                RowLabel::Named(l.clone()),
                &format!("{l}:"),
                10,
                &[],
                &format!("              {d}"),
            ),
            GenNamed::Wider(l, extra, d) => t.push_kernel_row(
                RowLabel::Named(l.clone()),
                prec,
                &take(pool, n + extra),
                &format!("  {d}"),
            ),
        }
        descs.push(None);
    }
}

fn expected_desc(d: &GenDesc) -> IrqDesc {
    let trigger = match d.handler.as_deref() {
        Some("edge") => Some(Trigger::Edge),
        Some("level") => Some(Trigger::Level),
        _ => None,
    };
    IrqDesc {
        chip: Some(d.chip.clone()),
        hwirq: d.hwirq,
        trigger,
        handler: d.handler.clone(),
        actions: d.actions.clone(),
    }
}

/// Whether the generated chip would look like an old `chip-handler` token.
fn looks_fused(chip: &str) -> bool {
    [
        "-edge", "-level", "-fasteoi", "-simple", "-event", "-percpu", "-eoi", "-ipi", "-virq",
        "-msi",
    ]
    .iter()
    .any(|s| chip.ends_with(s))
        || chip.ends_with("XT")
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..600)) {
        let text = String::from_utf8_lossy(&bytes);
        let _ = parse_interrupts(&text);
        let _ = parse_interrupts(&format!("           CPU0       CPU1\n{text}"));
    }

    #[test]
    fn interrupts_like_text_never_panics_and_is_stable(body in interrupts_like()) {
        accepted_text_is_stable(&body)?;
        accepted_text_is_stable(&format!("           CPU0       CPU1\n{body}"))?;
    }

    #[test]
    fn mutated_kernel_text_never_panics_and_is_stable(
        (t, _) in gen_table(),
        edits in prop::collection::vec((any::<prop::sample::Index>(), 0u8..3, any::<u8>()), 1..6),
    ) {
        let mut bytes = render_interrupts(&t).into_bytes();
        for (at, op, byte) in edits {
            let byte = b" 0123456789:\nA-,\t"[usize::from(byte) % 17];
            if bytes.is_empty() {
                bytes.push(byte);
                continue;
            }
            let i = at.index(bytes.len());
            match op {
                0 => bytes[i] = byte,
                1 => bytes.insert(i, byte),
                _ => { bytes.remove(i); }
            }
        }
        accepted_text_is_stable(&String::from_utf8_lossy(&bytes))?;
    }

    #[test]
    fn generated_tables_round_trip((t, _) in gen_table()) {
        let text = render_interrupts(&t);
        let parsed = parse_interrupts(&text);
        prop_assert_eq!(parsed.as_ref(), Ok(&t), "text:\n{}", text);
        prop_assert_eq!(render_interrupts(&parsed.unwrap()), text);
    }

    #[test]
    fn generated_descriptors_parse_back((t, made) in gen_table()) {
        prop_assume!(made.iter().flatten().all(|d| !looks_fused(&d.chip)));
        let parsed = parse_interrupts(&render_interrupts(&t)).unwrap();
        let descs = parse_descs(&parsed);
        prop_assert_eq!(descs.len(), made.len());
        for (got, want) in descs.iter().zip(&made) {
            prop_assert_eq!(got.clone(), want.as_ref().map(expected_desc));
        }
    }

    #[test]
    fn parse_into_equals_parse(a in gen_table(), b in gen_table()) {
        let (ta, tb) = (render_interrupts(&a.0), render_interrupts(&b.0));
        let mut t = InterruptTable::default();
        for text in [&ta, &tb, &ta] {
            parse_interrupts_into(text, &mut t).unwrap();
            prop_assert_eq!(&t, &parse_interrupts(text).unwrap());
        }
    }
}
