//! The commands end to end, on the built binary: the captured fixture, the generated server,
//! this machine (read only), and as a non-root user.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{firecracker, generated, irqpilot, ok};
use irqpilot_linux::Root;
use irqpilot_linux::inventory::read_machine;
use serde_json::{Value, json};
use std::io::Read;
use std::process::{Command, Stdio};

fn root_arg(p: &std::path::Path) -> String {
    p.to_str().unwrap().to_string()
}

/// Asserts that `keys` appear as object keys in `text` in this order (serde_json's `Value`
/// sorts keys, so the order is checked on the text).
fn assert_key_order(text: &str, keys: &[&str]) {
    let pos: Vec<usize> = keys
        .iter()
        .map(|k| {
            text.find(&format!("\"{k}\":"))
                .unwrap_or_else(|| panic!("no key {k}"))
        })
        .collect();
    assert!(
        pos.windows(2).all(|w| w[0] < w[1]),
        "{keys:?} out of order in {text}"
    );
}

#[test]
fn status_explains_the_fixture() {
    let root = root_arg(&firecracker());
    let text = ok(&["--root", &root, "status", "--sample", "0"]);
    for want in [
        "kernel        6.18.44-fc-v657",
        "cpus          2 online (0-1), all 2 possible",
        "topology      1 package, 2 cores, 1 thread per core (no SMT)",
        "caches        L1d 48K x2, L1i 32K x2, L2 1M x2, L3 32M x1 (LLC groups: 0-1)",
        "isolation     none",
        "housekeeping  0-1 (2 CPUs: every online CPU)",
        "eth0     0000:00:03.0  network  virtio-pci  -     rx0->1 tx0->0 misc->0",
        "virtio1  0000:00:02.0  storage  virtio-pci  -     io0->1 misc->1",
        "other IRQs: 24 ACPI:Ged->0, 25 ACPI:Ged->1, 26 ttyS0->1",
        "allocated without a handler: 27",
        "load: not measured (--sample 0)",
        "findings\n  none\n",
        "proc/irq/27 ",
        "sys/kernel/debug/irq/irqs  debugfs is not mounted",
    ] {
        assert!(text.contains(want), "missing {want:?} in\n{text}");
    }
}

#[test]
fn status_json_is_a_stable_object() {
    let root = root_arg(&firecracker());
    let text = ok(&[
        "--root", &root, "--format", "json", "status", "--sample", "20ms",
    ]);
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v.as_object().unwrap().len(), 14);
    assert_key_order(
        &text,
        &[
            "root",
            "kernel",
            "cpus",
            "numa_nodes",
            "topology",
            "caches",
            "isolation",
            "default_affinity",
            "devices",
            "devices_without_irqs",
            "other_irqs",
            "load",
            "findings",
            "gaps",
        ],
    );
    assert_eq!(v["cpus"]["online"], "0-1");
    assert_eq!(v["isolation"]["housekeeping_basis"], "all-online");
    assert_eq!(v["devices"].as_array().unwrap().len(), 5);
    let eth0 = &v["devices"][2];
    assert_eq!(eth0["name"], "eth0");
    assert_eq!(
        eth0["queues"][0],
        json!({"kind": "rx", "indexes": "0", "count": 1, "cpus": "1", "unknown": 0})
    );
    // A fixture's counters do not move: measured, but nothing to balance.
    assert_eq!(v["load"]["device_irq_per_sec"], 0.0);
    assert_eq!(v["load"]["imbalance"], Value::Null);
    assert_eq!(v["findings"], json!([]));
    let gap = |path: &str| {
        v["gaps"]
            .as_array()
            .unwrap()
            .iter()
            .find(|g| g["path"] == path)
            .cloned()
            .unwrap_or_else(|| panic!("no gap {path}: {}", v["gaps"]))
    };
    assert_eq!(gap("proc/irq/27")["reason"], "missing");
    // No interface is live under a fixture: eth0's coalescing is unknown, never read from this
    // machine's eth0.
    assert_eq!(gap("ethtool:eth0")["reason"], "missing");
}

