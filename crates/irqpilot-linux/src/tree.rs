//! Writing a model back out as a root directory: every file irqpilot reads, in the kernel's text.
//!
//! [`write_tree`] is the inverse of [`crate::inventory::read_machine`] plus a snapshot: given a
//! [`Machine`] and a [`Snapshot`] it writes `proc/interrupts`, `proc/stat`, `proc/softirqs`,
//! `proc/irq/N/*`, `proc/irq/default_smp_affinity`, `sys/kernel/irq/N/*`, debugfs IRQ state,
//! `sys/devices/system/{cpu,node}`, `proc/cmdline`, `proc/sys/kernel/osrelease` and
//! `sys/bus/pci/devices/*` (as links into `sys/devices/pciDDDD:BB/`, with `driver` links,
//! `msi_irqs/`, `net/`, `nvme/`), all through the renderers of [`crate::format`], and a
//! `MANIFEST.toml`. Reading the tree back gives the same machine: what the model knows is
//! written, what it does not know (`None`) is left out, so it reads back as unknown again.
//!
//! Users: `irqpilot fixture generate` (the synthetic large server of [`crate::generate`]),
//! tests, and the simulator's export of a simulated machine as a live tree, which rewrites only
//! the counter files with [`write_counters`] as time passes.

use crate::format::interrupts::render_interrupts;
use crate::format::softirqs::render_softirqs;
use crate::format::stat::render_stat;
use crate::format::{cpu, pci, procirq, sysirq, value};
use irqpilot_core::{
    CpuId, CpuSet, CpuTopo, Irq, Machine, PciDevice, RowLabel, Snapshot, Topology, Trigger,
};
use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};

/// Why a tree could not be written.
#[derive(Debug, thiserror::Error)]
pub enum TreeError {
    /// Creating a directory, file or link failed.
    #[error("{path}: {source}")]
    Io {
        /// The path being written.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: io::Error,
    },
}

/// Options of [`write_tree_with`].
#[derive(Clone, Debug, Default)]
pub struct TreeOptions {
    /// What the tree is, for `MANIFEST.toml`.
    pub description: String,
}

/// What [`write_tree`] wrote.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TreeReport {
    /// Regular files written.
    pub files: usize,
    /// Symbolic links created.
    pub links: usize,
}

/// What a destination directory holds before a tree is written into it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Destination {
    /// Nothing there yet (it will be created).
    Absent,
    /// An empty directory.
    Empty,
    /// Something already: a tree is never written over files it did not write.
    Occupied,
}

/// What `path` holds: the check `capture`, `fixture generate` and the twin's export make before
/// writing a tree, so none of them overwrites a directory's content.
pub fn destination(path: &Path) -> io::Result<Destination> {
    match std::fs::read_dir(path) {
        Ok(mut entries) => Ok(if entries.next().is_some() {
            Destination::Occupied
        } else {
            Destination::Empty
        }),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Destination::Absent),
        Err(e) => Err(e),
    }
}

/// Writes `machine` and `snapshot` under `root` (created if needed; existing files are
/// overwritten) with a default description.
pub fn write_tree(
    root: &Path,
    machine: &Machine,
    snapshot: &Snapshot,
) -> Result<TreeReport, TreeError> {
    write_tree_with(root, machine, snapshot, &TreeOptions::default())
}

/// Writes `machine` and `snapshot` under `root`, with `MANIFEST.toml` describing it.
pub fn write_tree_with(
    root: &Path,
    machine: &Machine,
    snapshot: &Snapshot,
    opts: &TreeOptions,
) -> Result<TreeReport, TreeError> {
    let mut w = Writer {
        root: root.to_path_buf(),
        report: TreeReport::default(),
    };
    w.dir("")?;
    write_counters_into(&mut w, snapshot)?;
    let nr = mask_width(machine, snapshot);
    w.irqs(machine, snapshot, nr)?;
    w.topology(&machine.topology)?;
    w.isolation(machine)?;
    w.devices(machine, nr)?;
    if let Some(cmdline) = &machine.cmdline {
        w.file("proc/cmdline", &format!("{cmdline}\n"))?;
    }
    if let Some(release) = &machine.kernel_release {
        w.file("proc/sys/kernel/osrelease", &format!("{release}\n"))?;
    }
    let manifest = manifest(machine, opts, &w.report);
    w.file("MANIFEST.toml", &manifest)?;
    Ok(w.report)
}

