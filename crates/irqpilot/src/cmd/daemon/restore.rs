//! `--restore-on-exit` on every way out of the daemon: the end of `--iterations`, SIGTERM or
//! SIGINT, an error that ends the loop (a closed stdout, a journal that cannot be written), a
//! panic. The platform lives inside [`RestoreOnExit`]; [`RestoreOnExit::finish`] reverts on the
//! normal way out and returns the report, and dropping it unfinished (an early return,
//! unwinding) reverts too, logging what it did.

use irqpilot_core::Platform;
use irqpilot_linux::journal::{JournaledPlatform, RevertReport};

/// The daemon's platform, reverted on exit when asked.
#[derive(Debug)]
pub struct RestoreOnExit<P: Platform> {
    /// The journaled platform the loop drives.
    pub platform: JournaledPlatform<P>,
    restore: bool,
    done: bool,
}

impl<P: Platform> RestoreOnExit<P> {
    /// Wraps the platform; `restore` is `--restore-on-exit` (or `[daemon] restore_on_exit`).
    pub fn new(platform: JournaledPlatform<P>, restore: bool) -> Self {
        RestoreOnExit {
            platform,
            restore,
            done: false,
        }
    }

    /// The normal way out: reverts the journal when asked (`Ok(None)`: not asked).
    pub fn finish(&mut self) -> anyhow::Result<Option<RevertReport>> {
        self.done = true;
        if !self.restore {
            return Ok(None);
        }
        Ok(Some(self.platform.revert_all()?))
    }
}

impl<P: Platform> Drop for RestoreOnExit<P> {
    fn drop(&mut self) {
        if self.done || !self.restore {
            return;
        }
        match self.platform.revert_all() {
            Ok(rep) => tracing::warn!(
                restored = rep.restored(),
                kept = rep.kept,
                "daemon ending on an error: journal restored (--restore-on-exit)"
            ),
            Err(e) => {
                tracing::error!(error = %e, "daemon ending: the journal could not be restored")
            }
        }
    }
}
