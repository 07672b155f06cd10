//! The one-value files that most of procfs and sysfs are made of: a single line holding a cpulist
//! (`%*pbl`), a hex mask (`%*pb`), a decimal (`%d`/`%u`) or a word, ended by `\n`.
//!
//! The parsers here accept exactly one line (the trailing `\n` optional, so hand-written fixtures
//! still parse) and report a second line as an error at line 2: a file that grew a second line is
//! a format this version does not know, not something to skip silently.

use crate::error::ParseError;
use irqpilot_core::CpuSet;

/// The text of a one-line file without its `\n`; an error at line 2 if more text follows.
pub fn one_line(text: &str) -> Result<&str, ParseError> {
    let body = text.strip_suffix('\n').unwrap_or(text);
    if body.contains('\n') {
        return Err(ParseError::new(2, "expected a single line"));
    }
    Ok(body)
}

/// Parses a cpulist file (`0-3,8`; an empty line is the empty set).
pub fn parse_cpulist(text: &str) -> Result<CpuSet, ParseError> {
    let line = one_line(text)?;
    CpuSet::parse_list(line).map_err(|e| ParseError::new(1, e.to_string()))
}

/// Renders a cpulist file as the kernel's `%*pbl\n` does.
pub fn render_cpulist(set: &CpuSet) -> String {
    let mut s = set.to_list_string();
    s.push('\n');
    s
}

/// Parses a hex mask file (`ff,ffffffff`; `0` is the empty set).
pub fn parse_mask(text: &str) -> Result<CpuSet, ParseError> {
    let line = one_line(text)?;
    if line.is_empty() {
        // The kernel always prints at least one digit; an empty line is not a mask.
        return Err(ParseError::new(1, "empty mask"));
    }
    CpuSet::parse_mask(line).map_err(|e| ParseError::new(1, e.to_string()))
}

/// Renders a hex mask file `nr_cpu_ids` bits wide, as the kernel's `%*pb\n` does.
pub fn render_mask(set: &CpuSet, nr_cpu_ids: u32) -> String {
    let mut s = set.to_mask_string(nr_cpu_ids);
    s.push('\n');
    s
}

/// Parses a one-line unsigned decimal (`%u`, `%lu`).
pub fn parse_unsigned(text: &str) -> Result<u64, ParseError> {
    let line = one_line(text)?;
    if line.is_empty() || !line.bytes().all(|b| b.is_ascii_digit()) {
        return Err(ParseError::new(
            1,
            format!("not an unsigned number: {line:?}"),
        ));
    }
    line.parse()
        .map_err(|_| ParseError::new(1, format!("number out of range: {line:?}")))
}

/// Parses a one-line signed decimal (`%d`).
pub fn parse_signed(text: &str) -> Result<i64, ParseError> {
    let line = one_line(text)?;
    let digits = line.strip_prefix('-').unwrap_or(line);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(ParseError::new(1, format!("not a number: {line:?}")));
    }
    line.parse()
        .map_err(|_| ParseError::new(1, format!("number out of range: {line:?}")))
}

/// Parses a `%d` id where `-1` means "none" (NUMA nodes, topology ids on some architectures).
/// Other negative values are errors: the kernel uses no other sentinel there.
pub fn parse_id_or_none(text: &str) -> Result<Option<u32>, ParseError> {
    match parse_signed(text)? {
        -1 => Ok(None),
        v => u32::try_from(v)
            .map(Some)
            .map_err(|_| ParseError::new(1, format!("id out of range: {v}"))),
    }
}

/// Renders a `%d` id, `-1` for none.
pub fn render_id_or_none(id: Option<u32>) -> String {
    match id {
        Some(v) => format!("{v}\n"),
        None => "-1\n".to_string(),
    }
}

/// Parses a one-line word (`edge`, `enabled`, `IO-APIC`); the empty file and the empty line are
/// `None`.
pub fn parse_word(text: &str) -> Result<Option<&str>, ParseError> {
    let line = one_line(text)?;
    Ok((!line.is_empty()).then_some(line))
}

#[cfg(test)]
mod tests {
    use super::*;
    use irqpilot_core::CpuId;
    use proptest::prelude::*;