/// Rewrites only the counter files (`proc/interrupts`, `proc/stat`, `proc/softirqs`, and
/// `proc/net/dev` and `proc/diskstats` when the snapshot has them) of a tree:
/// a moving clock for a tree written before.
pub fn write_counters(root: &Path, snapshot: &Snapshot) -> Result<(), TreeError> {
    let mut w = Writer {
        root: root.to_path_buf(),
        report: TreeReport::default(),
    };
    write_counters_into(&mut w, snapshot)
}

fn write_counters_into(w: &mut Writer, snapshot: &Snapshot) -> Result<(), TreeError> {
    w.file("proc/interrupts", &render_interrupts(&snapshot.interrupts))?;
    if let Some(stat) = &snapshot.stat {
        w.file("proc/stat", &render_stat(stat))?;
    }
    if let Some(soft) = &snapshot.softirqs {
        w.file("proc/softirqs", &render_softirqs(soft))?;
    }
    if let Some(net) = &snapshot.net {
        w.file("proc/net/dev", &crate::format::netdev::render_netdev(net))?;
    }
    if let Some(disks) = &snapshot.disks {
        w.file(
            "proc/diskstats",
            &crate::format::diskstats::render_diskstats(disks),
        )?;
    }
    Ok(())
}

/// `nr_cpu_ids`, the width of every mask file: from the topology, else from the snapshot's
/// columns.
fn mask_width(machine: &Machine, snapshot: &Snapshot) -> u32 {
    let t = &machine.topology;
    if t.possible.is_some() || !t.online.is_empty() {
        return t.nr_cpu_ids();
    }
    snapshot.interrupts.cpus.iter().max().map_or(1, |c| c.0 + 1)
}

struct Writer {
    root: PathBuf,
    report: TreeReport,
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> TreeError + '_ {
    move |source| TreeError::Io {
        path: path.to_path_buf(),
        source,
    }
}

impl Writer {
    fn dir(&mut self, rel: &str) -> Result<(), TreeError> {
        let path = self.root.join(rel);
        std::fs::create_dir_all(&path).map_err(io_err(&path))
    }

