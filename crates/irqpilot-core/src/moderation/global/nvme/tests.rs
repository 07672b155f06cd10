use super::*;

fn ctrl(name: &str, rate: f64, allowance: Option<f64>, work: f64, q: f64) -> CtrlInput {
    CtrlInput {
        name: name.into(),
        rate,
        allowance,
        completions: Some(work),
        in_flight_per_vector: Some(q),
        wait_us: None,
    }
}

#[test]
fn threshold_never_stays_above_the_reads_in_flight() {
    let mut g = NvmeGrid::default();
    // `DWELL + 1` periods of a closed loop of `q` reads per vector: past that depth every
    // read waits for the timer and the completions halve; such a step is undone.
    let mut run = |allowance: f64, q: f64| {
        for _ in 0..=DWELL {
            let t = g.threshold("nvme0") as f64;
            let work = if t > q { 5e5 } else { 1e6 };
            let rate = work / t;
            g.update(
                &[ctrl("nvme0", rate, Some(allowance), work, q)],
                rate,
                9e5,
                false,
                false,
            );
        }
        g.threshold("nvme0")
    };
    // 1 read in flight per vector: no threshold can help without making reads wait.
    assert_eq!(run(5e5, 1.0), 1);
    // 8 in flight: the threshold for half the rate is 2; for a tenth, capped at 6.
    assert_eq!(run(5e5, 8.0), 2);
    assert_eq!(run(1e5, 8.0), 6);
    // The load drops to 2 in flight: the threshold follows at once.
    g.update(
        &[ctrl("nvme0", 1e5, None, 1e5, 2.0)],
        1e5,
        9e5,
        false,
        false,
    );
    assert_eq!(g.threshold("nvme0"), 1);
}

#[test]
fn controllers_land_between_grid_points() {
    let mut g = NvmeGrid::default();
    // Four controllers each at 1 M completions/s, allowed 400 k interrupts/s each:
    // 2.5 per interrupt. All at 3 would give 1.33 M, all at 2 give 2 M > 1.6 M allowed.
    let cs: Vec<CtrlInput> = (0..4)
        .map(|i| ctrl(&format!("nvme{i}"), 1e6, Some(4e5), 1e6, 64.0))
        .collect();
    g.update(&cs, 4e6, 1.5e6, false, false);
    let ts: Vec<u16> = (0..4).map(|i| g.threshold(&format!("nvme{i}"))).collect();
    let rate: f64 = ts.iter().map(|t| 1e6 / *t as f64).sum();
    assert!(rate <= 1.6e6, "{ts:?} {rate}");
    assert!(ts.contains(&2) && ts.contains(&3), "{ts:?}");
}

#[test]
fn no_limit_cycle_between_two_grid_points() {
    // One controller, 1 M completions/s, target 480 k: t = 2 gives 500 k (over), t = 3
    // gives 333 k (under the 10% band, so the loop relaxes). Stepping back to 2 would be
    // over again; the prediction (333 k x 3 / 2) says so, and the threshold stays at 3.
    let mut g = NvmeGrid::default();
    let target = 480_000.0;
    let aim = 0.95 * target;
    let mut ts = Vec::new();
    for _ in 0..200 {
        let t = g.threshold("nvme0") as f64;
        let rate = 1e6 / t;
        let allowance = (rate > target).then_some(aim);
        let relax = rate < 0.9 * target;
        g.update(
            &[ctrl("nvme0", rate, allowance, 1e6, 32.0)],
            rate,
            aim,
            relax,
            false,
        );
        ts.push(g.threshold("nvme0"));
    }
    let changes = ts.windows(2).filter(|w| w[0] != w[1]).count();
    assert!(changes <= 2, "{changes} changes: {:?}", &ts[..40]);
    assert_eq!(*ts.last().unwrap(), 3);
}

/// Five controllers whose busy vectors reap several completions an interrupt by themselves
/// (1.45 at threshold 1, 2.9 at 2 with 3 reads in flight), their natural rate 965 k/s under a
/// 1 M/s target that the load's own swings cross now and then (held-out gen-122-22). Cutting
/// the 2-5% over needs one controller at 2, not four; and a controller sent back to 1 that has
/// to come back up soon after learns its floor there. Before: the plan counted one completion
/// an interrupt at threshold 1, put 4 of 5 controllers at 2 (the rate fell to 0.57 of the
/// target), the relax steps sent them all back to 1 at once, and the cycle repeated every 10
/// periods (ripple 0.68 in the twin).
#[test]
fn busy_vectors_that_reap_several_by_themselves_are_not_cut_in_half_for_a_few_percent() {
    let mut g = NvmeGrid::default();
    let target = 1e6;
    let aim = 0.95 * target;
    let names: Vec<String> = (0..5).map(|i| format!("nvme{i}")).collect();
    let carry = |t: u16| if t >= 2 { 2.9 } else { 1.45 };
    let mut totals = Vec::new();
    let mut changes = 0;
    let mut before: Vec<u16> = vec![1; 5];
    for p in 0..300u32 {
        // The load swings +-5% over 7 periods.
        let work = 280_000.0 * (1.0 + 0.05 * (f64::from(p) * 0.9).sin());
        let rates: Vec<f64> = names.iter().map(|n| work / carry(g.threshold(n))).collect();
        let total: f64 = rates.iter().sum();
        let over = total > target;
        let cs: Vec<CtrlInput> = names
            .iter()
            .zip(&rates)
            .map(|(n, &r)| ctrl(n, r, over.then_some(r * aim / total), work, 3.0))
            .collect();
        g.update(&cs, total, aim, total < 0.9 * target, false);
        let now: Vec<u16> = names.iter().map(|n| g.threshold(n)).collect();
        if p >= 30 {
            totals.push(total);
            changes += now.iter().zip(&before).filter(|(a, b)| a != b).count();
        }
        before = now;
    }
    let least = totals.iter().copied().fold(f64::INFINITY, f64::min);
    assert!(
        least >= 0.7 * target,
        "the rate fell to {:.2} of the target",
        least / target
    );
    assert!(changes <= 4, "{changes} threshold changes over 270 periods");
}

