//! `irqpilot sim --export-root`: the twin's live tree, read back by irqpilot's own commands.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
use common::{irqpilot, ok, scratch_dir};

#[test]
fn the_exported_twin_is_a_root_the_other_commands_read() {
    let dir = scratch_dir();
    let root = dir.path().join("twin");
    let root_s = root.to_str().unwrap();
    let report = ok(&[
        "sim",
        "isolation-rt-24cpu",
        "--export-root",
        root_s,
        "--set",
        "placement=irqpilot",
        "--format",
        "json",
    ]);
    let r: serde_json::Value = serde_json::from_str(&report).unwrap();
    assert_eq!(r["placement"]["channels"]["eth0"], 4);
    assert!(root.join("proc/interrupts").exists());
    assert!(
        root.join("sys/devices/system/cpu/cpu5/topology/core_siblings")
            .exists()
    );
    // `status` sees the simulated machine: 24 CPUs, 20 isolated, the NIC cut to 4 queues.
    let status: serde_json::Value = serde_json::from_str(&ok(&[
        "status", "--root", root_s, "--sample", "0", "--format", "json",
    ]))
    .unwrap();
    let text = status.to_string();
    assert!(text.contains("4-23"), "{text}");
    assert!(text.contains("eth0"), "{text}");
    // The flags that only make sense with an export are refused without one.
    let out = irqpilot(&["sim", "isolation-rt-24cpu", "--realtime", "1"]);
    assert!(!out.status.success());
}

/// The twin takes a write at its next step and may refuse it (its vector matrix is full):
/// `isolate --apply` waits for the twin, reads every write back and reports the ones it put
/// back as not taken (exit 3); `revert` restores the rest.
#[test]
fn writes_the_twin_puts_back_are_reported_refused() {
    use std::process::{Command, Stdio};
    let dir = scratch_dir();
    let root = dir.path().join("twin");
    let mut twin = Command::new(env!("CARGO_BIN_EXE_irqpilot"))
        .args([
            "sim",
            "isolation-rt-24cpu",
            "--duration",
            "600s",
            "--realtime",
            "1",
        ])
        .arg("--export-root")
        .arg(&root)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !root.join(".irqpilot-twin-ready").exists() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let root_s = root.to_str().unwrap();
    let lists = || -> Vec<String> {
        (24..48)
            .map(|irq| {
                std::fs::read_to_string(root.join(format!("proc/irq/{irq}/smp_affinity_list")))
                    .unwrap()
            })
            .collect()
    };
    let before = lists();
    let out = irqpilot(&[
        "--root",
        root_s,
        "--config",
        "/dev/null",
        "--format",
        "json",
        "isolate",
        "--cpus",
        "4-23",
        "--apply",
    ]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    let outcomes = v["applied"]["outcomes"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let not_taken: Vec<&serde_json::Value> = outcomes
        .iter()
        .filter(|o| o["result"] == "not-taken")
        .collect();
    let written = outcomes.iter().filter(|o| o["result"] == "written").count();
    let after = lists();
    let reverted = irqpilot(&["--root", root_s, "--config", "/dev/null", "revert"]);
    let restored = lists();
    // SAFETY: ending the twin this test started, by its pid.
    unsafe { libc::kill(twin.id() as libc::pid_t, libc::SIGTERM) };
    twin.wait().unwrap();
    assert_eq!(out.status.code(), Some(3), "{v}");
    assert!(!not_taken.is_empty() && written > 0, "{v}");
    for o in &not_taken {
        let irq = o["action"]["irq"].as_u64().unwrap() as usize;
        assert_eq!(after[irq - 24], before[irq - 24], "IRQ {irq} was put back");
    }
    // Written ones were read back and effective CPUs come from the twin, inside the new mask.
    for o in outcomes.iter().filter(|o| o["result"] == "written") {
        if o["action"]["action"] == "set-affinity" {
            assert_eq!(o["effective"], o["action"]["cpus"], "{o}");
        }
    }
    assert!(
        reverted.status.success(),
        "{}",
        String::from_utf8_lossy(&reverted.stderr)
    );
    assert_eq!(restored, before);
}

/// The twin never writes over a directory that is not its own earlier export, nor `/`.
#[test]
fn the_export_goes_only_where_nothing_would_be_written_over() {
    let dir = scratch_dir();
    let taken = dir.path().join("taken");
    std::fs::create_dir_all(&taken).unwrap();
    std::fs::write(taken.join("notes.txt"), "mine\n").unwrap();
    let run = |root: &str| {
        irqpilot(&[
            "sim",
            "isolation-rt-24cpu",
            "--duration",
            "20ms",
            "--export-root",
            root,
        ])
    };
    let out = run(taken.to_str().unwrap());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("not an empty directory nor an earlier export"),
        "{err}"
    );
    assert_eq!(
        std::fs::read_dir(&taken).unwrap().count(),
        1,
        "nothing written"
    );
    let out = run("/");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("this machine's root"), "{err}");
    // An earlier export (its twin has ended) is written over.
    let twin = dir.path().join("twin");
    ok(&[
        "sim",
        "isolation-rt-24cpu",
        "--duration",
        "20ms",
        "--export-root",
        twin.to_str().unwrap(),
    ]);
    ok(&[
        "sim",
        "isolation-rt-24cpu",
        "--duration",
        "20ms",
        "--export-root",
        twin.to_str().unwrap(),
    ]);
}

/// The twin's pinned application threads are under its `/proc` as a process's are on Linux
/// (`comm`, each thread's `Cpus_allowed_list`), so `[[placement.applications]] process =
/// "rpc-0"` finds them: with the entry some of the NIC's IRQs are planned onto the
/// application's node (0, CPUs 0-3), without it none leaves the NIC's node (1, CPUs 4-7).
#[test]
fn placement_finds_the_twins_application_by_process_name() {
    use std::process::{Command, Stdio};
    let dir = scratch_dir();
    let root = dir.path().join("twin");
    let root_s = root.to_str().unwrap();
    // Live at wall-clock pace, so `plan` samples rates.
    /// Ends the twin it started (by its id) however the test ends.
    struct Twin(std::process::Child);
    impl Drop for Twin {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let _twin = Twin(
        Command::new(env!("CARGO_BIN_EXE_irqpilot"))
            .args([
                "sim",
                "app-pinned-2node",
                "--export-root",
                root_s,
                "--realtime",
                "1",
            ])
            .args(["--set", "placement=none", "--set", "duration_ms=30000"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let ready = root.join(irqpilot_sim::export::READY_FILE);
    assert!(
        common::wait_for(|| ready.exists()),
        "the twin never became ready"
    );
    assert_eq!(
        std::fs::read_to_string(root.join("proc/4000/comm")).unwrap(),
        "rpc-0\n"
    );
    let cfg = dir.path().join("apps.toml");
    std::fs::write(
        &cfg,
        "[[placement.applications]]\ndevice = \"eth0\"\nprocess = \"rpc-0\"\n",
    )
    .unwrap();
    let targets = |config: &str| -> Vec<u64> {
        let out = ok(&[
            "--root", root_s, "--config", config, "--format", "json", "plan", "--sample", "300ms",
        ]);
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        v["moves"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["to"].as_str().unwrap().parse().unwrap())
            .collect()
    };
    let near_app = targets(cfg.to_str().unwrap());
    let near_device = targets("/dev/null");
    assert!(near_app.iter().any(|c| *c < 4), "{near_app:?}");
    assert!(near_device.iter().all(|c| *c >= 4), "{near_device:?}");
}
