//! What the long-running commands (`daemon`, `exporter`) share as services: their events
//! (signals, a metrics listener that died) on one channel the loop waits on with a deadline, and
//! the systemd notification protocol (`Type=notify`, the watchdog).

mod events;
mod systemd;

pub use events::{Event, Events};
pub use systemd::Systemd;
