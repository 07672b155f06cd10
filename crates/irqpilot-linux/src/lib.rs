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
//!
//! Every file access goes through [`root::Root`], so tests and the simulator's exported tree use
//! the same code as a live machine.

#![warn(missing_docs)]

pub mod capture;
pub mod error;
pub mod format;
pub mod inventory;
pub mod moderation;
pub mod root;

pub use error::ParseError;
pub use root::Root;
