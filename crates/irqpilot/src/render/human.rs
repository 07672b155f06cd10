//! Numbers for people: `12.3k/s`, `4.5M`, `32M` caches, abbreviated CPU lists. Every function
//! appends to a `String` (no allocation of its own), so the sampling loop can reuse its buffer.

use irqpilot_core::CpuSet;
use std::fmt::Write as _;

/// Appends `v` with a k/M/G suffix and three significant digits: `950`, `12.3k`, `4.56M`.
/// Values below 10 keep one decimal (`0.5`), so low rates do not read as zero.
pub fn push_si(out: &mut String, v: f64) {
    let v = if v.is_finite() && v > 0.0 { v } else { 0.0 };
    let (scaled, suffix) = if v >= 1e9 {
        (v / 1e9, "G")
    } else if v >= 1e6 {
        (v / 1e6, "M")
    } else if v >= 1e3 {
        (v / 1e3, "k")
    } else {
        (v, "")
    };
    let _ = if suffix.is_empty() {
        if v == 0.0 {
            write!(out, "0")
        } else if v < 10.0 {
            write!(out, "{scaled:.1}")
        } else {
            write!(out, "{scaled:.0}")
        }
    } else if scaled < 10.0 {
        write!(out, "{scaled:.2}{suffix}")
    } else if scaled < 100.0 {
        write!(out, "{scaled:.1}{suffix}")
    } else {
        write!(out, "{scaled:.0}{suffix}")
    };
}

/// `v` as [`push_si`] into a new string.
pub fn si(v: f64) -> String {
    let mut s = String::new();
    push_si(&mut s, v);
    s
}

/// A rate: `12.3k/s`.
pub fn rate(v: f64) -> String {
    let mut s = si(v);
    s.push_str("/s");
    s
}

/// A count: `33.2k` (integers below 1000 as they are).
pub fn count(v: u64) -> String {
    if v < 1000 {
        return v.to_string();
    }
    si(v as f64)
}

/// A size in bytes the way sysfs prints cache sizes: `48K`, `2M`, `1.5M`.
pub fn bytes(v: u64) -> String {
    const K: u64 = 1 << 10;
    const M: u64 = 1 << 20;
    const G: u64 = 1 << 30;
    let unit = |n: u64, d: u64, s: &str| {
        if n % d == 0 {
            format!("{}{s}", n / d)
        } else {
            format!("{:.1}{s}", n as f64 / d as f64)
        }
    };
    match v {
        v if v >= G => unit(v, G, "G"),
        v if v >= M => unit(v, M, "M"),
        v if v >= K => unit(v, K, "K"),
        v => format!("{v}B"),
    }
}

/// A percentage with one decimal, or `-` when unknown.
pub fn pct(v: Option<f64>) -> String {
    v.map_or_else(|| "-".to_string(), |p| format!("{p:.1}%"))
}

/// A cpulist, cut to about `max` characters: `0,2,4,6,…,126 (64 CPUs)`.
pub fn cpus(set: &CpuSet, max: usize) -> String {
    let full = set.to_list_string();
    if full.is_empty() {
        return "none".to_string();
    }
    if full.len() <= max {
        return full;
    }
    let mut out = String::new();
    for part in full.split(',') {
        if out.len() + part.len() + 1 > max.saturating_sub(8) {
            break;
        }
        out.push_str(part);
        out.push(',');
    }
    let last = full.rsplit(',').next().unwrap_or("");
    let last = last.rsplit('-').next().unwrap_or(last);
    let _ = write!(out, "…,{last} ({} CPUs)", set.len());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn si_numbers() {
        assert_eq!(si(0.0), "0");
        assert_eq!(si(0.46), "0.5");
        assert_eq!(si(7.0), "7.0");
        assert_eq!(si(950.0), "950");
        assert_eq!(si(12_345.0), "12.3k");
        assert_eq!(si(1_234.0), "1.23k");
        assert_eq!(si(456_789.0), "457k");
        assert_eq!(si(4_560_000.0), "4.56M");
        assert_eq!(si(3.2e9), "3.20G");
        assert_eq!(si(f64::NAN), "0");
        assert_eq!(rate(12_300.0), "12.3k/s");
        assert_eq!(count(277), "277");
        assert_eq!(count(7), "7");
        assert_eq!(count(33_162), "33.2k");
    }

    #[test]
    fn sizes_and_percentages() {
        assert_eq!(bytes(48 << 10), "48K");
        assert_eq!(bytes(32 << 20), "32M");
        assert_eq!(bytes(1536 << 10), "1.5M");
        assert_eq!(bytes(512), "512B");
        assert_eq!(pct(Some(12.345)), "12.3%");
        assert_eq!(pct(None), "-");
    }

    #[test]
    fn long_cpu_lists_are_cut() {
        let l = |s: &str| CpuSet::parse_list(s).unwrap();
        assert_eq!(cpus(&l("0-63"), 24), "0-63");
        assert_eq!(cpus(&CpuSet::new(), 24), "none");
        let evens: CpuSet = (0..64).map(|c| irqpilot_core::CpuId(c * 2)).collect();
        let s = cpus(&evens, 24);
        assert!(s.starts_with("0,2,4,"), "{s}");
        assert!(s.ends_with("…,126 (64 CPUs)"), "{s}");
        assert!(s.chars().count() < 40, "{s}");
    }
}
