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
