//! The real-world corpus: 25 `/proc/interrupts` captures and their `/proc/stat` and
//! `/proc/softirqs` companions, read in place from the shared folder beside the checkout (never
//! copied into the repository).
//!
//! For every file: it parses, its summary matches the golden file under `tests/golden/corpus/`
//! (the review of the parser: counts, totals, descriptors of the first and last rows), and it
//! round-trips: exactly (`render(parse(x)) == x`) for text the kernel printed, semantically
//! (`parse(render(parse(x))) == parse(x)`) for the files [`NOT_EXACT`] lists with the reason.
//! The CPU and IRQ-line counts of the corpus's `INDEX.md` are checked against the parse too.
//!
//! `UPDATE_GOLDEN=1 cargo test -p irqpilot-linux --test corpus` rewrites the goldens; review the
//! diff like an API change. Without the corpus folder the tests print that they skipped, unless
//! `CI=true`, where a missing corpus fails.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use irqpilot_core::{CpuId, InterruptTable, ProcStat, RowLabel, SoftirqTable, Trigger};
use irqpilot_linux::format::interrupts::{
    parse_interrupts, parse_interrupts_into, render_interrupts, render_interrupts_into,
};
use irqpilot_linux::format::irq_desc::{IrqDesc, infer_layout, parse_descs};
use irqpilot_linux::format::softirqs::{parse_softirqs, render_softirqs};
use irqpilot_linux::format::stat::{parse_stat, render_stat};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

const CORPUS: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../../shared/corpus/proc-interrupts"
);
const GOLDEN: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/golden/corpus");

/// Files whose text the kernel did not print as is, so only the semantic round trip can hold.
/// Every other file must round-trip byte for byte.
const NOT_EXACT: &[(&str, &str)] = &[
    (
        "01-procfs-qemu-kvm-4cpu.txt",
        "an empty line between MIS: and PIN: (added to the fixture; skipped, not kept)",
    ),
    (
        "03-nodeexp-graviton-arm64-8cpu.txt",
        "a whitespace-only last line (78 spaces; skipped, not kept)",
    ),
];

// ---- allocation counting (for the re-parse test) -------------------------------------------

#[path = "common/counting.rs"]
mod counting;

#[global_allocator]
static GLOBAL: counting::Counting = counting::Counting;

// ---- corpus access ----------------------------------------------------------------------------

/// The corpus folder, or `None` (after saying so) when it is missing outside CI.
fn corpus() -> Option<PathBuf> {
    let dir = Path::new(CORPUS);
    if dir.is_dir() {
        return Some(dir.to_path_buf());
    }
    if std::env::var("CI").as_deref() == Ok("true") {
        panic!("corpus folder {CORPUS} is missing (CI=true: it must sit beside the checkout)");
    }
    eprintln!("SKIPPED: corpus folder {CORPUS} not found");
    None
}

/// Corpus files ending in `.ext`, sorted by name.
fn files(dir: &Path, ext: &str) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == ext))
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read_to_string(&p).unwrap())
        })
        .collect();
    out.sort();
    out
}

/// Compares `summary` with its golden file (or rewrites it under `UPDATE_GOLDEN=1`); returns a
/// failure message.
fn check_golden(name: &str, summary: &str) -> Option<String> {
    let path = Path::new(GOLDEN).join(format!("{name}.summary"));
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::create_dir_all(GOLDEN).unwrap();
        std::fs::write(&path, summary).unwrap();
        return None;
    }
    match std::fs::read_to_string(&path) {
        Ok(golden) if golden == summary => None,
        Ok(golden) => {
            let line = golden
                .lines()
                .zip(summary.lines())
                .position(|(a, b)| a != b)
                .unwrap_or(golden.lines().count().min(summary.lines().count()));
            Some(format!(
                "{name}: summary differs from {} at line {}:\n  golden: {:?}\n  now:    {:?}",
                path.display(),
                line + 1,
                golden.lines().nth(line).unwrap_or(""),
                summary.lines().nth(line).unwrap_or("")
            ))
        }
        Err(e) => Some(format!(
            "{name}: no golden {} ({e}); run with UPDATE_GOLDEN=1",
            path.display()
        )),
    }
}