#[test]
fn status_finds_what_is_wrong_with_the_generated_server() {
    let (_dir, root) = generated(1);
    let root = root_arg(&root);
    let v: Value = serde_json::from_str(&ok(&[
        "--root", &root, "--format", "json", "status", "--sample", "0",
    ]))
    .unwrap();
    assert_eq!(v["cpus"]["online_count"], 256);
    assert_eq!(
        v["topology"],
        json!({"packages": 2, "cores": 128, "threads_per_core": 2})
    );
    assert_eq!(v["isolation"]["housekeeping"], "0-119,128-247");
    assert_eq!(
        v["isolation"]["isolcpus_flags"],
        json!(["domain", "managed_irq"])
    );
    let kinds = |k: &str| {
        v["findings"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|f| f["kind"] == k)
            .count()
    };
    // mlx5 completions 56-63 of the node-1 NIC, and 4 managed queues of each of 8 NVMe.
    assert_eq!(kinds("device-irq-on-isolated-cpu"), 8 + 8 * 4);
    // The ice NIC pinned to node 0 by a script (queue 63's move is pending).
    assert_eq!(kinds("remote-numa-irq"), 63);
    assert_eq!(kinds("affinity-not-honoured"), 1);
    assert_eq!(v["findings"][0]["severity"], "warning");

    let text = ok(&["--root", &root, "status", "--sample", "0"]);
    for want in [
        "topology      2 packages, 128 cores, 2 threads per core (SMT)",
        "LLC groups: 0-63,128-191 | 64-127,192-255",
        "isolcpus=domain,managed_irq 120-127,248-255",
        "txrx0-63->0-63 misc->0",
        "[8 on isolated CPUs]",
        "warning  ens6f0np0: 8 device IRQs (812-819) reach isolated CPUs 120-127",
        "info     ens5f0: 63 IRQs (431-493) of a device on node 1 are served from node 0 (CPUs 0-62)",
    ] {
        assert!(text.contains(want), "missing {want:?} in\n{text}");
    }
}

#[test]
fn status_works_as_a_non_root_user() {
    let bin = env!("CARGO_BIN_EXE_irqpilot");
    let fixture = root_arg(&firecracker());
    let as_nobody = |args: &[&str]| {
        let mut cmd = if common::is_root() {
            let mut c = Command::new("setpriv");
            c.args(["--reuid=65534", "--regid=65534", "--clear-groups", bin]);
            c
        } else {
            Command::new(bin)
        };
        cmd.args(args).output()
    };
    let Ok(out) = as_nobody(&["--root", &fixture, "status", "--sample", "0"]) else {
        eprintln!("SKIPPED: setpriv not available");
        return;
    };
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("eth0"));
    // This machine, read only, with a load sample.
    let out = as_nobody(&["status", "--sample", "100ms"]).unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("load over 0.1"), "{text}");
}

#[test]
fn snapshot_json_contract() {
    let root = root_arg(&firecracker());
    let text = ok(&["--root", &root, "--format", "json", "snapshot"]);
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v.as_object().unwrap().len(), 2);
    assert!(text.starts_with(
        "{\"cpus\":[0,1],\"interrupts\":[{\"irq\":\"24\",\"name\":\"ACPI:Ged\",\"per_cpu\":[1,0],\"total\":1},"
    ));
    assert_eq!(v["cpus"], json!([0, 1]));
    let rows = v["interrupts"].as_array().unwrap();
    assert_eq!(rows.len(), 35);
    assert_eq!(
        rows[0],
        json!({"irq": "24", "name": "ACPI:Ged", "per_cpu": [1, 0], "total": 1})
    );
    assert_eq!(rows[11]["irq"], "36");
    assert_eq!(rows[11]["per_cpu"], json!([0, 33162]));
    let rx = rows.iter().find(|r| r["irq"] == "38").unwrap();
    assert_eq!(
        rx["name"], "virtio2-input.0",
        "the table's NAME, as lsirq --json has it"
    );
    let nmi = rows.iter().find(|r| r["irq"] == "NMI").unwrap();
    assert_eq!(
        nmi,
        &json!({"irq": "NMI", "name": "Non-maskable interrupts", "per_cpu": [0, 0], "total": 0})
    );
    let loc = rows.iter().find(|r| r["irq"] == "LOC").unwrap();
    assert_eq!(
        loc,
        &json!({"irq": "LOC", "name": "Local timer interrupts", "per_cpu": [77569, 78904], "total": 156473})
    );
    let err = rows.iter().find(|r| r["irq"] == "ERR").unwrap();
    assert_eq!(
        err,
        &json!({"irq": "ERR", "name": "", "per_cpu": [], "total": 0})
    );
    for r in rows {
        let mut keys: Vec<&String> = r.as_object().unwrap().keys().collect();
        keys.sort();
        assert_eq!(keys, ["irq", "name", "per_cpu", "total"]);
        let sum: u64 = r["per_cpu"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c.as_u64().unwrap())
            .sum();
        if !r["per_cpu"].as_array().unwrap().is_empty() {
            assert_eq!(r["total"].as_u64(), Some(sum));
        }
    }
    // File order: numbered rows, then the named ones as the kernel printed them.
    let labels: Vec<&str> = rows.iter().map(|r| r["irq"].as_str().unwrap()).collect();
    assert_eq!(&labels[18..21], ["43", "NMI", "LOC"]);
    assert_eq!(labels.last(), Some(&"PIW"));
}

