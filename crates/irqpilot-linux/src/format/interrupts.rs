//! `/proc/interrupts`: one row per IRQ (or architecture counter), one count column per online CPU.
//!
//! The parser keeps each row's `lead` (label, colon, padding) and `tail` (chip, hwirq, handler and
//! action names, or a description) verbatim, so [`render_interrupts`] prints what the kernel
//! printed byte for byte, whatever its version or architecture. The description in a tail is
//! decoded separately by [`crate::format::irq_desc`].
//!
//! The kernel's layout (`kernel/irq/proc.c`, `arch_show_interrupts`): a header of `prec + 8`
//! spaces and `CPU%-8d` per online CPU; numbered rows as `%*d: ` then one `%10u ` per online CPU
//! (6.x: `%*d:` then ` %10u` each and a space), then the descriptor; named rows (`NMI`, `LOC`,
//! `IPI0`, `ERR`, ...) likewise with a free text. `ERR`/`MIS` carry one count, ARM's `FIQ` none,
//! and old ARM kernels print IPI counts for offline CPUs too, so a named row may have any number
//! of counts; a numbered row always has one per header CPU.
//!
//! Performance: parsing is a single hand-written byte scan over the text with no allocation per
//! row or count; [`parse_interrupts_into`] reuses a table's allocations, so a sampler that parses
//! the same machine's file again and again stops allocating after the first read.

mod parse;
#[cfg(test)]
mod proptests;
mod render;
#[cfg(test)]
mod tests;

pub use parse::{parse_interrupts, parse_interrupts_into};
pub use render::{render_interrupts, render_interrupts_into};

pub(crate) use parse::{cpu_columns, parse_u32, show};
pub(crate) use render::push_padded;