fn finish(failures: Vec<String>) {
    assert!(
        failures.is_empty(),
        "{} failure(s):\n{}",
        failures.len(),
        failures.join("\n")
    );
}

// ---- summaries --------------------------------------------------------------------------------

/// `CPU0..CPU7`, or a list where the ids are not contiguous.
fn cpu_list(cpus: &[CpuId]) -> String {
    let contiguous = cpus.windows(2).all(|w| w[1].0 == w[0].0 + 1);
    match (cpus.first(), cpus.last()) {
        (Some(a), Some(b)) if contiguous && cpus.len() > 1 => format!("CPU{a}..CPU{b}"),
        _ => cpus
            .iter()
            .map(|c| format!("CPU{c}"))
            .collect::<Vec<_>>()
            .join(" "),
    }
}

fn opt<T: std::fmt::Display>(v: &Option<T>) -> String {
    v.as_ref().map_or("-".to_string(), T::to_string)
}

fn trigger(t: Option<Trigger>) -> &'static str {
    match t {
        Some(Trigger::Edge) => "edge",
        Some(Trigger::Level) => "level",
        None => "-",
    }
}

fn desc_line(d: &IrqDesc) -> String {
    format!(
        "chip={} hwirq={} trigger={} handler={} actions={:?}",
        opt(&d.chip),
        opt(&d.hwirq),
        trigger(d.trigger),
        opt(&d.handler),
        d.actions
    )
}

/// `name xN` pairs, most frequent first, at most `max` of them.
fn tally<'a>(items: impl Iterator<Item = &'a str>, max: usize) -> String {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for i in items {
        *counts.entry(i).or_default() += 1;
    }
    let mut v: Vec<(&str, usize)> = counts.into_iter().collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    let shown: Vec<String> = v
        .iter()
        .take(max)
        .map(|(k, n)| format!("{k} x{n}"))
        .collect();
    let mut s = format!("({}) {}", v.len(), shown.join(", "));
    if v.len() > max {
        let _ = write!(s, ", ... {} more", v.len() - max);
    }
    s
}

