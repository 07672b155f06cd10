//! Bad `/proc/interrupts` end to end: every command says `irqpilot: <path>:<line>: <message>`
//! (or `irqpilot: <path>: <os error>` when the file cannot be read) and exits 1; never a panic.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{interrupts_only, irqpilot};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

const HEAD: &str = "           CPU0       CPU1       \n";

/// Runs every reading command on `root`; returns the one stderr line they all print.
fn fails_everywhere(root: &Path) -> String {
    let root = root.to_str().unwrap();
    let mut seen = None;
    for args in [
        vec!["--root", root, "snapshot"],
        vec!["--root", root, "--format", "json", "snapshot"],
        vec!["--root", root, "status", "--sample", "0"],
        vec!["--root", root, "watch", "--interval", "1ms", "--count", "1"],
    ] {
        let out = irqpilot(&args);
        let err = String::from_utf8(out.stderr).unwrap();
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(out.stdout.is_empty(), "{args:?}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        match &seen {
            None => seen = Some(err),
            Some(first) => assert_eq!(&err, first, "{args:?}"),
        }
    }
    seen.unwrap()
}

/// The line number of `irqpilot: <root>/proc/interrupts:<line>: <message>`.
fn line_of(err: &str, root: &Path) -> usize {
    let prefix = format!("irqpilot: {}/proc/interrupts:", root.display());
    let rest = err.strip_prefix(&prefix).unwrap_or_else(|| panic!("{err}"));
    let (line, message) = rest.split_once(": ").unwrap_or_else(|| panic!("{err}"));
    assert!(!message.trim().is_empty(), "{err}");
    line.parse().unwrap_or_else(|_| panic!("{err}"))
}

#[test]
fn malformed_files_name_file_and_line() {
    let cases: &[(&str, &[u8], usize, &str)] = &[
        ("truncated row", b" 24:          1\n", 2, ""),
        (
            "non-numeric count",
            b" 24:          1         x7   IO-APIC   5-edge  a\n",
            2,
            "x7",
        ),
        (
            "more columns than the header",
            b" 24:          1          2          3   IO-APIC   5-edge  a\n",
            2,
            "",
        ),
        (
            "binary",
            b" 24:          1          2   a\n\x00\x01\x02ELF\n",
            3,
            "",
        ),
        (
            "not UTF-8",
            b" 24:          1          2   a\n\xff\xfe\n",
            3,
            "0xff",
        ),
    ];
    for (what, body, want_line, token) in cases {
        let mut text = HEAD.as_bytes().to_vec();
        text.extend_from_slice(body);
        let dir = interrupts_only(&text);
        let err = fails_everywhere(dir.path());
        assert_eq!(line_of(&err, dir.path()), *want_line, "{what}: {err}");
        assert!(err.contains(token), "{what}: {err}");
    }
    let dir = interrupts_only(b"");
    let err = fails_everywhere(dir.path());
    assert_eq!(line_of(&err, dir.path()), 0, "empty: {err}");
}

#[test]
fn unreadable_files_name_the_file() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("proc/interrupts")).unwrap();
    let err = fails_everywhere(dir.path());
    assert_eq!(
        err,
        format!(
            "irqpilot: {}/proc/interrupts: Is a directory (os error 21)\n",
            dir.path().display()
        )
    );

    // Permission denied, for a user who may not read it (as root: run the binary as nobody).
    if !common::is_root() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::create_dir_all(dir.path().join("proc")).unwrap();
    let file = dir.path().join("proc/interrupts");
    std::fs::write(&file, HEAD).unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o000)).unwrap();
    let Ok(out) = std::process::Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(env!("CARGO_BIN_EXE_irqpilot"))
        .args(["--root", dir.path().to_str().unwrap(), "snapshot"])
        .output()
    else {
        eprintln!("SKIPPED: setpriv not available");
        return;
    };
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        format!(
            "irqpilot: {}: Permission denied (os error 13)\n",
            file.display()
        )
    );
}

#[test]
fn malformed_optional_files_are_errors_too() {
    let dir = tempfile::tempdir().unwrap();
    common::copy_tree(&common::firecracker(), dir.path());
    std::fs::write(
        dir.path().join("proc/softirqs"),
        "                    CPU0       CPU1\n  HI: 1\n",
    )
    .unwrap();
    let out = irqpilot(&["--root", dir.path().to_str().unwrap(), "snapshot"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        format!(
            "irqpilot: {}/proc/softirqs:2: `HI` has 1 counts but the header has 2 CPUs\n",
            dir.path().display()
        )
    );
    // Missing ones are not: the snapshot has no softirqs, and says nothing.
    std::fs::remove_file(dir.path().join("proc/softirqs")).unwrap();
    std::fs::remove_file(dir.path().join("proc/stat")).unwrap();
    let out = irqpilot(&[
        "--root",
        dir.path().to_str().unwrap(),
        "--format",
        "json",
        "watch",
        "--interval",
        "1ms",
        "--count",
        "1",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("\"hardirq_pct\":null"));
}
