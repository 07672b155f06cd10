//! Isolation: sysfs `isolated`/`nohz_full` plus the boot command line.

use super::gaps::GapLog;
use super::{Fetched, fetch, fetch_single};
use crate::format::{cmdline, cpu};
use crate::root::Root;
use irqpilot_core::{GapReason, Isolation};

const CPU_DIR: &str = "sys/devices/system/cpu";

pub(super) fn read_isolation(
    root: &Root,
    cmd: Option<&cmdline::Cmdline>,
    nr_cpu_ids: Option<u32>,
    log: &mut GapLog,
) -> Isolation {
    let (boot, errors) = match cmd {
        Some(c) => cmdline::isolation_from_cmdline(c, nr_cpu_ids),
        None => (Isolation::default(), Vec::new()),
    };
    for e in errors {
        log.single(
            "proc/cmdline",
            GapReason::Unparsable(format!("proc/cmdline:{}: {}", e.line, e.message)),
        );
    }
    let isolated = fetch_single(
        root,
        log,
        &format!("{CPU_DIR}/isolated"),
        cpu::parse_cpulist,
    );
    let nohz_path = format!("{CPU_DIR}/nohz_full");
    let nohz_full = match fetch(root, &nohz_path, cpu::parse_nohz_full) {
        Fetched::Got(set) => Some(set),
        // The file exists only with CONFIG_NO_HZ_FULL, and nohz_full CPUs exist only through
        // `nohz_full=` or `isolcpus=nohz`: with the command line known, its answer is complete.
        Fetched::Missing if cmd.is_some() => boot.nohz_full.clone(),
        Fetched::Missing => {
            log.single(nohz_path, GapReason::Missing);
            None
        }
        Fetched::Failed(reason) => {
            log.single(nohz_path, reason);
            boot.nohz_full.clone()
        }
    };
    Isolation {
        isolated,
        nohz_full,
        isolcpus: boot.isolcpus,
        irqaffinity: boot.irqaffinity,
    }
}
