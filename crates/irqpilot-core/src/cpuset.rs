//! `CpuSet`: a set of logical CPUs with exact round trips to the kernel's two text forms.
//!
//! * cpulist, as in `smp_affinity_list` or `/sys/devices/system/cpu/online`: `0-3,8,10-11`;
//! * comma-grouped hex mask, as in `smp_affinity`: `ffffffff,00000001` (most significant group
//!   first, 32 bits per group).
//!
//! The kernel prints a mask `nr_cpu_ids` bits wide: the first group has only as many hex digits as
//! the leftover bits need (2 CPUs print `3`, 40 CPUs print `ff,ffffffff`), so rendering a mask takes
//! that width. Parsing accepts every form the kernel's `bitmap_parse`/`bitmap_parselist` accept
//! that a tool would meet: ranges, strides (`0-15:2/4`), `N` for the last CPU when the width is
//! known, and groups shorter than 8 digits.

use crate::ids::CpuId;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;

/// The kernel's largest `NR_CPUS` (x86 `MAXSMP`); no real mask is wider.
pub const MAX_CPUS: u32 = 8192;

/// Why a cpulist or mask did not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CpuSetError {
    /// A token that is not a CPU number, range or stride.
    #[error("bad cpulist token {token:?}")]
    BadListToken {
        /// The offending token.
        token: String,
    },
    /// A range whose end is before its start.
    #[error("cpulist range {start}-{end} runs backwards")]
    BackwardsRange {
        /// First CPU of the range.
        start: u32,
        /// Last CPU of the range.
        end: u32,
    },
    /// A CPU at or above [`MAX_CPUS`], or above the given width.
    #[error("CPU {cpu} is beyond the limit of {limit} CPUs")]
    TooLarge {
        /// The CPU named.
        cpu: u32,
        /// The limit it broke.
        limit: u32,
    },
    /// A hex mask group with a non-hex character or more than 8 digits.
    #[error("bad hex mask group {group:?}")]
    BadMaskGroup {
        /// The offending group.
        group: String,
    },
    /// `N` used where the number of CPUs is unknown.
    #[error("`N` (last CPU) needs the number of CPUs")]
    LastUnknown,
}

/// A set of CPU numbers below [`MAX_CPUS`]. Bits are stored in 64-bit words with trailing zero
/// words trimmed, so equal sets compare equal whatever width they were parsed from.
#[derive(Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CpuSet {
    words: Vec<u64>,
}

impl CpuSet {
    /// The empty set.
    pub const fn new() -> CpuSet {
        CpuSet { words: Vec::new() }
    }

    /// A set holding one CPU.
    pub fn single(cpu: CpuId) -> CpuSet {
        let mut s = CpuSet::new();
        s.insert(cpu);
        s
    }

    /// CPUs `first..=last`.
    pub fn range(first: u32, last: u32) -> CpuSet {
        let mut s = CpuSet::new();
        for c in first..=last.min(MAX_CPUS - 1) {
            s.insert(CpuId(c));
        }
        s
    }

    /// Adds a CPU; returns false (and changes nothing) for a CPU at or above [`MAX_CPUS`] or one
    /// already present.
    pub fn insert(&mut self, cpu: CpuId) -> bool {
        if cpu.0 >= MAX_CPUS {
            return false;
        }
        let (w, b) = ((cpu.0 / 64) as usize, cpu.0 % 64);
        if self.words.len() <= w {
            self.words.resize(w + 1, 0);
        }
        let was = self.words[w] & (1 << b) != 0;
        self.words[w] |= 1 << b;
        !was
    }

    /// Removes a CPU; returns whether it was present.
    pub fn remove(&mut self, cpu: CpuId) -> bool {
        let (w, b) = ((cpu.0 / 64) as usize, cpu.0 % 64);
        let Some(word) = self.words.get_mut(w) else {
            return false;
        };
        let was = *word & (1 << b) != 0;
        *word &= !(1 << b);
        self.trim();
        was
    }

