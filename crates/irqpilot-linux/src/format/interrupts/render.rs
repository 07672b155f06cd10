//! [`InterruptTable`] -> text, in the layout documented on [`irqpilot_core::InterruptRow`].

use irqpilot_core::InterruptTable;

/// Prints the table as `/proc/interrupts` text.
pub fn render_interrupts(table: &InterruptTable) -> String {
    let mut out = String::new();
    render_interrupts_into(table, &mut out);
    out
}

/// Prints the table into `out` (cleared first, its allocation kept): the header, then per row
/// `lead`, the first count right-aligned in `first_width` columns, `" "` and a 10-column field per
/// further count, `tail`, and a newline; the last newline only if `final_newline`.
pub fn render_interrupts_into(table: &InterruptTable, out: &mut String) {
    out.clear();
    // Built as bytes (digits and spaces pushed directly), turned back into a String at the end:
    // every piece is either ASCII or copied from a `&str`, so the check cannot fail.
    let mut buf = std::mem::take(out).into_bytes();
    buf.reserve(estimate(table));
    buf.extend_from_slice(table.header.as_bytes());
    buf.push(b'\n');
    for row in table.rows() {
        buf.extend_from_slice(row.lead.as_bytes());
        if let Some((first, rest)) = table.counts(row).split_first() {
            push_padded(&mut buf, *first, usize::from(row.first_width));
            for &c in rest {
                buf.push(b' ');
                push_padded(&mut buf, c, 10);
            }
        }
        buf.extend_from_slice(row.tail.as_bytes());
        buf.push(b'\n');
    }
    if !table.final_newline {
        buf.pop();
    }
    *out = String::from_utf8(buf)
        .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned());
}

/// Bytes the rendered text will need (close enough to avoid regrowing the buffer).
fn estimate(table: &InterruptTable) -> usize {
    table.header.len()
        + 1
        + table
            .rows()
            .iter()
            .map(|r| r.lead.len() + r.tail.len() + 1 + 11 * table.counts(r).len())
            .sum::<usize>()
}

/// Appends `v` right-aligned in `width` columns (wider if it has more digits).
#[inline]
pub(crate) fn push_padded(buf: &mut Vec<u8>, mut v: u64, width: usize) {
    const SPACES: [u8; 64] = [b' '; 64];
    // Digits are written right to left into a space-filled buffer, so its last `width` bytes
    // are the padded field whenever the number fits (a u64 has at most 20 digits).
    let mut tmp = [b' '; 20];
    let mut i = tmp.len();
    loop {
        i -= 1;
        tmp[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    let mut extra = width.saturating_sub(tmp.len());
    while extra > 0 {
        let n = extra.min(SPACES.len());
        buf.extend_from_slice(&SPACES[..n]);
        extra -= n;
    }
    let from = i.min(tmp.len().saturating_sub(width));
    buf.extend_from_slice(&tmp[from..]);
}
