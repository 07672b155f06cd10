//! Collecting [`Gap`]s so that one cause gives one line.
//!
//! Rules (see [`GapLog::finish`]):
//!
//! 1. A file read once per item (IRQ, CPU, device) is logged against a pattern with a `{}` where
//!    the item goes, e.g. `proc/irq/{}/effective_affinity_list`. Items failing for the same
//!    reason share one gap, whose path names them: `*` when every item of the family failed,
//!    the item itself when only one did, else a brace list (`proc/irq/{24-26,31}/node`, runs of
//!    numbers folded into ranges).
//! 2. Unparsable files of one pattern share one gap too; its message is the first file's
//!    `path:line: message`, followed by how many more failed the same way.
//! 3. A gap under a missing or unreadable directory that is itself a gap is dropped: a missing
//!    `sys` is one gap, not one per file under it.
//! 4. Gaps come out sorted by path, so the report is stable.

use irqpilot_core::{Gap, GapReason};
use std::collections::BTreeMap;

#[derive(Debug)]
struct Group {
    universe: usize,
    items: Vec<String>,
    first: GapReason,
}

/// Gaps found while reading a machine, grouped on the way out.
#[derive(Debug, Default)]
pub(crate) struct GapLog {
    singles: Vec<Gap>,
    // Key: (pattern, reason kind). The first reason of the group is kept for its message.
    groups: BTreeMap<(String, u8), Group>,
}

fn kind(reason: &GapReason) -> u8 {
    match reason {
        GapReason::Missing => 0,
        GapReason::PermissionDenied => 1,
        GapReason::Unparsable(_) => 2,
    }
}

impl GapLog {
    /// A source read once for the whole machine (`proc/cmdline`, `sys/kernel/irq`).
    pub(crate) fn single(&mut self, path: impl Into<String>, reason: GapReason) {
        self.singles.push(Gap {
            path: path.into(),
            reason,
        });
    }

    /// A source read once per item: `pattern` holds `{}` where `item` goes, and `universe` is how
    /// many items the family has (so a failure on every one of them can be written `*`).
    pub(crate) fn item(&mut self, pattern: &str, item: &str, universe: usize, reason: GapReason) {
        let group = self
            .groups
            .entry((pattern.to_string(), kind(&reason)))
            .or_insert_with(|| Group {
                universe,
                items: Vec::new(),
                first: reason,
            });
        group.universe = group.universe.max(universe);
        group.items.push(item.to_string());
    }

    /// The grouped gaps, sorted by path, with gaps under a gap directory dropped.
    pub(crate) fn finish(self) -> Vec<Gap> {
        let mut gaps = self.singles;
        for ((pattern, _), mut g) in self.groups {
            g.items.sort_by(|a, b| natural(a).cmp(&natural(b)));
            g.items.dedup();
            let n = g.items.len();
            let fill = if n == 1 {
                g.items[0].clone()
            } else if n >= g.universe {
                "*".to_string()
            } else {
                format!("{{{}}}", fold(&g.items))
            };
            let reason = match g.first {
                GapReason::Unparsable(msg) if n > 1 => {
                    GapReason::Unparsable(format!("{msg} (and {} more like it)", n - 1))
                }
                other => other,
            };
            gaps.push(Gap {
                path: pattern.replacen("{}", &fill, 1),
                reason,
            });
        }
        let covering: Vec<String> = gaps
            .iter()
            .filter(|g| !matches!(g.reason, GapReason::Unparsable(_)))
            .map(|g| format!("{}/", g.path))
            .collect();
        gaps.retain(|g| !covering.iter().any(|dir| g.path.starts_with(dir.as_str())));
        gaps.sort_by(|a, b| a.path.cmp(&b.path));
        gaps.dedup();
        gaps
    }
}

/// Sort key putting `9` before `10`.
fn natural(s: &str) -> (usize, &str) {
    if s.bytes().all(|b| b.is_ascii_digit()) {
        (s.len(), s)
    } else {
        (usize::MAX, s)
    }
}

