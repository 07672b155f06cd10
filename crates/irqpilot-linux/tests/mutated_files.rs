//! Every reader against damaged kernel files: a property test that takes a real tree (the
//! captured Firecracker guest, the generated 256-CPU server), damages one file the way a
//! truncated read, a bad capture, a hand edit or a buggy kernel would (bytes flipped, inserted
//! or cut, lines repeated, dropped or swapped, numbers signed, widened, made full-width, the
//! file emptied, made binary or replaced by a directory), and runs everything that reads a
//! root: the inventory (`LinuxPlatform::machine`: topology, isolation, IRQs, devices, PCI,
//! the kernel command line, moderation knobs) and a counter snapshot (`/proc/interrupts`,
//! `/proc/stat`, `/proc/softirqs`), plus the apply journal.
//!
//! What must hold: nothing panics, and a failure is an error that names the damaged file (and
//! a line inside it, for text that does not parse). (That a damaged optional file becomes a
//! gap rather than a guess is checked file by file in `inventory.rs`.)
//!
//! Bounded for CI: 192 cases on the Firecracker tree and 24 on the generated server by
//! default; `IRQPILOT_FUZZ_CASES=N` runs N on each (and `PROPTEST_SEED`-style replays work as
//! for any proptest).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use irqpilot_core::{Platform, PlatformError};
use irqpilot_linux::LinuxPlatform;
use irqpilot_linux::journal::Journal;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use std::path::{Path, PathBuf};

/// Files every reader depends on: damaged more often than the hundreds of per-IRQ files.
const KEY_FILES: &[&str] = &[
    "proc/interrupts",
    "proc/stat",
    "proc/softirqs",
    "proc/cmdline",
    "proc/irq/default_smp_affinity",
    "sys/devices/system/cpu/online",
    "sys/devices/system/cpu/possible",
    "sys/devices/system/cpu/isolated",
    "sys/devices/system/cpu/nohz_full",
];