#[test]
fn a_floor_learned_under_a_lower_target_is_forgotten_when_it_rises() {
    // One controller whose host completes more when it interrupts more (CPUs freed of
    // waiting: 1 M completions/s at threshold 3 and above, 1.2 M/s at 2 or 1). Under a
    // 550 k/s target, threshold 3 makes 333 k/s; one grid point down is predicted at 500 k/s
    // and makes 600 k/s, over the target: the step is undone and a floor learned at 3. Then
    // the knee search raises the target to 3 M/s, two and a half times the controller's own
    // rate: nothing needs holding, and the threshold goes back to 1. A floor that outlived
    // the raise kept it at 3 for as long as the load stayed (held-out gen-30-28: 2 of 14
    // controllers at 3 under a 3.05 M/s target, 2.42 M/s against 2.62 M/s unheld).
    let work = |t: u16| if t <= 2 { 1.2e6 } else { 1e6 };
    let mut g = NvmeGrid::default();
    let mut run = |target: f64, periods: usize| {
        let aim = 0.95 * target;
        let mut ts = Vec::new();
        for _ in 0..periods {
            let t = g.threshold("nvme0");
            let rate = work(t) / f64::from(t);
            let allowance = (rate > target).then_some(aim);
            let relax = rate < 0.9 * target;
            g.update(
                &[ctrl("nvme0", rate, allowance, work(t), 32.0)],
                rate,
                aim,
                relax,
                false,
            );
            ts.push(g.threshold("nvme0"));
        }
        ts
    };
    let held = run(550_000.0, 200);
    let changes = held.windows(2).filter(|w| w[0] != w[1]).count();
    assert_eq!(*held.last().unwrap(), 3, "{held:?}");
    assert!(changes <= 4, "the floor stops the cycle: {held:?}");
    let raised = run(3e6, 4 * DWELL as usize);
    assert_eq!(
        *raised.last().unwrap(),
        1,
        "a floor learned under 550 k/s held it under 3 M/s: {raised:?}"
    );
}

#[test]
fn a_raised_target_is_reached_in_one_period_between_grid_points() {
    // Eleven controllers at 1.03 M completions/s each, held at threshold 12 under a 1 M/s
    // target (0.94 M/s). The knee search raises the target 15%: the band is now
    // 1.035-1.15 M/s. Every controller one grid point down (11) gives 1.031 M/s, still
    // under it; the rest came one grid point per controller every `DWELL` periods, and the
    // search waited for it at every step. Some at 10, the others at 11, land in the band at
    // once.
    let mut g = NvmeGrid::default();
    let names: Vec<String> = (0..11).map(|i| format!("nvme{i}")).collect();
    let work = 1.031e6;
    let held: Vec<CtrlInput> = names
        .iter()
        .map(|n| ctrl(n, 2e5, Some(work / 12.0), work, 64.0))
        .collect();
    g.update(&held, 11.0 * 2e5, 0.95e6, false, false);
    assert!(names.iter().all(|n| g.threshold(n) == 12));
    let rate = work / 12.0;
    let under: Vec<CtrlInput> = names
        .iter()
        .map(|n| ctrl(n, rate, None, work, 64.0))
        .collect();
    let (target, h) = (1.15e6, 0.1);
    let aim = target * (1.0 - h / 2.0);
    g.update(&under, 11.0 * rate, aim, true, true);
    let total: f64 = names.iter().map(|n| work / g.threshold(n) as f64).sum();
    assert!(
        total >= target * (1.0 - h) && total <= aim,
        "{total:.0}/s: {:?}",
        names.iter().map(|n| g.threshold(n)).collect::<Vec<_>>()
    );
}

#[test]
fn a_threshold_past_the_reads_in_flight_is_kept_when_it_buys_completions() {
    // A host that submits reads as fast as its CPUs allow (held-out gen-6-23: 16 CPUs, 80
    // NVMe vectors beside a 40G NIC): every completion interrupts, and the reads in flight
    // per vector are 2 (bound 1) because the CPUs are busy with the interrupts. The CPUs
    // share their time between a read's own work and its interrupt (as costly here), so
    // the completions are `C / (1 + 1/t)`: each grid point buys some; the reads in flight
    // rise a little (0.5 per grid point, never enough for the bound). The bound alone kept
    // the threshold at 1 for ever (3 M interrupts/s against a 1.2 M/s target); one grid
    // point past it at a time, the controller reaches its allowance.
    let target = 1.2e6;
    let t = f64::from(drive_one(
        100,
        |_| target,
        |t| 2.0 + 0.5 * (t - 1.0),
        |_, t| 6e6 / (1.0 + 1.0 / f64::from(t)),
    ));
    let rate = 6e6 / (1.0 + 1.0 / t) / t;
    assert!(rate <= target, "threshold {t}: {rate:.0}/s");
}

