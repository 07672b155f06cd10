//! `/proc/stat`: CPU time per CPU, interrupt and softirq totals, and a few system counters.
//!
//! The kernel (`fs/proc/stat.c`) prints `cpu  ` and `cpuN ` lines with 4 to 10 tick counts (the
//! number grew with kernel versions: 2.6.16 prints 8), `intr` with the total then one count per
//! IRQ number, `ctxt`, `btime`, `processes`, `procs_running`, `procs_blocked`, and since 2.6.31
//! `softirq` with the total then one count per softirq type. Lines irqpilot does not interpret are
//! kept verbatim in [`ProcStat::other`].
//!
//! [`render_stat`] prints `cpu` lines, `intr`, the other lines in file order, then `softirq`: the
//! kernel's order since 2.6, so every file a 2.6+ kernel printed round-trips byte for byte.

use crate::ParseError;
use crate::format::interrupts::{push_padded, show};
use irqpilot_core::{CpuId, CpuTicks, ProcStat};

/// Parses `/proc/stat` text. Blank lines are skipped.
///
/// Errors: a `cpu` line with fewer than 4 or more than 10 numbers, a repeated `cpu`, `intr` or
/// `softirq` line, a malformed number, a key with control characters.
pub fn parse_stat(text: &str) -> Result<ProcStat, ParseError> {
    let mut stat = ProcStat::default();
    parse_stat_into(text, &mut stat)?;
    Ok(stat)
}

/// [`parse_stat`] into an existing [`ProcStat`], reusing its vectors and strings: a sampler that
/// parses the same machine's file again and again stops allocating once it has seen it. On error
/// `stat` is left empty.
pub fn parse_stat_into(text: &str, stat: &mut ProcStat) -> Result<(), ParseError> {
    let result = parse_stat_reusing(text, stat);
    if result.is_err() {
        *stat = ProcStat::default();
    }
    result
}

fn parse_stat_reusing(text: &str, stat: &mut ProcStat) -> Result<(), ParseError> {
    stat.total = None;
    stat.per_cpu.clear();
    // The count vectors and the `other` strings are kept and refilled in place.
    let mut intr = stat.intr.take().map(|(_, v)| v).unwrap_or_default();
    let mut softirq = stat.softirq.take().map(|(_, v)| v).unwrap_or_default();
    let (mut seen_intr, mut seen_softirq) = (None, None);
    let mut others = 0usize;
    for (index, line) in text.split('\n').enumerate() {
        let line_no = index + 1;
        let err = |m: String| ParseError::new(line_no, m);
        if line.bytes().all(|b| b == b' ' || b == b'\t') {
            continue;
        }
        if let Some(b) = line
            .bytes()
            .find(|&b| (b < 0x20 && b != b'\t') || b == 0x7f)
        {
            return Err(err(format!("control character {:?}", char::from(b))));
        }
        let (key, rest) = line.split_once(' ').unwrap_or((line, ""));
        if key == "cpu" || cpu_number(key).is_some() {
            let ticks = ticks_of(rest).map_err(|m| err(format!("`{key}`: {m}")))?;
            match cpu_number(key) {
                // Lines come in CPU order: only one out of order can repeat a CPU.
                Some(cpu)
                    if stat.per_cpu.last().is_some_and(|(last, _)| last.0 >= cpu)
                        && stat.per_cpu.iter().any(|(c, _)| c.0 == cpu) =>
                {
                    return Err(err(format!("`cpu{cpu}` is listed twice")));
                }
                Some(cpu) => stat.per_cpu.push((CpuId(cpu), ticks)),
                None if stat.total.is_some() => return Err(err("repeated `cpu` line".into())),
                None => stat.total = Some(ticks),
            }
        } else if key == "intr" || key == "softirq" {
            let (slot, buf) = if key == "intr" {
                (&mut seen_intr, &mut intr)
            } else {
                (&mut seen_softirq, &mut softirq)
            };
            if slot.is_some() {
                return Err(err(format!("repeated `{key}` line")));
            }
            numbers(rest, buf).map_err(|m| err(format!("`{key}`: {m}")))?;
            if buf.is_empty() {
                return Err(err(format!("`{key}` line without a total")));
            }
            // The total is the first number; the rest are the per-IRQ or per-type counts.
            *slot = Some(buf.remove(0));
        } else if key.is_empty() {
            return Err(err(format!("line starts with a space: `{}`", show(line))));
        } else {
            match stat.other.get_mut(others) {
                Some((k, r)) => {
                    k.clear();
                    k.push_str(key);
                    r.clear();
                    r.push_str(rest);
                }
                None => stat.other.push((key.to_string(), rest.to_string())),
            }
            others += 1;
        }
    }
    stat.other.truncate(others);
    stat.intr = seen_intr.map(|total| (total, intr));
    stat.softirq = seen_softirq.map(|total| (total, softirq));
    Ok(())
}

