//! Reading a machine's inventory ([`irqpilot_core::Machine`]) from a root directory.
//!
//! [`read_machine`] walks the files below and fills the model through the parsers of
//! [`crate::format`]. Everything except the root itself is optional: a missing, unreadable or
//! malformed source becomes a [`irqpilot_core::Gap`] and the field it would have filled stays
//! `None`. The read never stops at a bad file.
//!
//! Gaps are grouped so that one cause gives one line:
//!
//! * a file read per IRQ, CPU or device is one gap per (file, reason), its path naming the items:
//!   `proc/irq/*/effective_affinity_list` when every item lacks it, `proc/irq/27` for one item,
//!   `proc/irq/{25-26,31}/node` for some;
//! * malformed files of one kind share a gap whose message is the first file's
//!   `path:line: message` and how many more failed the same way;
//! * nothing is reported under a missing or unreadable directory that is itself a gap (no `sys`
//!   is one gap);
//! * where the kernel legitimately has no file, there is no gap: `msi_irqs/`, `driver`, `net/`
//!   absent on a device, topology and caches of an offline CPU, `nohz_full` on a kernel without
//!   `CONFIG_NO_HZ_FULL` when the command line asks for none.
//!
//! | part | sources |
//! |---|---|
//! | topology | `sys/devices/system/cpu/{online,possible}`, `cpuN/topology/*`, `cpuN/cache/indexK/*`, `sys/devices/system/node/nodeN/cpulist` |
//! | isolation | `sys/devices/system/cpu/{isolated,nohz_full}`, `proc/cmdline` (`isolcpus=`, `nohz_full=`, `irqaffinity=`) |
//! | devices | `sys/bus/pci/devices/*/{class,numa_node,local_cpulist,irq,driver,msi_irqs/,net/,nvme/,virtioN/net/}` |
//! | IRQs | `proc/irq/N/*`, `sys/kernel/irq/N/*`, `sys/kernel/debug/irq/irqs/N` (root only) |
//! | the rest | `proc/irq/default_smp_affinity`, `proc/sys/kernel/osrelease`, `proc/cmdline` |
//!
//! IRQ names come from `sys/kernel/irq/N/actions`. Descriptions parsed from `/proc/interrupts`
//! (which every kernel has, unlike `/sys/kernel/irq`) are merged afterwards with
//! [`merge_interrupts_desc`].

mod devices;
mod gaps;
mod irqs;
mod isolation;
mod topology;

pub use irqs::irq_affinity;

use crate::error::ParseError;
use crate::format::{cmdline, pci, value};
use crate::root::Root;
use gaps::GapLog;
use irqpilot_core::{GapReason, Irq, IrqNum, Machine, PlatformError, Trigger, queue};

/// Result of reading and parsing one file.
enum Fetched<T> {
    /// Read and understood.
    Got(T),
    /// The file does not exist.
    Missing,
    /// Unreadable or malformed; the reason names the path (and line).
    Failed(GapReason),
}

/// Reads `rel` and parses it; a parse error becomes `Unparsable("<rel>:<line>: <message>")`.
fn fetch<T>(
    root: &Root,
    rel: &str,
    parse: impl FnOnce(&str) -> Result<T, ParseError>,
) -> Fetched<T> {
    match root.read_optional(rel) {
        Ok(Some(text)) => match parse(&text) {
            Ok(v) => Fetched::Got(v),
            Err(e) => Fetched::Failed(GapReason::Unparsable(format!(
                "{rel}:{}: {}",
                e.line, e.message
            ))),
        },
        Ok(None) => Fetched::Missing,
        // Other I/O errors (EINVAL from a sysfs show(), EIO) carry no path of their own.
        Err(GapReason::Unparsable(msg)) => {
            Fetched::Failed(GapReason::Unparsable(format!("{rel}: {msg}")))
        }
        Err(reason) => Fetched::Failed(reason),
    }
}

/// A per-item file: `pattern` with `{}` for the item (an IRQ number, a CPU number, a PCI
/// address), and how many items the family has, for gap grouping.
#[derive(Clone, Copy)]
struct Family<'a> {
    item: &'a str,
    universe: usize,
}

/// A file's parser.
type Parser<T> = fn(&str) -> Result<T, ParseError>;

