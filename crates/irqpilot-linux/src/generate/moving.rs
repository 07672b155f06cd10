//! [`MovingServer`]: the generated server with its counters moving, for benchmarks and tests
//! of the samplers (`watch`, `top`, recordings) that need a 256-CPU machine whose interrupts
//! keep coming. Each IRQ keeps the rate its counts imply over the uptime, on the CPU that took
//! most of them, varied by up to ±25% per sample; one IRQ in 64 bursts to 10x for a sample now
//! and then. `/proc/stat` gains 100 ticks a second per CPU (1 us of hardirq and 2 us of softirq
//! time per interrupt, the rest idle), `/proc/softirqs` a `NET_RX` per device interrupt and the
//! timers' steady counts. Its clock is virtual: `sleep` moves it and returns at once.

use super::{HZ, Lcg, large_server};
use irqpilot_core::{ApplyReport, Machine, MonoNs, Plan, Platform, PlatformError, Snapshot};

/// One moving cell: flat index into the interrupt counts, CPU column, rate per second.
#[derive(Clone, Copy, Debug)]
struct Mover {
    cell: usize,
    column: usize,
    per_sec: f64,
}

/// See the module documentation.
#[derive(Debug, Clone)]
pub struct MovingServer {
    machine: Machine,
    snap: Snapshot,
    movers: Vec<Mover>,
    rng: Lcg,
    now_ns: u64,
    /// Interrupts per CPU column in the current step (reused).
    per_cpu: Vec<u64>,
    /// Hardirq and softirq time not yet a whole tick, per CPU column, in ticks.
    carry: Vec<(f64, f64)>,
}

/// Start of the virtual clock (the monotonic time of the first sample).
const START_NS: u64 = 1_000_000_000_000;

impl MovingServer {
    /// The generated server of `seed`, moving with a stream of its own seed.
    pub fn new(seed: u64) -> MovingServer {
        let (machine, mut snap) = large_server(seed);
        snap.taken_at = MonoNs(START_NS);
        // Uptime from CPU 0's ticks (the generator gives every CPU the same total).
        let uptime_s = snap
            .stat
            .as_ref()
            .and_then(|s| s.per_cpu.first())
            .map_or(1.0, |(_, t)| (t.total() as f64 / HZ as f64).max(1.0));
        let t = &snap.interrupts;
        let mut movers = Vec::new();
        let mut base = 0usize;
        for row in t.rows() {
            let counts = t.counts(row);
            if row.label.irq().is_some() && t.is_per_cpu(row) {
                if let Some((col, &max)) = counts.iter().enumerate().max_by_key(|(_, c)| **c) {
                    if max > 0 {
                        movers.push(Mover {
                            cell: base + col,
                            column: col,
                            per_sec: max as f64 / uptime_s,
                        });
                    }
                }
            }
            base += counts.len();
        }
        let n = t.cpus.len();
        MovingServer {
            machine,
            snap,
            movers,
            rng: Lcg(seed ^ 0x6d6f_7669_6e67),
            now_ns: START_NS,
            per_cpu: vec![0; n],
            carry: vec![(0.0, 0.0); n],
        }
    }

    /// The snapshot as of the current virtual time.
    pub fn snapshot_now(&self) -> &Snapshot {
        &self.snap
    }

