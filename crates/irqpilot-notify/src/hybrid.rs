//! The hybrid strategy's rule: how long to spin before blocking, adapted to what this waiter
//! observed. The same trade-off as interrupt moderation: poll while events come fast, sleep (and
//! pay a wake-up) when they are rare.
//!
//! # What the waiter observes
//!
//! * The *gap* of every wake-up: the time from entering `wait()` to the notification. While
//!   spinning it is the number of spin iterations times the calibrated cost of one iteration (no
//!   clock read on the fast path); after blocking it is the spin time plus the time from going to
//!   sleep to the notifier's timestamp (the notifier reads the clock only when it has to make the
//!   wake-up system call anyway).
//! * Its own *wake-up latency* after blocking: from the notifier's timestamp to running again.
//! * For request/response use ([`Duplex`](crate::Duplex)): whether the peer was **asleep** when
//!   this side last notified it ([`Notifier::notify`](crate::Notifier::notify) returns that).
//!
//! # One-way rule (plain [`Waiter`](crate::Waiter))
//!
//! * A gap is a *would-hit* when `gap <= max_spin_ns`: spinning for the longest allowed window
//!   would have caught it without a system call.
//! * `hit_rate` is an exponentially weighted moving average of would-hits, weight 1/8
//!   (`HIT_EWMA_SHIFT`), kept in 1/1024 units; `fast_gap_ns` is an EWMA (weight 1/8) of the
//!   would-hit gaps only.
//! * The spin budget of the next wait is `clamp(WINDOW_FACTOR * fast_gap_ns, min_spin_ns,
//!   max_spin_ns)` while `hit_rate >= 1/2` (`SPIN_THRESHOLD`), else **0**: block at once.
//! * While the budget is 0, every `probe_every`-th wait spins `max_spin_ns` anyway, so the waiter
//!   notices when wake-ups become fast again.
//!
//! The waiter starts optimistic (`hit_rate` = 1): six consecutive misses (`(7/8)^6 < 1/2`) switch
//! it to blocking, and six would-hits switch it back.
//!
//! # Request/response rule ([`Duplex`](crate::Duplex))
//!
//! In a closed loop the gap one end sees is the other end's reaction time, *including the other
//! end's wake-up if it was asleep*; judged by gaps alone, two blocking ends each see the other's
//! wake-up latency and both keep blocking. So a duplex wait after a notify decides from the
//! peer's state, like an adaptive mutex that spins only while the lock owner is running:
//!
//! * peer was **awake**: spin `clamp(WINDOW_FACTOR * fast_gap_ns, min_spin_ns, max_spin_ns)`,
//!   then block, as long as such spins usually succeed: `awake_hit_rate`, an EWMA (weight 1/8) of
//!   whether an after-notify spin caught the answer, must stay `>= 1/2`. Awake is not running:
//!   a peer on the same CPU, or preempted, cannot answer while we spin, the spins miss, and after
//!   six misses the end blocks at once (with a spin probe every `probe_every`-th wait to notice
//!   when spinning pays again);
//! * peer was **asleep**: its answer needs its wake-up first, so block at once; but every
//!   `probe_every`-th such wait spins `clamp(2 * wake_latency, max_spin_ns, MAX_PROBE_NS)`, long
//!   enough to catch an answer that follows the peer's wake-up. If it does, this end is awake when
//!   the peer notifies it back, the peer spins, and both ends are spinning again.
//!
//! # Cost bound
//!
//! Spinning never exceeds `max_spin_ns` per wait except for probes, which cost at most
//! `MAX_PROBE_NS / probe_every` per wait on average. With `max_spin_ns` about the CPU cost of one
//! futex sleep/wake-up pair, spinning at most doubles the CPU cost of waiting compared with always
//! blocking (the classic competitive bound for spin-then-block), and while idle it adds only the
//! probes.

use serde::Serialize;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};