fn interrupts_summary(name: &str, text: &str, t: &InterruptTable, verdict: &str) -> String {
    let rows = t.rows();
    let descs = parse_descs(t);
    let numbered: Vec<usize> = (0..rows.len())
        .filter(|&i| rows[i].label.irq().is_some())
        .collect();
    let named: Vec<usize> = (0..rows.len())
        .filter(|&i| rows[i].label.irq().is_none())
        .collect();
    let ncpu = t.cpus.len();
    let kinds =
        |pred: &dyn Fn(usize) -> bool| rows.iter().filter(|r| pred(t.counts(r).len())).count();
    let sum = |idx: &[usize]| idx.iter().map(|&i| t.total(&rows[i]) as u128).sum::<u128>();
    let ds: Vec<&IrqDesc> = descs.iter().flatten().collect();

    let mut s = String::new();
    let w = &mut s;
    let _ = writeln!(w, "# {name}");
    let _ = writeln!(w, "bytes: {}, lines: {}", text.len(), text.lines().count());
    let indent = t.header.len() - t.header.trim_start().len();
    let _ = writeln!(
        w,
        "header: {indent} leading spaces, {} trailing spaces, {ncpu} CPUs ({})",
        t.header.len() - t.header.trim_end().len(),
        cpu_list(&t.cpus)
    );
    let _ = writeln!(w, "final newline: {}", t.final_newline);
    let _ = writeln!(
        w,
        "rows: {} = {} numbered + {} named",
        rows.len(),
        numbered.len(),
        named.len()
    );
    if let (Some(&a), Some(&b)) = (numbered.first(), numbered.last()) {
        let _ = writeln!(w, "IRQ numbers: {} .. {}", rows[a].label, rows[b].label);
    }
    let names: Vec<String> = named.iter().map(|&i| rows[i].label.to_string()).collect();
    let _ = writeln!(w, "named: {}", names.join(" "));
    let _ = writeln!(
        w,
        "counts per row: per-CPU {}, one {}, none {}, more than CPUs {}, other {}",
        kinds(&|n| n == ncpu),
        kinds(&|n| n == 1 && ncpu != 1),
        kinds(&|n| n == 0),
        kinds(&|n| n > ncpu),
        kinds(&|n| n > 1 && n < ncpu),
    );
    let max = rows
        .iter()
        .flat_map(|r| t.counts(r).iter().enumerate().map(move |(c, v)| (*v, c, r)))
        .max_by_key(|(v, _, _)| *v);
    let _ = writeln!(
        w,
        "totals: numbered {}, named {}, all {}",
        sum(&numbered),
        sum(&named),
        sum(&numbered) + sum(&named)
    );
    if let Some((v, c, r)) = max {
        let column = t
            .cpus
            .get(c)
            .map_or(format!("column {c}, past the header"), |cpu| {
                format!("CPU{cpu}")
            });
        let _ = writeln!(w, "largest count: {v} (row {}, {column})", r.label);
    }
    let tails = numbered.iter().map(|&i| rows[i].tail.as_str());
    let _ = writeln!(w, "tail layout: {:?}", infer_layout(tails));
    let _ = writeln!(
        w,
        "descs: chip {}, hwirq {}, trigger {} (edge {}, level {}), handler {}, with actions {}, without {}",
        ds.iter().filter(|d| d.chip.is_some()).count(),
        ds.iter().filter(|d| d.hwirq.is_some()).count(),
        ds.iter().filter(|d| d.trigger.is_some()).count(),
        ds.iter()
            .filter(|d| d.trigger == Some(Trigger::Edge))
            .count(),
        ds.iter()
            .filter(|d| d.trigger == Some(Trigger::Level))
            .count(),
        ds.iter().filter(|d| d.handler.is_some()).count(),
        ds.iter().filter(|d| !d.actions.is_empty()).count(),
        ds.iter().filter(|d| d.actions.is_empty()).count(),
    );
    let _ = writeln!(
        w,
        "chips: {}",
        tally(ds.iter().filter_map(|d| d.chip.as_deref()), 8)
    );
    let _ = writeln!(
        w,
        "handlers: {}",
        tally(ds.iter().filter_map(|d| d.handler.as_deref()), 8)
    );
    let shared: Vec<String> = numbered
        .iter()
        .zip(&ds)
        .filter(|(_, d)| d.actions.len() > 1)
        .map(|(&i, _)| rows[i].label.to_string())
        .collect();
    let _ = writeln!(w, "shared (several actions): {}", shared.join(" "));
    let nameless: Vec<String> = numbered
        .iter()
        .zip(&ds)
        .filter(|(_, d)| d.actions.is_empty())
        .map(|(&i, _)| rows[i].label.to_string())
        .collect();
    let _ = writeln!(w, "without action: {}", nameless.join(" "));
    let _ = writeln!(w, "numbered rows (first and last 4):");
    let pick: Vec<usize> = if numbered.len() <= 8 {
        numbered.clone()
    } else {
        numbered[..4]
            .iter()
            .chain(&numbered[numbered.len() - 4..])
            .copied()
            .collect()
    };
    for i in pick {
        let r = &rows[i];
        let d = descs[i].as_ref().map_or(String::new(), desc_line);
        let _ = writeln!(
            w,
            "  {:>5} [{} counts, total {}] {d}",
            r.label,
            t.counts(r).len(),
            t.total(r)
        );
    }
    let _ = writeln!(w, "named rows (first and last 3):");
    let pick: Vec<usize> = if named.len() <= 6 {
        named.clone()
    } else {
        named[..3]
            .iter()
            .chain(&named[named.len() - 3..])
            .copied()
            .collect()
    };
    for i in pick {
        let r = &rows[i];
        let _ = writeln!(
            w,
            "  {:>5} [{} counts, total {}] {:?}",
            r.label,
            t.counts(r).len(),
            t.total(r),
            r.desc()
        );
    }
    let _ = writeln!(w, "round trip: {verdict}");
    s
}

