//! Text -> [`InterruptTable`]: one pass over the bytes, no per-row or per-count allocation.

use crate::ParseError;
use irqpilot_core::{CpuId, InterruptTable, IrqNum, RowLabel};

/// A `u64` has at most 20 decimal digits; longer digit runs are rejected rather than guessed.
const MAX_DIGITS: usize = 20;
/// Width of a count field in kernel output (`%10u`).
const FIELD: usize = 10;

/// Parses `/proc/interrupts` text into a new table.
///
/// Blank lines are skipped (the kernel prints none). Errors name the 1-based line and the
/// offending token; see [`parse_interrupts_into`] for the rules.
pub fn parse_interrupts(text: &str) -> Result<InterruptTable, ParseError> {
    let mut table = InterruptTable::default();
    parse_interrupts_into(text, &mut table)?;
    Ok(table)
}

/// Parses `/proc/interrupts` text into `table`, replacing its content but keeping its
/// allocations: parsing a file no larger than one parsed before into the same table allocates
/// nothing.
///
/// The first non-blank line must be the `CPUn` header. A numbered row must carry exactly one
/// count per header CPU (the kernel prints every online CPU for them), so fewer counts, more
/// counts, or a malformed count are errors. A named row may carry any number of counts
/// (`ERR:` one, `FIQ:` none, old ARM `IPIn:` one per present CPU). On error the table is left
/// empty.
pub fn parse_interrupts_into(text: &str, table: &mut InterruptTable) -> Result<(), ParseError> {
    table.clear();
    let result = Parser {
        text,
        pos: 0,
        line: 0,
    }
    .run(table);
    if result.is_err() {
        table.clear();
    }
    result
}

struct Parser<'a> {
    text: &'a str,
    /// Byte offset of the next unread line.
    pos: usize,
    /// 1-based number of the line being read.
    line: usize,
}

/// What earlier rows a new row must not repeat: the kernel prints numbered rows in ascending
/// order and each named row once, so a repeat is found with one comparison per numbered row
/// (earlier rows are searched only when one comes out of order) and a search over the named
/// rows only.
#[derive(Default)]
struct Seen {
    last_irq: Option<u32>,
    first_named: Option<usize>,
}

impl Seen {
    /// The line's message when `label` repeats an earlier row of `table`.
    fn repeat(&mut self, table: &InterruptTable, irq: Option<u32>, label: &str) -> Option<String> {
        let rows = table.rows();
        match irq {
            Some(n) => {
                let in_order = self.last_irq.is_none_or(|last| n > last);
                self.last_irq = Some(self.last_irq.map_or(n, |l| l.max(n)));
                let dup = !in_order && rows.iter().any(|r| r.label == RowLabel::Irq(IrqNum(n)));
                dup.then(|| format!("IRQ {n} is listed twice"))
            }
            None => {
                let from = *self.first_named.get_or_insert(rows.len());
                let dup = rows
                    .get(from..)
                    .unwrap_or(&[])
                    .iter()
                    .any(|r| matches!(&r.label, RowLabel::Named(s) if s.as_str() == label));
                dup.then(|| format!("row `{}` is listed twice", show(label)))
            }
        }
    }
}

#[inline(always)]
fn is_space(b: u8) -> bool {
    b == b' ' || b == b'\t'
}

/// Whether `b` may not appear in a line (the kernel prints none): ASCII control characters but
/// tab, and DEL.
#[inline(always)]
fn is_control(b: u8) -> bool {
    (b < 0x20 && b != b'\t') || b == 0x7f
}

/// A token for an error message: escaped, and cut short when long.
pub(crate) fn show(token: &str) -> String {
    const MAX: usize = 40;
    let mut s: String = token
        .chars()
        .take(MAX)
        .flat_map(char::escape_debug)
        .collect();
    if token.chars().nth(MAX).is_some() {
        s.push('…');
    }
    s
}