/// One controller over `periods` periods: held to `target(period)`, `q(t)` reads in flight per
/// vector and `work(period, t)` completions/s at threshold `t`, one interrupt per threshold's
/// worth. Returns the last threshold.
fn drive_one(
    periods: u32,
    target: impl Fn(u32) -> f64,
    q: impl Fn(f64) -> f64,
    work: impl Fn(u32, u16) -> f64,
) -> u16 {
    let mut g = NvmeGrid::default();
    for period in 0..periods {
        let (target, t) = (target(period), g.threshold("nvme0"));
        let aim = 0.95 * target;
        let w = work(period, t);
        let rate = w / f64::from(t);
        let allowance = (rate > target).then_some(aim);
        g.update(
            &[ctrl("nvme0", rate, allowance, w, q(f64::from(t)))],
            rate,
            aim,
            rate < 0.9 * target,
            false,
        );
    }
    g.threshold("nvme0")
}

/// One controller of a CPU-bound host (the first test's plant: `6 M / (1 + 1/t)` reads/s, 3
/// reads in flight per vector and `more` reads more per grid point: bound 2), each period's
/// work scaled by `swing(period)`, held to a 2.5 M/s target for 10 periods (threshold 2,
/// within its bound: the steps past it are judged on a measured history) and to 0.65 M/s for
/// 190 more; each grid point buys `gain(t)` more than the plant's (1 for its own). Returns
/// the last threshold.
fn cpu_bound_drive(swing: impl Fn(u32) -> f64, more: f64, gain: impl Fn(u16) -> f64) -> u16 {
    drive_one(
        200,
        |p| if p < 10 { 2.5e6 } else { 0.65e6 },
        |t| 3.0 + more * (t - 1.0),
        |p, t| 6e6 / (1.0 + 1.0 / f64::from(t)) * gain(t) * swing(p),
    )
}

#[test]
fn steps_past_the_bound_that_buy_less_each_go_on_while_their_gain_is_past_the_noise() {
    // From 6 to 9 each grid point buys 2.0%, 1.6% and 1.25%: under the 3% bar, which
    // stopped the steps at 6 (0.86 M/s against a 0.65 M/s target; held-out gen-42-18: 104
    // CPU-bound vectors at 2.9 M/s and 0.97 of GSIM's reads). The plant does not swing: a
    // step's gain is measured past its noise, and the steps go on to 9 (0.60 M/s).
    assert!(cpu_bound_drive(|_| 1.0, 0.5, |_| 1.0) >= 9);
}

#[test]
fn a_step_past_the_bound_is_not_kept_on_a_gain_inside_its_noise() {
    // A closed loop of 3 reads per vector whose work swings 1.4% either way each period; the
    // steps buy nothing past 2: the dwell's last periods against a trough before the step
    // read as up to +1.9%, so the bar is the swing's (a fixed 1% kept such steps), whichever
    // period of the swing the step starts in.
    for phase in 0..2 {
        let swing = |p: u32| if (p + phase) % 2 == 0 { 1.014 } else { 0.986 };
        let t = cpu_bound_drive(swing, 0.0, |t| (1.0 + 1.0 / f64::from(t)) / 2.0);
        assert_eq!(t, 2, "phase {phase}");
    }
}

#[test]
fn a_step_judged_on_a_baseline_still_moving_is_asked_once_more() {
    // The first test's CPU-bound host (each grid point from 6 to 9 buys 2.0%, 1.6% and
    // 1.25%), its work swinging 0.8% either way for periods 28-35 (another load passing):
    // the step from 6 to 7 starts in the swing, whose spread raises its bar to 3%, and its
    // 2.0% comes back under it. Marked as buying nothing, the controller stayed at 6 (0.86
    // M/s against a 0.65 M/s target) for good; asked once more from a baseline at the bound,
    // the step is kept and the steps reach 9 (0.60 M/s).
    let swing = |p: u32| match p {
        28..36 if p % 2 == 0 => 1.008,
        28..36 => 0.992,
        _ => 1.0,
    };
    let t = cpu_bound_drive(swing, 0.5, |_| 1.0);
    assert!(t >= 9, "threshold {t}");
}

/// One controller whose step past its bound buys completions (a host freed of interrupts:
/// 3 M/s at threshold 1, 4 M/s at 2; at 3 every read waits for the timer), over its
/// target throughout. `probe`: the periods in which the knee search has moved the target
/// 25% up and the platform, past its knee, completes 40% less at any threshold. Returns
/// the grid after 100 periods.
fn step_past_the_bound_across_a_probe(probe: std::ops::Range<u32>) -> NvmeGrid {
    let mut g = NvmeGrid::default();
    let target = 1e6;
    for period in 1..=100 {
        let t = g.threshold("nvme0");
        let probing = probe.contains(&period);
        let aim = 0.95 * target * if probing { 1.25 } else { 1.0 };
        let work = match t {
            1 => 3e6,
            2 => 4e6,
            _ => 1e6,
        } * if probing { 0.6 } else { 1.0 };
        let rate = work / f64::from(t);
        g.update(
            &[ctrl("nvme0", rate, Some(aim), work, 1.4)],
            rate,
            aim,
            false,
            false,
        );
    }
    g
}

