//! No original value is ever lost (DESIGN.md rule 11): the sequences that used to lose them,
//! each run as a careful operator would, on temporary copies of fixture trees. Each ends with
//! `revert` and checks every file under `proc/irq` against the tree as it was, byte for byte.
//!
//! * `revert` or `apply` / `isolate --apply` while the daemon runs: refused, naming its pid
//!   (the daemon owns the root); after the daemon stops, `revert` restores everything.
//! * Two `apply` at once: the second waits for the first and the journal keeps the values from
//!   before the first.
//! * `kill -9` of the daemon or of `apply` at any moment: the journal is written before any
//!   knob, so `revert` always restores.
//! * Affinities that are not CPU lists: left alone and reported, never overwritten.
//! * The daemon survives a malformed sample and restores on every way out it is asked to.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{irq_files, wait_for};
use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_irqpilot");

/// Placement periods short enough for a test.
const FAST: &str = "[placement]\nmin_interval_ms = 20\nmax_interval_ms = 40\n";

/// A config file in `dir`.
fn config(dir: &Path, text: &str) -> PathBuf {
    let p = dir.join("irqpilot.toml");
    std::fs::write(&p, text).unwrap();
    p
}

fn cmd(root: &Path, cfg: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(BIN);
    c.arg("--root")
        .arg(root)
        .arg("--config")
        .arg(cfg)
        .args(args)
        .env_remove("RUST_LOG");
    c
}

