//! Small identifiers with their own types, so a CPU number is never mistaken for an IRQ number.

use serde::{Deserialize, Serialize};
use std::fmt;

macro_rules! id_type {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(pub u32);

        impl $name {
            /// The number as the kernel prints it.
            pub const fn get(self) -> u32 {
                self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Display::fmt(&self.0, f)
            }
        }

        impl From<u32> for $name {
            fn from(v: u32) -> Self {
                Self(v)
            }
        }
    };
}

id_type!(
    /// A logical CPU as the kernel numbers it (`cpuN`, `CPUN` in `/proc/interrupts`).
    CpuId
);
id_type!(
    /// A Linux IRQ number (the numbered rows of `/proc/interrupts`, `/proc/irq/N`).
    IrqNum
);
id_type!(
    /// A NUMA node (`/sys/devices/system/node/nodeN`).
    NodeId
);

/// A monotonic timestamp in nanoseconds (`CLOCK_MONOTONIC` on Linux, simulated time in the twin).
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct MonoNs(pub u64);

impl MonoNs {
    /// Nanoseconds from `earlier` to `self`, or `None` if time went backwards.
    pub fn since(self, earlier: MonoNs) -> Option<u64> {
        self.0.checked_sub(earlier.0)
    }
}

/// A PCI function address in the kernel's `domain:bus:device.function` form, e.g. `0000:3b:00.1`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct PciAddr(pub String);

impl PciAddr {
    /// Accepts `dddd:bb:dd.f` (hex digits), the form of `/sys/bus/pci/devices` entries. The
    /// domain is printed `%04x`, so it can be wider than 4 digits (Intel VMD domains such as
    /// `10000:e1:00.0`).
    pub fn parse(s: &str) -> Option<PciAddr> {
        let b = s.as_bytes();
        let domain = b.len().checked_sub(8)?;
        let hex = |r: std::ops::Range<usize>| b[r].iter().all(u8::is_ascii_hexdigit);
        let ok = (4..=8).contains(&domain)
            && hex(0..domain)
            && b[domain] == b':'
            && hex(domain + 1..domain + 3)
            && b[domain + 3] == b':'
            && hex(domain + 4..domain + 6)
            && b[domain + 6] == b'.'
            && (b'0'..=b'7').contains(&b[domain + 7]);
        ok.then(|| PciAddr(s.to_string()))
    }

    /// The address as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for PciAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pci_addr_parse() {
        assert!(PciAddr::parse("0000:3b:00.1").is_some());
        assert!(PciAddr::parse("0000:3B:1f.7").is_some());
        assert!(PciAddr::parse("0000:3b:00.8").is_none());
        assert!(PciAddr::parse("0000:3b:00").is_none());
        assert!(PciAddr::parse("virtio0").is_none());
        assert!(PciAddr::parse("10000:e1:00.0").is_some());
        assert!(PciAddr::parse("000:3b:00.1").is_none());
        assert!(PciAddr::parse("").is_none());
    }

    #[test]
    fn mono_since() {
        assert_eq!(MonoNs(10).since(MonoNs(4)), Some(6));
        assert_eq!(MonoNs(4).since(MonoNs(10)), None);
    }
}