/// Reads the first of `sources` (patterns with `{}`, each with its parser) that exists, logging
/// one gap: the first unreadable or malformed source if any, else `Missing` against the first
/// pattern when none exists. A malformed preferred file still yields the fallback's value.
fn fetch_first<T>(
    root: &Root,
    log: &mut GapLog,
    fam: Family<'_>,
    sources: &[(&str, Parser<T>)],
) -> Option<T> {
    let mut failure: Option<(&str, GapReason)> = None;
    let mut value = None;
    for (pattern, parse) in sources {
        match fetch(root, &pattern.replacen("{}", fam.item, 1), parse) {
            Fetched::Got(v) => {
                value = Some(v);
                break;
            }
            Fetched::Missing => {}
            Fetched::Failed(reason) => {
                if failure.is_none() {
                    failure = Some((pattern, reason));
                }
            }
        }
    }
    match (failure, &value, sources.first()) {
        (Some((pattern, reason)), _, _) => log.item(pattern, fam.item, fam.universe, reason),
        (None, None, Some((pattern, _))) => {
            log.item(pattern, fam.item, fam.universe, GapReason::Missing)
        }
        _ => {}
    }
    value
}

/// [`fetch_first`] with one source.
fn fetch_item<T>(
    root: &Root,
    log: &mut GapLog,
    fam: Family<'_>,
    pattern: &str,
    parse: Parser<T>,
) -> Option<T> {
    fetch_first(root, log, fam, &[(pattern, parse)])
}

/// Reads a file read once per machine, logging a gap when it cannot be used.
fn fetch_single<T>(
    root: &Root,
    log: &mut GapLog,
    rel: &str,
    parse: impl FnOnce(&str) -> Result<T, ParseError>,
) -> Option<T> {
    match fetch(root, rel, parse) {
        Fetched::Got(v) => Some(v),
        Fetched::Missing => {
            log.single(rel, GapReason::Missing);
            None
        }
        Fetched::Failed(reason) => {
            log.single(rel, reason);
            None
        }
    }
}

/// Lists a directory, logging a gap (`Missing` only when `missing_is_gap`) when it cannot be.
fn list_single(
    root: &Root,
    log: &mut GapLog,
    rel: &str,
    missing_is_gap: bool,
) -> Option<Vec<String>> {
    match root.list_dir(rel) {
        Ok(Some(names)) => Some(names),
        Ok(None) => {
            if missing_is_gap {
                log.single(rel, GapReason::Missing);
            }
            None
        }
        Err(reason) => {
            log.single(rel, reason);
            None
        }
    }
}

/// Reads the inventory of the machine under `root`.
///
/// Fails only when `root` itself cannot be opened (a wrong `--root` is a start-up error); every
/// other problem is recorded in [`Machine::gaps`].
pub fn read_machine(root: &Root) -> Result<Machine, PlatformError> {
    if let Err(source) = std::fs::read_dir(root.dir()) {
        return Err(PlatformError::Io {
            path: root.dir().to_path_buf(),
            source,
        });
    }
    let mut log = GapLog::default();
    for top in ["proc", "sys"] {
        // One gap for a whole missing tree; the grouping drops everything below it.
        if let Err(e) = std::fs::symlink_metadata(root.join(top)) {
            let reason = match e.kind() {
                std::io::ErrorKind::NotFound => GapReason::Missing,
                std::io::ErrorKind::PermissionDenied => GapReason::PermissionDenied,
                _ => GapReason::Unparsable(format!("{top}: {e}")),
            };
            log.single(top, reason);
        }
    }

    let topology = topology::read_topology(root, &mut log);
    let cmdline_text = fetch_single(root, &mut log, "proc/cmdline", |t| Ok(t.to_string()));
    let parsed_cmdline = cmdline_text.as_deref().map(cmdline::parse_cmdline);
    // `N` in a boot cpulist means nr_cpu_ids - 1; only `possible` knows nr_cpu_ids for sure.
    let nr_cpu_ids = topology
        .possible
        .as_ref()
        .and_then(|p| p.last())
        .map(|c| c.0 + 1);
    let isolation = isolation::read_isolation(root, parsed_cmdline.as_ref(), nr_cpu_ids, &mut log);
    let devices = devices::read_devices(root, &mut log);
    let (irqs, default_affinity) = irqs::read_irqs(root, &devices, &mut log);
    let kernel_release = fetch_single(root, &mut log, "proc/sys/kernel/osrelease", |t| {
        value::parse_word(t).map(|w| w.map(str::to_string))
    })
    .flatten();

    Ok(Machine {
        topology,
        isolation,
        irqs,
        devices,
        default_affinity,
        kernel_release,
        cmdline: cmdline_text.map(|t| t.trim().to_string()),
        // Moderation knobs need ioctls on live devices; the moderation readers fill them.
        moderation: Default::default(),
        gaps: log.finish(),
    })
}