/// One way to damage a file.
#[derive(Clone, Debug)]
enum Damage {
    /// Byte at a position (fraction of the length) set to a value.
    Flip(f64, u8),
    /// Bytes inserted at a position.
    Insert(f64, Vec<u8>),
    /// A range cut out.
    Cut(f64, f64),
    /// A line written twice.
    RepeatLine(f64),
    /// A line dropped.
    DropLine(f64),
    /// Two lines swapped.
    SwapLines(f64, f64),
    /// The text cut short.
    Truncate(f64),
    /// Nothing left.
    Empty,
    /// A number replaced by one the kernel never prints.
    Number(f64, &'static str),
    /// A line of garbage appended.
    Append(String),
    /// A directory where the file was.
    Directory,
}

const NUMBERS: &[&str] = &[
    "-1",
    "-5",
    "+7",
    "１２",
    "٣",
    "4294967296",
    "18446744073709551616",
    "99999999999999999999999999",
    "0x10",
    "1e3",
    "",
    "ff",
];

fn damage() -> impl Strategy<Value = Damage> {
    let at = 0.0f64..1.0;
    prop_oneof![
        3 => (at.clone(), any::<u8>()).prop_map(|(a, b)| Damage::Flip(a, b)),
        2 => (at.clone(), prop::collection::vec(any::<u8>(), 1..8)).prop_map(|(a, b)| Damage::Insert(a, b)),
        2 => (at.clone(), 0.0f64..0.3).prop_map(|(a, n)| Damage::Cut(a, n)),
        2 => at.clone().prop_map(Damage::RepeatLine),
        2 => at.clone().prop_map(Damage::DropLine),
        1 => (at.clone(), at.clone()).prop_map(|(a, b)| Damage::SwapLines(a, b)),
        2 => at.clone().prop_map(Damage::Truncate),
        1 => Just(Damage::Empty),
        4 => (at.clone(), prop::sample::select(NUMBERS)).prop_map(|(a, n)| Damage::Number(a, n)),
        1 => "[ -~]{0,40}".prop_map(Damage::Append),
        1 => Just(Damage::Directory),
    ]
}

fn pos(len: usize, f: f64) -> usize {
    ((len as f64) * f).floor().min(len as f64) as usize
}

/// Line boundaries (start, end-with-newline) of `b`.
fn lines(b: &[u8]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut start = 0;
    for (i, &c) in b.iter().enumerate() {
        if c == b'\n' {
            out.push((start, i + 1));
            start = i + 1;
        }
    }
    if start < b.len() {
        out.push((start, b.len()));
    }
    out
}

/// The damaged bytes (`None`: replace the file by a directory).
fn apply(d: &Damage, b: &[u8]) -> Option<Vec<u8>> {
    let mut v = b.to_vec();
    let ls = lines(b);
    let line = |f: f64| ls.get(pos(ls.len().saturating_sub(1), f)).copied();
    match d {
        Damage::Flip(a, x) => {
            if !v.is_empty() {
                let i = pos(v.len() - 1, *a);
                v[i] = *x;
            }
        }
        Damage::Insert(a, bytes) => {
            let i = pos(v.len(), *a);
            v.splice(i..i, bytes.iter().copied());
        }
        Damage::Cut(a, n) => {
            let i = pos(v.len(), *a);
            let j = (i + pos(v.len(), *n).max(1)).min(v.len());
            v.drain(i..j);
        }
        Damage::RepeatLine(a) => {
            if let Some((s, e)) = line(*a) {
                let copy = b[s..e].to_vec();
                v.splice(e..e, copy);
            }
        }
        Damage::DropLine(a) => {
            if let Some((s, e)) = line(*a) {
                v.drain(s..e);
            }
        }
        Damage::SwapLines(a, c) => {
            if let (Some(x), Some(y)) = (line(*a), line(*c)) {
                let (x, y) = if x.0 <= y.0 { (x, y) } else { (y, x) };
                if x != y {
                    let mut out = b[..x.0].to_vec();
                    out.extend_from_slice(&b[y.0..y.1]);
                    out.extend_from_slice(&b[x.1..y.0]);
                    out.extend_from_slice(&b[x.0..x.1]);
                    out.extend_from_slice(&b[y.1..]);
                    v = out;
                }
            }
        }
        Damage::Truncate(a) => v.truncate(pos(v.len(), *a)),
        Damage::Empty => v.clear(),
        Damage::Number(a, n) => {
            // The digit run at or after the position (or anywhere, from the start).
            let start = pos(v.len(), *a);
            let found = v[start..]
                .iter()
                .position(u8::is_ascii_digit)
                .map(|k| start + k)
                .or_else(|| v.iter().position(u8::is_ascii_digit));
            match found {
                Some(i) => {
                    let j = v[i..]
                        .iter()
                        .position(|c| !c.is_ascii_digit())
                        .map_or(v.len(), |k| i + k);
                    v.splice(i..j, n.bytes());
                }
                None => v.extend_from_slice(n.as_bytes()),
            }
        }
        Damage::Append(s) => {
            v.extend_from_slice(s.as_bytes());
            v.push(b'\n');
        }
        Damage::Directory => return None,
    }
    Some(v)
}

/// Every regular file under `root`, relative, but the manifest and keep files.
fn files(root: &Path) -> Vec<String> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<String>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let e = e.unwrap();
            let t = e.file_type().unwrap();
            let p = e.path();
            if t.is_dir() {
                walk(root, &p, out);
            } else if t.is_file() {
                let rel = p.strip_prefix(root).unwrap().to_str().unwrap().to_string();
                if rel != "MANIFEST.toml" && !rel.ends_with(".keep") {
                    out.push(rel);
                }
            }
        }
    }
    let mut out = Vec::new();
    walk(root, root, &mut out);
    out.sort();
    out
}

/// An error must name the damaged file (and, for text, a line it has).
fn names_the_file(e: &PlatformError, path: &Path, text: Option<&[u8]>) -> Result<(), String> {
    let n_lines = text.map_or(0, |t| lines(t).len());
    match e {
        PlatformError::Parse {
            path: p,
            line,
            message,
        } => {
            if p != path {
                return Err(format!(
                    "parse error names {} not {}",
                    p.display(),
                    path.display()
                ));
            }
            if *line > n_lines + 1 || message.is_empty() {
                return Err(format!("line {line} of {n_lines}: {message:?}"));
            }
            Ok(())
        }
        PlatformError::Io { path: p, .. } if p == path => Ok(()),
        other => {
            let text = other.to_string();
            if text.contains(&path.display().to_string()) {
                Ok(())
            } else {
                Err(format!("error does not name {}: {text}", path.display()))
            }
        }
    }
}

