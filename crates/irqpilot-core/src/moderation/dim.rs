//! Linux net DIM: dynamic interrupt moderation by hill climbing over five `{usec, pkts}` profiles.
//!
//! Faithful to `lib/dim/net_dim.c` and `include/linux/dim.h` (moderation.md section 2): an
//! iteration every [`DIM_NEVENTS`] interrupts computes bytes/ms, packets/ms and events/ms over the
//! window; a >10% difference is significant; bytes then packets (higher is better) then events
//! (lower is better) decide whether the last step helped; the tuner goes right (more moderation)
//! or left, turns when a step did not help, parks "on top" when it oscillates around the best
//! profile, and parks "tired" for 10 iterations after 10 consecutive steps.

use serde::{Deserialize, Serialize};

/// Interrupts (events) per DIM iteration (`DIM_NEVENTS`).
pub const DIM_NEVENTS: u16 = 64;
/// Profiles per table (`NET_DIM_PARAMS_NUM_PROFILES`).
pub const NUM_PROFILES: u8 = 5;
/// Default starting profile (`NET_DIM_DEF_PROFILE_CQE` / `_EQE`).
pub const DEFAULT_PROFILE: u8 = 1;

/// One moderation profile: timer and packet-count threshold.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Profile {
    /// Timer in microseconds.
    pub usec: u32,
    /// Packet-count threshold.
    pub pkts: u32,
}

const fn p(usec: u32, pkts: u32) -> Profile {
    Profile { usec, pkts }
}

/// RX profiles, timer restarting at the first event (EQE mode).
pub const RX_EQE_PROFILES: [Profile; 5] =
    [p(1, 256), p(8, 256), p(64, 256), p(128, 256), p(256, 256)];
/// RX profiles, timer restarting at every completion (CQE mode, mlx5's default).
pub const RX_CQE_PROFILES: [Profile; 5] = [p(2, 256), p(8, 128), p(16, 64), p(32, 64), p(64, 64)];
/// TX profiles, EQE mode.
pub const TX_EQE_PROFILES: [Profile; 5] =
    [p(1, 128), p(8, 128), p(32, 128), p(64, 128), p(128, 128)];
/// TX profiles, CQE mode.
pub const TX_CQE_PROFILES: [Profile; 5] = [p(5, 128), p(8, 64), p(16, 32), p(32, 32), p(64, 32)];

/// When the moderation timer (re)starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PeriodMode {
    /// At the first event after an interrupt: bounds the delay of the first packet.
    Eqe,
    /// At every completion: fires when the queue has been idle for `usec`.
    Cqe,
}

impl PeriodMode {
    /// The RX profile table of this mode.
    pub fn rx_profiles(self) -> &'static [Profile; 5] {
        match self {
            PeriodMode::Eqe => &RX_EQE_PROFILES,
            PeriodMode::Cqe => &RX_CQE_PROFILES,
        }
    }
}

/// Cumulative counters a driver hands to DIM (`struct dim_sample`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sample {
    /// Time in nanoseconds.
    pub time_ns: u64,
    /// Packets so far (wraps at 2^32).
    pub pkt_ctr: u32,
    /// Bytes so far (wraps at 2^32).
    pub byte_ctr: u32,
    /// Interrupts (events) so far (wraps at 2^16).
    pub event_ctr: u16,
}

/// Rates over one iteration's window (`struct dim_stats`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stats {
    /// Packets per millisecond.
    pub ppms: u64,
    /// Bytes per millisecond.
    pub bpms: u64,
    /// Events per millisecond.
    pub epms: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
enum State {
    StartMeasure,
    MeasureInProgress,
    ApplyNewProfile,
}

/// Tuning direction or parking state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Tune {
    /// Parked at the best profile found; leaves when traffic changes significantly.
    ParkingOnTop,
    /// Parked after too many steps; leaves after 10 iterations.
    ParkingTired,
    /// Stepping towards more moderation.
    GoingRight,
    /// Stepping towards less moderation.
    GoingLeft,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Compare {
    Better,
    Worse,
    Same,
}