/// EWMA weight of a new observation: `1 / 2^HIT_EWMA_SHIFT` = 1/8.
pub const HIT_EWMA_SHIFT: u32 = 3;
/// Fixed-point one for `hit_rate`.
pub const RATE_ONE: u32 = 1024;
/// Spin while at least half of recent wake-ups were would-hits.
pub const SPIN_THRESHOLD: u32 = RATE_ONE / 2;
/// The spin window is this many times the typical fast gap.
pub const WINDOW_FACTOR: u32 = 4;
/// Longest probe after notifying a sleeping peer, ns.
pub const MAX_PROBE_NS: u32 = 200_000;

/// Tuning of [`Strategy::Hybrid`](crate::Strategy::Hybrid).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct HybridConfig {
    /// Longest spin before blocking, ns, and the horizon of a would-hit. Default 4000: about
    /// the CPU cost of one futex sleep/wake-up pair on current x86 (1-3 us bare metal, more in
    /// a VM), so spinning never costs much more CPU than blocking would.
    pub max_spin_ns: u32,
    /// Shortest spin window while spinning, ns. Default 1000, so a wake-up that is a little late
    /// (a cache miss, an interrupt on the peer) still lands in the spin.
    pub min_spin_ns: u32,
    /// While blocking at once, probe by spinning on every `probe_every`-th wait. Default 128.
    pub probe_every: u32,
}

impl Default for HybridConfig {
    fn default() -> Self {
        HybridConfig {
            max_spin_ns: 4_000,
            min_spin_ns: 1_000,
            probe_every: 128,
        }
    }
}

/// What a hybrid waiter currently believes (for observability and tests).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct HybridState {
    /// Fraction of recent wake-ups that a `max_spin_ns` spin would have caught, in 1/1024.
    pub hit_rate: u32,
    /// Fraction of recent spins after notifying an awake peer that caught the answer, in 1/1024.
    pub awake_hit_rate: u32,
    /// Typical gap of those wake-ups, ns.
    pub fast_gap_ns: u32,
    /// The spin budget the next one-way wait would use (0 = block at once, probes aside).
    pub budget_ns: u32,
    /// Own wake-up latency after blocking (EWMA), ns.
    pub wake_latency_ns: u32,
}

/// The adaptive spin budget (pure arithmetic; the waiter feeds it gaps).
#[derive(Clone, Debug)]
pub struct SpinPolicy {
    cfg: HybridConfig,
    hit_rate: u32,
    awake_hit_rate: u32,
    fast_gap_ns: u32,
    wake_latency_ns: u32,
    since_probe: u32,
}

impl SpinPolicy {
    /// A policy that starts optimistic (spinning).
    pub fn new(cfg: HybridConfig) -> SpinPolicy {
        let cfg = HybridConfig {
            max_spin_ns: cfg.max_spin_ns,
            min_spin_ns: cfg.min_spin_ns.min(cfg.max_spin_ns),
            probe_every: cfg.probe_every.max(1),
        };
        SpinPolicy {
            cfg,
            hit_rate: RATE_ONE,
            awake_hit_rate: RATE_ONE,
            fast_gap_ns: 0,
            wake_latency_ns: 0,
            since_probe: 0,
        }
    }

    fn window(&self) -> u32 {
        self.fast_gap_ns
            .saturating_mul(WINDOW_FACTOR)
            .clamp(self.cfg.min_spin_ns, self.cfg.max_spin_ns)
    }

    fn steady_budget(&self) -> u32 {
        if self.hit_rate >= SPIN_THRESHOLD {
            self.window()
        } else {
            0
        }
    }

    /// Counts a wait that would block at once; every `probe_every`-th one returns `probe`.
    fn block_or_probe(&mut self, probe: u32) -> u32 {
        self.since_probe += 1;
        if self.since_probe >= self.cfg.probe_every {
            self.since_probe = 0;
            probe
        } else {
            0
        }
    }

    /// The spin budget for the one-way wait about to start, ns (0 = block at once).
    pub fn next_budget_ns(&mut self) -> u32 {
        let budget = self.steady_budget();
        if budget > 0 {
            self.since_probe = 0;
            return budget;
        }
        self.block_or_probe(self.cfg.max_spin_ns)
    }

