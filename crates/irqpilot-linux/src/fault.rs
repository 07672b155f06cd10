//! A fault-injection seam for tests of `apply` and `revert` on fixture trees: a fixture
//! directory accepts every write, so the kernel's refusals (ENOENT, EACCES, EIO/EPERM, ENOSPC,
//! EINVAL, EOPNOTSUPP) are simulated per IRQ here and mapped by the platform's own errno
//! mapping ([`crate::platform::apply_error`]).

use crate::platform::apply_error;
use crate::root::Root;
use irqpilot_core::{
    Action, ApplyReport, IrqNum, Machine, MonoNs, Outcome, Plan, Platform, PlatformError, Snapshot,
};
use std::collections::BTreeMap;
use std::io;

/// Errno by name.
pub fn errno(name: &str) -> Option<i32> {
    Some(match name {
        "ENOENT" => libc::ENOENT,
        "EACCES" => libc::EACCES,
        "EIO" => libc::EIO,
        "EPERM" => libc::EPERM,
        "ENOSPC" => libc::ENOSPC,
        "EINVAL" => libc::EINVAL,
        "EOPNOTSUPP" => libc::EOPNOTSUPP,
        _ => return None,
    })
}

/// Parses `IRQ=ERRNO,...` (e.g. `36=ENOSPC,38=EIO`).
pub fn parse_faults(spec: &str) -> Result<BTreeMap<IrqNum, i32>, String> {
    let mut out = BTreeMap::new();
    for item in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (irq, name) = item
            .split_once('=')
            .ok_or_else(|| format!("{item:?}: want IRQ=ERRNO"))?;
        let irq: u32 = irq
            .trim()
            .parse()
            .map_err(|_| format!("{item:?}: bad IRQ number"))?;
        let e = errno(name.trim()).ok_or_else(|| format!("{item:?}: unknown errno"))?;
        out.insert(IrqNum(irq), e);
    }
    Ok(out)
}

/// A platform whose affinity writes to the listed IRQs fail with the given errno.
#[derive(Debug)]
pub struct FaultInjection<P> {
    inner: P,
    root: Root,
    faults: BTreeMap<IrqNum, i32>,
}

impl<P: Platform> FaultInjection<P> {
    /// Wraps `inner`; no faults means a plain pass-through.
    pub fn new(inner: P, root: Root, faults: BTreeMap<IrqNum, i32>) -> Self {
        FaultInjection {
            inner,
            root,
            faults,
        }
    }
}

impl<P: Platform> Platform for FaultInjection<P> {
    fn machine(&mut self) -> Result<Machine, PlatformError> {
        self.inner.machine()
    }

    fn snapshot_into(&mut self, snap: &mut Snapshot) -> Result<(), PlatformError> {
        self.inner.snapshot_into(snap)
    }

    fn apply(&mut self, plan: &Plan) -> ApplyReport {
        if self.faults.is_empty() {
            return self.inner.apply(plan);
        }
        let faulted = |a: &Action| match a {
            Action::SetAffinity { irq, .. } => self.faults.get(irq).copied(),
            _ => None,
        };
        let pass = Plan {
            actions: plan
                .actions
                .iter()
                .filter(|a| faulted(a).is_none())
                .cloned()
                .collect(),
            notes: Vec::new(),
        };
        let mut done = self.inner.apply(&pass).outcomes.into_iter();
        let mut outcomes = Vec::with_capacity(plan.actions.len());
        for a in &plan.actions {
            match (faulted(a), a) {
                (Some(e), Action::SetAffinity { irq, .. }) => {
                    let rel = format!("proc/irq/{irq}/smp_affinity_list");
                    let old = self
                        .root
                        .read_optional(&rel)
                        .ok()
                        .flatten()
                        .map(|t| t.trim_end_matches('\n').to_string());
                    let path = self.root.join(&rel);
                    outcomes.push(Outcome {
                        action: a.clone(),
                        old: if e == libc::ENOENT { None } else { old },
                        result: Err(apply_error(&io::Error::from_raw_os_error(e), &path)),
                    });
                }
                _ => {
                    if let Some(o) = done.next() {
                        outcomes.push(o);
                    }
                }
            }
        }
        ApplyReport { outcomes }
    }

    fn now(&mut self) -> MonoNs {
        self.inner.now()
    }

    fn sleep(&mut self, ns: u64) {
        self.inner.sleep(ns)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_fault_specs() {
        let f = parse_faults("36=ENOSPC, 38=EIO,").unwrap();
        assert_eq!(f[&IrqNum(36)], libc::ENOSPC);
        assert_eq!(f[&IrqNum(38)], libc::EIO);
        assert!(parse_faults("36").is_err());
        assert!(parse_faults("x=EIO").is_err());
        assert!(parse_faults("36=EWHAT").is_err());
        assert!(parse_faults("").unwrap().is_empty());
    }
}
