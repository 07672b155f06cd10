//! NIC channels (`ethtool -L <dev> combined N`) as the twin models them.
//!
//! A NIC is built with `queues` queue pairs, its hardware maximum. Setting `combined` to `N`
//! keeps the first `N` in use: RSS spreads flows over them only (bulk flows are re-hashed), and
//! the driver frees the IRQs of the others, as ice and i40e do when they rebuild their queue
//! vectors: those IRQs leave `/proc/interrupts` and give their vectors back. Raising `N` again
//! requests the IRQs anew: each starts on the CPU of `default_smp_affinity` with the fewest
//! vectors and a free one (the vector matrix, `vectors.rs`); if none has room the change is
//! refused with ENOSPC. Packets already on a dropped queue's ring are still drained.
//! Separate RX/TX channel counts are not modelled (EOPNOTSUPP).

use crate::model::Dev;
use crate::sim::Sim;
use irqpilot_core::ApplyError;

impl Sim {
    /// Whether vector `s` is requested (its NIC queue is within the channels in use).
    pub(crate) fn src_enabled(&self, s: usize) -> bool {
        match self.srcs[s].dev {
            Dev::Nic(q) => {
                let nq = &self.nq[q as usize];
                nq.index < self.nics[nq.nic as usize].channels
            }
            Dev::Nvme(_) => true,
        }
    }

    /// `ethtool -L <device> combined <n>`; `Ok(true)` when the count changed. Returns the old
    /// count with the result.
    pub(crate) fn set_channels(
        &mut self,
        device: &str,
        combined: Option<u32>,
        separate: bool,
    ) -> (Option<String>, Result<bool, ApplyError>) {
        let Some(ni) = self.nics.iter().position(|n| n.name == device) else {
            return (None, Err(ApplyError::Vanished));
        };
        let old = self.nics[ni].channels;
        let old_text = Some(format!("combined {old}"));
        if separate {
            return (old_text, Err(ApplyError::Unsupported));
        }
        let Some(n) = combined else {
            return (old_text, Ok(false));
        };
        if n == 0 || n > self.nics[ni].queues {
            return (old_text, Err(ApplyError::Invalid));
        }
        if n == old {
            return (old_text, Ok(false));
        }
        let first = self.nics[ni].first_q;
        if n > old {
            // Request the IRQs again, each on the emptiest CPU of the default affinity.
            let cap = self.sc.machine.vectors_per_cpu;
            let mut used = self.vectors_per_cpu();
            let mut picks = Vec::new();
            for q in first + old..first + n {
                let s = self.nq[q as usize].src as usize;
                let Some(c) = self
                    .default_affinity
                    .iter()
                    .map(|c| c.0 as usize)
                    .filter(|&c| c < used.len() && used[c] < cap)
                    .min_by_key(|&c| (used[c], c))
                else {
                    return (old_text, Err(ApplyError::NoVectorSpace));
                };
                used[c] += 1;
                picks.push((s, c as u32));
            }
            for (s, c) in picks {
                let src = &mut self.srcs[s];
                src.requested = self.default_affinity.clone();
                if src.cpu != c {
                    src.cpu = c;
                    src.migrated = true;
                }
            }
        }
        self.nics[ni].channels = n;
        self.rehash_flows(ni);
        (old_text, Ok(true))
    }
}