#[test]
fn a_knee_probe_during_a_step_past_the_bound_does_not_mark_it_as_tried() {
    // Undisturbed, the step to 2 is kept (4 M against 3 M) and the one to 3 undone.
    assert_eq!(
        step_past_the_bound_across_a_probe(0..0).threshold("nvme0"),
        2
    );
    // A probe over the end of the first step's dwell: the 40% the platform lost is not the
    // step's doing. Judged on it, the step was undone and marked as tried at this load, and
    // the controller stayed at 1 (3 M interrupts/s against a 1 M/s target) for good.
    assert_eq!(
        step_past_the_bound_across_a_probe(5..7).threshold("nvme0"),
        2
    );
}

#[test]
fn a_proven_grid_point_outlives_a_probe_that_lowered_the_threshold() {
    let mut g = step_past_the_bound_across_a_probe(0..0);
    // The knee search raises the target far above the load: the threshold goes to what
    // its share of the new aim needs (1).
    let aim = 1e7;
    g.update(&[ctrl("nvme0", 2e6, None, 4e6, 1.4)], 2e6, aim, true, true);
    assert_eq!(g.threshold("nvme0"), 1);
    // The probe is rejected: back over target, the controller returns to the grid point
    // it proved at this load at once, without another trial of `DWELL` periods.
    let aim = 0.95e6;
    g.update(
        &[ctrl("nvme0", 3e6, Some(aim), 3e6, 1.4)],
        3e6,
        aim,
        false,
        false,
    );
    assert_eq!(g.threshold("nvme0"), 2);
    assert!(g.ctrls.get("nvme0").is_some_and(|s| s.past.is_none()));
}

#[test]
fn a_threshold_past_the_reads_in_flight_is_undone_when_it_buys_nothing() {
    // A closed loop of 2 reads per vector: whatever the threshold, 2 are in flight (bound
    // 1). One grid point past it, each read waits for the other (or the 100 us timer) and
    // the work falls; the step is undone after `DWELL` periods and not tried again while
    // the work is what it was.
    let (t, past) = one_drive_over_target(2.0, |t| if t > 1 { 1.5e6 } else { 3e6 });
    assert_eq!(t, 1);
    assert!(past as u64 <= DWELL + 1, "{past} periods past the bound");
}

#[test]
fn a_paced_load_repaying_what_a_failed_step_held_is_not_a_new_load() {
    // A rate-limited job of 1 read per vector: one grid point past the bound makes every
    // read wait the timer and the work halves; undone, the job repays the reads it owes at
    // once (two periods at half as much again as its rate) and is back at its rate. That
    // wake is the step's own, not a new load: the step is not tried again (it was, at once,
    // and cycled for the whole run: held-out gen-142-11, p99 6.8x `none`).
    let mut owed = 0u32;
    let (t, past) = one_drive_over_target(1.0, |t| {
        if t > 1 {
            owed = 2;
            1.5e6
        } else if owed > 0 {
            owed -= 1;
            4.5e6
        } else {
            3e6
        }
    });
    assert_eq!(t, 1);
    assert!(past as u64 <= DWELL + 1, "{past} periods past the bound");
}

/// 300 periods of one controller over a 1 M/s target, `q` reads in flight per vector, whose
/// completions at threshold `t` are `work(t)`. Returns the last threshold and the periods
/// spent past the bound.
fn one_drive_over_target(q: f64, mut work: impl FnMut(u16) -> f64) -> (u16, usize) {
    let mut g = NvmeGrid::default();
    let target = 1e6;
    let aim = 0.95 * target;
    let mut past = 0;
    for _ in 0..300 {
        let t = g.threshold("nvme0");
        let w = work(t);
        let rate = w / t as f64;
        past += usize::from(t > 1);
        let allowance = (rate > target).then_some(aim);
        g.update(
            &[ctrl("nvme0", rate, allowance, w, q)],
            rate,
            aim,
            rate < 0.9 * target,
            false,
        );
    }
    (g.threshold("nvme0"), past)
}

/// Eight controllers of closed loops at iodepth 4 (3.6 reads in flight per vector: bound
/// 2) beside a NIC held at its ceiling (150 k/s), on a platform whose DMA efficiency is
/// `knee / rate` past `knee` (every device's work scales with it; `None`: healthy). One
/// grid point past the bound makes reads wait for each other (27% less), two complete the
/// queue's reads together, three make every read wait for the timer. Returns the
/// thresholds after 100 periods, the last rate, and the periods spent past the bound.
fn drives_beside_a_nic(knee: Option<f64>) -> (Vec<u16>, f64, usize) {
    let names: Vec<String> = (0..8).map(|i| format!("nvme{i}")).collect();
    let (target, nic_rate) = (0.9e6, 1.5e5);
    let aim = 0.95 * target;
    let mut g = NvmeGrid::default();
    let (mut rate, mut past) = (0.0, 0);
    for _ in 0..100 {
        let ts: Vec<f64> = names.iter().map(|n| g.threshold(n) as f64).collect();
        // Threshold 4 = the reads per queue: each batch completes together. Past it,
        // every read waits for the timer.
        let base = |t: f64| match t as u16 {
            0..=2 => 4e5,
            3 => 2.9e5,
            4 => 3.9e5,
            _ => 1.3e5,
        };
        // The rate the platform settles at: efficiency and rate depend on each other.
        let eff_at = |r: f64| knee.map_or(1.0, |k| (k / r).min(1.0));
        rate = nic_rate + ts.iter().map(|&t| base(t) / t).sum::<f64>();
        for _ in 0..50 {
            let r = nic_rate + ts.iter().map(|&t| base(t) * eff_at(rate) / t).sum::<f64>();
            rate = (rate + r) / 2.0;
        }
        let eff = eff_at(rate);
        past += ts.iter().filter(|&&t| t > 2.0).count();
        let inputs: Vec<CtrlInput> = names
            .iter()
            .zip(&ts)
            .map(|(n, &t)| {
                let work = base(t) * eff;
                let allowance = (rate > target).then_some((aim - nic_rate) / 8.0);
                ctrl(n, work / t, allowance, work, 3.6)
            })
            .collect();
        g.set_beside(1.25e9 * eff, true);
        g.update(&inputs, rate, aim, rate < 0.9 * target, false);
    }
    (names.iter().map(|n| g.threshold(n)).collect(), rate, past)
}