    /// Whether `cpu` is in the set.
    pub fn contains(&self, cpu: CpuId) -> bool {
        let (w, b) = ((cpu.0 / 64) as usize, cpu.0 % 64);
        self.words.get(w).is_some_and(|word| word & (1 << b) != 0)
    }

    /// Number of CPUs in the set.
    pub fn len(&self) -> usize {
        self.words.iter().map(|w| w.count_ones() as usize).sum()
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.words.is_empty()
    }

    /// Lowest CPU, if any.
    pub fn first(&self) -> Option<CpuId> {
        self.iter().next()
    }

    /// Highest CPU, if any.
    pub fn last(&self) -> Option<CpuId> {
        let w = self.words.len().checked_sub(1)?;
        let word = self.words[w];
        Some(CpuId(w as u32 * 64 + 63 - word.leading_zeros()))
    }

    /// CPUs in ascending order.
    pub fn iter(&self) -> Iter<'_> {
        Iter {
            words: &self.words,
            word_index: 0,
            current: self.words.first().copied().unwrap_or(0),
        }
    }

    /// `self ∪ other`.
    pub fn union(&self, other: &CpuSet) -> CpuSet {
        let n = self.words.len().max(other.words.len());
        let words = (0..n)
            .map(|i| {
                self.words.get(i).copied().unwrap_or(0) | other.words.get(i).copied().unwrap_or(0)
            })
            .collect();
        CpuSet { words }
    }

    /// `self ∩ other`.
    pub fn intersection(&self, other: &CpuSet) -> CpuSet {
        let words = self
            .words
            .iter()
            .zip(&other.words)
            .map(|(a, b)| a & b)
            .collect();
        let mut s = CpuSet { words };
        s.trim();
        s
    }

    /// `self \ other`.
    pub fn difference(&self, other: &CpuSet) -> CpuSet {
        let words = self
            .words
            .iter()
            .enumerate()
            .map(|(i, a)| a & !other.words.get(i).copied().unwrap_or(0))
            .collect();
        let mut s = CpuSet { words };
        s.trim();
        s
    }

    /// Whether every CPU of `self` is in `other`.
    pub fn is_subset(&self, other: &CpuSet) -> bool {
        self.words
            .iter()
            .enumerate()
            .all(|(i, a)| a & !other.words.get(i).copied().unwrap_or(0) == 0)
    }

    /// Whether the two sets share a CPU.
    pub fn intersects(&self, other: &CpuSet) -> bool {
        self.words.iter().zip(&other.words).any(|(a, b)| a & b != 0)
    }

    fn trim(&mut self) {
        while self.words.last() == Some(&0) {
            self.words.pop();
        }
    }

    /// Parses a cpulist (`0-3,8,10-11`, `0-15:2/4`, empty for none). `N` is refused; use
    /// [`CpuSet::parse_list_with_width`] where the CPU count is known.
    pub fn parse_list(s: &str) -> Result<CpuSet, CpuSetError> {
        parse_list(s, None)
    }

    /// Parses a cpulist where `N` stands for the last of `nr_cpus` CPUs, and every CPU must be
    /// below `nr_cpus`.
    pub fn parse_list_with_width(s: &str, nr_cpus: u32) -> Result<CpuSet, CpuSetError> {
        parse_list(s, Some(nr_cpus))
    }

    /// The kernel's cpulist text (`%*pbl`): ascending ranges, `a-b` for two or more CPUs.
    pub fn to_list_string(&self) -> String {
        let mut out = String::new();
        let mut it = self.iter().peekable();
        while let Some(start) = it.next() {
            let mut end = start;
            while let Some(&next) = it.peek() {
                if next.0 != end.0 + 1 {
                    break;
                }
                end = next;
                it.next();
            }
            if !out.is_empty() {
                out.push(',');
            }
            out.push_str(&start.0.to_string());
            if end != start {
                out.push('-');
                out.push_str(&end.0.to_string());
            }
        }
        out
    }

    /// Parses a comma-grouped hex mask (`ffffffff,00000001`, `3`, `00000000,00000000,0000ff00`).
    pub fn parse_mask(s: &str) -> Result<CpuSet, CpuSetError> {
        let s = s.trim();
        let mut set = CpuSet::new();
        if s.is_empty() {
            return Ok(set);
        }
        let groups: Vec<&str> = s.split(',').collect();
        let n = groups.len();
        for (i, g) in groups.iter().enumerate() {
            if g.is_empty() || g.len() > 8 || !g.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(CpuSetError::BadMaskGroup {
                    group: g.to_string(),
                });
            }
            let v = u32::from_str_radix(g, 16).map_err(|_| CpuSetError::BadMaskGroup {
                group: g.to_string(),
            })?;
            let base = (n - 1 - i) as u64 * 32;
            for bit in 0..32u64 {
                if v & (1 << bit) != 0 {
                    let cpu = base + bit;
                    if cpu >= MAX_CPUS as u64 {
                        return Err(CpuSetError::TooLarge {
                            cpu: cpu as u32,
                            limit: MAX_CPUS,
                        });
                    }
                    set.insert(CpuId(cpu as u32));
                }
            }
        }
        Ok(set)
    }

    /// The kernel's mask text (`%*pb`) for a bitmap `nr_bits` wide (`nr_cpu_ids`): 32-bit groups,
    /// most significant first, the first group only as wide as its bits need. CPUs at or above
    /// `nr_bits` are not shown, as in the kernel.
    pub fn to_mask_string(&self, nr_bits: u32) -> String {
        let nr_bits = nr_bits.clamp(1, MAX_CPUS);
        let groups = nr_bits.div_ceil(32);
        let mut out = String::with_capacity(groups as usize * 9);
        for g in (0..groups).rev() {
            let width_bits = if g == groups - 1 {
                nr_bits - g * 32
            } else {
                32
            };
            let word = self.words.get((g / 2) as usize).copied().unwrap_or(0);
            let mut val = (word >> ((g % 2) * 32)) as u32;
            if width_bits < 32 {
                val &= (1u32 << width_bits) - 1;
            }
            if !out.is_empty() {
                out.push(',');
            }
            let digits = width_bits.div_ceil(4) as usize;
            out.push_str(&format!("{val:0digits$x}"));
        }
        out
    }
}