    /// The spin budget for a wait that follows a notify to the peer, given whether that notify
    /// found the peer asleep (the request/response rule).
    pub fn next_budget_after_notify_ns(&mut self, peer_was_asleep: bool) -> u32 {
        if !peer_was_asleep {
            if self.awake_hit_rate >= SPIN_THRESHOLD {
                self.since_probe = 0;
                return self.window();
            }
            return self.block_or_probe(self.window());
        }
        let probe = self
            .wake_latency_ns
            .saturating_mul(2)
            .clamp(self.cfg.max_spin_ns, MAX_PROBE_NS.max(self.cfg.max_spin_ns));
        self.block_or_probe(probe)
    }

    /// Feeds whether a spin after notifying an awake peer caught the answer.
    pub fn observe_awake_spin(&mut self, caught: bool) {
        self.awake_hit_rate = ewma(self.awake_hit_rate, if caught { RATE_ONE } else { 0 });
    }

    /// Feeds the waiter's own wake-up latency after a block, ns.
    pub fn observe_wake_latency(&mut self, ns: u64) {
        let ns = u32::try_from(ns).unwrap_or(u32::MAX);
        self.wake_latency_ns = ewma(self.wake_latency_ns, ns);
    }

    /// Feeds the gap of one wake-up, ns.
    pub fn observe(&mut self, gap_ns: u64) {
        let hit = gap_ns <= u64::from(self.cfg.max_spin_ns);
        let target = if hit { RATE_ONE } else { 0 };
        self.hit_rate = ewma(self.hit_rate, target);
        if hit {
            // gap_ns <= max_spin_ns fits in u32.
            self.fast_gap_ns = ewma(self.fast_gap_ns, gap_ns as u32);
        }
    }

    /// The current belief.
    pub fn state(&self) -> HybridState {
        HybridState {
            hit_rate: self.hit_rate,
            awake_hit_rate: self.awake_hit_rate,
            fast_gap_ns: self.fast_gap_ns,
            budget_ns: self.steady_budget(),
            wake_latency_ns: self.wake_latency_ns,
        }
    }

    /// The configuration in force (after clamping).
    pub fn config(&self) -> HybridConfig {
        self.cfg
    }
}

/// `old + (new - old) / 8` in integers, without overflow.
fn ewma(old: u32, new: u32) -> u32 {
    let (old, new) = (i64::from(old), i64::from(new));
    (old + ((new - old) >> HIT_EWMA_SHIFT)) as u32
}