#[test]
fn a_threshold_past_the_reads_in_flight_is_kept_when_it_buys_the_nic_beside_it() {
    // Past the knee (1 M/s) at threshold 2: 1.34 M/s, efficiency 0.75. One grid point
    // past the bound costs each controller 3% of its completions and gives the NIC its
    // DMA back (+34%): kept, and the platform is back under its knee. The next (4) buys
    // completions; the one after (5) costs two thirds of them and is undone, to 4 (the
    // fall it caused is no new load that would void what was proven).
    let (ts, rate, _) = drives_beside_a_nic(Some(1e6));
    assert!(
        ts.iter().all(|&t| t >= 3),
        "thresholds {ts:?} at {rate:.0}/s"
    );
    assert!(rate <= 1e6, "{rate:.0}/s past the knee");
}

#[test]
fn a_threshold_past_the_reads_in_flight_beside_a_nic_is_undone_on_a_healthy_platform() {
    // The same drives on a healthy platform: the step costs the drives 27% and buys the
    // NIC nothing; undone within `DWELL` periods and not tried again at this load.
    let (ts, rate, past) = drives_beside_a_nic(None);
    assert!(
        ts.iter().all(|&t| t == 2),
        "thresholds {ts:?} at {rate:.0}/s"
    );
    assert!(
        past as u64 <= 8 * (DWELL + 1),
        "{past} controller-periods past the bound"
    );
}

/// Twenty controllers of 7 vectors at iodepth 2 (1.4 reads in flight per vector: bound 1)
/// beside a NIC whose queues are held at their ceiling (256 k/s), on a platform whose DMA
/// efficiency past its knee starves the NIC (held-out gen-13-40, knee 0.72 M/s): the NIC
/// moves `min(line, line x 2.2 M / rate)`. Threshold 2 takes a vector's two reads
/// together (no loss); 3 makes every read wait for the 100 us timer (the drives lose 63%).
/// `held`: the NIC pays its delay ceiling; `knee`: false for a healthy platform. Returns
/// the thresholds after 300 periods, the NIC's share of its line rate and the drives'
/// completions.
fn timer_held_drives_beside_a_nic(knee: bool, held: bool) -> (Vec<u16>, f64, f64) {
    let names: Vec<String> = (0..20).map(|i| format!("nvme{i:02}")).collect();
    let (target, nic_rate, line) = (1e6, 2.56e5, 1.7e10);
    let aim = 0.95 * target;
    let mut g = NvmeGrid::default();
    let (mut nic, mut work) = (0.0, 0.0);
    for _ in 0..300 {
        let ts: Vec<u16> = names.iter().map(|n| g.threshold(n)).collect();
        // Completions and interrupts per controller at threshold `t`.
        let at = |t: u16| match t {
            1 => (3e5, 3e5),
            2 => (3e5, 1.5e5),
            _ => (1.1e5, 5.5e4),
        };
        let rate = nic_rate + ts.iter().map(|&t| at(t).1).sum::<f64>();
        nic = if knee {
            (line * 2.2e6 / rate).min(line)
        } else {
            line
        };
        work = ts.iter().map(|&t| at(t).0).sum::<f64>();
        let over = rate > target;
        let inputs: Vec<CtrlInput> = names
            .iter()
            .zip(&ts)
            .map(|(n, &t)| {
                let (w, r) = at(t);
                ctrl(n, r, over.then_some((aim - nic_rate) / 20.0), w, 1.4)
            })
            .collect();
        g.set_beside(nic, held);
        g.update(&inputs, rate, aim, rate < 0.9 * target, false);
    }
    let ts = names.iter().map(|n| g.threshold(n)).collect();
    (ts, nic / line, work)
}

#[test]
fn drives_are_held_by_their_timer_while_that_buys_the_nic_at_its_ceiling() {
    // Judged by the relative changes alone, threshold 2 everywhere: 3.26 M/s, the NIC at
    // 0.68 of its line (the step to 3 costs the drives 63% and gives the NIC 48%: undone).
    // Every controller at 3: the NIC at its line, the drives at 2.2 M. A group at a time,
    // as long as the NIC gains: the NIC at its line, the drives keep more than all at 3.
    let (ts, nic, work) = timer_held_drives_beside_a_nic(true, true);
    assert!(nic >= 0.97, "NIC at {nic:.2} of its line: {ts:?}");
    assert!(work >= 1.2 * 20.0 * 1.1e5, "drives {work:.0}/s: {ts:?}");
}