fn run(root: &Path, cfg: &Path, args: &[&str]) -> Output {
    cmd(root, cfg, args).output().unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The files that differ from `before`.
fn changed(root: &Path, before: &BTreeMap<PathBuf, Vec<u8>>) -> Vec<PathBuf> {
    let now = irq_files(root);
    before
        .iter()
        .filter(|(p, v)| now.get(*p) != Some(*v))
        .map(|(p, _)| p.clone())
        .collect()
}

fn daemon(root: &Path, cfg: &Path, extra: &[&str]) -> Child {
    let mut args = vec!["daemon"];
    args.extend_from_slice(extra);
    cmd(root, cfg, &args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn signal(child: &Child, sig: libc::c_int) {
    // SAFETY: signalling a child this test spawned and has not reaped.
    unsafe { libc::kill(child.id() as libc::pid_t, sig) };
}

/// SIGTERM, then the exit status and stderr.
fn stop(mut child: Child) -> (std::process::ExitStatus, String) {
    signal(&child, libc::SIGTERM);
    let status = child.wait().unwrap();
    let mut err = String::new();
    if let Some(mut e) = child.stderr.take() {
        e.read_to_string(&mut err).unwrap();
    }
    (status, err)
}

/// `revert` succeeds and the tree is back, byte for byte.
fn assert_reverted(root: &Path, cfg: &Path, before: &BTreeMap<PathBuf, Vec<u8>>) {
    let out = run(root, cfg, &["revert"]);
    assert!(
        out.status.success(),
        "revert: {}\n{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    let differ = changed(root, before);
    assert!(
        differ.is_empty(),
        "{} files differ after revert, e.g. {:?}\n{}",
        differ.len(),
        differ.first(),
        text(&out.stdout)
    );
}

#[test]
fn revert_and_apply_while_the_daemon_runs_are_refused_and_nothing_is_lost() {
    let (dir, root) = common::generated(1);
    let cfg = config(dir.path(), FAST);
    let before = irq_files(&root);
    let d = daemon(&root, &cfg, &[]);
    let pid = d.id();
    assert!(
        wait_for(|| !changed(&root, &before).is_empty()),
        "the daemon placed nothing"
    );
    let placed = irq_files(&root);
    for args in [
        vec!["revert"],
        vec!["apply", "--sample", "0"],
        vec!["isolate", "--cpus", "100-127", "--apply"],
    ] {
        let started = Instant::now();
        let out = run(&root, &cfg, &args);
        let err = text(&out.stderr);
        assert_eq!(
            out.status.code(),
            Some(1),
            "{args:?} ran beside the daemon: {err}"
        );
        assert!(
            err.contains(&format!("daemon (pid {pid})")) && err.contains("stop it first"),
            "{args:?}: {err}"
        );
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "a daemon is not waited for"
        );
    }
    // Nobody but the daemon wrote: it keeps its placement (sticky), and its journal holds
    // the originals.
    assert_eq!(irq_files(&root), placed);
    let (status, err) = stop(d);
    assert!(status.success(), "{err}");
    assert_reverted(&root, &cfg, &before);
}

#[test]
fn two_applies_at_once_keep_the_first_originals() {
    let (dir, root) = common::generated(2);
    let cfg = config(dir.path(), "");
    let before = irq_files(&root);
    for round in 0..3 {
        let a = cmd(&root, &cfg, &["apply", "--sample", "0"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let b = cmd(&root, &cfg, &["apply", "--sample", "0"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        for c in [a, b] {
            let out = c.wait_with_output().unwrap();
            assert!(out.status.success(), "round {round}: {}", text(&out.stderr));
        }
        assert!(!changed(&root, &before).is_empty());
        assert_reverted(&root, &cfg, &before);
    }
}

#[test]
fn kill_9_at_any_moment_loses_nothing() {
    let (dir, root) = common::generated(3);
    let cfg = config(dir.path(), FAST);
    let before = irq_files(&root);
    // The daemon's first period writes ~100 knobs; apply writes as many. Kill them at moments
    // spread over their start-up and their writes.
    for (k, delay_ms) in [0u64, 30, 80, 150, 250, 400, 700].into_iter().enumerate() {
        let args: &[&str] = if k % 2 == 0 {
            &["daemon"]
        } else {
            &["apply", "--sample", "0"]
        };
        let mut c = cmd(&root, &cfg, args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(delay_ms));
        signal(&c, libc::SIGKILL);
        c.wait().unwrap();
        assert_reverted(&root, &cfg, &before);
    }
}

#[test]
fn affinities_that_are_not_cpu_lists_are_left_alone() {
    let dir = common::scratch_dir();
    let root = dir.path().join("root");
    common::copy_tree(&common::firecracker(), &root);
    // Letters, nothing, CPUs beyond any machine: irqpilot could not write them back.
    for (irq, bad) in [(24, "abc\n"), (25, "\n"), (26, "0-4294967295\n")] {
        std::fs::write(root.join(format!("proc/irq/{irq}/smp_affinity_list")), bad).unwrap();
    }
    let cfg = config(dir.path(), "[placement]\nban_cpus = \"1\"\n");
    let before = irq_files(&root);
    let out = run(&root, &cfg, &["--format", "json", "apply", "--sample", "0"]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    for irq in [24, 25, 26] {
        let r = common::result_of(&v, irq);
        assert!(
            r.is_none() || r.as_deref() == Some("left-alone"),
            "IRQ {irq}: {r:?}"
        );
        let f = root.join(format!("proc/irq/{irq}/smp_affinity_list"));
        assert_eq!(
            std::fs::read(&f).unwrap(),
            before[&f],
            "IRQ {irq} was written"
        );
    }
    assert!(v["written"].as_u64().unwrap() > 0);
    assert_reverted(&root, &cfg, &before);
}

#[test]
fn a_bad_sample_is_skipped_and_every_way_out_restores() {
    let (dir, root) = common::generated(4);
    let cfg = config(dir.path(), FAST);
    let before = irq_files(&root);
    let interrupts = root.join("proc/interrupts");
    let good = std::fs::read(&interrupts).unwrap();

    // A malformed /proc/interrupts mid-run: periods are skipped, the daemon lives on, and
    // SIGTERM with --restore-on-exit restores.
    let mut d = daemon(&root, &cfg, &["--restore-on-exit"]);
    // Its log read as it comes, so the bad file stays until a period has met it (a loaded
    // machine may run no period in any fixed time).
    let log = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let reader = {
        let log = std::sync::Arc::clone(&log);
        let mut e = d.stderr.take().unwrap();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = e.read(&mut buf) {
                if n == 0 {
                    break;
                }
                log.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        })
    };
    assert!(wait_for(|| !changed(&root, &before).is_empty()));
    std::fs::write(&interrupts, b"           CPU0       CPU1\n 24: x y z\n").unwrap();
    assert!(
        wait_for(|| log.lock().unwrap().contains("sample skipped")),
        "{}",
        log.lock().unwrap()
    );
    std::fs::write(&interrupts, &good).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let (status, _) = stop(d);
    reader.join().unwrap();
    let err = log.lock().unwrap().clone();
    assert!(status.success(), "{err}");
    assert!(
        changed(&root, &before).is_empty(),
        "not restored on SIGTERM"
    );

    // The end of --iterations.
    let out = run(
        &root,
        &cfg,
        &["daemon", "--iterations", "2", "--restore-on-exit"],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("restored"));
    assert!(
        changed(&root, &before).is_empty(),
        "not restored after --iterations"
    );

    // An error that ends the loop: stdout closed under it (JSON lines go to stdout each period).
    let mut d = cmd(
        &root,
        &cfg,
        &["--format", "json", "daemon", "--restore-on-exit"],
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    assert!(wait_for(|| !changed(&root, &before).is_empty()));
    drop(d.stdout.take());
    let deadline = Instant::now() + Duration::from_secs(60);
    while d.try_wait().unwrap().is_none() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        d.try_wait().unwrap().is_some(),
        "still running without its stdout"
    );
    assert!(
        changed(&root, &before).is_empty(),
        "not restored on an error exit"
    );
}