/// What `/proc/interrupts` says about one numbered IRQ (the columns after the counts), for
/// [`merge_interrupts_desc`]. The `/proc/interrupts` parser maps its row description to this.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct InterruptFacts {
    /// Chip column (`IO-APIC`, `PCI-MSIX-0000:00:01.0`, `IR-PCI-MSI`).
    pub chip: Option<String>,
    /// Hardware IRQ, where the row shows it as a number.
    pub hwirq: Option<u64>,
    /// `edge`/`level` (`-edge`, `Edge`, `Level` in the row).
    pub trigger: Option<Trigger>,
    /// Action names (the row joins them with `, `).
    pub actions: Vec<String>,
}

/// Merges what `/proc/interrupts` says about `irq` into a machine read by [`read_machine`].
///
/// `/sys/kernel/irq` wins where it gave a value (it is per-field and unambiguous); the row fills
/// what is unknown, and adds the IRQ when sysfs did not list it (kernels without
/// `CONFIG_SPARSE_IRQ`, or a root holding only `proc/interrupts`). The queue role is recognised
/// again from the merged actions, and an IRQ with no device yet gets the one its MSI chip name
/// carries, when that device is known.
pub fn merge_interrupts_desc(machine: &mut Machine, irq: IrqNum, facts: InterruptFacts) {
    let entry = machine.irqs.entry(irq).or_insert_with(|| Irq::new(irq));
    if entry.chip.is_none() {
        entry.chip = facts.chip;
    }
    if entry.hwirq.is_none() {
        entry.hwirq = facts.hwirq;
    }
    if entry.trigger.is_none() {
        entry.trigger = facts.trigger;
    }
    if entry.actions.is_empty() {
        entry.actions = facts.actions;
    }
    if entry.queue.is_none() {
        entry.queue = entry.actions.iter().find_map(|a| queue::recognise(a));
    }
    if entry.device.is_none() {
        let dev = entry
            .chip
            .as_deref()
            .and_then(pci::msi_chip_device)
            .and_then(|addr| machine.devices.get(&addr));
        if let Some(dev) = dev {
            entry.device = Some(dev.addr.clone());
            entry.driver.clone_from(&dev.driver);
            if entry.node.is_none() {
                entry.node = dev.numa_node;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use irqpilot_core::{PciAddr, PciDevice, QueueKind};

    #[test]
    fn merge_fills_unknowns_only() {
        let mut m = Machine::default();
        let addr = PciAddr::parse("0000:00:03.0").unwrap();
        let mut dev = PciDevice::new(addr.clone());
        dev.driver = Some("virtio-pci".into());
        m.devices.insert(addr.clone(), dev);
        let mut known = Irq::new(IrqNum(5));
        known.chip = Some("IO-APIC".into());
        m.irqs.insert(IrqNum(5), known);

        merge_interrupts_desc(
            &mut m,
            IrqNum(5),
            InterruptFacts {
                chip: Some("XT-PIC".into()),
                actions: vec!["ttyS0".into()],
                ..Default::default()
            },
        );
        assert_eq!(m.irqs[&IrqNum(5)].chip.as_deref(), Some("IO-APIC"));
        assert_eq!(m.irqs[&IrqNum(5)].actions, ["ttyS0"]);

        merge_interrupts_desc(
            &mut m,
            IrqNum(38),
            InterruptFacts {
                chip: Some("PCI-MSIX-0000:00:03.0".into()),
                hwirq: Some(1),
                trigger: Some(Trigger::Edge),
                actions: vec!["virtio2-input.0".into()],
            },
        );
        let i = &m.irqs[&IrqNum(38)];
        assert_eq!(i.device.as_ref(), Some(&addr));
        assert_eq!(i.driver.as_deref(), Some("virtio-pci"));
        assert_eq!(i.queue.as_ref().map(|q| q.kind), Some(QueueKind::Rx));
    }

    #[test]
    fn missing_root_is_an_error() {
        let r = Root::new("/nonexistent/irqpilot-root");
        assert!(matches!(read_machine(&r), Err(PlatformError::Io { .. })));
    }
}