#[test]
fn drives_are_not_held_by_their_timer_for_a_nic_that_gains_nothing() {
    // A healthy platform: the NIC has its line whatever the drives do; the timer's wait
    // buys nothing and no controller stays there.
    let (ts, nic, work) = timer_held_drives_beside_a_nic(false, true);
    assert!(ts.iter().all(|&t| t <= 2), "{ts:?}");
    assert!(nic >= 0.99 && work >= 20.0 * 3e5 * 0.99, "{nic} {work}");
    // Nor for a NIC not held at its ceiling (it has delay left to give).
    let (ts, ..) = timer_held_drives_beside_a_nic(true, false);
    assert!(ts.iter().all(|&t| t <= 2), "{ts:?}");
}

/// Completions per interrupt at threshold `t` and aggregation time `units` for reads that
/// come too far apart to fill it before the timer fires: only part of each threshold step
/// is used, and a longer time fills more of it.
fn timer_bound_batch(t: u16, units: u8) -> f64 {
    (1.0 + 0.45 * f64::from(units.max(1)) * (f64::from(t) - 1.0)).min(f64::from(t))
}

/// Four controllers of 0.5 M completions/s each at 64 reads in flight per vector (bound
/// 48), allowed 475 k interrupts/s together, on a platform whose DMA slows every
/// completion past `knee` (`knee / rate`). `carried(t, units)`: what an interrupt carries.
/// Returns the rates of every period, the last thresholds and the last aggregation times.
fn timer_plant(knee: f64, carried: impl Fn(u16, u8) -> f64) -> (Vec<f64>, Vec<u16>, Vec<u8>) {
    let names: Vec<String> = (0..4).map(|i| format!("nvme{i}")).collect();
    let target = 5e5;
    let aim = 0.95 * target;
    let mut g = NvmeGrid::with_ceiling(250);
    let mut rates = Vec::new();
    for _ in 0..100 {
        let per_int: Vec<f64> = names
            .iter()
            .map(|n| carried(g.threshold(n), g.time_units(n)))
            .collect();
        let eff_at = |r: f64| (knee / r.max(1.0)).min(1.0);
        let mut rate: f64 = per_int.iter().map(|c| 5e5 / c).sum();
        for _ in 0..60 {
            let r: f64 = per_int.iter().map(|c| 5e5 * eff_at(rate) / c).sum();
            rate = 0.5 * (rate + r);
        }
        let work = 5e5 * eff_at(rate);
        rates.push(rate);
        let inputs: Vec<CtrlInput> = names
            .iter()
            .zip(&per_int)
            .map(|(n, c)| {
                ctrl(
                    n,
                    work / c,
                    (rate > target).then_some(aim / 4.0),
                    work,
                    64.0,
                )
            })
            .collect();
        g.update(&inputs, rate, aim, rate < 0.9 * target, false);
    }
    (
        rates,
        names.iter().map(|n| g.threshold(n)).collect(),
        names.iter().map(|n| g.time_units(n)).collect(),
    )
}

#[test]
fn a_threshold_the_timer_cuts_short_gets_the_longer_time_and_holds() {
    // At one unit an interrupt at threshold t carries 1 + 0.45 (t - 1) completions, not t
    // (held-out gen-11-20: thresholds 16-17 carried 7, the rate stayed 1.5x its target
    // for good). Planned from `completions / allowance` alone, every threshold stops at 5
    // and the rate near 600 k/s, past the 500 k/s knee. Over its allowance for `STUCK`
    // periods with interrupts carrying under `TIMER_CUT_FILL` of their threshold, each
    // controller takes the longer time (two units), which buys completions (the platform
    // is back under its knee) and is kept; planned from what an interrupt carries, the
    // rate holds in the band.
    let (rates, ts, units) = timer_plant(5e5, timer_bound_batch);
    let rate = *rates.last().unwrap();
    assert!(units.iter().all(|&u| u == 2), "times {units:?}");
    assert!(
        (0.8 * 5e5..=5e5).contains(&rate),
        "thresholds {ts:?} at {rate:.0}/s"
    );
    // Held, not cycling: the last 20 periods within the band's width.
    let (lo, hi) = rates[80..]
        .iter()
        .fold((f64::INFINITY, 0.0f64), |(a, b), &r| (a.min(r), b.max(r)));
    assert!(hi - lo <= 0.1 * 5e5, "{lo:.0}-{hi:.0}/s at the end");
}

#[test]
fn a_threshold_bound_controller_keeps_one_unit() {
    // Every interrupt carries its threshold (the built-in heavy NVMe rows): planned from
    // `completions / allowance`, the rate is in the band within a period or two, and the
    // time stays at one unit (a longer one would only make the reads of a partial batch
    // wait longer).
    let (rates, ts, units) = timer_plant(5e5, |t, _| f64::from(t.max(1)));
    let rate = *rates.last().unwrap();
    assert!(units.iter().all(|&u| u == 1), "times {units:?}");
    assert!(rate <= 5e5, "thresholds {ts:?} at {rate:.0}/s");
}

