//! Files a real machine has that irqbalance reads and irqpilot does not, so irqbalance sees the
//! simulated machine as it would see a real one (read from irqbalance 1.9.2: `cputree.c`,
//! `numa.c`, `classify.c`):
//!
//! * `sys/devices/system/cpu/cpuN/topology/{core_siblings,thread_siblings,core_cpus,
//!   package_cpus,cluster_cpus,die_cpus}`: the hex-mask forms of the `_list` files (irqbalance
//!   takes its package from `core_siblings`);
//! * `sys/devices/system/cpu/cpuN/cache/indexK/shared_cpu_map`: its cache domains;
//! * `sys/devices/system/cpu/cpuN/nodeM` -> `../../node/nodeM`: the CPU's NUMA node, found by
//!   listing the CPU's directory;
//! * `sys/devices/system/node/nodeN/cpumap`, `node/{online,possible,has_cpu,has_normal_memory}`;
//! * `sys/bus/pci/devices/*/{vendor,device,subsystem_vendor,subsystem_device}`: without them
//!   irqbalance cannot classify a device, and an unclassified IRQ is never moved.
//!
//! and, for irqpilot's `[[placement.applications]] process = "..."` (read as on Linux, by
//! `irqpilot_linux::apps`), the workloads' pinned application threads:
//! `proc/PID/{comm,status}` and `proc/PID/task/TID/status` with `Cpus_allowed_list`.
//!
//! PCI ids are those of a real part with the simulated driver: mlx5_core a ConnectX-5
//! (15b3:1017), e1000e an 82574L (8086:10d3), nvme a Samsung PM9A3 (144d:a80a).

use super::{ExportError, io_err};
use crate::apps::AppProcess;
use irqpilot_core::{CpuId, CpuSet, Machine};
use irqpilot_linux::format::{pci, value};
use std::path::Path;

fn file(root: &Path, rel: &str, text: &str) -> Result<(), ExportError> {
    let path = root.join(rel);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(io_err(parent))?;
    }
    std::fs::write(&path, text).map_err(io_err(&path))
}

fn link(root: &Path, rel: &str, target: &str) -> Result<(), ExportError> {
    let path = root.join(rel);
    if std::fs::symlink_metadata(&path).is_ok() {
        std::fs::remove_file(&path).map_err(io_err(&path))?;
    }
    std::os::unix::fs::symlink(target, &path).map_err(io_err(&path))
}

/// `(vendor, device, subsystem vendor, subsystem device)` of a driver's part.
fn pci_ids(driver: Option<&str>) -> (u16, u16, u16, u16) {
    match driver {
        Some("mlx5_core") => (0x15b3, 0x1017, 0x15b3, 0x0007),
        Some("e1000e") => (0x8086, 0x10d3, 0x8086, 0xa01f),
        Some("nvme") => (0x144d, 0xa80a, 0x144d, 0xa812),
        // A virtio device: any readable ids let irqbalance classify by class.
        _ => (0x1af4, 0x1000, 0x1af4, 0x0001),
    }
}

/// Writes the extra files under `root` for `machine`; masks are `nr_cpu_ids` wide.
pub(super) fn write(root: &Path, machine: &Machine, nr_cpu_ids: u32) -> Result<(), ExportError> {
    let mask = |set: &CpuSet| value::render_mask(set, nr_cpu_ids);
    let topo = &machine.topology;
    let base = "sys/devices/system/cpu";
    for (cpu, t) in &topo.cpus {
        let dir = format!("{base}/cpu{}", cpu.0);
        let top = format!("{dir}/topology");
        for (files, set) in [
            (&["thread_siblings", "core_cpus"][..], &t.thread_siblings),
            (&["core_siblings", "package_cpus"][..], &t.package_cpus),
            (&["cluster_cpus"][..], &t.cluster_cpus),
            (&["die_cpus"][..], &t.die_cpus),
        ] {
            if let Some(set) = set {
                for f in files {
                    file(root, &format!("{top}/{f}"), &mask(set))?;
                }
            }
        }
        for (k, cache) in t.caches.iter().enumerate() {
            file(
                root,
                &format!("{dir}/cache/index{k}/shared_cpu_map"),
                &mask(&cache.shared_cpus),
            )?;
        }
        if let Some(node) = topo.node_of(*cpu) {
            link(
                root,
                &format!("{dir}/node{}", node.0),
                &format!("../../node/node{}", node.0),
            )?;
        }
    }
    if !topo.nodes.is_empty() {
        let nodes: CpuSet = topo
            .nodes
            .keys()
            .map(|n| irqpilot_core::CpuId(n.0))
            .collect();
        let list = value::render_cpulist(&nodes);
        for f in ["online", "possible", "has_cpu", "has_normal_memory"] {
            file(root, &format!("sys/devices/system/node/{f}"), &list)?;
        }
        for (node, cpus) in &topo.nodes {
            file(
                root,
                &format!("sys/devices/system/node/node{}/cpumap", node.0),
                &mask(cpus),
            )?;
        }
    }
    for dev in machine.devices.values() {
        let dir = format!("sys/bus/pci/devices/{}", dev.addr.as_str());
        let (v, d, sv, sd) = pci_ids(dev.driver.as_deref());
        for (f, id) in [
            (pci::VENDOR, v),
            (pci::DEVICE, d),
            ("subsystem_vendor", sv),
            ("subsystem_device", sd),
        ] {
            file(root, &format!("{dir}/{f}"), &pci::render_id16(id))?;
        }
    }
    Ok(())
}

/// Writes a `proc/PID` directory per application process: `comm`, and a `status` for the
/// process and each of its threads whose `Cpus_allowed` is the thread's one CPU (pinned) or
/// the set it is scheduled over.
pub(super) fn write_processes(
    root: &Path,
    apps: &[AppProcess],
    nr_cpu_ids: u32,
) -> Result<(), ExportError> {
    for app in apps {
        let pid = app.pid;
        file(
            root,
            &format!("proc/{pid}/comm"),
            &format!("{}\n", app.comm),
        )?;
        let status = |tid: u32, cpus: &CpuSet| {
            format!(
                "Name:\t{}\nState:\tS (sleeping)\nTgid:\t{pid}\nPid:\t{tid}\nCpus_allowed:\t{}\nCpus_allowed_list:\t{}\n",
                app.comm,
                value::render_mask(cpus, nr_cpu_ids).trim_end(),
                value::render_cpulist(cpus).trim_end(),
            )
        };
        for (k, cpu) in app.cpus.iter().enumerate() {
            let tid = pid + k as u32;
            let one: CpuSet = std::iter::once(CpuId(*cpu)).collect();
            let text = status(tid, app.allowed.as_ref().unwrap_or(&one));
            // The process's own status is its main thread's (the first).
            if k == 0 {
                file(root, &format!("proc/{pid}/status"), &text)?;
            }
            file(root, &format!("proc/{pid}/task/{tid}/status"), &text)?;
        }
    }
    Ok(())
}