/// Cost of one spin iteration (an acquire load plus `spin_loop()`, i.e. `pause` on x86), in
/// picoseconds, measured once per process. Used to turn a spin budget in ns into an iteration
/// count, so the spin loop never reads the clock.
pub fn spin_iteration_ps() -> u64 {
    static PS: OnceLock<u64> = OnceLock::new();
    *PS.get_or_init(|| {
        const N: u64 = 4096;
        let word = AtomicU32::new(0);
        let mut best = u64::MAX;
        for _ in 0..5 {
            let t0 = crate::clock::now_ns();
            for _ in 0..N {
                std::hint::black_box(word.load(Ordering::Acquire));
                std::hint::spin_loop();
            }
            let dt = crate::clock::now_ns().saturating_sub(t0);
            best = best.min(dt);
        }
        // Never below 100 ps per iteration (a 10 GHz loop), so a budget never becomes an
        // enormous iteration count on a clock glitch.
        (best.saturating_mul(1000) / N).max(100)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fast_wakeups_keep_spinning_with_a_window_around_the_gap() {
        let mut p = SpinPolicy::new(HybridConfig::default());
        for _ in 0..100 {
            assert!(p.next_budget_ns() > 0);
            p.observe(300);
        }
        let s = p.state();
        assert!(s.hit_rate > 1000, "{s:?}");
        // The integer EWMA settles within 8 ns below the input.
        assert!((292..=300).contains(&s.fast_gap_ns), "{s:?}");
        // 4 x ~300, inside [1000, 4000].
        assert_eq!(s.budget_ns, 4 * s.fast_gap_ns);
    }

    #[test]
    fn window_is_clamped() {
        let mut p = SpinPolicy::new(HybridConfig::default());
        for _ in 0..100 {
            p.observe(10);
        }
        assert_eq!(p.state().budget_ns, 1000, "min_spin");
        for _ in 0..100 {
            p.observe(3_900);
        }
        assert_eq!(p.state().budget_ns, 4000, "max_spin");
    }

    #[test]
    fn rare_wakeups_drive_the_budget_to_zero_and_probe_now_and_then() {
        let mut p = SpinPolicy::new(HybridConfig::default());
        let mut misses = 0;
        while p.state().budget_ns > 0 {
            p.next_budget_ns();
            p.observe(1_000_000);
            misses += 1;
            assert!(misses < 100);
        }
        assert_eq!(misses, 6, "(7/8)^6 < 1/2 after six misses");
        let budgets: Vec<u32> = (0..128)
            .map(|_| {
                let b = p.next_budget_ns();
                p.observe(1_000_000);
                b
            })
            .collect();
        let probes = budgets.iter().filter(|&&b| b == 4000).count();
        assert_eq!(probes, 1, "one probe per 128 waits");
        assert_eq!(budgets.iter().filter(|&&b| b == 0).count(), 127);
    }

    #[test]
    fn returns_to_spinning_when_wakeups_become_fast_again() {
        let mut p = SpinPolicy::new(HybridConfig::default());
        for _ in 0..50 {
            p.observe(1_000_000);
        }
        assert_eq!(p.state().budget_ns, 0);
        let mut n = 0;
        while p.state().budget_ns == 0 {
            p.observe(200);
            n += 1;
            assert!(n < 100);
        }
        assert!(n >= 6, "needs a sustained change, took {n}");
    }

    #[test]
    fn request_response_follows_the_peer_state() {
        let mut p = SpinPolicy::new(HybridConfig::default());
        // Gap statistics that say "block" do not matter while the peer is awake.
        for _ in 0..50 {
            p.observe(1_000_000);
        }
        assert_eq!(p.state().budget_ns, 0);
        assert_eq!(p.next_budget_after_notify_ns(false), 1000);
        for _ in 0..50 {
            p.observe(500);
        }
        assert_eq!(
            p.next_budget_after_notify_ns(false),
            4 * p.state().fast_gap_ns
        );
        // An awake peer that never answers during the spin (same CPU, preempted): stop spinning
        // after six misses, probe now and then.
        let mut n = 0;
        while p.state().awake_hit_rate >= SPIN_THRESHOLD {
            assert!(p.next_budget_after_notify_ns(false) > 0);
            p.observe_awake_spin(false);
            n += 1;
        }
        assert_eq!(n, 6);
        let spins = (0..256)
            .filter(|_| p.next_budget_after_notify_ns(false) > 0)
            .count();
        assert_eq!(spins, 2);
        // A sleeping peer: block, with a probe sized from the wake-up latency now and then.
        for _ in 0..20 {
            p.observe_wake_latency(30_000);
        }
        let budgets: Vec<u32> = (0..256)
            .map(|_| p.next_budget_after_notify_ns(true))
            .collect();
        let probes: Vec<u32> = budgets.iter().copied().filter(|&b| b > 0).collect();
        assert_eq!(probes.len(), 2);
        let lat = p.state().wake_latency_ns;
        assert!((25_000..=30_000).contains(&lat), "{lat}");
        assert_eq!(probes[0], 2 * lat);
        // Probes never exceed MAX_PROBE_NS nor fall below max_spin_ns.
        for _ in 0..100 {
            p.observe_wake_latency(10_000_000);
        }
        let big = (0..128).map(|_| p.next_budget_after_notify_ns(true)).max();
        assert_eq!(big, Some(MAX_PROBE_NS));
    }

    #[test]
    fn degenerate_config_is_clamped() {
        let p = SpinPolicy::new(HybridConfig {
            max_spin_ns: 500,
            min_spin_ns: 9_999,
            probe_every: 0,
        });
        let c = p.config();
        assert_eq!(c.min_spin_ns, 500);
        assert_eq!(c.probe_every, 1);
    }

    #[test]
    fn iteration_cost_is_calibrated() {
        let ps = spin_iteration_ps();
        assert!((100..10_000_000).contains(&ps), "{ps} ps");
    }
}
