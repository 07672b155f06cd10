//! The model behind the live views (`watch`, `top`) and the reports: sampling and what is
//! derived from it, independent of how it is shown. [`sampler`] turns snapshots into rates and
//! the imbalance index; [`affinity`] notices affinity changes on a live root; [`daemon`] reads
//! what a running daemon left on disk; [`devices`] names each IRQ's device and queue;
//! [`recording`] opens recordings and replays for the commands.

pub mod affinity;
pub mod daemon;
pub mod devices;
pub mod recording;
pub mod sampler;

pub use sampler::Sampler;