    #[test]
    fn one_line_rules() {
        assert_eq!(one_line("0-1\n"), Ok("0-1"));
        assert_eq!(one_line("0-1"), Ok("0-1"));
        assert_eq!(one_line(""), Ok(""));
        assert_eq!(one_line("\n"), Ok(""));
        assert_eq!(one_line("1\n2\n").unwrap_err().line, 2);
        assert_eq!(one_line("1\n\n").unwrap_err().line, 2);
    }

    #[test]
    fn cpulists() {
        assert_eq!(parse_cpulist("\n"), Ok(CpuSet::new()));
        assert_eq!(parse_cpulist("0-1\n").map(|s| s.len()), Ok(2));
        let e = parse_cpulist("zz\n").unwrap_err();
        assert_eq!(e.line, 1);
        assert!(e.message.contains("zz"), "{e}");
        assert_eq!(render_cpulist(&CpuSet::new()), "\n");
        assert_eq!(render_cpulist(&CpuSet::range(0, 3)), "0-3\n");
    }

    #[test]
    fn masks() {
        assert_eq!(parse_mask("3\n"), Ok(CpuSet::range(0, 1)));
        assert_eq!(parse_mask("0\n"), Ok(CpuSet::new()));
        assert_eq!(parse_mask("00000000,00000000\n"), Ok(CpuSet::new()));
        assert!(parse_mask("\n").is_err());
        assert!(parse_mask("0x3\n").is_err());
        assert_eq!(render_mask(&CpuSet::single(CpuId(32)), 40), "01,00000000\n");
    }

    #[test]
    fn numbers() {
        assert_eq!(parse_unsigned("42\n"), Ok(42));
        assert!(parse_unsigned("-1\n").is_err());
        assert!(parse_unsigned("+1\n").is_err());
        assert!(parse_unsigned("99999999999999999999999\n").is_err());
        assert_eq!(parse_signed("-1\n"), Ok(-1));
        assert!(parse_signed("-\n").is_err());
        assert!(parse_signed("1 \n").is_err());
        assert_eq!(parse_id_or_none("-1\n"), Ok(None));
        assert_eq!(parse_id_or_none("3\n"), Ok(Some(3)));
        assert!(parse_id_or_none("-2\n").is_err());
        assert!(parse_id_or_none("4294967296\n").is_err());
        assert_eq!(render_id_or_none(None), "-1\n");
        assert_eq!(render_id_or_none(Some(7)), "7\n");
    }

    #[test]
    fn words() {
        assert_eq!(parse_word(""), Ok(None));
        assert_eq!(parse_word("\n"), Ok(None));
        assert_eq!(parse_word("edge\n"), Ok(Some("edge")));
    }

    fn cpuset() -> impl Strategy<Value = CpuSet> {
        proptest::collection::btree_set(0u32..600, 0..48)
            .prop_map(|v| v.into_iter().map(CpuId).collect())
    }

    proptest! {
        #[test]
        fn cpulist_round_trip(set in cpuset()) {
            let text = render_cpulist(&set);
            prop_assert_eq!(parse_cpulist(&text), Ok(set.clone()));
            prop_assert_eq!(render_cpulist(&parse_cpulist(&text).unwrap()), text);
        }

        #[test]
        fn mask_round_trip(set in cpuset(), extra in 0u32..100) {
            let width = set.last().map_or(1, |c| c.0 + 1) + extra;
            let text = render_mask(&set, width);
            prop_assert_eq!(parse_mask(&text), Ok(set.clone()));
            prop_assert_eq!(render_mask(&parse_mask(&text).unwrap(), width), text);
        }

        #[test]
        fn id_round_trip(id in proptest::option::of(0u32..u32::MAX)) {
            prop_assert_eq!(parse_id_or_none(&render_id_or_none(id)), Ok(id));
        }

        #[test]
        fn never_panics(text in "\\PC*") {
            let _ = parse_cpulist(&text);
            let _ = parse_mask(&text);
            let _ = parse_signed(&text);
            let _ = parse_unsigned(&text);
        }
    }
}