/// The whitespace-delimited token of `text` starting at byte `start`.
fn token_at(text: &str, start: usize) -> &str {
    let rest = text.get(start..).unwrap_or("");
    let end = rest
        .bytes()
        .position(|b| is_space(b) || b == b'\n')
        .unwrap_or(rest.len());
    rest.get(..end).unwrap_or(rest)
}

impl Parser<'_> {
    fn err(&self, message: impl Into<String>) -> ParseError {
        ParseError::new(self.line, message)
    }

    /// The next line (without its newline), advancing past it; `None` at the end of the text.
    fn next_line(&mut self) -> Option<(usize, usize)> {
        let b = self.text.as_bytes();
        if self.pos >= b.len() {
            return None;
        }
        let start = self.pos;
        let end = b[start..]
            .iter()
            .position(|&c| c == b'\n')
            .map_or(b.len(), |n| start + n);
        self.pos = end + 1;
        self.line += 1;
        Some((start, end))
    }

    fn run(mut self, table: &mut InterruptTable) -> Result<(), ParseError> {
        let b = self.text.as_bytes();
        let mut last_end;
        loop {
            let Some((start, end)) = self.next_line() else {
                return Err(ParseError::new(0, "no CPU header: the text has no lines"));
            };
            if b[start..end].iter().all(|&c| is_space(c)) {
                continue;
            }
            self.header(start, end, table)?;
            last_end = end;
            break;
        }
        let ncpu = table.cpus.len();
        let mut seen = Seen::default();
        while self.pos < b.len() {
            self.line += 1;
            let (end, content) = self.row(self.pos, ncpu, table, &mut seen)?;
            if content {
                last_end = end;
            }
            self.pos = end + 1;
        }
        // Whether the last printed line (blank lines are not kept) had its newline.
        table.final_newline = b.get(last_end) == Some(&b'\n');
        Ok(())
    }

    /// The header: whitespace and `CPUn` tokens only, at least one.
    fn header(
        &self,
        start: usize,
        end: usize,
        table: &mut InterruptTable,
    ) -> Result<(), ParseError> {
        let line = self.text.get(start..end).unwrap_or("");
        cpu_columns(line, &mut table.cpus).map_err(|m| self.err(m))?;
        table.header.push_str(line);
        Ok(())
    }

    /// Parses the row starting at byte `start`; returns where its line ends (the newline or the
    /// end of the text) and whether it was a row (blank lines are skipped).
    fn row(
        &self,
        start: usize,
        ncpu: usize,
        table: &mut InterruptTable,
        seen: &mut Seen,
    ) -> Result<(usize, bool), ParseError> {
        let text = self.text;
        let b = text.as_bytes();
        let len = b.len();
        let mut i = start;
        while i < len && is_space(b[i]) {
            i += 1;
        }
        if i >= len || b[i] == b'\n' {
            return Ok((i, false));
        }

        // Label: printable ASCII up to the colon.
        let label_start = i;
        while i < len && b[i] != b':' && b[i] != b'\n' && !is_space(b[i]) {
            if !b[i].is_ascii_graphic() {
                return Err(self.err(format!(
                    "invalid character in row label `{}`",
                    show(token_at(text, label_start))
                )));
            }
            i += 1;
        }
        if i >= len || b[i] != b':' {
            return Err(self.err(format!(
                "no `:` after the row label `{}`",
                show(token_at(text, label_start))
            )));
        }
        if i == label_start {
            return Err(self.err("row without a label before `:`"));
        }
        let colon = i;
        let label = text.get(label_start..colon).unwrap_or("");
        let irq =
            if label.bytes().all(|c| c.is_ascii_digit()) {
                Some(parse_u32(label).ok_or_else(|| {
                    self.err(format!("IRQ number `{}` out of range", show(label)))
                })?)
            } else {
                None
            };
        if let Some(message) = seen.repeat(table, irq, label) {
            return Err(self.err(message));
        }
        i += 1;

        // Counts. `tail_start` is where the text after the last count begins.
        let mut tail_start = i;
        let mut k = 0usize;
        loop {
            if irq.is_some() && k == ncpu {
                break;
            }
            // The fast paths below apply to fields that start with eight spaces (counts of at
            // most three digits); wider counts skip them with one comparison.
            if k > 0 && word_at(b, i) == Some(SPACES8) {
                // Runs of idle CPUs (` %10u` of 0), the bulk of a big machine's file, are
                // compared against a prepared run and appended in one go.
                let max = if irq.is_some() { ncpu - k } else { usize::MAX };
                let zeros = zero_fields(b, i, max);
                if zeros > 0 {
                    for chunk in 0..zeros.div_ceil(RUN) {
                        let n = (zeros - chunk * RUN).min(RUN);
                        table.push_counts(&[0; RUN][..n]);
                    }
                    k += zeros;
                    i += zeros * (1 + FIELD);
                    tail_start = i;
                    continue;
                }
                if let Some(v) = one_digit_field(b, i) {
                    // The kernel's ` %10u` of a one-digit count (most cells of a big machine
                    // are `0`): same result as the general scan below, a third of the work.
                    table.push_count(v);
                    k += 1;
                    i += 1 + FIELD;
                    tail_start = i;
                    continue;
                }
            }
            let mut j = skip_spaces(b, i);
            let at_eol = j >= len || b[j] == b'\n';
            if at_eol || !b[j].is_ascii_digit() {
                if irq.is_none() {
                    break; // named rows: the description starts here
                }
                let token = token_at(text, j);
                return Err(if at_eol {
                    self.err(format!(
                        "truncated row `{label}`: it ends after {k} of {ncpu} counts"
                    ))
                } else if looks_numeric(token) {
                    // `-5`, `+5`, full-width `１２`: a count, but not one the kernel prints.
                    self.err(format!(
                        "invalid count `{}` in row `{label}`: counts are unsigned decimal numbers",
                        show(token)
                    ))
                } else {
                    self.err(format!(
                        "row `{label}` has {k} counts before `{}` but the header has {ncpu} CPUs",
                        show(token_at(text, j))
                    ))
                });
            }
            let ds = j;
            let Some((v, end)) = scan_digits(b, ds) else {
                return Err(self.err(format!("count `{}` out of range", show(token_at(text, ds)))));
            };
            j = end;
            if j < len && !is_space(b[j]) && b[j] != b'\n' {
                return Err(self.err(format!("invalid count `{}`", show(token_at(text, ds)))));
            }
            if k == 0 {
                let (lead_end, width) = first_field(colon + 1, ds, j - ds);
                let lead = text.get(start..lead_end).unwrap_or("");
                match irq {
                    Some(n) => table.begin_row(RowLabel::Irq(IrqNum(n)), lead, width),
                    None => table.begin_named_row(label, lead, width),
                }
            }
            table.push_count(v);
            k += 1;
            i = j;
            tail_start = j;
        }
        if k == 0 {
            // Only named rows get here (`FIQ:   usb_fiq`): the lead ends at the colon.
            table.begin_named_row(label, text.get(start..colon + 1).unwrap_or(""), FIELD as u8);
        }

        // Tail: verbatim up to the newline, without control characters.
        let mut end = tail_start;
        while end < len && b[end] != b'\n' {
            if is_control(b[end]) {
                return Err(self.err(format!(
                    "control character {:?} in row `{label}`",
                    char::from(b[end])
                )));
            }
            end += 1;
        }
        if irq.is_some() {
            let mut j = tail_start;
            while j < end && is_space(b[j]) {
                j += 1;
            }
            let token = token_at(text, j);
            if !token.is_empty() && token.bytes().all(|c| c.is_ascii_digit()) {
                return Err(self.err(format!(
                    "row `{label}` has more columns than the header's {ncpu} CPUs: `{}`",
                    show(token)
                )));
            }
        }
        table.set_last_tail(text.get(tail_start..end).unwrap_or(""));
        Ok((end, true))
    }
}

