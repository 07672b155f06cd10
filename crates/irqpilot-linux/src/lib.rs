//! # irqpilot-linux
//!
//! The Linux side of irqpilot: the kernel's text formats and a platform over a root directory.
//!
//! * [`format`](mod@format): parsers (text in, `irqpilot-core` model out) and renderers (model back to the
//!   kernel's exact text) for `/proc/interrupts`, `/proc/stat`, `/proc/softirqs`, `/proc/irq/N/*`,
//!   `/sys/kernel/irq/N/*`, CPU topology and caches, NUMA nodes, `/proc/cmdline` and PCI devices.
//!   Parsers take `&str`, never paths.
//! * [`inventory`]: reads a [`irqpilot_core::Machine`] from a root directory (default `/`); any
//!   file but `/proc/interrupts` may be missing and becomes a recorded gap.
//! * [`moderation`]: the moderation knobs (ethtool coalescing, NVMe features 08h/09h, the
//!   kernel's soft moderation files): reading them into the inventory and changing them.
//! * [`capture`]: copies the files irqpilot reads from a root into a fixture tree with a
//!   `MANIFEST.toml` (`irqpilot capture`).
//! * [`platform`]: [`LinuxPlatform`], the [`irqpilot_core::Platform`] over a root: inventory,
//!   allocation-free counter snapshots, and affinity writes.
//! * [`tree`]: writes a model ([`irqpilot_core::Machine`] + [`irqpilot_core::Snapshot`]) back
//!   out as a complete root directory, through the renderers; [`generate`] builds a large
//!   synthetic server to write (`irqpilot fixture generate`).
//! * [`journal`]: records every value `apply` replaces before writing it, and `revert`;
//!   [`owner`]: the lock that makes one process at a time the writer of a root;
//!   [`channels`]: NIC queue counts through the ethtool channels ioctl; [`fault`]: simulated
//!   kernel refusals for tests on fixture trees.
//! * [`privileges`]: the capabilities and socket families the writers need (the systemd unit
//!   grants exactly these), and dropping the ones a machine does not call for.
//!
//! Every file access goes through [`root::Root`], so tests and the simulator's exported tree use
//! the same code as a live machine.

#![warn(missing_docs)]

pub mod apps;
pub mod capture;
pub mod channels;
pub mod error;
pub mod fault;
pub mod format;
pub mod generate;
pub mod inventory;
pub mod journal;
pub mod moderation;
pub mod owner;
pub mod platform;
pub mod privileges;
pub mod readback;
pub mod root;
pub mod tree;

pub use error::ParseError;
pub use platform::LinuxPlatform;
pub use root::Root;
