//! The kernel's text formats: parse (text -> model) and render (model -> the kernel's text).
//!
//! Parsers never panic on any input: malformed text gives a [`crate::ParseError`] naming the line
//! and the offending token.

pub mod cmdline;
pub mod cpu;
pub mod diskstats;
pub mod interrupts;
pub mod irq_desc;
pub mod netdev;
pub mod pci;
pub mod procirq;
pub mod softirqs;
pub mod stat;
pub mod status;
pub mod sysirq;
pub mod value;