/// The tick counts of a `cpu` line, without a temporary vector.
fn ticks_of(rest: &str) -> Result<CpuTicks, String> {
    let mut n = [0u64; 10];
    let mut len = 0usize;
    for token in rest.split(' ').filter(|t| !t.is_empty()) {
        let v = parse_u64(token).ok_or_else(|| format!("invalid number `{}`", show(token)))?;
        if len == n.len() {
            // Count them all for the message, as the vector version did.
            let extra = rest.split(' ').filter(|t| !t.is_empty()).count();
            return Err(format!("{extra} numbers, expected 4 to 10"));
        }
        n[len] = v;
        len += 1;
    }
    ticks(&n[..len])
}

/// `cpu12` -> 12.
fn cpu_number(key: &str) -> Option<u32> {
    crate::format::interrupts::parse_u32(key.strip_prefix("cpu")?)
}

/// Space-separated decimal numbers into `out` (cleared first).
fn numbers(s: &str, out: &mut Vec<u64>) -> Result<(), String> {
    out.clear();
    for token in s.split(' ').filter(|t| !t.is_empty()) {
        let v = parse_u64(token).ok_or_else(|| format!("invalid number `{}`", show(token)))?;
        out.push(v);
    }
    Ok(())
}

/// A decimal `u64` of ASCII digits only.
pub(crate) fn parse_u64(s: &str) -> Option<u64> {
    if s.is_empty() || !s.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

fn ticks(n: &[u64]) -> Result<CpuTicks, String> {
    if !(4..=10).contains(&n.len()) {
        return Err(format!("{} numbers, expected 4 to 10", n.len()));
    }
    let at = |i: usize| n.get(i).copied();
    Ok(CpuTicks {
        user: n[0],
        nice: n[1],
        system: n[2],
        idle: n[3],
        iowait: at(4),
        irq: at(5),
        softirq: at(6),
        steal: at(7),
        guest: at(8),
        guest_nice: at(9),
        fields: n.len() as u8,
    })
}

/// Prints `/proc/stat` text (see the module documentation for the line order).
pub fn render_stat(stat: &ProcStat) -> String {
    let mut buf: Vec<u8> = Vec::with_capacity(
        64 * (stat.per_cpu.len() + stat.other.len() + 4)
            + 12 * stat.intr.as_ref().map_or(0, |(_, v)| v.len()),
    );
    if let Some(t) = &stat.total {
        buf.extend_from_slice(b"cpu ");
        push_ticks(&mut buf, t);
    }
    for (cpu, t) in &stat.per_cpu {
        buf.extend_from_slice(b"cpu");
        push_padded(&mut buf, u64::from(cpu.0), 0);
        push_ticks(&mut buf, t);
    }
    if let Some((total, each)) = &stat.intr {
        push_counts(&mut buf, b"intr", *total, each);
    }
    for (key, rest) in &stat.other {
        buf.extend_from_slice(key.as_bytes());
        if !rest.is_empty() {
            buf.push(b' ');
            buf.extend_from_slice(rest.as_bytes());
        }
        buf.push(b'\n');
    }
    if let Some((total, each)) = &stat.softirq {
        push_counts(&mut buf, b"softirq", *total, each);
    }
    String::from_utf8(buf).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// ` a b c ...` with as many tick fields as the line had, then a newline.
fn push_ticks(buf: &mut Vec<u8>, t: &CpuTicks) {
    let optional = [t.iowait, t.irq, t.softirq, t.steal, t.guest, t.guest_nice];
    let extra = usize::from(t.fields).clamp(4, 10) - 4;
    let fields = [t.user, t.nice, t.system, t.idle]
        .into_iter()
        .chain(optional.into_iter().take(extra).map(|v| v.unwrap_or(0)));
    for v in fields {
        buf.push(b' ');
        push_padded(buf, v, 0);
    }
    buf.push(b'\n');
}

fn push_counts(buf: &mut Vec<u8>, key: &[u8], total: u64, each: &[u64]) {
    buf.extend_from_slice(key);
    for v in std::iter::once(&total).chain(each) {
        buf.push(b' ');
        push_padded(buf, *v, 0);
    }
    buf.push(b'\n');
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const STAT_418: &str = "\
cpu  12333 29 11930 386965 126 4523 2711 0 0 0
cpu0 6088 14 5849 193612 93 2230 1398 0 0 0
cpu1 6245 14 6081 193353 32 2293 1312 0 0 0
intr 1164323 0 0 0 0 0 0 0 0 1 0 0
ctxt 5562073
btime 1569982765
processes 5959
procs_running 3
procs_blocked 0
softirq 2817870 0 1040794 68 435652 25900 0 28629 572137 0 714690
";

    #[test]
    fn modern_file_round_trips() {
        let s = parse_stat(STAT_418).unwrap();
        let total = s.total.unwrap();
        assert_eq!((total.user, total.idle, total.fields), (12333, 386965, 10));
        assert_eq!(total.guest_nice, Some(0));
        assert_eq!(s.per_cpu.len(), 2);
        assert_eq!(s.cpu(CpuId(1)).unwrap().softirq, Some(1312));
        let (intr_total, intr) = s.intr.as_ref().unwrap();
        assert_eq!((*intr_total, intr.len(), intr[8]), (1164323, 11, 1));
        assert_eq!(s.softirq.as_ref().unwrap().1.len(), 10);
        assert_eq!(s.other[0], ("ctxt".to_string(), "5562073".to_string()));
        assert_eq!(s.other.len(), 5);
        assert_eq!(render_stat(&s), STAT_418);
    }

    #[test]
    fn eight_field_cpu_lines_of_2_6_16() {
        let text = "cpu  96 0 2629 14389 0 102 1007 0\ncpu0 96 0 2629 14389 0 102 1007 0\n\
                    intr 31431 0 0 9\nctxt 25774\n";
        let s = parse_stat(text).unwrap();
        let t = s.total.unwrap();
        assert_eq!((t.fields, t.steal, t.guest), (8, Some(0), None));
        assert!(s.softirq.is_none());
        assert_eq!(render_stat(&s), text);
    }

    #[test]
    fn four_fields_minimum_ten_maximum() {
        let s = parse_stat("cpu  1 2 3 4\n").unwrap();
        assert_eq!(s.total.unwrap().iowait, None);
        assert_eq!(render_stat(&s), "cpu  1 2 3 4\n");
        let e = parse_stat("cpu  1 2 3\n").unwrap_err();
        assert_eq!(e.line, 1);
        assert!(e.message.contains("3 numbers"), "{e}");
        assert!(parse_stat("cpu0 1 2 3 4 5 6 7 8 9 10 11\n").is_err());
    }

    #[test]
    fn other_lines_keep_their_text_and_order() {
        let text = "cpu  1 2 3 4\npage 5741 1808\nswap 1 0\nintr 5 1 4\nbtime 7\nodd\n";
        let s = parse_stat(text).unwrap();
        assert_eq!(s.other[0], ("page".into(), "5741 1808".into()));
        assert_eq!(s.other[3], ("odd".into(), String::new()));
        // `intr` prints before the other lines (the kernel's order since 2.6); the data survives.
        let back = render_stat(&s);
        assert_eq!(
            back,
            "cpu  1 2 3 4\nintr 5 1 4\npage 5741 1808\nswap 1 0\nbtime 7\nodd\n"
        );
        assert_eq!(parse_stat(&back).unwrap(), s);
    }

    #[test]
    fn parse_into_reuses_and_matches() {
        let mut s = parse_stat(STAT_418).unwrap();
        parse_stat_into("cpu  1 2 3 4\nbtime 7\n", &mut s).unwrap();
        assert_eq!(s, parse_stat("cpu  1 2 3 4\nbtime 7\n").unwrap());
        assert!(s.intr.is_none() && s.softirq.is_none());
        parse_stat_into(STAT_418, &mut s).unwrap();
        assert_eq!(s, parse_stat(STAT_418).unwrap());
        assert!(parse_stat_into("intr 1\nintr 2\n", &mut s).is_err());
        assert_eq!(s, ProcStat::default());
    }

    #[test]
    fn errors_name_line_and_token() {
        let e = parse_stat("cpu  1 2 3 4\nintr 12 3x 4\n").unwrap_err();
        assert_eq!(e.line, 2);
        assert!(e.message.contains("`3x`"), "{e}");
        assert_eq!(parse_stat("intr 1\nintr 2\n").unwrap_err().line, 2);
        assert!(parse_stat("cpu  1 2 3 4\ncpu  1 2 3 4\n").is_err());
        assert!(parse_stat("intr\n").is_err());
        assert!(parse_stat("cpu0 1 2 3 4\n\0\n").is_err());
        assert!(parse_stat(" ctxt 1\n").is_err());
        let e = parse_stat("intr 99999999999999999999999\n").unwrap_err();
        assert!(e.message.contains("invalid number"), "{e}");
    }

    #[test]
    fn empty_text_is_an_empty_stat() {
        assert_eq!(parse_stat("").unwrap(), ProcStat::default());
        assert_eq!(render_stat(&ProcStat::default()), "");
    }

    fn gen_ticks() -> impl Strategy<Value = CpuTicks> {
        (4usize..=10, prop::collection::vec(any::<u64>(), 10)).prop_map(|(fields, v)| {
            let at = |i: usize| (i < fields).then_some(v[i]);
            CpuTicks {
                user: v[0],
                nice: v[1],
                system: v[2],
                idle: v[3],
                iowait: at(4),
                irq: at(5),
                softirq: at(6),
                steal: at(7),
                guest: at(8),
                guest_nice: at(9),
                fields: fields as u8,
            }
        })
    }

    fn gen_counts() -> impl Strategy<Value = Option<(u64, Vec<u64>)>> {
        prop::option::of((any::<u64>(), prop::collection::vec(any::<u64>(), 0..300)))
    }

    fn gen_stat() -> impl Strategy<Value = ProcStat> {
        let other = prop::collection::vec(
            (
                "(ctxt|btime|processes|procs_running|page|x[a-z_]{0,8})",
                "[0-9 a-z]{0,12}",
            ),
            0..6,
        );
        (
            prop::option::of(gen_ticks()),
            // Each CPU once (the kernel prints every online CPU once).
            prop::collection::btree_map(0u32..4096, gen_ticks(), 0..16),
            gen_counts(),
            gen_counts(),
            other,
        )
            .prop_map(|(total, per_cpu, intr, softirq, other)| ProcStat {
                total,
                per_cpu: per_cpu.into_iter().map(|(c, t)| (CpuId(c), t)).collect(),
                intr,
                softirq,
                other,
            })
    }

    proptest! {
        #[test]
        fn arbitrary_text_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..400)) {
            let _ = parse_stat(&String::from_utf8_lossy(&bytes));
        }

        #[test]
        fn stat_like_text_never_panics_and_is_stable(
            text in "((cpu[0-9]?|intr|softirq|ctxt)( [0-9]{1,21}| ){0,12}\n?){0,8}",
        ) {
            if let Ok(s) = parse_stat(&text) {
                prop_assert_eq!(parse_stat(&render_stat(&s)), Ok(s));
            }
        }

        #[test]
        fn generated_stats_round_trip(s in gen_stat()) {
            let text = render_stat(&s);
            prop_assert_eq!(parse_stat(&text), Ok(s));
        }
    }

    #[test]
    fn live_proc_stat_round_trips() {
        let Ok(text) = std::fs::read_to_string("/proc/stat") else {
            eprintln!("no /proc/stat here: skipped");
            return;
        };
        let s = parse_stat(&text).unwrap();
        assert!(s.total.is_some() && !s.per_cpu.is_empty());
        assert_eq!(render_stat(&s), text);
    }
}
