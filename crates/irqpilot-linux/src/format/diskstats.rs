//! `/proc/diskstats`: per block device I/O counters (`Documentation/admin-guide/iostats.rst`).
//!
//! The kernel (`block/genhd.c`, `diskstats_show`) prints one line per device: major as `%4d`,
//! minor as `%7d`, the name, then 11 fields (reads completed, merged, sectors, ms; writes
//! completed, merged, sectors, ms; I/Os in progress, ms doing I/O, weighted ms), then 4 discard
//! fields (4.18+) and 2 flush fields (5.5+). The later fields are kept verbatim, so every
//! kernel's file prints back unchanged.

use crate::ParseError;
use crate::format::interrupts::show;
use crate::format::stat::parse_u64;
use irqpilot_core::DiskCounters;
use std::fmt::Write as _;

/// Parses `/proc/diskstats` text.
///
/// Errors: a line with fewer than 14 tokens, a malformed number.
pub fn parse_diskstats(text: &str) -> Result<Vec<DiskCounters>, ParseError> {
    let mut v = Vec::new();
    parse_diskstats_into(text, &mut v)?;
    Ok(v)
}

/// [`parse_diskstats`] into an existing vector, reusing its strings. On error `out` is left
/// empty.
pub fn parse_diskstats_into(text: &str, out: &mut Vec<DiskCounters>) -> Result<(), ParseError> {
    let r = parse_reusing(text, out);
    if r.is_err() {
        out.clear();
    }
    r
}

fn parse_reusing(text: &str, out: &mut Vec<DiskCounters>) -> Result<(), ParseError> {
    let mut used = 0;
    for (index, line) in text.split('\n').enumerate() {
        let line_no = index + 1;
        let err = |m: String| ParseError::new(line_no, m);
        let mut tokens = line.split([' ', '\t']).filter(|t| !t.is_empty());
        let Some(major) = tokens.next() else {
            continue;
        };
        let num = |t: Option<&str>, what: &str| {
            let t = t.ok_or_else(|| err(format!("{what} missing in `{}`", show(line))))?;
            parse_u64(t).ok_or_else(|| err(format!("invalid {what} `{}`", show(t))))
        };
        let major = u32::try_from(num(Some(major), "major")?)
            .map_err(|_| err(format!("major out of range in `{}`", show(line))))?;
        let minor = u32::try_from(num(tokens.next(), "minor")?)
            .map_err(|_| err(format!("minor out of range in `{}`", show(line))))?;
        let name = tokens
            .next()
            .ok_or_else(|| err(format!("no device name in `{}`", show(line))))?;
        if used == out.len() {
            out.push(DiskCounters::default());
        }
        let slot = &mut out[used];
        used += 1;
        slot.major = major;
        slot.minor = minor;
        slot.name.clear();
        slot.name.push_str(name);
        for (i, field) in slot.fields.iter_mut().enumerate() {
            // The message is built only on error: a sampler parses this file every period.
            *field = match tokens.next().map(|t| (t, parse_u64(t))) {
                Some((_, Some(v))) => v,
                Some((t, None)) => {
                    return Err(err(format!(
                        "{name}: invalid field {} `{}`",
                        i + 1,
                        show(t)
                    )));
                }
                None => return Err(err(format!("{name}: field {} missing", i + 1))),
            };
        }
        slot.rest.clear();
        for (i, t) in tokens.enumerate() {
            if parse_u64(t).is_none() {
                return Err(err(format!("{name}: invalid field `{}`", show(t))));
            }
            if i > 0 {
                slot.rest.push(' ');
            }
            slot.rest.push_str(t);
        }
    }
    out.truncate(used);
    Ok(())
}

/// Renders devices as the kernel prints `/proc/diskstats`.
pub fn render_diskstats(disks: &[DiskCounters]) -> String {
    let mut s = String::new();
    for d in disks {
        let _ = write!(s, "{:>4} {:>7} {}", d.major, d.minor, d.name);
        for f in d.fields {
            let _ = write!(s, " {f}");
        }
        if !d.rest.is_empty() {
            s.push(' ');
            s.push_str(&d.rest);
        }
        s.push('\n');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIVE: &str = "   7       0 loop0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0
 259       0 nvme0n1 1523 0 97328 412 20 3 184 9 0 604 421 0 0 0 0 2 0
 254       0 vda 8890 1830 752942 3109 4205 2907 245546 8820 0 7612 11929
";

    #[test]
    fn parses_and_round_trips() {
        let v = parse_diskstats(LIVE).unwrap();
        assert_eq!(v.len(), 3);
        assert_eq!(v[1].name, "nvme0n1");
        assert_eq!((v[1].major, v[1].minor), (259, 0));
        assert_eq!(v[1].ios(), 1543);
        assert_eq!(v[1].sectors(), 97_512);
        assert_eq!(v[1].weighted_ms(), 421);
        assert_eq!(v[1].nvme_controller(), Some("nvme0"));
        assert_eq!(v[2].rest, "");
        assert_eq!(render_diskstats(&v), LIVE);
    }

    #[test]
    fn malformed_lines_name_the_line() {
        let e = parse_diskstats(&LIVE.replace("1523", "15x3")).unwrap_err();
        assert_eq!(e.line, 2);
        assert!(e.message.contains("nvme0n1"), "{e:?}");
        let e = parse_diskstats(" 259 0 nvme0n1 1 2 3\n").unwrap_err();
        assert!(e.message.contains("field 4"), "{e:?}");
        assert!(parse_diskstats("x 0 sda\n").is_err());
    }
}