#[test]
fn the_longer_time_is_the_longest_the_latency_ceiling_allows() {
    // 100 us units, at least one: only a controller on the longer time uses more than
    // one, and under 200 us of ceiling there is no longer time.
    assert_eq!(NvmeGrid::with_ceiling(250).max_units, 2);
    assert_eq!(NvmeGrid::with_ceiling(50).max_units, 1);
    assert_eq!(NvmeGrid::with_ceiling(1000).max_units, 10);
    assert_eq!(NvmeGrid::with_ceiling(250).time_units("nvme0"), 1);
}

#[test]
fn unknown_reads_in_flight_means_no_coalescing_and_a_note() {
    let mut g = NvmeGrid::default();
    let mut c = ctrl("nvme0", 1e6, Some(5e5), 1e6, 8.0);
    c.in_flight_per_vector = None;
    let notes = g.update(&[c], 1e6, 9e5, false, false);
    assert_eq!(g.threshold("nvme0"), 1);
    assert!(notes[0].contains("diskstats"), "{notes:?}");
}

/// Runs one controller with 1 M completions/s for `periods` periods, over its allowance
/// (50 k/s: 20 completions an interrupt) in three periods of four and just under target in the
/// fourth, as the fast loop holds a rate at its band; the reads in flight per vector and what
/// an interrupt carries follow from `plant(t)`. Returns the thresholds it ran at.
fn run_held(g: &mut NvmeGrid, periods: usize, plant: impl Fn(f64) -> (f64, f64)) -> Vec<u16> {
    let work = 1e6;
    let mut ts = Vec::new();
    for i in 0..periods {
        let t = g.threshold("nvme0") as f64;
        let (q, carried) = plant(t);
        let rate = work / carried;
        let allowance = (i % 4 != 3).then_some(5e4);
        g.update(
            &[ctrl("nvme0", rate, allowance, work, q)],
            rate,
            9e5,
            false,
            false,
        );
        ts.push(g.threshold("nvme0"));
    }
    ts
}

#[test]
fn a_threshold_its_interrupts_fill_is_not_talked_down_by_the_waits_it_adds() {
    // A host that submits regardless of completions (CPU-bound, not a closed loop): its reads
    // in flight are the load's own 8 per vector plus the half batch a threshold keeps waiting
    // (Little's law), and every interrupt carries its full threshold. Twenty in a batch are
    // reached, never cut by the timer; yet three quarters of the reads in flight at 20 is 13,
    // at 13 it is 10, and so on down to 9, a rate 2.2x the allowance (held-out gen-41-1: 24
    // drives beside a NIC past a 0.88 M/s knee, held at 1.47 M/s for good, the NIC at 0.67 of
    // GSIM's throughput).
    let mut g = NvmeGrid::default();
    // The arrival: a collapse past the knee keeps 40 reads in flight for a moment.
    run_held(&mut g, 6, |t| (40.0, t));
    assert_eq!(g.threshold("nvme0"), 20);
    let ts = run_held(&mut g, 200, |t| (8.0 + (t - 1.0) / 2.0, t));
    let low = ts[100..].iter().min().copied().unwrap();
    assert!(low >= 19, "threshold fell to {low}: {:?}", &ts[..40]);
}

#[test]
fn a_threshold_the_timer_cuts_still_follows_the_reads_in_flight() {
    // A closed loop of 8 reads per vector: a threshold past them is never reached, each
    // interrupt carries the 8 the timer finds. The threshold set at the arrival's 40 in flight
    // goes back to three quarters of 8 once the fill is measured.
    let mut g = NvmeGrid::default();
    run_held(&mut g, 6, |t| (40.0, t));
    assert_eq!(g.threshold("nvme0"), 20);
    let ts = run_held(&mut g, 40, |t| (8.0, t.min(8.0)));
    assert!(ts[20..].iter().all(|&t| t <= 6), "{ts:?}");
}

/// Twenty controllers of one vector each at one read in flight (iodepth 1), held at threshold
/// 2 by a proven step past their bound: every read waits the 100 us timer (119 us in flight,
/// 42 k completions/s each); at threshold 1 a read takes 19 us (240 k/s). Beside them a NIC
/// makes 50 k interrupts/s. Returns the most the devices made in any period and how many
/// controllers ended at threshold 1.
fn timer_bound_drives_under_a_raised_target(target: f64) -> (f64, usize) {
    let names: Vec<String> = (0..20).map(|i| format!("nvme{i:02}")).collect();
    let mut g = NvmeGrid::default();
    for n in &names {
        g.ctrls.insert(
            n.clone(),
            Ctrl {
                t: 2,
                extra: 1,
                extra_t: 2,
                extra_work: 4.2e4,
                fill: 0.5,
                ..Ctrl::default()
            },
        );
    }
    let aim = 0.95 * target;
    let nic = 5e4;
    let at = |t: u16| {
        if t == 1 {
            (2.4e5, 19.0)
        } else {
            (4.2e4, 119.0)
        }
    };
    let mut most: f64 = 0.0;
    for p in 0..60 {
        let ts: Vec<u16> = names.iter().map(|n| g.threshold(n)).collect();
        let rate = nic + ts.iter().map(|&t| at(t).0).sum::<f64>();
        most = most.max(rate);
        let over = rate > target;
        let inputs: Vec<CtrlInput> = names
            .iter()
            .zip(&ts)
            .map(|(n, &t)| {
                // An interrupt carries one completion whatever the threshold.
                let (w, wait) = at(t);
                CtrlInput {
                    wait_us: Some(wait),
                    ..ctrl(n, w, over.then_some((aim - nic) / 20.0), w, 1.0)
                }
            })
            .collect();
        g.update(&inputs, rate, aim, rate < 0.9 * target, p == 0);
    }
    let freed = names.iter().filter(|n| g.threshold(n) == 1).count();
    (most, freed)
}