/// Damages `rel` under `root`, runs every reader, checks, and puts the file back.
fn one_case(root: &Path, rel: &str, d: &Damage) -> Result<(), TestCaseError> {
    let path = root.join(rel);
    let original = std::fs::read(&path).unwrap();
    let damaged = apply(d, &original);
    match &damaged {
        Some(bytes) => std::fs::write(&path, bytes).unwrap(),
        None => {
            std::fs::remove_file(&path).unwrap();
            std::fs::create_dir(&path).unwrap();
        }
    }
    let outcome = (|| -> Result<(), String> {
        let mut p = LinuxPlatform::with_root(root);
        if let Err(e) = p.machine() {
            names_the_file(&e, &path, damaged.as_deref())?;
        }
        if let Err(e) = p.snapshot() {
            names_the_file(&e, &path, damaged.as_deref())?;
        }
        Ok(())
    })();
    if damaged.is_none() {
        std::fs::remove_dir(&path).unwrap();
    }
    std::fs::write(&path, &original).unwrap();
    outcome.map_err(|m| TestCaseError::fail(format!("{rel} after {d:?}: {m}")))
}

fn cases(default: u32) -> u32 {
    std::env::var("IRQPILOT_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn run_on(root: &Path, n: u32) {
    let all = files(root);
    let key: Vec<String> = KEY_FILES
        .iter()
        .filter(|f| root.join(f).is_file())
        .map(|f| f.to_string())
        .collect();
    let pick = prop_oneof![prop::sample::select(key), prop::sample::select(all),];
    let mut runner = TestRunner::new(Config {
        cases: n,
        failure_persistence: None,
        ..Config::default()
    });
    runner
        .run(&(pick, damage()), |(rel, d)| one_case(root, &rel, &d))
        .unwrap();
}

#[test]
fn damaged_files_of_a_captured_machine() {
    let (_d, root) = common::fixture_copy("firecracker-2cpu");
    // The harness sees errors: a repeated IRQ row is one, at the repeat's line.
    let path = root.join("proc/interrupts");
    let original = std::fs::read(&path).unwrap();
    let damaged = apply(&Damage::RepeatLine(0.1), &original).unwrap();
    std::fs::write(&path, &damaged).unwrap();
    match LinuxPlatform::with_root(&root).snapshot() {
        Err(e @ PlatformError::Parse { .. }) => {
            names_the_file(&e, &path, Some(&damaged)).unwrap();
            assert!(e.to_string().contains(":5: IRQ 26 is listed twice"), "{e}");
        }
        other => panic!("{other:?}"),
    }
    std::fs::write(&path, &original).unwrap();
    run_on(&root, cases(192));
}

#[test]
fn damaged_files_of_the_generated_server() {
    let dir = common::scratch_dir();
    let root: PathBuf = dir.path().join("large");
    let (machine, snap) = irqpilot_linux::generate::large_server(3);
    irqpilot_linux::tree::write_tree(&root, &machine, &snap).unwrap();
    run_on(&root, cases(24));
}

#[test]
fn a_damaged_journal_is_an_error_naming_it() {
    let d = tempfile::tempdir().unwrap();
    let path = d.path().join("journal.json");
    let good = b"{\n  \"version\": 1,\n  \"entries\": [\n    {\n      \"knob\": {\n        \"kind\": \"affinity\",\n        \"irq\": 24\n      },\n      \"old\": \"0-3\"\n    }\n  ]\n}\n";
    let mut runner = TestRunner::new(Config {
        cases: cases(128),
        failure_persistence: None,
        ..Config::default()
    });
    runner
        .run(&damage(), |d| {
            let Some(bytes) = apply(&d, good) else {
                return Ok(());
            };
            std::fs::write(&path, &bytes).unwrap();
            if let Err(e) = Journal::open(&path) {
                let text = e.to_string();
                prop_assert!(text.contains(&path.display().to_string()), "{text}");
            }
            Ok(())
        })
        .unwrap();
}
