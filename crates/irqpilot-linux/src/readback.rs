//! A write counts only when a read-back shows it held (DESIGN.md rule 11). The kernel takes or
//! refuses a write to `/proc/irq` at once, and [`crate::LinuxPlatform`] reads each file back
//! right after writing it. The twin's exported tree ([`Backing::Twin`]) takes writes at its next
//! step instead: there the platform waits until the twin has stepped twice after the writes
//! (one whole step began after them), then reads every written affinity again; one the twin
//! refused has its old text back and becomes [`irqpilot_core::ApplyError::NotTaken`].

use crate::format::procirq;
use crate::platform::DEFAULT_SMP_AFFINITY;
use crate::root::{Backing, Root, TWIN_STEP_FILE, process_exists};
use irqpilot_core::{Action, ApplyReport};
use std::time::{Duration, Instant};

/// The longest wait for the twin to take a plan's writes (its steps take milliseconds; a twin
/// holding its clock, `--hold-until`, takes none).
pub const TWIN_TAKE_TIMEOUT: Duration = Duration::from_secs(2);

fn twin_step(root: &Root) -> Option<u64> {
    std::fs::read_to_string(root.join(TWIN_STEP_FILE))
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// Waits until the twin has stepped twice; false when it did not in time (or has ended).
fn wait_for_twin(root: &Root, pid: u32) -> bool {
    let Some(start) = twin_step(root) else {
        return false;
    };
    let deadline = Instant::now() + TWIN_TAKE_TIMEOUT;
    loop {
        if twin_step(root).is_some_and(|n| n >= start + 2) {
            return true;
        }
        if Instant::now() >= deadline || !process_exists(pid) {
            return false;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// On a twin's tree, waits for the twin to take the plan's affinity writes and reads them back
/// again: a write the twin refused is reported as not taken. Elsewhere, nothing to do (the
/// kernel answered at the write; a fixture keeps whatever is written).
pub(crate) fn recheck_on_twin(root: &Root, report: &mut ApplyReport) {
    let written: Vec<usize> = report
        .outcomes
        .iter()
        .enumerate()
        .filter(|(_, o)| {
            o.result == Ok(true)
                && matches!(
                    o.action,
                    Action::SetAffinity { .. } | Action::SetDefaultAffinity { .. }
                )
        })
        .map(|(k, _)| k)
        .collect();
    if written.is_empty() {
        return;
    }
    let Backing::Twin { pid } = root.backing() else {
        return;
    };
    if !wait_for_twin(root, pid) {
        tracing::warn!(
            pid,
            "the twin did not step within {} s: writes not read back",
            TWIN_TAKE_TIMEOUT.as_secs()
        );
        return;
    }
    for k in written {
        let o = &mut report.outcomes[k];
        let (path, held) = match &o.action {
            Action::SetAffinity { irq, cpus } => {
                let path = root.join(&format!("proc/irq/{irq}/{}", procirq::SMP_AFFINITY_LIST));
                let held = crate::platform::verify(&path, cpus, procirq::parse_affinity_list);
                (path, held)
            }
            Action::SetDefaultAffinity { cpus } => {
                let path = root.join(DEFAULT_SMP_AFFINITY);
                let held = crate::platform::verify(&path, cpus, procirq::parse_affinity_mask);
                (path, held)
            }
            _ => continue,
        };
        if let Err(e) = held {
            tracing::warn!(action = o.action.describe(), path = %path.display(), error = %e, "the twin did not keep the write");
            o.result = Err(e);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::root::TWIN_READY_FILE;
    use irqpilot_core::{ApplyError, CpuId, CpuSet, IrqNum, Outcome};

    /// IRQ 40 written to CPU 3 (it was on 0).
    fn written_40_to_3() -> ApplyReport {
        ApplyReport {
            outcomes: vec![Outcome {
                action: Action::SetAffinity {
                    irq: IrqNum(40),
                    cpus: CpuSet::single(CpuId(3)),
                },
                old: Some("0".into()),
                result: Ok(true),
            }],
        }
    }

    #[test]
    fn a_write_the_twin_put_back_is_not_taken() {
        let d = tempfile::tempdir().unwrap();
        let root = Root::new(d.path());
        let irq_dir = d.path().join("proc/irq/40");
        std::fs::create_dir_all(&irq_dir).unwrap();
        std::fs::write(irq_dir.join("smp_affinity_list"), "3\n").unwrap();
        std::fs::write(
            d.path().join(TWIN_READY_FILE),
            format!("{}\n", std::process::id()),
        )
        .unwrap();
        std::fs::write(d.path().join(TWIN_STEP_FILE), "7\n").unwrap();
        // A stand-in twin: steps twice, refusing the write (old text back) on the way.
        let step = d.path().join(TWIN_STEP_FILE);
        let list = irq_dir.join("smp_affinity_list");
        let twin = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            std::fs::write(&list, "0\n").unwrap();
            std::fs::write(&step, "8\n").unwrap();
            std::thread::sleep(Duration::from_millis(20));
            std::fs::write(&step, "9\n").unwrap();
        });
        let mut report = written_40_to_3();
        recheck_on_twin(&root, &mut report);
        twin.join().unwrap();
        assert_eq!(
            report.outcomes[0].result,
            Err(ApplyError::NotTaken {
                readback: "0".into()
            })
        );
    }

    #[test]
    fn fixtures_are_not_waited_for() {
        let d = tempfile::tempdir().unwrap();
        let mut report = written_40_to_3();
        let started = Instant::now();
        recheck_on_twin(&Root::new(d.path()), &mut report);
        assert!(started.elapsed() < Duration::from_secs(1));
        assert_eq!(report.outcomes[0].result, Ok(true));
    }
}
