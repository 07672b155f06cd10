//! PCI device attributes under `/sys/bus/pci/devices/<addr>/` (`drivers/pci/pci-sysfs.c`,
//! `drivers/pci/msi/`).
//!
//! | entry | kernel print | parser |
//! |---|---|---|
//! | `class` | `0x%06x\n` | [`parse_class`] |
//! | `vendor`, `device` | `0x%04x\n` | [`parse_id16`] |
//! | `numa_node` | `%d\n`, `-1` when unknown | [`parse_numa_node`] |
//! | `local_cpulist` / `local_cpus` | `%*pbl\n` / `%*pb\n` | [`crate::format::value`] |
//! | `irq` | `%u\n`, `0` when the device has no INTx line | [`parse_legacy_irq`] |
//! | `msi_irqs/` | one entry per MSI/MSI-X IRQ, named by IRQ number | [`parse_msi_irq_names`] |
//! | `msi_irqs/N` | `msi\n` or `msix\n` (older kernels: a directory holding `mode`) | [`parse_msi_mode`] |
//! | `driver` | symlink to `../../../bus/pci/drivers/<name>` | basename |
//! | `net/`, `nvme/`, `virtioN/net/` | one entry per interface or controller | names |
//!
//! While MSI (not MSI-X) is enabled the kernel reports the MSI vector in `irq`; with MSI-X it
//! reports the INTx line again, whether or not the driver uses it. `irq` therefore names the
//! device's interrupt only when `msi_irqs/` is absent or empty.

use crate::error::ParseError;
use crate::format::value;
use irqpilot_core::{IrqNum, NodeId};

/// PCI class code.
pub const CLASS: &str = "class";
/// Vendor id.
pub const VENDOR: &str = "vendor";
/// Device id.
pub const DEVICE: &str = "device";
/// NUMA node of the device.
pub const NUMA_NODE: &str = "numa_node";
/// CPUs local to the device, as a cpulist.
pub const LOCAL_CPULIST: &str = "local_cpulist";
/// CPUs local to the device, as a mask.
pub const LOCAL_CPUS: &str = "local_cpus";
/// Legacy INTx IRQ.
pub const IRQ: &str = "irq";
/// Directory of MSI/MSI-X IRQs.
pub const MSI_IRQS: &str = "msi_irqs";
/// Symlink to the bound driver.
pub const DRIVER: &str = "driver";
/// Directory of network interfaces.
pub const NET: &str = "net";
/// Directory of NVMe controllers.
pub const NVME: &str = "nvme";

fn parse_hex(text: &str, what: &str, max: u64) -> Result<u64, ParseError> {
    let line = value::one_line(text)?;
    let digits = line
        .strip_prefix("0x")
        .ok_or_else(|| ParseError::new(1, format!("{what} {line:?} lacks the 0x prefix")))?;
    if digits.is_empty() || digits.len() > 16 || !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(ParseError::new(1, format!("bad {what} {line:?}")));
    }
    u64::from_str_radix(digits, 16)
        .ok()
        .filter(|v| *v <= max)
        .ok_or_else(|| ParseError::new(1, format!("{what} out of range: {line:?}")))
}

/// Parses `class` (`0x020000` = Ethernet controller).
pub fn parse_class(text: &str) -> Result<u32, ParseError> {
    parse_hex(text, "class", 0xff_ffff).map(|v| v as u32)
}

/// Renders `class`.
pub fn render_class(class: u32) -> String {
    format!("0x{class:06x}\n")
}

/// Parses `vendor`, `device`, `subsystem_vendor` or `subsystem_device`.
pub fn parse_id16(text: &str) -> Result<u16, ParseError> {
    parse_hex(text, "id", 0xffff).map(|v| v as u16)
}

/// Renders a 16-bit id file.
pub fn render_id16(id: u16) -> String {
    format!("0x{id:04x}\n")
}

/// Parses `numa_node`: `None` for `-1`.
pub fn parse_numa_node(text: &str) -> Result<Option<NodeId>, ParseError> {
    Ok(value::parse_id_or_none(text)?.map(NodeId))
}

/// Renders `numa_node`.
pub fn render_numa_node(node: Option<NodeId>) -> String {
    value::render_id_or_none(node.map(NodeId::get))
}

/// Parses `irq`: `None` for 0 (no INTx line).
pub fn parse_legacy_irq(text: &str) -> Result<Option<IrqNum>, ParseError> {
    let v = value::parse_unsigned(text)?;
    let v = u32::try_from(v).map_err(|_| ParseError::new(1, format!("irq out of range: {v}")))?;
    Ok((v != 0).then_some(IrqNum(v)))
}

/// Renders `irq` (`0\n` for none).
pub fn render_legacy_irq(irq: Option<IrqNum>) -> String {
    format!("{}\n", irq.map_or(0, IrqNum::get))
}

/// IRQ numbers from the entry names of `msi_irqs/`, ascending. A name that is not a number is an
/// error whose "line" is the entry's 1-based position.
pub fn parse_msi_irq_names<S: AsRef<str>>(names: &[S]) -> Result<Vec<IrqNum>, ParseError> {
    let mut irqs = Vec::with_capacity(names.len());
    for (i, name) in names.iter().enumerate() {
        let name = name.as_ref();
        if name.starts_with('.') {
            // Not a kernel entry (e.g. a `.keep` placed by a fixture); sysfs names never start so.
            continue;
        }
        let irq = crate::format::procirq::parse_irq_dir_name(name).ok_or_else(|| {
            ParseError::new(
                i + 1,
                format!("msi_irqs entry {name:?} is not an IRQ number"),
            )
        })?;
        irqs.push(irq);
    }
    irqs.sort();
    Ok(irqs)
}