fn parse_num(tok: &str, whole: &str, last: Option<u32>) -> Result<u32, CpuSetError> {
    if tok == "N" {
        return match last {
            Some(n) if n > 0 => Ok(n - 1),
            _ => Err(CpuSetError::LastUnknown),
        };
    }
    if tok.is_empty() || !tok.bytes().all(|b| b.is_ascii_digit()) || tok.len() > 9 {
        return Err(CpuSetError::BadListToken {
            token: whole.to_string(),
        });
    }
    tok.parse().map_err(|_| CpuSetError::BadListToken {
        token: whole.to_string(),
    })
}

fn parse_list(s: &str, nr_cpus: Option<u32>) -> Result<CpuSet, CpuSetError> {
    let mut set = CpuSet::new();
    let limit = nr_cpus.unwrap_or(MAX_CPUS).min(MAX_CPUS);
    for tok in s.trim().split(',') {
        let tok = tok.trim();
        if tok.is_empty() {
            // The kernel prints an empty line for an empty set; a lone empty token is that set.
            if s.trim().is_empty() {
                continue;
            }
            return Err(CpuSetError::BadListToken {
                token: tok.to_string(),
            });
        }
        let (range, stride) = match tok.split_once(':') {
            Some((r, st)) => (r, Some(st)),
            None => (tok, None),
        };
        let (start, end) = match range.split_once('-') {
            Some((a, b)) => (parse_num(a, tok, nr_cpus)?, parse_num(b, tok, nr_cpus)?),
            None => {
                let v = parse_num(range, tok, nr_cpus)?;
                (v, v)
            }
        };
        if end < start {
            return Err(CpuSetError::BackwardsRange { start, end });
        }
        if end >= limit {
            return Err(CpuSetError::TooLarge { cpu: end, limit });
        }
        let (used, group) = match stride {
            None => (1, 1),
            Some(st) => {
                let (u, g) = st
                    .split_once('/')
                    .ok_or_else(|| CpuSetError::BadListToken {
                        token: tok.to_string(),
                    })?;
                let (u, g) = (parse_num(u, tok, None)?, parse_num(g, tok, None)?);
                if u == 0 || g == 0 || u > g {
                    return Err(CpuSetError::BadListToken {
                        token: tok.to_string(),
                    });
                }
                (u, g)
            }
        };
        for cpu in start..=end {
            if (cpu - start) % group < used {
                set.insert(CpuId(cpu));
            }
        }
    }
    Ok(set)
}

