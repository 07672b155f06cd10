//! The machine's isolation as the kernel derives it from `machine.cmdline`.

use super::error::CmdlineError;
use super::schema::MachineCfg;
use irqpilot_core::Isolation;
use irqpilot_linux::format::cmdline::{isolation_from_cmdline, parse_cmdline};

/// The machine's isolation, from its kernel command line as Linux derives it: `isolcpus=`
/// (its CPUs are `/sys/devices/system/cpu/isolated` when the `domain` flag is in force),
/// `nohz_full=`, `irqaffinity=`.
pub fn isolation_of(mc: &MachineCfg) -> Result<Isolation, CmdlineError> {
    let ncpu = mc.packages * mc.cores_per_package * mc.threads_per_core;
    let (mut iso, errors) = isolation_from_cmdline(&parse_cmdline(&mc.cmdline), Some(ncpu));
    if let Some(e) = errors.first() {
        return Err(CmdlineError(e.message.clone()));
    }
    let domain = iso
        .isolcpus
        .as_ref()
        .filter(|ic| ic.flags.contains(&irqpilot_core::IsolFlag::Domain))
        .map(|ic| ic.cpus.clone());
    iso.isolated = Some(domain.unwrap_or_default());
    Ok(iso)
}