    fn file(&mut self, rel: &str, text: &str) -> Result<(), TreeError> {
        let path = self.root.join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(io_err(parent))?;
        }
        std::fs::write(&path, text).map_err(io_err(&path))?;
        self.report.files += 1;
        Ok(())
    }

    /// A symbolic link `rel` -> `target` (relative text, as sysfs has); an existing link is
    /// replaced.
    fn link(&mut self, rel: &str, target: &str) -> Result<(), TreeError> {
        let path = self.root.join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(io_err(parent))?;
        }
        if std::fs::symlink_metadata(&path).is_ok() {
            std::fs::remove_file(&path).map_err(io_err(&path))?;
        }
        std::os::unix::fs::symlink(target, &path).map_err(io_err(&path))?;
        self.report.links += 1;
        Ok(())
    }

    fn irqs(&mut self, m: &Machine, snap: &Snapshot, nr: u32) -> Result<(), TreeError> {
        if m.irqs.values().any(|i| i.requested.is_some()) || m.default_affinity.is_some() {
            self.dir("proc/irq")?;
        }
        if let Some(def) = &m.default_affinity {
            self.file(
                "proc/irq/default_smp_affinity",
                &procirq::render_affinity_mask(def, nr),
            )?;
        }
        // `per_cpu_count` has one count per possible CPU; the snapshot has online columns.
        let possible: Vec<CpuId> = match &m.topology.possible {
            Some(p) => p.iter().collect(),
            None => snap.interrupts.cpus.clone(),
        };
        let column: BTreeMap<CpuId, usize> = snap
            .interrupts
            .cpus
            .iter()
            .enumerate()
            .map(|(i, c)| (*c, i))
            .collect();
        let managed_known = m.irqs.values().any(|i| i.managed.is_some());
        if managed_known {
            self.dir(DEBUG_IRQS)?;
        }
        for irq in m.irqs.values() {
            let n = irq.irq;
            if let Some(req) = &irq.requested {
                self.proc_irq(irq, req, nr)?;
            }
            let s = format!("sys/kernel/irq/{n}");
            self.file(
                &format!("{s}/{}", sysirq::CHIP_NAME),
                &sysirq::render_chip_name(irq.chip.as_deref()),
            )?;
            self.file(
                &format!("{s}/{}", sysirq::HWIRQ),
                &sysirq::render_hwirq(irq.hwirq),
            )?;
            if let Some(t) = irq.trigger {
                self.file(&format!("{s}/{}", sysirq::TYPE), &sysirq::render_type(t))?;
            }
            self.file(
                &format!("{s}/{}", sysirq::NAME),
                &sysirq::render_handler_name(irq.handler.as_deref()),
            )?;
            self.file(
                &format!("{s}/{}", sysirq::ACTIONS),
                &sysirq::render_actions(&irq.actions),
            )?;
            let counts = snap
                .interrupts
                .rows()
                .iter()
                .find(|r| r.label == RowLabel::Irq(n))
                .map(|r| snap.interrupts.counts(r));
            let per_cpu: Vec<u64> = possible
                .iter()
                .map(|c| {
                    column
                        .get(c)
                        .and_then(|&i| counts.and_then(|v| v.get(i)))
                        .copied()
                        .unwrap_or(0)
                })
                .collect();
            self.file(
                &format!("{s}/{}", sysirq::PER_CPU_COUNT),
                &sysirq::render_per_cpu_count(&per_cpu),
            )?;
            self.file(
                &format!("{s}/{}", sysirq::WAKEUP),
                &sysirq::render_wakeup(false),
            )?;
            if let Some(managed) = irq.managed {
                self.file(&format!("{DEBUG_IRQS}/{n}"), &debugfs_irq(irq, managed))?;
            }
        }
        Ok(())
    }

    fn proc_irq(&mut self, irq: &Irq, req: &CpuSet, nr: u32) -> Result<(), TreeError> {
        let p = format!("proc/irq/{}", irq.irq);
        self.file(
            &format!("{p}/{}", procirq::SMP_AFFINITY),
            &procirq::render_affinity_mask(req, nr),
        )?;
        self.file(
            &format!("{p}/{}", procirq::SMP_AFFINITY_LIST),
            &procirq::render_affinity_list(req),
        )?;
        if let Some(eff) = &irq.effective {
            self.file(
                &format!("{p}/{}", procirq::EFFECTIVE_AFFINITY),
                &procirq::render_affinity_mask(eff, nr),
            )?;
            self.file(
                &format!("{p}/{}", procirq::EFFECTIVE_AFFINITY_LIST),
                &procirq::render_affinity_list(eff),
            )?;
        }
        self.file(
            &format!("{p}/{}", procirq::AFFINITY_HINT),
            &procirq::render_affinity_hint(irq.affinity_hint.as_ref(), nr),
        )?;
        self.file(
            &format!("{p}/{}", procirq::NODE),
            &procirq::render_node(irq.node),
        )
    }

    fn topology(&mut self, t: &Topology) -> Result<(), TreeError> {
        if t.online.is_empty() && t.cpus.is_empty() && t.possible.is_none() {
            return Ok(());
        }
        let base = "sys/devices/system/cpu";
        self.file(&format!("{base}/online"), &value::render_cpulist(&t.online))?;
        if let Some(p) = &t.possible {
            self.file(&format!("{base}/possible"), &value::render_cpulist(p))?;
            self.file(&format!("{base}/present"), &value::render_cpulist(p))?;
            self.file(
                &format!("{base}/offline"),
                &value::render_cpulist(&p.difference(&t.online)),
            )?;
        }
        for (c, topo) in &t.cpus {
            self.cpu(&format!("{base}/cpu{}", c.0), topo)?;
        }
        for (node, cpus) in &t.nodes {
            self.file(
                &format!("sys/devices/system/node/node{}/cpulist", node.0),
                &value::render_cpulist(cpus),
            )?;
        }
        Ok(())
    }

    fn cpu(&mut self, dir: &str, t: &CpuTopo) -> Result<(), TreeError> {
        self.dir(dir)?;
        let has_topology = t.package.is_some()
            || t.die.is_some()
            || t.cluster.is_some()
            || t.core.is_some()
            || t.thread_siblings.is_some()
            || t.cluster_cpus.is_some()
            || t.die_cpus.is_some()
            || t.package_cpus.is_some();
        if has_topology {
            let top = format!("{dir}/topology");
            for (file, id) in [
                ("physical_package_id", t.package),
                ("die_id", t.die),
                ("cluster_id", t.cluster),
                ("core_id", t.core),
            ] {
                self.file(&format!("{top}/{file}"), &cpu::render_topology_id(id))?;
            }
            // Both the 5.x names and the older ones, as current kernels have.
            for (files, set) in [
                (
                    &["core_cpus_list", "thread_siblings_list"][..],
                    &t.thread_siblings,
                ),
                (&["cluster_cpus_list"][..], &t.cluster_cpus),
                (&["die_cpus_list"][..], &t.die_cpus),
                (
                    &["package_cpus_list", "core_siblings_list"][..],
                    &t.package_cpus,
                ),
            ] {
                if let Some(set) = set {
                    for f in files {
                        self.file(&format!("{top}/{f}"), &value::render_cpulist(set))?;
                    }
                }
            }
        }
        for (k, cache) in t.caches.iter().enumerate() {
            let d = format!("{dir}/cache/index{k}");
            self.file(&format!("{d}/level"), &cpu::render_cache_level(cache.level))?;
            self.file(&format!("{d}/type"), &cpu::render_cache_type(cache.kind))?;
            if let Some(size) = cache.size_bytes {
                self.file(&format!("{d}/size"), &cpu::render_cache_size(size))?;
            }
            self.file(
                &format!("{d}/shared_cpu_list"),
                &value::render_cpulist(&cache.shared_cpus),
            )?;
            if let Some(id) = cache.id {
                self.file(&format!("{d}/id"), &cpu::render_cache_id(id))?;
            }
        }
        Ok(())
    }

    fn isolation(&mut self, m: &Machine) -> Result<(), TreeError> {
        let base = "sys/devices/system/cpu";
        if let Some(set) = &m.isolation.isolated {
            self.file(&format!("{base}/isolated"), &value::render_cpulist(set))?;
        }
        if let Some(set) = &m.isolation.nohz_full {
            self.file(&format!("{base}/nohz_full"), &value::render_cpulist(set))?;
        }
        Ok(())
    }

    fn devices(&mut self, m: &Machine, nr: u32) -> Result<(), TreeError> {
        for dev in m.devices.values() {
            self.device(dev, nr)?;
        }
        Ok(())
    }

    fn device(&mut self, dev: &PciDevice, nr: u32) -> Result<(), TreeError> {
        let addr = dev.addr.as_str();
        // `dddd:bb:dd.f` sits under the host bridge directory `pcidddd:bb`.
        let bridge = addr.rsplit_once(':').map_or(addr, |(head, _)| head);
        let phys = format!("devices/pci{bridge}/{addr}");
        let dir = format!("sys/{phys}");
        self.dir(&dir)?;
        self.link(
            &format!("sys/bus/pci/devices/{addr}"),
            &format!("../../../{phys}"),
        )?;
        if let Some(class) = dev.class {
            self.file(&format!("{dir}/{}", pci::CLASS), &pci::render_class(class))?;
        }
        self.file(
            &format!("{dir}/{}", pci::NUMA_NODE),
            &pci::render_numa_node(dev.numa_node),
        )?;
        if let Some(local) = &dev.local_cpus {
            self.file(
                &format!("{dir}/{}", pci::LOCAL_CPULIST),
                &value::render_cpulist(local),
            )?;
            self.file(
                &format!("{dir}/{}", pci::LOCAL_CPUS),
                &value::render_mask(local, nr),
            )?;
        }
        self.file(
            &format!("{dir}/{}", pci::IRQ),
            &pci::render_legacy_irq(dev.legacy_irq),
        )?;
        if let Some(driver) = &dev.driver {
            self.dir(&format!("sys/bus/pci/drivers/{driver}"))?;
            // From sys/devices/pciDDDD:BB/<addr>/ three levels up is sys/.
            self.link(
                &format!("{dir}/{}", pci::DRIVER),
                &format!("../../../bus/pci/drivers/{driver}"),
            )?;
        }
        for irq in &dev.msi_irqs {
            self.file(
                &format!("{dir}/{}/{irq}", pci::MSI_IRQS),
                &pci::render_msi_mode(pci::MsiMode::Msix),
            )?;
        }
        for name in &dev.net {
            self.dir(&format!("{dir}/{}/{name}", pci::NET))?;
        }
        for name in &dev.nvme {
            self.dir(&format!("{dir}/{}/{name}", pci::NVME))?;
        }
        Ok(())
    }
}