/// `exact`, or `semantic (...)` with the first line that differs.
fn verdict(text: &str, rendered: &str) -> String {
    if text == rendered {
        return "exact".to_string();
    }
    let line = text
        .split('\n')
        .zip(rendered.split('\n'))
        .position(|(a, b)| a != b)
        .unwrap_or_else(|| text.split('\n').count().min(rendered.split('\n').count()));
    format!("semantic (text differs from line {})", line + 1)
}

// ---- tests ------------------------------------------------------------------------------------

#[test]
fn interrupts_files_parse_match_goldens_and_round_trip() {
    let Some(dir) = corpus() else { return };
    let files = files(&dir, "txt");
    assert_eq!(files.len(), 25, "the corpus has 25 interrupts files");
    let mut failures = Vec::new();
    for (name, text) in &files {
        let t = match parse_interrupts(text) {
            Ok(t) => t,
            Err(e) => {
                failures.push(format!("{name}: {e}"));
                continue;
            }
        };
        let rendered = render_interrupts(&t);
        let verdict = verdict(text, &rendered);
        let expected_exact = !NOT_EXACT.iter().any(|(n, _)| n == name);
        if expected_exact != (rendered == *text) {
            failures.push(format!(
                "{name}: round trip is {verdict}, expected {}",
                if expected_exact { "exact" } else { "semantic" }
            ));
        }
        match parse_interrupts(&rendered) {
            Ok(again) if again == t => {}
            Ok(_) => failures.push(format!("{name}: parse(render(parse(x))) != parse(x)")),
            Err(e) => failures.push(format!("{name}: rendered text does not parse: {e}")),
        }
        if let Some(f) = check_golden(name, &interrupts_summary(name, text, &t, &verdict)) {
            failures.push(f);
        }
    }
    finish(failures);
}

/// The CPU and IRQ-line columns of `INDEX.md` agree with the parse.
#[test]
fn index_counts_match_the_parse() {
    let Some(dir) = corpus() else { return };
    let index = std::fs::read_to_string(dir.join("INDEX.md")).unwrap();
    let first_number = |cell: &str| -> usize {
        let digits: String = cell
            .trim()
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        digits
            .parse()
            .unwrap_or_else(|_| panic!("no number in INDEX cell {cell:?}"))
    };
    let mut checked = 0;
    for line in index.lines() {
        let cells: Vec<&str> = line.split('|').collect();
        if cells.len() != 8 || !cells[1].contains(".txt") {
            continue;
        }
        let name = cells[1].split_whitespace().next().unwrap();
        let text = std::fs::read_to_string(dir.join(name)).unwrap();
        let t = parse_interrupts(&text).unwrap();
        let numbered = t.rows().iter().filter(|r| r.label.irq().is_some()).count();
        assert_eq!(t.cpus.len(), first_number(cells[4]), "{name}: CPUs");
        assert_eq!(numbered, first_number(cells[5]), "{name}: IRQ lines");
        checked += 1;
    }
    assert_eq!(checked, 25, "INDEX.md rows checked");
}