    /// Moves the counters on by `ns`.
    pub fn advance(&mut self, ns: u64) {
        if ns == 0 {
            return;
        }
        let secs = ns as f64 / 1e9;
        self.now_ns += ns;
        self.snap.taken_at = MonoNs(self.now_ns);
        self.per_cpu.iter_mut().for_each(|c| *c = 0);
        let counts = self.snap.interrupts.all_counts_mut();
        for m in &self.movers {
            let r = self.rng.next();
            let jitter = 0.75 + (r % 1000) as f64 / 2000.0;
            let burst = if (r >> 10) % 64 == 0 && (r >> 16) % 16 == 0 {
                10.0
            } else {
                1.0
            };
            let k = (m.per_sec * secs * jitter * burst).round() as u64;
            if let Some(c) = counts.get_mut(m.cell) {
                // Kernel per-CPU counts are `unsigned int`.
                *c = (*c + k) & u64::from(u32::MAX);
            }
            if let Some(p) = self.per_cpu.get_mut(m.column) {
                *p += k;
            }
        }
        // The local timer on every CPU, 250 Hz.
        let timer = (250.0 * secs).round() as u64;
        let t = &mut self.snap.interrupts;
        if let Some(i) = t
            .rows()
            .iter()
            .position(|r| r.label == irqpilot_core::RowLabel::Named("LOC".into()))
        {
            if let Some(c) = t.counts_mut(i) {
                c.iter_mut()
                    .for_each(|v| *v = (*v + timer) & u64::from(u32::MAX));
            }
        }
        let ticks = (HZ as f64 * secs).round() as u64;
        if let Some(st) = self.snap.stat.as_mut() {
            for (j, (_, t)) in st.per_cpu.iter_mut().enumerate() {
                let irqs = self.per_cpu.get(j).copied().unwrap_or(0) as f64;
                let Some(carry) = self.carry.get_mut(j) else {
                    continue;
                };
                // 1 us of hardirq and 2 us of softirq per interrupt, in 10 ms ticks; the
                // fractions carry over to the next step, as the kernel's accounting does.
                carry.0 += irqs * 1e-6 * HZ as f64;
                carry.1 += irqs * 2e-6 * HZ as f64;
                let hard = (carry.0.floor() as u64).min(ticks);
                let soft = (carry.1.floor() as u64).min(ticks - hard);
                carry.0 -= hard as f64;
                carry.1 -= soft as f64;
                if let Some(v) = t.irq.as_mut() {
                    *v += hard;
                }
                if let Some(v) = t.softirq.as_mut() {
                    *v += soft;
                }
                t.idle += ticks - hard - soft;
            }
        }
        if let Some(s) = self.snap.softirqs.as_mut() {
            for (name, v) in s.rows.iter_mut() {
                let add = |j: usize| match name.as_str() {
                    "NET_RX" => self.per_cpu.get(j).copied().unwrap_or(0) / 2,
                    "TIMER" | "HRTIMER" => timer,
                    "SCHED" => timer / 2,
                    "RCU" => timer / 4,
                    _ => 0,
                };
                for (j, c) in v.iter_mut().enumerate() {
                    *c += add(j);
                }
            }
        }
    }
}

impl Platform for MovingServer {
    fn machine(&mut self) -> Result<Machine, PlatformError> {
        Ok(self.machine.clone())
    }

    fn snapshot_into(&mut self, snap: &mut Snapshot) -> Result<(), PlatformError> {
        snap.clone_from(&self.snap);
        Ok(())
    }

    fn apply(&mut self, plan: &Plan) -> ApplyReport {
        ApplyReport::refuse_all(plan, "the moving server is read-only")
    }

    fn now(&mut self) -> MonoNs {
        MonoNs(self.now_ns)
    }

    fn sleep(&mut self, ns: u64) {
        self.advance(ns);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use irqpilot_core::Rates;

    #[test]
    fn counters_move_at_plausible_rates() {
        let mut m = MovingServer::new(1);
        let a = m.snapshot().unwrap();
        m.sleep(1_000_000_000);
        let b = m.snapshot().unwrap();
        let r = Rates::between(&a, &b).unwrap();
        let moving = r.rows.iter().filter(|x| x.total_per_sec > 0.0).count();
        assert!(moving > 500, "{moving} rows moved");
        let device: f64 = r.per_cpu.iter().map(|c| c.irq_per_sec).sum();
        assert!(device > 100_000.0 && device < 50_000_000.0, "{device}/s");
        assert!(r.per_cpu.iter().all(|c| c.arch_per_sec >= 250.0));
        assert!(r.per_cpu.iter().any(|c| c.softirq_pct.is_some()));
        // Same seed, same numbers.
        let mut m2 = MovingServer::new(1);
        m2.sleep(1_000_000_000);
        assert_eq!(m2.snapshot().unwrap(), b);
    }
}
