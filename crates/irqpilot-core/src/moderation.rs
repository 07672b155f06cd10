//! Interrupt moderation algorithms, as pure state machines.
//!
//! * [`dim`]: Linux net DIM (`lib/dim/net_dim.c`), the per-queue hill climber most NIC drivers use.
//! * [`aim`]: e1000/igb adaptive interrupt moderation (FreeBSD `enable_aim` modes 0/1/2).
//! * [`knobs`]: which moderation each IRQ offers and its current setting.
//! * [`global`]: irqpilot's global moderator, a [`crate::Policy`] that keeps the platform-wide rate
//!   and per-CPU hardirq time under targets through those knobs.
//! * [`kernel_soft`]: the same targets written into the kernel's own software moderation (GSIM)
//!   where the kernel carries it, and GSIM enabled on the device IRQs that offer it.
//!
//! The simulator runs these inside its simulated drivers; the Linux actuators never need them
//! (the real drivers run their own copies). Constants and their sources are in
//! `shared/research/moderation.md` sections 2 and 3.

pub mod aim;
pub mod dim;
pub mod global;
pub mod kernel_soft;
pub mod knobs;