/// One queue's DIM state (`struct dim`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Dim {
    state: State,
    tune: Tune,
    profile_ix: u8,
    steps_right: u8,
    steps_left: u8,
    tired: u8,
    start: Sample,
    prev: Stats,
}

impl Default for Dim {
    fn default() -> Self {
        Dim::new()
    }
}

fn significant(val: u64, reference: u64) -> bool {
    reference != 0 && 100 * val.abs_diff(reference) / reference > 10
}

fn compare(cur: &Stats, prev: &Stats) -> Compare {
    let pick = |better: bool| {
        if better {
            Compare::Better
        } else {
            Compare::Worse
        }
    };
    if prev.bpms == 0 {
        return if cur.bpms != 0 {
            Compare::Better
        } else {
            Compare::Same
        };
    }
    if significant(cur.bpms, prev.bpms) {
        return pick(cur.bpms > prev.bpms);
    }
    if prev.ppms == 0 {
        return if cur.ppms != 0 {
            Compare::Better
        } else {
            Compare::Same
        };
    }
    if significant(cur.ppms, prev.ppms) {
        return pick(cur.ppms > prev.ppms);
    }
    if prev.epms == 0 {
        return Compare::Same;
    }
    if significant(cur.epms, prev.epms) {
        return pick(cur.epms < prev.epms);
    }
    Compare::Same
}

/// Window rates, or `None` when no time passed (`dim_calc_stats`).
pub fn calc_stats(start: &Sample, end: &Sample) -> Option<Stats> {
    let delta_us = end.time_ns.saturating_sub(start.time_ns) / 1000;
    if delta_us == 0 {
        return None;
    }
    let npkts = end.pkt_ctr.wrapping_sub(start.pkt_ctr) as u64;
    let nbytes = end.byte_ctr.wrapping_sub(start.byte_ctr) as u64;
    Some(Stats {
        ppms: (npkts * 1000).div_ceil(delta_us),
        bpms: (nbytes * 1000).div_ceil(delta_us),
        epms: (DIM_NEVENTS as u64 * 1000).div_ceil(delta_us),
    })
}

impl Dim {
    /// A queue's DIM as drivers initialise it: zeroed state (parked on top) at the default
    /// profile.
    pub fn new() -> Dim {
        Dim {
            state: State::StartMeasure,
            tune: Tune::ParkingOnTop,
            profile_ix: DEFAULT_PROFILE,
            steps_right: 0,
            steps_left: 0,
            tired: 0,
            start: Sample::default(),
            prev: Stats::default(),
        }
    }

    /// Current profile index (0 = least moderation).
    pub fn profile_ix(&self) -> u8 {
        self.profile_ix
    }

    /// Current tuning state.
    pub fn tune(&self) -> Tune {
        self.tune
    }

    /// Feeds one sample (drivers call this on every interrupt/NAPI poll). Returns the new
    /// profile index when the driver must program new moderation; DIM then ignores samples until
    /// [`Dim::profile_applied`] is called (the driver's work item).
    pub fn on_sample(&mut self, sample: Sample) -> Option<u8> {
        match self.state {
            State::ApplyNewProfile => return None,
            State::MeasureInProgress => {
                let nevents = sample.event_ctr.wrapping_sub(self.start.event_ctr);
                if nevents < DIM_NEVENTS {
                    return None;
                }
                let stats = calc_stats(&self.start, &sample)?;
                if self.decide(&stats) {
                    self.state = State::ApplyNewProfile;
                    return Some(self.profile_ix);
                }
            }
            State::StartMeasure => {}
        }
        self.start = sample;
        self.state = State::MeasureInProgress;
        None
    }

    /// The driver has programmed the profile; measuring restarts with the next sample.
    pub fn profile_applied(&mut self) {
        self.state = State::StartMeasure;
    }

    fn step(&mut self) -> Step {
        if self.tired == NUM_PROFILES * 2 {
            return Step::TooTired;
        }
        match self.tune {
            Tune::ParkingOnTop | Tune::ParkingTired => {}
            Tune::GoingRight => {
                if self.profile_ix == NUM_PROFILES - 1 {
                    return Step::OnEdge;
                }
                self.profile_ix += 1;
                self.steps_right += 1;
            }
            Tune::GoingLeft => {
                if self.profile_ix == 0 {
                    return Step::OnEdge;
                }
                self.profile_ix -= 1;
                self.steps_left += 1;
            }
        }
        self.tired += 1;
        Step::Stepped
    }

