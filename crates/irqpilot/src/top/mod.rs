//! `irqpilot top`'s model and view: [`state`] holds what is shown and the view's settings,
//! [`keys`] maps keys onto them, [`cpus`] builds the (folded) CPU rows, [`view`] draws it all
//! with ratatui. The terminal and the sampling loop are in `cmd/top.rs`; nothing here does
//! I/O, so tests draw the screen into a buffer.

pub mod cpus;
pub mod keys;
pub mod state;
pub mod view;