/// Ascending iterator over a [`CpuSet`].
#[derive(Debug, Clone)]
pub struct Iter<'a> {
    words: &'a [u64],
    word_index: usize,
    current: u64,
}

impl Iterator for Iter<'_> {
    type Item = CpuId;

    fn next(&mut self) -> Option<CpuId> {
        loop {
            if self.current != 0 {
                let bit = self.current.trailing_zeros();
                self.current &= self.current - 1;
                return Some(CpuId(self.word_index as u32 * 64 + bit));
            }
            self.word_index += 1;
            self.current = *self.words.get(self.word_index)?;
        }
    }
}

impl<'a> IntoIterator for &'a CpuSet {
    type Item = CpuId;
    type IntoIter = Iter<'a>;
    fn into_iter(self) -> Iter<'a> {
        self.iter()
    }
}

impl FromIterator<CpuId> for CpuSet {
    fn from_iter<I: IntoIterator<Item = CpuId>>(iter: I) -> CpuSet {
        let mut s = CpuSet::new();
        for c in iter {
            s.insert(c);
        }
        s
    }
}

impl Extend<CpuId> for CpuSet {
    fn extend<I: IntoIterator<Item = CpuId>>(&mut self, iter: I) {
        for c in iter {
            self.insert(c);
        }
    }
}

impl fmt::Debug for CpuSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CpuSet({})", self.to_list_string())
    }
}

impl fmt::Display for CpuSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_list_string())
    }
}

/// Serialized as its cpulist string, the form users read and write.
impl Serialize for CpuSet {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_list_string())
    }
}

impl<'de> Deserialize<'de> for CpuSet {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<CpuSet, D::Error> {
        let s = String::deserialize(d)?;
        CpuSet::parse_list(&s).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn set(cpus: &[u32]) -> CpuSet {
        cpus.iter().map(|&c| CpuId(c)).collect()
    }

    #[test]
    fn list_round_trips() {
        for text in ["", "0", "0-3,8,10-11", "1,3,5", "0-8191", "4095-4097"] {
            let s = CpuSet::parse_list(text).unwrap();
            assert_eq!(s.to_list_string(), text);
        }
        assert_eq!(
            CpuSet::parse_list("0-3,8,10-11\n").unwrap(),
            set(&[0, 1, 2, 3, 8, 10, 11])
        );
    }

    #[test]
    fn list_strides_and_last() {
        assert_eq!(
            CpuSet::parse_list("0-15:2/4").unwrap(),
            set(&[0, 1, 4, 5, 8, 9, 12, 13])
        );
        assert_eq!(
            CpuSet::parse_list_with_width("2-N", 4).unwrap(),
            set(&[2, 3])
        );
        assert_eq!(CpuSet::parse_list("2-N"), Err(CpuSetError::LastUnknown));
    }

