//! `/proc/net/dev`: per network interface receive and transmit counters.
//!
//! The kernel (`net/core/net-procfs.c`, `dev_seq_show`) prints two header lines, then one line
//! per interface: the name as `%6s:` and 16 numbers from `dev_get_stats()` (the counters
//! `/sys/class/net/<dev>/statistics/` shows one per file): receive `bytes packets errs drop fifo
//! frame compressed multicast`, transmit `bytes packets errs drop fifo colls carrier
//! compressed`. One file gives every interface, so a sampler reads it as it reads
//! `/proc/interrupts`.

use crate::ParseError;
use crate::format::interrupts::show;
use crate::format::stat::parse_u64;
use irqpilot_core::NetDevCounters;
use std::fmt::Write as _;

/// The two header lines, as the kernel prints them.
pub const HEADER: &str = "Inter-|   Receive                                                |  Transmit\n face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed\n";

/// Parses `/proc/net/dev` text.
///
/// Errors: a line (after the two headers) without `name:`, or without exactly 16 numbers.
pub fn parse_netdev(text: &str) -> Result<Vec<NetDevCounters>, ParseError> {
    let mut v = Vec::new();
    parse_netdev_into(text, &mut v)?;
    Ok(v)
}

/// [`parse_netdev`] into an existing vector, reusing its names: parsing the same machine's file
/// again allocates nothing. On error `out` is left empty.
pub fn parse_netdev_into(text: &str, out: &mut Vec<NetDevCounters>) -> Result<(), ParseError> {
    let r = parse_reusing(text, out);
    if r.is_err() {
        out.clear();
    }
    r
}

fn parse_reusing(text: &str, out: &mut Vec<NetDevCounters>) -> Result<(), ParseError> {
    let mut used = 0;
    for (index, line) in text.split('\n').enumerate() {
        let line_no = index + 1;
        let err = |m: String| ParseError::new(line_no, m);
        // The header's lines hold `|`; a data line never does.
        if line.trim().is_empty() || line.contains('|') {
            continue;
        }
        let Some((name, rest)) = line.split_once(':') else {
            return Err(err(format!("no `:` in `{}`", show(line))));
        };
        let name = name.trim_start_matches(' ');
        if name.is_empty() || !name.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(err(format!("invalid interface name `{}`", show(name))));
        }
        if used == out.len() {
            out.push(NetDevCounters::default());
        }
        let slot = &mut out[used];
        used += 1;
        slot.name.clear();
        slot.name.push_str(name);
        let mut n = 0;
        for token in rest.split([' ', '\t']).filter(|t| !t.is_empty()) {
            let v = parse_u64(token)
                .ok_or_else(|| err(format!("`{name}`: invalid count `{}`", show(token))))?;
            if n == 16 {
                return Err(err(format!("`{name}`: more than 16 numbers")));
            }
            slot.fields[n] = v;
            n += 1;
        }
        if n != 16 {
            return Err(err(format!("`{name}`: {n} numbers, expected 16")));
        }
    }
    out.truncate(used);
    Ok(())
}

/// Renders interfaces as the kernel prints `/proc/net/dev`.
pub fn render_netdev(devs: &[NetDevCounters]) -> String {
    let mut s = String::from(HEADER);
    for d in devs {
        let f = &d.fields;
        let _ = writeln!(
            s,
            "{:>6}: {:>7} {:>7} {:>4} {:>4} {:>4} {:>5} {:>10} {:>9} {:>8} {:>7} {:>4} {:>4} {:>4} {:>5} {:>7} {:>10}",
            d.name,
            f[0],
            f[1],
            f[2],
            f[3],
            f[4],
            f[5],
            f[6],
            f[7],
            f[8],
            f[9],
            f[10],
            f[11],
            f[12],
            f[13],
            f[14],
            f[15]
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIVE: &str = "Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo:    3245      30    0    0    0     0          0         0     3245      30    0    0    0     0       0          0
  eth0: 405005666   15779    0    0    0     0          0         0   985544   11400    0    0    0     0       0          0
";

    #[test]
    fn parses_and_round_trips() {
        let v = parse_netdev(LIVE).unwrap();
        assert_eq!(v.len(), 2);
        assert_eq!(v[1].name, "eth0");
        assert_eq!(v[1].rx_bytes(), 405_005_666);
        assert_eq!(v[1].rx_packets(), 15_779);
        assert_eq!(v[1].tx_bytes(), 985_544);
        assert_eq!(v[1].tx_packets(), 11_400);
        assert_eq!(render_netdev(&v), LIVE);
    }

    #[test]
    fn malformed_lines_name_the_line() {
        let e = parse_netdev(&LIVE.replace("15779", "x")).unwrap_err();
        assert_eq!(e.line, 4);
        assert!(e.message.contains("eth0"), "{e:?}");
        let e = parse_netdev(&LIVE.replace("       0          0\n  eth0", "\n  eth0")).unwrap_err();
        assert_eq!(e.line, 3);
        assert!(parse_netdev("eth0 1 2 3\n").is_err());
        let mut v = parse_netdev(LIVE).unwrap();
        assert!(parse_netdev_into("lo: 1\n", &mut v).is_err());
        assert!(v.is_empty());
    }
}