fn stat_summary(
    name: &str,
    s: &ProcStat,
    interrupts: Option<&InterruptTable>,
    verdict: &str,
) -> String {
    let mut out = String::new();
    let w = &mut out;
    let _ = writeln!(w, "# {name}");
    if let Some(t) = &s.total {
        let _ = writeln!(
            w,
            "cpu: {} fields, user {} nice {} system {} idle {} iowait {} irq {} softirq {} steal {}, total {}",
            t.fields,
            t.user,
            t.nice,
            t.system,
            t.idle,
            opt(&t.iowait),
            opt(&t.irq),
            opt(&t.softirq),
            opt(&t.steal),
            t.total()
        );
    }
    let cpus: Vec<CpuId> = s.per_cpu.iter().map(|(c, _)| *c).collect();
    let fields: Vec<u8> = s.per_cpu.iter().map(|(_, t)| t.fields).collect();
    let _ = writeln!(
        w,
        "per-CPU lines: {} ({}), fields {:?}",
        cpus.len(),
        cpu_list(&cpus),
        fields.first()
    );
    let per_cpu_sum: u64 = s.per_cpu.iter().map(|(_, t)| t.total()).sum();
    let _ = writeln!(w, "per-CPU ticks summed: {per_cpu_sum}");
    if let Some((total, each)) = &s.intr {
        let nonzero: Vec<String> = each
            .iter()
            .enumerate()
            .filter(|(_, v)| **v != 0)
            .map(|(i, v)| format!("{i}={v}"))
            .collect();
        let _ = writeln!(
            w,
            "intr: total {total}, {} IRQ fields, sum {}, non-zero: {}",
            each.len(),
            each.iter().sum::<u64>(),
            nonzero.join(" ")
        );
        if let Some(t) = interrupts {
            let mut equal = 0;
            let mut differ = Vec::new();
            for r in t.rows() {
                if let Some(n) = r.label.irq() {
                    match each.get(n.0 as usize) {
                        Some(v) if *v == t.total(r) => equal += 1,
                        v => differ.push(format!("{n}: intr {} vs rows {}", opt(&v), t.total(r))),
                    }
                }
            }
            let _ = writeln!(
                w,
                "intr vs the interrupts file: {equal} IRQs equal, {} differ{}{}",
                differ.len(),
                if differ.is_empty() { "" } else { ": " },
                differ.into_iter().take(5).collect::<Vec<_>>().join(", ")
            );
        }
    }
    if let Some((total, each)) = &s.softirq {
        let _ = writeln!(w, "softirq: total {total}, per type {each:?}");
    }
    let keys: Vec<&str> = s.other.iter().map(|(k, _)| k.as_str()).collect();
    let _ = writeln!(w, "other: {}", keys.join(" "));
    let _ = writeln!(w, "round trip: {verdict}");
    out
}

fn softirqs_summary(
    name: &str,
    s: &SoftirqTable,
    interrupts: Option<&InterruptTable>,
    verdict: &str,
) -> String {
    let mut out = String::new();
    let w = &mut out;
    let _ = writeln!(w, "# {name}");
    let _ = writeln!(w, "CPU columns: {} ({})", s.cpus.len(), cpu_list(&s.cpus));
    if let Some(t) = interrupts {
        let _ = writeln!(w, "CPU columns of the interrupts file: {}", t.cpus.len());
    }
    let _ = writeln!(w, "rows: {}", s.rows.len());
    for (n, counts) in &s.rows {
        let _ = writeln!(
            w,
            "  {n:>12}: total {}, max {}",
            counts.iter().sum::<u64>(),
            counts.iter().max().copied().unwrap_or(0)
        );
    }
    let _ = writeln!(w, "round trip: {verdict}");
    out
}

/// The interrupts file of the same capture, when there is one.
fn sibling(dir: &Path, name: &str) -> Option<InterruptTable> {
    let stem = name.rsplit_once('.')?.0;
    let text = std::fs::read_to_string(dir.join(format!("{stem}.txt"))).ok()?;
    parse_interrupts(&text).ok()
}

