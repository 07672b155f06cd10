//! `/proc/softirqs`: per softirq type, one count per *possible* CPU.
//!
//! The kernel (`fs/proc/softirqs.c`) prints a header of 20 spaces and `CPU%-8d` per possible CPU,
//! then one row per softirq type: the name as `%12s:` and ` %10u` per CPU. The layout is fixed,
//! so [`render_softirqs`] rebuilds it from the model and every kernel-printed file round-trips
//! byte for byte. The columns are possible CPUs, not online ones: a machine with hot-unplugged
//! CPUs has more columns here than in `/proc/interrupts`.

use crate::ParseError;
use crate::format::interrupts::{cpu_columns, push_padded, show};
use crate::format::stat::parse_u64;
use irqpilot_core::SoftirqTable;

/// Parses `/proc/softirqs` text. Blank lines are skipped; the first other line is the header.
///
/// Errors: no `CPUn` header, a row without `name:`, a row with another number of counts than
/// the header has CPUs, a malformed count.
pub fn parse_softirqs(text: &str) -> Result<SoftirqTable, ParseError> {
    let mut table = SoftirqTable::default();
    parse_softirqs_into(text, &mut table)?;
    Ok(table)
}

/// [`parse_softirqs`] into an existing table, reusing its rows' names and count vectors: parsing
/// the same machine's file again allocates nothing. On error `table` is left empty.
pub fn parse_softirqs_into(text: &str, table: &mut SoftirqTable) -> Result<(), ParseError> {
    let result = parse_reusing(text, table);
    if result.is_err() {
        table.cpus.clear();
        table.rows.clear();
    }
    result
}

fn parse_reusing(text: &str, table: &mut SoftirqTable) -> Result<(), ParseError> {
    table.cpus.clear();
    let mut header_seen = false;
    let mut used = 0usize;
    for (index, line) in text.split('\n').enumerate() {
        let line_no = index + 1;
        let err = |m: String| ParseError::new(line_no, m);
        if line.bytes().all(|b| b == b' ' || b == b'\t') {
            continue;
        }
        if !header_seen {
            cpu_columns(line, &mut table.cpus).map_err(err)?;
            header_seen = true;
            continue;
        }
        let Some((name, rest)) = line.split_once(':') else {
            return Err(err(format!("no `:` in `{}`", show(line))));
        };
        let name = name.trim_start_matches(' ');
        if name.is_empty() || !name.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(err(format!("invalid softirq name `{}`", show(name))));
        }
        if table.rows[..used].iter().any(|(n, _)| n == name) {
            return Err(err(format!("softirq `{}` is listed twice", show(name))));
        }
        if used == table.rows.len() {
            table
                .rows
                .push((String::new(), Vec::with_capacity(table.cpus.len())));
        }
        let (slot_name, counts) = &mut table.rows[used];
        used += 1;
        slot_name.clear();
        slot_name.push_str(name);
        counts.clear();
        for token in rest.split([' ', '\t']).filter(|t| !t.is_empty()) {
            let v = parse_u64(token)
                .ok_or_else(|| err(format!("`{name}`: invalid count `{}`", show(token))))?;
            counts.push(v);
        }
        if counts.len() != table.cpus.len() {
            return Err(err(format!(
                "`{name}` has {} counts but the header has {} CPUs",
                counts.len(),
                table.cpus.len()
            )));
        }
    }
    table.rows.truncate(used);
    if !header_seen {
        return Err(ParseError::new(0, "no CPU header: the text has no lines"));
    }
    Ok(())
}