    #[test]
    fn list_errors() {
        assert!(matches!(
            CpuSet::parse_list("3-1"),
            Err(CpuSetError::BackwardsRange { .. })
        ));
        assert!(matches!(
            CpuSet::parse_list("a"),
            Err(CpuSetError::BadListToken { .. })
        ));
        assert!(matches!(
            CpuSet::parse_list("1,,2"),
            Err(CpuSetError::BadListToken { .. })
        ));
        assert!(matches!(
            CpuSet::parse_list("8192"),
            Err(CpuSetError::TooLarge { .. })
        ));
        assert!(matches!(
            CpuSet::parse_list_with_width("0-4", 4),
            Err(CpuSetError::TooLarge { cpu: 4, limit: 4 })
        ));
    }

    #[test]
    fn mask_kernel_widths() {
        assert_eq!(set(&[0, 1]).to_mask_string(2), "3");
        assert_eq!(set(&[0]).to_mask_string(4), "1");
        assert_eq!(set(&[0, 1, 2, 3, 4, 5, 6, 7]).to_mask_string(8), "ff");
        assert_eq!(CpuSet::range(0, 39).to_mask_string(40), "ff,ffffffff");
        assert_eq!(set(&[0, 63]).to_mask_string(64), "80000000,00000001");
        assert_eq!(set(&[32]).to_mask_string(96), "00000000,00000001,00000000");
        assert_eq!(CpuSet::new().to_mask_string(1152).split(',').count(), 36);
    }

    #[test]
    fn mask_parse() {
        assert_eq!(CpuSet::parse_mask("ffffffff,00000001").unwrap().len(), 33);
        assert_eq!(CpuSet::parse_mask("3\n").unwrap(), set(&[0, 1]));
        assert_eq!(CpuSet::parse_mask("1,0").unwrap(), set(&[32]));
        assert!(CpuSet::parse_mask("xyz").is_err());
        assert!(CpuSet::parse_mask("123456789").is_err());
        assert!(CpuSet::parse_mask("ff,,ff").is_err());
    }

    #[test]
    fn set_ops() {
        let a = set(&[1, 2, 3, 100]);
        let b = set(&[3, 4, 100]);
        assert_eq!(a.union(&b), set(&[1, 2, 3, 4, 100]));
        assert_eq!(a.intersection(&b), set(&[3, 100]));
        assert_eq!(a.difference(&b), set(&[1, 2]));
        assert_eq!(b.difference(&a), set(&[4]));
        assert!(set(&[3]).is_subset(&a));
        assert!(!b.is_subset(&a));
        assert!(a.intersects(&b));
        assert_eq!(a.last(), Some(CpuId(100)));
        assert_eq!(set(&[100]).difference(&set(&[100])), CpuSet::new());
        assert!(!CpuSet::new().insert(CpuId(MAX_CPUS)));
    }

    #[test]
    fn serde_as_cpulist() {
        let s = set(&[0, 1, 2, 5]);
        let j = serde_json::to_string(&s).unwrap();
        assert_eq!(j, "\"0-2,5\"");
        assert_eq!(serde_json::from_str::<CpuSet>(&j).unwrap(), s);
    }

    proptest! {
        #[test]
        fn list_and_mask_round_trip(cpus in proptest::collection::btree_set(0u32..MAX_CPUS, 0..64),
                                    extra in 0u32..64) {
            let s: CpuSet = cpus.iter().map(|&c| CpuId(c)).collect();
            prop_assert_eq!(CpuSet::parse_list(&s.to_list_string()).unwrap(), s.clone());
            let width = s.last().map_or(1, |l| l.0 + 1).saturating_add(extra).min(MAX_CPUS);
            let mask = s.to_mask_string(width);
            prop_assert_eq!(CpuSet::parse_mask(&mask).unwrap(), s.clone());
            // The text itself round trips exactly at the same width.
            prop_assert_eq!(CpuSet::parse_mask(&mask).unwrap().to_mask_string(width), mask);
            prop_assert_eq!(s.iter().count(), s.len());
        }
    }
}