#[test]
fn companion_stat_and_softirqs_files() {
    let Some(dir) = corpus() else { return };
    let mut failures = Vec::new();
    let stats = files(&dir, "stat");
    let softirqs = files(&dir, "softirqs");
    assert_eq!((stats.len(), softirqs.len()), (3, 4), "companion files");
    for (name, text) in &stats {
        match parse_stat(text) {
            Err(e) => failures.push(format!("{name}: {e}")),
            Ok(s) => {
                let rendered = render_stat(&s);
                let v = verdict(text, &rendered);
                if rendered != *text {
                    failures.push(format!("{name}: round trip is {v}"));
                }
                let summary = stat_summary(name, &s, sibling(&dir, name).as_ref(), &v);
                failures.extend(check_golden(name, &summary));
            }
        }
    }
    for (name, text) in &softirqs {
        match parse_softirqs(text) {
            Err(e) => failures.push(format!("{name}: {e}")),
            Ok(s) => {
                let rendered = render_softirqs(&s);
                let v = verdict(text, &rendered);
                if rendered != *text {
                    failures.push(format!("{name}: round trip is {v}"));
                }
                let summary = softirqs_summary(name, &s, sibling(&dir, name).as_ref(), &v);
                failures.extend(check_golden(name, &summary));
            }
        }
    }
    finish(failures);
}

/// A 256-CPU, 800-IRQ file in the kernel's layout (the size the parser must handle in well
/// under 5 ms).
fn generated_large() -> String {
    let cpus: Vec<CpuId> = (0..256).map(CpuId).collect();
    let mut t = InterruptTable::with_kernel_header(cpus, 4);
    for irq in 0..800u32 {
        let counts: Vec<u64> = (0..256u64)
            .map(|c| (u64::from(irq) * 7919 + c * 104_729) % 5_000_000_000)
            .collect();
        let tail = format!(
            "  IR-PCI-MSIX-0000:3b:00.0 {:>4}-edge      eth0-TxRx-{irq}",
            irq % 64
        );
        t.push_kernel_row(RowLabel::Irq(irqpilot_core::IrqNum(irq)), 4, &counts, &tail);
    }
    t.push_kernel_row(
        RowLabel::Named("LOC".into()),
        4,
        &[5; 256],
        "   Local timer interrupts",
    );
    t.push_kernel_row(RowLabel::Named("ERR".into()), 4, &[0], "");
    render_interrupts(&t)
}

/// Once warm, parsing and rendering the same file again into the same table and string allocate
/// nothing. Warm takes two parses: the first fills the rows, the first `clear` moves them to the
/// spare list (whose vector grows once).
#[test]
fn reparse_and_rerender_do_not_allocate() {
    let mut texts = vec![(
        "generated 256 CPUs x 800 IRQs".to_string(),
        generated_large(),
    )];
    if let Some(dir) = corpus() {
        texts.extend(files(&dir, "txt"));
    }
    let mut table = InterruptTable::default();
    let mut out = String::new();
    for (name, text) in &texts {
        for _ in 0..2 {
            parse_interrupts_into(text, &mut table).unwrap();
        }
        render_interrupts_into(&table, &mut out);
        let (n, ()) = counting::allocations(|| {
            parse_interrupts_into(text, &mut table).unwrap();
            render_interrupts_into(&table, &mut out);
        });
        assert_eq!(n, 0, "{name}: {n} allocations on re-parse and re-render");
        assert_eq!(table, parse_interrupts(text).unwrap(), "{name}");
    }
}

#[test]
fn generated_large_file_round_trips() {
    let text = generated_large();
    let t = parse_interrupts(&text).unwrap();
    assert_eq!((t.cpus.len(), t.rows().len()), (256, 802));
    assert_eq!(render_interrupts(&t), text);
    let d = parse_descs(&t);
    assert_eq!(d[799].as_ref().unwrap().hwirq, Some(799 % 64));
}