/// Prints `/proc/softirqs` text in the kernel's layout.
pub fn render_softirqs(table: &SoftirqTable) -> String {
    let mut buf: Vec<u8> =
        Vec::with_capacity(32 + (table.rows.len() + 1) * (16 + 11 * table.cpus.len()));
    buf.extend_from_slice(&[b' '; 20]);
    for cpu in &table.cpus {
        let start = buf.len();
        buf.extend_from_slice(b"CPU");
        push_padded(&mut buf, u64::from(cpu.0), 0);
        // `CPU%-8d`: the number left-aligned in 8 columns.
        while buf.len() - start < 11 {
            buf.push(b' ');
        }
    }
    buf.push(b'\n');
    for (name, counts) in &table.rows {
        buf.extend(std::iter::repeat_n(
            b' ',
            12usize.saturating_sub(name.len()),
        ));
        buf.extend_from_slice(name.as_bytes());
        buf.push(b':');
        for &c in counts {
            buf.push(b' ');
            push_padded(&mut buf, c, 10);
        }
        buf.push(b'\n');
    }
    String::from_utf8(buf).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use irqpilot_core::CpuId;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn arbitrary_text_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..400)) {
            let text = String::from_utf8_lossy(&bytes);
            let _ = parse_softirqs(&text);
            let _ = parse_softirqs(&format!("                    CPU0       CPU1\n{text}"));
        }

        #[test]
        fn generated_tables_round_trip_exactly(
            cpus in prop::collection::btree_set(0u32..2048, 1..40),
            // Each softirq once, as the kernel prints them.
            rows in prop::collection::btree_map("[A-Z][A-Z_]{0,13}", any::<u64>(), 0..12),
        ) {
            let cpus: Vec<CpuId> = cpus.into_iter().map(CpuId).collect();
            let n = cpus.len() as u64;
            let rows = rows
                .into_iter()
                .map(|(name, seed)| (name, (0..n).map(|i| seed.rotate_left(i as u32) >> (i % 64)).collect()))
                .collect();
            let t = SoftirqTable { cpus, rows };
            let text = render_softirqs(&t);
            let back = parse_softirqs(&text);
            prop_assert_eq!(back.as_ref(), Ok(&t));
            prop_assert_eq!(render_softirqs(&back.unwrap()), text);
        }
    }

    const FOUR: &str = "                    CPU0       CPU1       CPU2       CPU3       
          HI:         29          0          0          0
       TIMER:      41380       7501       3748       2241
BLOCK_IOPOLL:         28          0          0          0
";

    #[test]
    fn parse_into_reuses_and_matches() {
        let mut t = parse_softirqs(FOUR).unwrap();
        parse_softirqs_into("                    CPU0\n      HI:          5\n", &mut t).unwrap();
        assert_eq!(t.cpus, vec![CpuId(0)]);
        assert_eq!(t.rows, vec![("HI".to_string(), vec![5])]);
        parse_softirqs_into(FOUR, &mut t).unwrap();
        assert_eq!(t, parse_softirqs(FOUR).unwrap());
        assert!(parse_softirqs_into("junk\n", &mut t).is_err());
        assert!(t.rows.is_empty() && t.cpus.is_empty());
    }

    #[test]
    fn kernel_layout_round_trips() {
        let t = parse_softirqs(FOUR).unwrap();
        assert_eq!(t.cpus, vec![CpuId(0), CpuId(1), CpuId(2), CpuId(3)]);
        assert_eq!(t.row("TIMER"), Some(&[41380, 7501, 3748, 2241][..]));
        assert_eq!(t.rows[2].0, "BLOCK_IOPOLL");
        assert_eq!(render_softirqs(&t), FOUR);
    }

    #[test]
    fn wide_cpu_numbers_and_counts() {
        let mut t = SoftirqTable {
            cpus: vec![CpuId(999), CpuId(1000)],
            rows: vec![("NET_RX".into(), vec![12_345_678_901, 0])],
        };
        let text = render_softirqs(&t);
        assert!(text.starts_with("                    CPU999     CPU1000    \n"));
        assert!(text.ends_with("      NET_RX: 12345678901          0\n"));
        assert_eq!(parse_softirqs(&text).unwrap(), t);
        t.rows[0].0 = "A_VERY_LONG_NAME".into();
        assert_eq!(parse_softirqs(&render_softirqs(&t)).unwrap(), t);
    }

    #[test]
    fn errors() {
        assert_eq!(parse_softirqs("").unwrap_err().line, 0);
        assert!(
            parse_softirqs("HI: 1 2\n")
                .unwrap_err()
                .message
                .contains("no CPU header")
        );
        let head = "                    CPU0       CPU1\n";
        let e = parse_softirqs(&format!("{head}          HI:          1\n")).unwrap_err();
        assert_eq!(e.line, 2);
        assert!(e.message.contains("1 counts but the header has 2"), "{e}");
        let e = parse_softirqs(&format!("{head}          HI:          1 2 3\n")).unwrap_err();
        assert!(e.message.contains("3 counts"), "{e}");
        let e = parse_softirqs(&format!("{head}          HI:          1 2x\n")).unwrap_err();
        assert!(e.message.contains("`2x`"), "{e}");
        assert!(parse_softirqs(&format!("{head}  HI 1 2\n")).is_err());
        assert!(parse_softirqs(&format!("{head}\0: 1 2\n")).is_err());
        assert!(parse_softirqs(&format!("{head}    : 1 2\n")).is_err());
    }

    #[test]
    fn live_proc_softirqs_round_trips() {
        let Ok(text) = std::fs::read_to_string("/proc/softirqs") else {
            eprintln!("no /proc/softirqs here: skipped");
            return;
        };
        let t = parse_softirqs(&text).unwrap();
        assert!(t.row("TIMER").is_some());
        assert_eq!(render_softirqs(&t), text);
    }
}