/// Eight spaces, for skipping a word of padding at a time.
const SPACES8: u64 = u64::from_le_bytes([b' '; 8]);

/// The eight bytes at `at`, little-endian, when the text has them.
#[inline(always)]
fn word_at(b: &[u8], at: usize) -> Option<u64> {
    let chunk: [u8; 8] = b.get(at..at + 8)?.try_into().ok()?;
    Some(u64::from_le_bytes(chunk))
}

/// Fields compared at once by [`zero_fields`].
const RUN: usize = 64;

/// `RUN` zero counts as the kernel prints them (` %10u` each: ten spaces and `0`).
static ZERO_RUN: [u8; RUN * (1 + FIELD)] = {
    let mut run = [b' '; RUN * (1 + FIELD)];
    let mut k = 0;
    while k < RUN {
        run[k * (1 + FIELD) + FIELD] = b'0';
        k += 1;
    }
    run
};

/// Length of the common prefix of `a` and `b`, eight bytes at a time.
#[inline(always)]
fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    let n = a.len().min(b.len());
    let mut i = 0;
    while i + 8 <= n {
        let (Some(x), Some(y)) = (word_at(a, i), word_at(b, i)) else {
            break;
        };
        if x != y {
            return i + ((x ^ y).trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    while i < n && a[i] == b[i] {
        i += 1;
    }
    i
}

/// How many zero counts printed as ` %10u` start at `i` (at most `max`). The last one must end
/// its field (a space, a newline or the end of the text follows), or it is left to the general
/// scan, which reports `0x` and reads `05` as it always did.
#[inline(never)]
fn zero_fields(b: &[u8], i: usize, max: usize) -> usize {
    const W: usize = 1 + FIELD;
    let mut n = 0;
    while n < max {
        let chunk = (max - n).min(RUN);
        let have = b.get(i + n * W..).unwrap_or(&[]);
        let full = common_prefix(have, &ZERO_RUN[..chunk * W]) / W;
        n += full;
        if full < chunk {
            break;
        }
    }
    if n > 0 && !matches!(b.get(i + n * W), None | Some(b' ' | b'\n')) {
        n -= 1;
    }
    n
}

/// The value of a one-digit count printed as ` %10u` at `i` (ten spaces, the digit, then a
/// space, a newline or the end of the text); `None` for anything else.
#[inline(always)]
fn one_digit_field(b: &[u8], i: usize) -> Option<u64> {
    let w = word_at(b, i)?;
    let rest = b.get(i + 8..i + 1 + FIELD)?;
    if w != SPACES8 || rest[0] != b' ' || rest[1] != b' ' || !rest[2].is_ascii_digit() {
        return None;
    }
    match b.get(i + 1 + FIELD) {
        None | Some(b' ' | b'\n') => Some(u64::from(rest[2] - b'0')),
        Some(_) => None,
    }
}

/// The offset of the first byte at or after `j` that is not a space or tab. Count fields are
/// mostly padding, so spaces are skipped eight at a time.
#[inline(always)]
fn skip_spaces(b: &[u8], mut j: usize) -> usize {
    loop {
        match word_at(b, j) {
            Some(x) if x == SPACES8 => j += 8,
            Some(x) => {
                j += ((x ^ SPACES8).trailing_zeros() / 8) as usize;
                if b[j] != b'\t' {
                    return j;
                }
                j += 1;
            }
            None => {
                while j < b.len() && is_space(b[j]) {
                    j += 1;
                }
                return j;
            }
        }
    }
}

/// The decimal number whose digits start at `ds` (there is at least one) and the offset after
/// its last digit; `None` when it does not fit a `u64` or has more than 20 digits. Up to eight
/// digits are converted at once (SWAR: per-byte digit test, then three multiplications).
#[inline(always)]
fn scan_digits(b: &[u8], ds: usize) -> Option<(u64, usize)> {
    const LOW_NIBBLES: u64 = 0x0F0F_0F0F_0F0F_0F0F;
    const HIGH_NIBBLES: u64 = 0xF0F0_F0F0_F0F0_F0F0;
    const THREES: u64 = 0x3030_3030_3030_3030;
    const SIXES: u64 = 0x0606_0606_0606_0606;
    let (mut v, mut j) = match word_at(b, ds) {
        Some(x) => {
            // A byte is a digit when its high nibble is 3 and adding 6 keeps it so (0x30-0x39).
            // The addition cannot carry between bytes: UTF-8 text has no byte above 0xF4.
            let not_digit =
                ((x & HIGH_NIBBLES) ^ THREES) | ((x.wrapping_add(SIXES) & HIGH_NIBBLES) ^ THREES);
            let n = if not_digit == 0 {
                8
            } else {
                (not_digit.trailing_zeros() / 8) as usize
            };
            if n == 1 {
                // Most per-CPU counts of a big machine are one digit (`0`): skip the
                // multiplications, whose latency dominates the scan otherwise.
                return Some((x & 0x0F, ds + 1));
            }
            // Keep the n digits' values, shifted so that missing digits are leading zeros.
            // (The caller saw a digit at `ds`, so n >= 1 and the shift is below 64.)
            let d = (x & LOW_NIBBLES)
                .checked_shl(8 * (8 - n as u32))
                .unwrap_or(0);
            // Pairs, then quads, then the eight: each step multiplies the higher-order half by
            // 10, 100, 10000 and adds the lower one (digit order is reversed in a LE word).
            let d = d.wrapping_mul((10 << 8) + 1) >> 8;
            let d = (d & 0x00FF_00FF_00FF_00FF).wrapping_mul((100 << 16) + 1) >> 16;
            let d = (d & 0x0000_FFFF_0000_FFFF).wrapping_mul((10_000 << 32) + 1) >> 32;
            if n < 8 {
                // The byte after the digits is not a digit: the number is complete.
                return Some((d, ds + n));
            }
            (d, ds + n)
        }
        None => (0, ds),
    };
    // Digits past the first eight (or near the end of the text), one at a time.
    while j < b.len() && b[j].is_ascii_digit() {
        if j - ds >= MAX_DIGITS {
            return None;
        }
        v = v.checked_mul(10)?.checked_add(u64::from(b[j] - b'0'))?;
        j += 1;
    }
    Some((v, j))
}

/// [`scan_digits`] over text, for the unit tests.
#[cfg(test)]
pub(super) fn scan_digits_for_test(text: &str, ds: usize) -> Option<(u64, usize)> {
    scan_digits(text.as_bytes(), ds)
}

/// [`skip_spaces`] over text, for the unit tests.
#[cfg(test)]
pub(super) fn skip_spaces_for_test(text: &str, j: usize) -> usize {
    skip_spaces(text.as_bytes(), j)
}

/// Where the first count's field starts and how wide it is, so that `lead` + the count
/// right-aligned in `width` reproduces the text. `min_start` is just after the colon, the digits
/// are at `digits_start` (`n_digits` long). The field takes as many of the spaces before the
/// digits as a 10-column field needs, so kernel output always gets width 10 and a re-parse of
/// rendered text gives the same split.
fn first_field(min_start: usize, digits_start: usize, n_digits: usize) -> (usize, u8) {
    let want = FIELD.saturating_sub(n_digits);
    let pad = want.min(digits_start - min_start);
    let width = if pad == want { FIELD } else { n_digits + pad };
    // n_digits <= MAX_DIGITS, so width <= 20.
    (digits_start - pad, width as u8)
}

/// Reads a `CPUn CPUm ...` header (`/proc/interrupts`, `/proc/softirqs`) into `cpus`; the error
/// is a message naming the offending token.
pub(crate) fn cpu_columns(line: &str, cpus: &mut Vec<CpuId>) -> Result<(), String> {
    for token in line.split([' ', '\t']).filter(|t| !t.is_empty()) {
        let num = token.strip_prefix("CPU").unwrap_or("");
        let cpu = parse_u32(num).ok_or_else(|| {
            format!(
                "no CPU header: expected `CPUn` columns, found `{}`",
                show(token)
            )
        })?;
        // The kernel prints each online CPU once, in order: only an out-of-order column can
        // repeat one, and only then is the header searched.
        if cpus.last().is_some_and(|last| last.0 >= cpu) && cpus.contains(&CpuId(cpu)) {
            return Err(format!("CPU{cpu} appears twice in the header"));
        }
        cpus.push(CpuId(cpu));
    }
    if cpus.is_empty() {
        return Err("no CPU header: the first line names no CPU".to_string());
    }
    Ok(())
}

/// Whether `token` was meant as a number: a sign before a digit, or any digit of any script.
fn looks_numeric(token: &str) -> bool {
    let rest = token.strip_prefix(['-', '+']).unwrap_or(token);
    rest.chars().next().is_some_and(char::is_numeric)
}

/// A decimal `u32` of ASCII digits only (no sign, no spaces).
pub(crate) fn parse_u32(s: &str) -> Option<u32> {
    if s.is_empty() || !s.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

#[cfg(test)]
mod fast_path_tests {
    use super::*;

    #[test]
    fn one_digit_fields() {
        let f = |s: &str, i| one_digit_field(s.as_bytes(), i);
        assert_eq!(f("          0 ", 0), Some(0));
        assert_eq!(f("          7\n", 0), Some(7));
        assert_eq!(f("          7", 0), Some(7), "end of text");
        assert_eq!(f("         17 ", 0), None, "two digits: the general scan");
        assert_eq!(
            f("          7x", 0),
            None,
            "not a count: the general scan reports it"
        );
        assert_eq!(f("         \t7 ", 0), None, "tabs: the general scan");
        assert_eq!(f("          x ", 0), None);
        assert_eq!(f("      0", 0), None, "too short");
    }

    #[test]
    fn zero_runs() {
        let z = |s: &str, max| zero_fields(s.as_bytes(), 0, max);
        let zero = "          0";
        assert_eq!(z(&zero.repeat(3), 10), 3);
        assert_eq!(z(&format!("{}\n", zero.repeat(3)), 10), 3);
        assert_eq!(
            z(&zero.repeat(3), 2),
            2,
            "never more than the header's CPUs"
        );
        assert_eq!(z(&zero.repeat(200), 500), 200, "runs longer than one chunk");
        assert_eq!(z(&format!("{}         17", zero.repeat(2)), 10), 2);
        assert_eq!(
            z(&format!("{}x", zero.repeat(2)), 10),
            1,
            "`0x`: the general scan"
        );
        assert_eq!(
            z(&format!("{}5", zero.repeat(2)), 10),
            1,
            "`05`: the general scan"
        );
        assert_eq!(
            z("         0 ", 10),
            0,
            "nine spaces is not the kernel's field"
        );
        assert_eq!(common_prefix(b"abcdefghij", b"abcdefgXij"), 7);
        assert_eq!(common_prefix(b"abc", b"abcdef"), 3);
    }

    #[test]
    fn idle_rows_parse_like_before() {
        let head: String = (0..150).map(|c| format!("CPU{c:<8}")).collect();
        let mut counts = vec![0u64; 150];
        counts[70] = 12;
        counts[149] = 3;
        let fields: String = counts.iter().map(|c| format!(" {c:>10}")).collect();
        let text = format!(
            "{}{head}\n 24:{fields}  IR-PCI-MSIX-0000:3b:00.0   1-edge      eth0\n",
            " ".repeat(11)
        );
        let t = parse_interrupts(&text).unwrap();
        assert_eq!(t.counts(&t.rows()[0]), counts.as_slice());
        assert_eq!(crate::format::interrupts::render_interrupts(&t), text);
        let more = text.replace("  IR-PCI", "          0  IR-PCI");
        assert!(
            parse_interrupts(&more)
                .unwrap_err()
                .message
                .contains("more columns")
        );
    }

    #[test]
    fn fast_and_general_paths_agree() {
        // The same counts with fields the fast path takes and fields it leaves.
        let head = "           CPU0       CPU1       CPU2\n";
        let a = format!("{head} 24:          5          0          9   IO-APIC   5-edge  a\n");
        let b = format!("{head} 24:          5\t0         \t9   IO-APIC   5-edge  a\n");
        let (ta, tb) = (parse_interrupts(&a).unwrap(), parse_interrupts(&b).unwrap());
        assert_eq!(ta.counts(&ta.rows()[0]), [5, 0, 9]);
        assert_eq!(tb.counts(&tb.rows()[0]), [5, 0, 9]);
        assert_eq!(ta.rows()[0].tail, tb.rows()[0].tail);
        let bad = format!("{head} 24:          5          0          9x  IO-APIC\n");
        assert!(parse_interrupts(&bad).unwrap_err().message.contains("9x"));
        let short = format!("{head} 24:          5          0\n");
        assert!(
            parse_interrupts(&short)
                .unwrap_err()
                .message
                .contains("2 of 3")
        );
    }
}

#[cfg(test)]
mod fast_path_proptests {
    use super::*;
    use irqpilot_core::CpuId;
    use proptest::prelude::*;

    /// Kernel text for rows that are mostly zeros (a big, mostly idle machine).
    fn sparse_text() -> impl Strategy<Value = String> {
        let count =
            prop_oneof![8 => Just(0u64), 1 => 0u64..10, 1 => any::<u32>().prop_map(u64::from)];
        (
            1usize..150,
            prop::collection::vec(prop::collection::vec(count, 150), 1..6),
        )
            .prop_map(|(ncpu, rows)| {
                let cpus: Vec<CpuId> = (0..ncpu as u32).map(CpuId).collect();
                let mut t = InterruptTable::with_kernel_header(cpus, 3);
                for (n, counts) in rows.iter().enumerate() {
                    let label = RowLabel::Irq(IrqNum(24 + n as u32));
                    t.push_kernel_row(
                        label,
                        3,
                        &counts[..ncpu],
                        "  PCI-MSIX-0000:00:03.0   1-edge  q",
                    );
                }
                t.push_kernel_row(
                    RowLabel::Named("LOC".into()),
                    3,
                    &rows[0][..ncpu],
                    "   Local timer",
                );
                crate::format::interrupts::render_interrupts(&t)
            })
    }

    /// Labels and counts, or that it failed: what the fast paths must not change.
    fn outcome(text: &str) -> Result<Vec<(String, Vec<u64>)>, ()> {
        let t = parse_interrupts(text).map_err(|_| ())?;
        Ok(t.rows()
            .iter()
            .map(|r| (r.label.to_string(), t.counts(r).to_vec()))
            .collect())
    }

    proptest! {
        #[test]
        fn sparse_rows_round_trip(text in sparse_text()) {
            let t = parse_interrupts(&text).unwrap();
            prop_assert_eq!(crate::format::interrupts::render_interrupts(&t), text);
        }

        /// A tab before each idle field sends the parser down the general scan: the fast paths
        /// must agree with it on any (edited) text.
        #[test]
        fn fast_paths_agree_with_the_general_scan(
            text in sparse_text(),
            edits in prop::collection::vec((any::<prop::sample::Index>(), 0u8..3, any::<u8>()), 0..6),
        ) {
            let mut bytes = text.into_bytes();
            for (at, op, byte) in edits {
                let byte = b" 0123456789:\nA-x\t"[usize::from(byte) % 17];
                let i = at.index(bytes.len().max(1)).min(bytes.len());
                match op {
                    0 if i < bytes.len() => bytes[i] = byte,
                    2 if i < bytes.len() => { bytes.remove(i); }
                    _ => bytes.insert(i, byte),
                }
            }
            let text = String::from_utf8_lossy(&bytes).into_owned();
            let general = text.replace("          0", "\t         0").replace("          ", "\t         ");
            prop_assert_eq!(outcome(&text), outcome(&general), "text:\n{}", text);
        }
    }
}