const DEBUG_IRQS: &str = "sys/kernel/debug/irq/irqs";

/// A debugfs IRQ file (`kernel/irq/debugfs.c: irq_debug_show`) with the state irqpilot reads.
/// The `dstate` value uses the 6.x bit positions of the names it lists.
fn debugfs_irq(irq: &Irq, managed: bool) -> String {
    let mut names: Vec<(&str, u32)> = vec![("IRQD_ACTIVATED", 9), ("IRQD_IRQ_STARTED", 22)];
    if irq.effective.as_ref().is_some_and(|e| e.len() == 1) {
        names.push(("IRQD_SINGLE_TARGET", 24));
    }
    if managed {
        names.push(("IRQD_AFFINITY_MANAGED", 21));
        names.push(("IRQD_AFFINITY_SET", 12));
    }
    let trigger_bits = match irq.trigger {
        Some(Trigger::Edge) => 0x1,
        Some(Trigger::Level) => 0x4,
        None => 0,
    };
    let value = names
        .iter()
        .fold(trigger_bits, |v, (_, bit)| v | (1u32 << bit));
    let mut s = format!(
        "handler:  handle_{}_irq\n",
        irq.handler.as_deref().unwrap_or("bad")
    );
    if let Some(dev) = &irq.device {
        s.push_str(&format!("device:   {dev}\n"));
    }
    s.push_str(&format!("dstate:   0x{value:08x}\n"));
    names.sort_by_key(|(_, bit)| *bit);
    for (name, _) in &names {
        s.push_str(&format!("            {name}\n"));
    }
    let node = irq.node.map_or(-1, |n| i64::from(n.0));
    s.push_str(&format!("node:     {node}\n"));
    if let Some(req) = &irq.requested {
        s.push_str(&format!("affinity: {req}\n"));
    }
    if let Some(eff) = &irq.effective {
        s.push_str(&format!("effectiv: {eff}\n"));
    }
    if let Some(chip) = &irq.chip {
        s.push_str(&format!("domain:  {chip}\n"));
    }
    s
}

fn manifest(m: &Machine, opts: &TreeOptions, r: &TreeReport) -> String {
    let toml_str = crate::capture::toml_str;
    let mut s = String::from(
        "# A machine's /proc and /sys files as irqpilot reads them (written from a model).\n",
    );
    let description = if opts.description.is_empty() {
        "written by irqpilot from a model (tree::write_tree)"
    } else {
        &opts.description
    };
    s.push_str(&format!("description = {}\n", toml_str(description)));
    if let Some(k) = &m.kernel_release {
        s.push_str(&format!("kernel_release = {}\n", toml_str(k)));
    }
    if !m.topology.online.is_empty() {
        s.push_str(&format!("online_cpus = {}\n", m.topology.online.len()));
    }
    s.push_str(&format!(
        "irqpilot_version = {}\n",
        toml_str(env!("CARGO_PKG_VERSION"))
    ));
    s.push_str(&format!(
        "irqs = {}\ndevices = {}\nfiles = {}\nlinks = {}\n",
        m.irqs.len(),
        m.devices.len(),
        r.files,
        r.links
    ));
    s
}