#[test]
fn snapshot_table() {
    let root = root_arg(&firecracker());
    let text = ok(&["--root", &root, "snapshot"]);
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("IRQ  TOTAL   CPU0   CPU1  NAME"));
    assert!(
        text.contains("\n36   33.2k      0  33.2k  virtio1-req.0\n"),
        "{text}"
    );
    assert!(
        text.contains("\nERR      0                Non-maskable")
            || text.contains("\nERR      0\n"),
        "{text}"
    );
    // A big machine gets the busiest CPU instead of 256 columns.
    let (_dir, big) = generated(2);
    let text = ok(&["--root", &root_arg(&big), "snapshot"]);
    assert!(
        text.starts_with("IRQ  TOTAL  BUSIEST CPU  NAME\n"),
        "{}",
        &text[..200]
    );
    assert!(
        text.lines()
            .any(|l| l.ends_with("mlx5_comp5@pci:0000:3b:00.0") && l.contains(" 5 ("))
    );
}

#[test]
fn watch_prints_json_lines() {
    let root = root_arg(&firecracker());
    let text = ok(&[
        "--root",
        &root,
        "--format",
        "json",
        "watch",
        "--interval",
        "10ms",
        "--count",
        "3",
    ]);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3);
    let mut last_t = 0.0;
    for line in lines {
        let v: Value = serde_json::from_str(line).unwrap();
        assert_eq!(v.as_object().unwrap().len(), 5);
        assert_key_order(line, &["t", "interval_s", "irqs", "cpus", "imbalance"]);
        let t = v["t"].as_f64().unwrap();
        assert!(t > last_t);
        last_t = t;
        assert!(v["interval_s"].as_f64().unwrap() > 0.0);
        // The fixture's counters do not move.
        assert_eq!(v["irqs"], json!([]));
        assert_eq!(v["imbalance"], Value::Null);
        let cpus = v["cpus"].as_array().unwrap();
        assert_eq!(cpus.len(), 2);
        assert_eq!(
            cpus[1],
            json!({"cpu": 1, "irq_per_sec": 0.0, "arch_per_sec": 0.0, "hardirq_pct": null, "softirq_pct": null})
        );
    }
    let text = ok(&[
        "--root",
        &root,
        "watch",
        "--interval",
        "5ms",
        "--count",
        "1",
    ]);
    assert!(
        text.contains("  IRQ        RATE/S  CPUS (share)           NAME\n"),
        "{text}"
    );
    // This machine, where something always happens (the timer at least).
    let text = ok(&[
        "--format",
        "json",
        "watch",
        "--interval",
        "50ms",
        "--count",
        "1",
        "--top",
        "0",
    ]);
    let v: Value = serde_json::from_str(text.trim()).unwrap();
    assert!(!v["irqs"].as_array().unwrap().is_empty(), "{text}");
}

#[test]
fn capture_reads_back_identical() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("copy");
    let text = ok(&[
        "--root",
        &root_arg(&firecracker()),
        "capture",
        "--out",
        out.to_str().unwrap(),
        "--description",
        "test copy",
    ]);
    assert!(
        text.starts_with("captured 384 files and 11 links from "),
        "{text}"
    );
    assert_eq!(
        read_machine(&Root::new(&out)).unwrap(),
        read_machine(&Root::new(firecracker())).unwrap()
    );
    let manifest: toml::Table =
        toml::from_str(&std::fs::read_to_string(out.join("MANIFEST.toml")).unwrap()).unwrap();
    assert_eq!(manifest["description"].as_str(), Some("test copy"));
    assert_eq!(manifest["kernel_release"].as_str(), Some("6.18.44-fc-v657"));
    assert_eq!(manifest["online_cpus"].as_integer(), Some(2));
    assert!(manifest["captured_at"].as_str().unwrap().ends_with('Z'));
    // The same again: the destination is not empty.
    let again = irqpilot(&[
        "--root",
        &root_arg(&firecracker()),
        "capture",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(again.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&again.stderr).contains("not an empty directory"));
}

#[test]
fn capture_of_this_machine_reads_back() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("live");
    let v: Value = serde_json::from_str(&ok(&[
        "--format",
        "json",
        "capture",
        "--out",
        out.to_str().unwrap(),
    ]))
    .unwrap();
    assert!(v["files"].as_u64().unwrap() > 10);
    let m = read_machine(&Root::new(&out)).unwrap();
    assert_eq!(
        Some(m.topology.online.len() as u64),
        v["online_cpus"].as_u64()
    );
    assert!(!m.irqs.is_empty());
    ok(&["--root", out.to_str().unwrap(), "status", "--sample", "0"]);
}