    fn exit_parking(&mut self) {
        self.tune = if self.profile_ix > 0 {
            Tune::GoingLeft
        } else {
            Tune::GoingRight
        };
        self.step();
    }

    fn on_top(&self) -> bool {
        match self.tune {
            Tune::ParkingOnTop | Tune::ParkingTired => true,
            Tune::GoingRight => self.steps_left > 1 && self.steps_right == 1,
            Tune::GoingLeft => self.steps_right > 1 && self.steps_left == 1,
        }
    }

    fn turn(&mut self) {
        match self.tune {
            Tune::ParkingOnTop | Tune::ParkingTired => {}
            Tune::GoingRight => {
                self.tune = Tune::GoingLeft;
                self.steps_left = 0;
            }
            Tune::GoingLeft => {
                self.tune = Tune::GoingRight;
                self.steps_right = 0;
            }
        }
    }

    fn park_on_top(&mut self) {
        self.steps_right = 0;
        self.steps_left = 0;
        self.tired = 0;
        self.tune = Tune::ParkingOnTop;
    }

    fn park_tired(&mut self) {
        self.steps_right = 0;
        self.steps_left = 0;
        self.tune = Tune::ParkingTired;
    }

    /// `net_dim_decision`: returns whether the profile changed.
    fn decide(&mut self, cur: &Stats) -> bool {
        let prev_tune = self.tune;
        let prev_ix = self.profile_ix;
        match self.tune {
            Tune::ParkingOnTop => {
                if compare(cur, &self.prev) != Compare::Same {
                    self.exit_parking();
                }
            }
            Tune::ParkingTired => {
                self.tired = self.tired.saturating_sub(1);
                if self.tired == 0 {
                    self.exit_parking();
                }
            }
            Tune::GoingRight | Tune::GoingLeft => {
                if compare(cur, &self.prev) != Compare::Better {
                    self.turn();
                }
                if self.on_top() {
                    self.park_on_top();
                } else {
                    match self.step() {
                        Step::OnEdge => self.park_on_top(),
                        Step::TooTired => self.park_tired(),
                        Step::Stepped => {}
                    }
                }
            }
        }
        // Parked on top, DIM keeps comparing against the stats it parked with.
        if prev_tune != Tune::ParkingOnTop || self.tune != Tune::ParkingOnTop {
            self.prev = *cur;
        }
        self.profile_ix != prev_ix
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    Stepped,
    OnEdge,
    TooTired,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds one full iteration (64 events over `window_us`) with the given throughput.
    fn iterate(d: &mut Dim, t: &mut Sample, window_us: u64, bytes: u32, pkts: u32) -> Option<u8> {
        let mut out = None;
        for i in 0..DIM_NEVENTS {
            t.time_ns += window_us * 1000 / DIM_NEVENTS as u64;
            t.event_ctr = t.event_ctr.wrapping_add(1);
            t.byte_ctr = t.byte_ctr.wrapping_add(bytes / DIM_NEVENTS as u32);
            t.pkt_ctr = t.pkt_ctr.wrapping_add(pkts / DIM_NEVENTS as u32);
            if let Some(ix) = d.on_sample(*t) {
                out = Some(ix);
                d.profile_applied();
            }
            let _ = i;
        }
        out
    }

    #[test]
    fn stats_math() {
        let a = Sample {
            time_ns: 0,
            pkt_ctr: u32::MAX - 9,
            byte_ctr: 0,
            event_ctr: 65530,
        };
        let b = Sample {
            time_ns: 2_000_000,
            pkt_ctr: 10,
            byte_ctr: 3000,
            event_ctr: 58,
        };
        let s = calc_stats(&a, &b).unwrap();
        assert_eq!(
            s,
            Stats {
                ppms: 10,
                bpms: 1500,
                epms: 32
            }
        );
        assert_eq!(calc_stats(&a, &a), None);
    }

    #[test]
    fn compare_order() {
        let s = |b, p, e| Stats {
            bpms: b,
            ppms: p,
            epms: e,
        };
        assert_eq!(compare(&s(120, 10, 10), &s(100, 10, 10)), Compare::Better);
        assert_eq!(compare(&s(105, 20, 10), &s(100, 10, 10)), Compare::Better); // packets decide
        assert_eq!(compare(&s(100, 10, 5), &s(100, 10, 10)), Compare::Better); // fewer events
        assert_eq!(compare(&s(100, 10, 20), &s(100, 10, 10)), Compare::Worse);
        assert_eq!(compare(&s(100, 10, 10), &s(100, 10, 10)), Compare::Same);
        assert_eq!(compare(&s(5, 1, 1), &s(0, 0, 0)), Compare::Better);
        assert_eq!(compare(&s(0, 0, 0), &s(0, 0, 0)), Compare::Same);
    }

    #[test]
    fn first_iteration_leaves_parking_towards_less_moderation() {
        let mut d = Dim::new();
        let mut t = Sample::default();
        // The first sample only starts the window.
        assert_eq!(d.on_sample(t), None);
        assert_eq!(iterate(&mut d, &mut t, 1000, 1_000_000, 1000), Some(0));
        assert_eq!(d.tune(), Tune::GoingLeft);
        assert_eq!(d.profile_ix(), 0);
    }

    #[test]
    fn flat_traffic_oscillates_then_parks_tired() {
        // With stats that never change, no step is "better": DIM turns every iteration between
        // two neighbouring profiles until it has made 10 steps, then parks tired for 10
        // iterations (the kernel's behaviour, not a bug of this copy).
        let mut d = Dim::new();
        let mut t = Sample::default();
        d.on_sample(t);
        let mut seen_tired = false;
        for _ in 0..40 {
            iterate(&mut d, &mut t, 1000, 1_000_000, 1000);
            assert!(d.profile_ix() <= 1);
            seen_tired |= d.tune() == Tune::ParkingTired;
        }
        assert!(seen_tired);
    }

    #[test]
    fn climbs_right_while_more_moderation_pays() {
        // A queue whose throughput grows with moderation (e.g. a platform that suffers from
        // interrupts): DIM walks to the most moderated profile and parks there.
        let mut d = Dim::new();
        let mut t = Sample::default();
        d.on_sample(t);
        let bytes = |ix: u8| 1_000_000 * (4 + ix as u32) / 4;
        for _ in 0..40 * DIM_NEVENTS as u32 {
            // Traffic responds to the profile in force at each interrupt.
            t.time_ns += 1_000_000 / DIM_NEVENTS as u64;
            t.event_ctr = t.event_ctr.wrapping_add(1);
            t.byte_ctr = t
                .byte_ctr
                .wrapping_add(bytes(d.profile_ix()) / DIM_NEVENTS as u32);
            t.pkt_ctr = t.pkt_ctr.wrapping_add(1000 / DIM_NEVENTS as u32);
            if d.on_sample(t).is_some() {
                d.profile_applied();
            }
        }
        assert_eq!(d.profile_ix(), NUM_PROFILES - 1);
        assert_eq!(d.tune(), Tune::ParkingOnTop);
        for _ in 0..10 {
            assert_eq!(iterate(&mut d, &mut t, 1000, bytes(4), 1000), None);
        }
        // A significant change (traffic halves) makes it leave.
        let mut moved = false;
        for _ in 0..3 {
            moved |= iterate(&mut d, &mut t, 1000, bytes(4) / 2, 1000).is_some();
        }
        assert!(moved);
    }

    #[test]
    fn samples_ignored_until_applied() {
        let mut d = Dim::new();
        let mut t = Sample::default();
        d.on_sample(t);
        for _ in 0..DIM_NEVENTS {
            t.time_ns += 10_000;
            t.event_ctr += 1;
            t.byte_ctr += 1000;
            t.pkt_ctr += 1;
            if d.on_sample(t).is_some() {
                break;
            }
        }
        for _ in 0..200 {
            t.time_ns += 10_000;
            t.event_ctr += 1;
            assert_eq!(d.on_sample(t), None);
        }
    }
}