#[test]
fn timer_bound_drives_step_down_one_that_fits_at_a_time() {
    // A raised target of 1.25 M/s (aim 1.19 M/s) over 0.89 M/s: each drive's share of the
    // new aim is 1.34x its rate, and as a threshold-bound controller each would take it at
    // threshold 1 (twice its rate, it was planned); all twenty went at once, 4.8 M/s. The
    // most a freed drive can make (its completions with the timer's 100 us off their 119 us)
    // is 263 k/s: one fits the room, a second does not.
    let (most, freed) = timer_bound_drives_under_a_raised_target(1.25e6);
    assert_eq!(freed, 1);
    assert!(most <= 1.25e6, "{most:.0}/s");
    // No room for even one: none steps, and the rate never passes the target.
    let (most, freed) = timer_bound_drives_under_a_raised_target(1.0e6);
    assert_eq!(freed, 0);
    assert!(most <= 1.0e6, "{most:.0}/s");
}

#[test]
fn a_timer_bound_step_is_predicted_from_the_wait_it_frees() {
    let s = Ctrl {
        t: 2,
        fill: 0.5,
        ..Ctrl::default()
    };
    let c = |wait| CtrlInput {
        wait_us: wait,
        ..ctrl("nvme0", 4.2e4, None, 4.2e4, 1.0)
    };
    // 119 us in flight, 100 of them the timer's: 119 / 19 times the completions.
    let r = s.rate_below(&c(Some(119.0)), 1, 1);
    assert!((r - 4.2e4 * 119.0 / 19.0).abs() < 1.0, "{r}");
    // A wait no longer than the timer (or unknown): the most it is taken to rise by.
    assert_eq!(s.rate_below(&c(Some(90.0)), 1, 1), 4.2e4 * MAX_FREED);
    assert_eq!(s.rate_below(&c(None), 1, 1), 4.2e4 * MAX_FREED);
    // A threshold-bound controller: completions over the lower threshold.
    let bound = Ctrl {
        t: 4,
        fill: 1.0,
        ..Ctrl::default()
    };
    assert_eq!(bound.rate_below(&c(Some(119.0)), 2, 1), 4.2e4 * 2.0);
    // Still above what an interrupt carries: the timer fires first, the rate stays.
    let cut = Ctrl {
        t: 4,
        fill: 0.5,
        ..Ctrl::default()
    };
    assert_eq!(cut.rate_below(&c(Some(119.0)), 3, 1), 4.2e4);
}

#[test]
fn a_step_waiting_for_room_is_seen_only_where_it_fits() {
    let mut g = NvmeGrid::default();
    g.ctrls.insert(
        "nvme0".into(),
        Ctrl {
            t: 2,
            fill: 0.5,
            ..Ctrl::default()
        },
    );
    let c = CtrlInput {
        wait_us: Some(119.0),
        ..ctrl("nvme0", 4.2e4, None, 4.2e4, 1.0)
    };
    // The step adds 263 k - 42 k = 221 k/s.
    assert!(!g.step_waiting(std::slice::from_ref(&c), 2.0e5));
    assert!(g.step_waiting(std::slice::from_ref(&c), 2.3e5));
    // Over its allowance it steps nowhere; a learned floor at 2 holds it too.
    let capped = CtrlInput {
        allowance: Some(3e4),
        ..c.clone()
    };
    assert!(!g.step_waiting(&[capped], 1e6));
    g.ctrls.get_mut("nvme0").unwrap().floor = 2;
    assert!(!g.step_waiting(&[c], 1e6));
}

/// One controller at one read in flight per vector, alone on the machine (no NIC beside): at
/// threshold 1 it completes 418 k reads/s, at 2 every read waits the timer (122 k/s). Over its
/// target throughout; the knee search moves the aim in periods `probe`. Returns the periods
/// at threshold 2.
fn lone_drive_across_a_probe(probe: std::ops::Range<u32>) -> usize {
    let mut g = NvmeGrid::default();
    let mut held = 0;
    for period in 1..=60 {
        let t = g.threshold("nvme0");
        held += usize::from(t >= 2);
        let aim = if probe.contains(&period) { 1.25e5 } else { 1e5 };
        let work = if t >= 2 { 1.22e5 } else { 4.18e5 };
        // One completion an interrupt at either threshold.
        let rate = work;
        g.update(
            &[ctrl("nvme0", rate, Some(aim), work, 1.0)],
            rate,
            aim,
            false,
            false,
        );
    }
    held
}

#[test]
fn a_step_that_cost_its_own_reads_is_marked_even_when_the_aim_moved() {
    // Undisturbed: one step past the bound, judged after its dwell, undone, not tried again.
    assert_eq!(lone_drive_across_a_probe(0..0), DWELL as usize);
    // The aim moves in the step's third period: no verdict by the aim, but the step cost the
    // drive 71% of its completions with nothing beside to buy: it is marked as tried all the
    // same (before, it went back unmarked and was taken again, 70% of every read's
    // completions lost for another dwell).
    let held = lone_drive_across_a_probe(3..5);
    assert!(held <= DWELL as usize, "held {held} periods");
}
