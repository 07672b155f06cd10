//! The end-to-end check of the moderation actuators against real drivers in a QEMU VM
//! (`scripts/vm-check.sh`), run only when asked: it needs root, installs packages and takes
//! 20-70 s with KVM or TCG, so neither `cargo test` nor CI runs it by default.

use std::process::Command;

#[test]
fn moderation_against_real_drivers_in_a_vm() {
    if std::env::var("IRQPILOT_VM_TEST").as_deref() != Ok("1") {
        eprintln!(
            "skipped: set IRQPILOT_VM_TEST=1 (needs root, KVM or TCG, ~20-70 s; runs scripts/vm-check.sh)"
        );
        return;
    }
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/vm-check.sh");
    // The binary this test run built: the script then builds nothing (and never waits on the
    // cargo lock this run holds).
    let status = Command::new("bash")
        .arg(script)
        .env("IRQPILOT_BIN", env!("CARGO_BIN_EXE_irqpilot"))
        .status()
        .expect("run scripts/vm-check.sh");
    assert!(status.success(), "scripts/vm-check.sh: {status}");
}