/// What kind of message-signalled interrupt an `msi_irqs/N` entry is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MsiMode {
    /// `msi`.
    Msi,
    /// `msix`.
    Msix,
}

/// Parses `msi_irqs/N` (or `msi_irqs/N/mode` on older kernels).
pub fn parse_msi_mode(text: &str) -> Result<MsiMode, ParseError> {
    match value::one_line(text)? {
        "msi" => Ok(MsiMode::Msi),
        "msix" => Ok(MsiMode::Msix),
        other => Err(ParseError::new(1, format!("unknown MSI mode {other:?}"))),
    }
}

/// Renders `msi_irqs/N`.
pub fn render_msi_mode(mode: MsiMode) -> String {
    match mode {
        MsiMode::Msi => "msi\n",
        MsiMode::Msix => "msix\n",
    }
    .to_string()
}

/// The PCI address an MSI chip name carries: `PCI-MSIX-0000:00:01.0`, `IR-PCI-MSI-0000:3b:00.0`
/// (per-device MSI domains, 6.x). Older kernels print a bare `PCI-MSI`, which names no device.
pub fn msi_chip_device(chip: &str) -> Option<irqpilot_core::PciAddr> {
    let rest = chip.strip_prefix("IR-").unwrap_or(chip);
    let addr = rest
        .strip_prefix("PCI-MSIX-")
        .or_else(|| rest.strip_prefix("PCI-MSI-"))?;
    irqpilot_core::PciAddr::parse(addr)
}

#[cfg(test)]
mod tests {
    use super::*;
    use irqpilot_core::PciAddr;
    use proptest::prelude::*;

    #[test]
    fn real_files() {
        // virtio devices of a Firecracker guest.
        assert_eq!(parse_class("0x020000\n"), Ok(0x020000));
        assert_eq!(parse_class("0xffff00\n"), Ok(0xffff00));
        assert_eq!(parse_id16("0x1af4\n"), Ok(0x1af4));
        assert_eq!(parse_numa_node("-1\n"), Ok(None));
        assert_eq!(parse_legacy_irq("0\n"), Ok(None));
        assert_eq!(parse_msi_mode("msix\n"), Ok(MsiMode::Msix));
        assert_eq!(
            parse_msi_irq_names(&["39", "37", "38"]),
            Ok(vec![IrqNum(37), IrqNum(38), IrqNum(39)])
        );
        assert_eq!(render_class(0x018000), "0x018000\n");
        assert_eq!(render_id16(0x0d57), "0x0d57\n");
    }

    #[test]
    fn malformed() {
        assert!(parse_class("020000\n").is_err());
        assert!(parse_class("0x1000000\n").is_err());
        assert!(parse_class("0x\n").is_err());
        assert!(parse_id16("0x10000\n").is_err());
        assert!(parse_numa_node("-5\n").is_err());
        assert!(parse_legacy_irq("-1\n").is_err());
        assert!(parse_msi_mode("intx\n").is_err());
        let e = parse_msi_irq_names(&["37", "mode"]).unwrap_err();
        assert_eq!(e.line, 2);
        assert!(e.message.contains("mode"));
        assert_eq!(parse_msi_irq_names(&[".keep", "40"]), Ok(vec![IrqNum(40)]));
    }

    #[test]
    fn chip_names() {
        assert_eq!(
            msi_chip_device("PCI-MSIX-0000:00:01.0"),
            PciAddr::parse("0000:00:01.0")
        );
        assert_eq!(
            msi_chip_device("IR-PCI-MSI-0000:3b:00.0"),
            PciAddr::parse("0000:3b:00.0")
        );
        assert_eq!(msi_chip_device("PCI-MSI"), None);
        assert_eq!(msi_chip_device("IO-APIC"), None);
    }

    proptest! {
        #[test]
        fn attributes_round_trip(class in 0u32..=0xff_ffff, id in any::<u16>(),
                                 node in proptest::option::of(0u32..64),
                                 irq in proptest::option::of(1u32..100_000)) {
            prop_assert_eq!(parse_class(&render_class(class)), Ok(class));
            prop_assert_eq!(parse_id16(&render_id16(id)), Ok(id));
            let node = node.map(NodeId);
            prop_assert_eq!(parse_numa_node(&render_numa_node(node)), Ok(node));
            let irq = irq.map(IrqNum);
            prop_assert_eq!(parse_legacy_irq(&render_legacy_irq(irq)), Ok(irq));
        }

        #[test]
        fn local_cpulist_round_trip(cpus in proptest::collection::btree_set(0u32..512, 0..32)) {
            let set: irqpilot_core::CpuSet = cpus.into_iter().map(irqpilot_core::CpuId).collect();
            let nr = set.last().map_or(1, |c| c.0 + 1);
            prop_assert_eq!(value::parse_cpulist(&value::render_cpulist(&set)), Ok(set.clone()));
            prop_assert_eq!(value::parse_mask(&value::render_mask(&set, nr)), Ok(set));
        }
    }
}