#[test]
fn fixture_generate_is_deterministic() {
    let (a_dir, a) = generated(7);
    let (_b_dir, b) = generated(7);
    for rel in [
        "proc/interrupts",
        "proc/stat",
        "proc/softirqs",
        "MANIFEST.toml",
    ] {
        assert_eq!(
            std::fs::read(a.join(rel)).unwrap(),
            std::fs::read(b.join(rel)).unwrap(),
            "{rel}"
        );
    }
    let again = irqpilot(&["fixture", "generate", "--out", a.to_str().unwrap()]);
    assert_eq!(again.status.code(), Some(1));
    let err = String::from_utf8_lossy(&again.stderr);
    assert!(
        err.starts_with("irqpilot: ") && err.contains("not an empty directory"),
        "{err}"
    );
    drop(a_dir);
}

#[test]
fn closed_pipe_is_a_quiet_success() {
    let (_dir, root) = generated(3);
    // `irqpilot snapshot --format json | head -c 100`: ~1.5 MB of output into a closed pipe.
    let mut child = Command::new(env!("CARGO_BIN_EXE_irqpilot"))
        .args([
            "--root",
            root.to_str().unwrap(),
            "--format",
            "json",
            "snapshot",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut head = [0u8; 100];
    stdout.read_exact(&mut head).unwrap();
    drop(stdout);
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{:?}", out.status);
    assert_eq!(String::from_utf8_lossy(&out.stderr), "");
    assert!(head.starts_with(b"{\"cpus\":[0,1,2,"));
}

#[test]
fn unknown_config_keys_and_missing_roots_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("irqpilot.toml");
    std::fs::write(&cfg, "[findings]\nheavy_min_per_second = 5.0\n").unwrap();
    let out = irqpilot(&[
        "--config",
        cfg.to_str().unwrap(),
        "--root",
        &root_arg(&firecracker()),
        "status",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.starts_with("irqpilot: config "), "{err}");
    assert!(err.contains("heavy_min_per_second"), "{err}");

    std::fs::write(&cfg, "[findings]\nvector_capacity = 3\n").unwrap();
    let v: Value = serde_json::from_str(&ok(&[
        "--config",
        cfg.to_str().unwrap(),
        "--root",
        &root_arg(&firecracker()),
        "--format",
        "json",
        "status",
        "--sample",
        "0",
    ]))
    .unwrap();
    // With a capacity of 3 vectors per CPU, this 20-IRQ guest is under pressure.
    assert!(
        v["findings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["kind"] == "vector-pressure")
    );

    let out = irqpilot(&["--root", "/nonexistent-root", "snapshot"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "irqpilot: /nonexistent-root/proc/interrupts: No such file or directory (os error 2)\n"
    );
}

#[test]
fn roots_that_are_not_machines_and_roots_a_command_ignores_are_said() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("capture");
    let o = irqpilot(&[
        "--root",
        "/nonexistent",
        "capture",
        "--out",
        out.to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("/nonexistent/proc/interrupts"), "{err}");
    assert!(
        !out.exists(),
        "nothing written for a root that is not there"
    );
    // Commands that do not read a machine through --root say so.
    let o = irqpilot(&["--root", "/tmp", "sim", "--list"]);
    assert!(o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("--root /tmp: ignored: `sim`"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let generated_dir = dir.path().join("gen");
    let o = irqpilot(&[
        "--root",
        "/tmp",
        "fixture",
        "generate",
        "--out",
        generated_dir.to_str().unwrap(),
    ]);
    assert!(o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("ignored: `fixture generate`"));
    // No note when --root is not given.
    let o = irqpilot(&["sim", "--list"]);
    assert!(
        o.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn command_line_errors_exit_2_like_clap_s_own() {
    for args in [
        vec!["status", "--no-such-flag"],
        vec!["isolate", "--cpus", "x-y"],
        vec!["sim"],
        vec!["sim", "nic-100g-32q", "--set", "novalue"],
        vec!["sim", "nic-100g-32q", "--duration", "0s"],
        vec!["sim", "nic-100g-32q", "--duration", "1500us"],
        vec!["watch", "--interval", "0s", "--count", "1"],
    ] {
        let o = irqpilot(&args);
        assert_eq!(
            o.status.code(),
            Some(2),
            "{args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
}

#[test]
fn sim_moderation_values_are_the_same_in_help_and_errors() {
    let help = ok(&["sim", "--help"]);
    let values = irqpilot_sim::config::MODERATION_VALUES.join("|");
    assert!(
        help.split_whitespace()
            .collect::<String>()
            .contains(&format!("moderation={values}")),
        "{help}"
    );
    let o = irqpilot(&["sim", "nic-100g-32q", "--set", "moderation=turbo"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(&irqpilot_sim::config::MODERATION_VALUES.join(", ")),
        "{err}"
    );
    // --duration 0 is refused like duration_ms = 0, not run as 1 ms.
    let o = irqpilot(&["sim", "nic-100g-32q", "--duration", "0s"]);
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("duration_ms >= 1"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}