/// `24,25,26,31` -> `24-26,31`; non-numeric items are listed as they are.
fn fold(items: &[String]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut run: Option<(u64, u64)> = None;
    let flush = |run: &mut Option<(u64, u64)>, out: &mut Vec<String>| {
        if let Some((a, b)) = run.take() {
            out.push(if a == b {
                a.to_string()
            } else {
                format!("{a}-{b}")
            });
        }
    };
    for item in items {
        match item.parse::<u64>() {
            Ok(v) if item.bytes().all(|b| b.is_ascii_digit()) => match run {
                Some((a, b)) if v == b + 1 => run = Some((a, v)),
                _ => {
                    flush(&mut run, &mut out);
                    run = Some((v, v));
                }
            },
            _ => {
                flush(&mut run, &mut out);
                out.push(item.clone());
            }
        }
    }
    flush(&mut run, &mut out);
    out.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths(gaps: &[Gap]) -> Vec<&str> {
        gaps.iter().map(|g| g.path.as_str()).collect()
    }

    #[test]
    fn grouping() {
        let mut log = GapLog::default();
        for irq in ["24", "25", "26", "31", "9"] {
            log.item("proc/irq/{}/node", irq, 10, GapReason::Missing);
        }
        for irq in ["1", "2"] {
            log.item(
                "proc/irq/{}/effective_affinity_list",
                irq,
                2,
                GapReason::Missing,
            );
        }
        log.item(
            "sys/bus/pci/devices/{}/numa_node",
            "0000:00:01.0",
            3,
            GapReason::Missing,
        );
        log.item(
            "sys/bus/pci/devices/{}/numa_node",
            "0000:00:02.0",
            3,
            GapReason::Missing,
        );
        let gaps = log.finish();
        assert_eq!(
            paths(&gaps),
            [
                "proc/irq/*/effective_affinity_list",
                "proc/irq/{9,24-26,31}/node",
                "sys/bus/pci/devices/{0000:00:01.0,0000:00:02.0}/numa_node",
            ]
        );
    }

    #[test]
    fn unparsable_counts_and_reasons_stay_apart() {
        let mut log = GapLog::default();
        let bad = |p: &str| GapReason::Unparsable(format!("{p}:1: bad"));
        log.item("proc/irq/{}/node", "3", 4, bad("proc/irq/3/node"));
        log.item("proc/irq/{}/node", "4", 4, bad("proc/irq/4/node"));
        log.item("proc/irq/{}/node", "5", 4, GapReason::PermissionDenied);
        let gaps = log.finish();
        assert_eq!(gaps.len(), 2);
        assert_eq!(gaps[0].path, "proc/irq/5/node");
        assert_eq!(gaps[0].reason, GapReason::PermissionDenied);
        assert_eq!(
            gaps[1].reason,
            GapReason::Unparsable("proc/irq/3/node:1: bad (and 1 more like it)".into())
        );
        assert_eq!(gaps[1].path, "proc/irq/{3-4}/node");
    }

    #[test]
    fn covered_gaps_dropped() {
        let mut log = GapLog::default();
        log.single("sys", GapReason::Missing);
        log.single("sys/kernel/irq", GapReason::Missing);
        log.item("sys/bus/pci/devices/{}/class", "x", 1, GapReason::Missing);
        log.single("proc/irq", GapReason::PermissionDenied);
        log.single("proc/irq/default_smp_affinity", GapReason::PermissionDenied);
        log.single("proc/irqx", GapReason::Missing);
        log.single("proc/cmdline", GapReason::Unparsable("x".into()));
        log.single("proc/cmdline/y", GapReason::Missing);
        let gaps = log.finish();
        assert_eq!(
            paths(&gaps),
            [
                "proc/cmdline",
                "proc/cmdline/y",
                "proc/irq",
                "proc/irqx",
                "sys"
            ]
        );
    }
}
