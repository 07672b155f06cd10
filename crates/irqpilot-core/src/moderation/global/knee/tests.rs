use super::*;

/// One period of one interface doing `work` bytes/s at `rate` interrupts/s (the load's own
/// rate last seen: `natural`), the fast loop in its band and at no limit.
fn period(work: f64, rate: f64, natural: f64, binding: bool) -> Observation {
    Observation {
        work: vec![("eth0".into(), work, rate)],
        binding,
        rate,
        raw_rate: rate,
        natural,
        settled: true,
        at_limit: false,
        least: 0.0,
        unheld: false,
        nic_gap_us: 0.0,
        pool: None,
    }
}

/// Runs the finder against a platform whose work collapses past `knee` (DMA efficiency
/// knee / rate, as on affected SoCs), with the fast loop holding the rate at the target and
/// a natural rate of 10x the start. Returns the targets it set, period by period.
fn search(start: f64, knee: f64, periods: u32) -> Vec<f64> {
    let mut k = KneeFinder::new(start, 100_000.0, true);
    let mut targets = Vec::new();
    for i in 0..periods {
        let rate = k.target();
        let eff = if rate > knee { knee / rate } else { 1.0 };
        // A little deterministic noise, as real counters have.
        let noise = 1.0 + 0.002 * f64::from(i % 7) - 0.006;
        k.observe(&period(1e10 * eff * noise, rate, 10.0 * start, true));
        targets.push(k.target());
    }
    targets
}

#[test]
fn probes_never_go_far_past_the_knee() {
    // The first version's first probe went to the natural rate: 10x a knee of 2x.
    let (start, knee) = (1_000_000.0, 2_000_000.0);
    let t = search(start, knee, 3000);
    let highest = t.iter().copied().fold(0.0, f64::max);
    // A step kept just past the knee (a loss under the least effect) is the highest proven.
    assert!(
        highest <= knee * (1.0 + MIN_EFFECT) * (1.0 + UNPROVEN_STEP),
        "a probe went to {highest:.0}/s, knee {knee:.0}/s"
    );
    // It found room above the start, and parks under the knee.
    let last = *t.last().unwrap();
    assert!(last > start && last <= knee, "parked at {last:.0}/s");
    // Time spent past the knee: a few probes' worth, not a standing cost.
    let past = t.iter().filter(|&&x| x > knee).count();
    assert!(past <= 60, "{past} of 3000 periods past the knee");
}

#[test]
fn a_knee_far_above_the_start_is_still_reached() {
    // A healthy platform: the knee is 8x the start; the search climbs most of the way
    // within two seconds, step by step.
    let t = search(1_000_000.0, 8_000_000.0, 200);
    let last = *t.last().unwrap();
    assert!(last >= 2_500_000.0, "after 2 s: {last:.0}/s");
}

/// Runs the finder through bursts of a bulk load (`on`: periods [start, end)) on a platform
/// whose work falls as knee / rate past `knee`, the load's natural rate `natural`. The fast
/// loop takes two periods to catch a burst, then holds the rate at the target; while the
/// target is within 10% of the natural rate its delays are still relaxing (binding).
/// Returns the interrupt rate per period, and the finder.
fn bursts(knee: f64, natural: f64, on: &[(u32, u32)], periods: u32) -> (Vec<f64>, KneeFinder) {
    bursts_lingering(knee, natural, on, periods, 0)
}

/// [`bursts`], the fast loop's delays still in place for `linger` periods after a burst
/// ends (its smoothed rate halving each period): the target still binds while the load
/// has gone.
fn bursts_lingering(
    knee: f64,
    natural: f64,
    on: &[(u32, u32)],
    periods: u32,
    linger: u32,
) -> (Vec<f64>, KneeFinder) {
    let mut k = KneeFinder::new(1_000_000.0, 100_000.0, true);
    let mut out: Vec<f64> = Vec::new();
    for i in 0..periods {
        let ended = on.iter().find(|(_, b)| i >= *b && i < b + linger);
        let obs = match on.iter().find(|(a, b)| i >= *a && i < *b) {
            None if ended.is_some() => {
                let rate = out.last().copied().unwrap_or(1000.0) / 2.0;
                Observation {
                    settled: false,
                    ..period(1e5, rate, natural, true)
                }
            }
            Some((a, _)) => {
                let rate = if i < a + 2 {
                    natural
                } else {
                    k.target().min(natural)
                };
                let eff = if rate > knee { knee / rate } else { 1.0 };
                let noise = 1.0 + 0.002 * f64::from(i % 7) - 0.006;
                Observation {
                    settled: rate <= 1.02 * k.target(),
                    ..period(
                        1e10 * eff * noise,
                        rate,
                        natural,
                        natural >= 0.9 * k.target(),
                    )
                }
            }
            None => period(1e5, 1000.0, 1000.0, false),
        };
        k.observe(&obs);
        out.push(obs.rate);
    }
    (out, k)
}

/// Periods after `from` until the rate stays within 10% of its mean over `[mean_from, to)`
/// (the held-out sweep's settling rule).
fn settles(t: &[f64], from: usize, mean_from: usize, to: usize) -> Option<usize> {
    let mean = t[mean_from..to].iter().sum::<f64>() / (to - mean_from) as f64;
    (from..to)
        .find(|&i| t[i..to].iter().all(|x| (x - mean).abs() <= 0.1 * mean))
        .map(|i| i - from)
}

#[test]
fn a_burst_ending_during_a_probe_is_not_a_knee() {
    // A healthy platform: the first burst ends while the search climbs. Less work then is
    // the load leaving; the first version read it as the knee, remembered the probe's rate
    // as too high and held the next burst at 70% of it. With `linger` 2 the fast loop's
    // delays outlive the burst by two periods, so the target still binds while the work
    // falls to nothing (gen-4-26: "3517876/s not held (work -97.6%)" on a healthy
    // platform): a knee costs work while the interrupts go on; here they leave with it.
    for linger in [0, 2] {
        for end in 60..90 {
            let (_, k) = bursts_lingering(1e9, 3e6, &[(0, end), (end + 48, 240)], 240, linger);
            assert_eq!(
                k.too_high(),
                None,
                "burst ending at {end}, linger {linger}: a knee was remembered"
            );
            let last = k.target();
            assert!(
                last >= 2.9e6,
                "burst ending at {end}, linger {linger}: the next held at {last:.0}/s"
            );
        }
    }
}

#[test]
fn a_high_knee_is_reached_before_the_load_is_judged_settled() {
    // The held-out `settle-first` target: the rate within 10% of its steady mean 800 ms
    // after a load first arrives, and the steady window starts at 720 ms. A knee at 4.5x
    // the start must be found (the search parked, under the knee) well within that: at
    // 15% a step and nine periods a step the climb alone took over a second.
    for knee in [2.7e6, 3.6e6, 4.5e6] {
        let t = search(1_000_000.0, knee, 120);
        let last = *t.last().unwrap();
        let moved = t
            .windows(2)
            .rposition(|w| w[0] != w[1])
            .map_or(0, |i| i + 1);
        assert!(
            moved <= 65 && last <= knee && last >= 0.6 * knee,
            "knee {knee:.0}: last move at period {moved}, parked at {last:.0}/s"
        );
    }
}

#[test]
fn a_knee_found_by_the_first_steps_leaves_the_rate_settled_within_300_ms() {
    // Issue 10: the rate settles within 300 ms of a load step. A knee just above the start
    // (the first or second step up collapses): after the step is undone the platform gets
    // `RECOVER` periods, the margin's target is measured, and a step below it is asked once.
    // With the fast loop ideal here, the target must stay within 10% of where it parks from
    // period 24 on, leaving the real loop the 50 ms it takes to bring a new load under the
    // start (three to five periods in the twin). With 9 periods of recovery (stop 41) the
    // knees below settled at 25, 25, 29 and 29.
    for knee in [1.1e6, 1.15e6, 1.2e6, 1.5e6] {
        let t = search(1_000_000.0, knee, 150);
        let last = *t.last().unwrap();
        let settled = (0..t.len())
            .find(|&i| t[i..].iter().all(|x| (x - last).abs() <= 0.1 * last))
            .unwrap();
        assert!(
            settled <= 24 && last <= knee,
            "knee {knee:.0}: settled at period {settled}, parked at {last:.0}/s"
        );
    }
}

#[test]
fn an_overshoot_that_gains_work_is_not_a_knee() {
    // A healthy platform whose fast loop lets its queues up at once when the target rises
    // and overshoots it by 40% for two periods, while the backlog drains (work +2%). The
    // first version read the overshoot as "not held" (gen-2-20: "1520875/s not held (work
    // +1.9%): back to 1064612/s") and held the load at 70% of it for good.
    let natural = 3e6;
    let mut k = KneeFinder::new(1_000_000.0, 100_000.0, true);
    let (mut last, mut since) = (k.target(), 0u32);
    for i in 0..300u32 {
        if k.target() != last {
            last = k.target();
            since = 0;
        }
        since += 1;
        let overshoot = since <= 2 && k.target() < natural;
        let rate = if overshoot {
            (1.4 * k.target()).min(natural)
        } else {
            k.target().min(natural)
        };
        let noise = 1.0 + 0.002 * f64::from(i % 7) - 0.006;
        let gain = if overshoot { 1.02 } else { 1.0 };
        k.observe(&Observation {
            settled: !overshoot,
            ..period(
                5e9 * noise * gain,
                rate,
                natural,
                natural >= 0.95 * k.target(),
            )
        });
    }
    assert_eq!(k.too_high(), None, "a knee was remembered");
    assert!(k.target() >= natural, "held at {:.0}/s", k.target());
}

#[test]
fn letting_go_past_a_knee_under_the_natural_rate_is_undone() {
    // A load whose own rate (5 M/s) is just past the knee (4.7 M/s). The step that lets
    // go of everything shows no loss at first: the rate rises to the load's own over a few
    // periods (the fast loop's smoothing), and the work falls only then. The first version
    // kept such a step as soon as nothing was held back (gen-2-29: parked at 5.0 M/s
    // against a 4.49 M/s knee, 7% of its throughput lost for good).
    let (natural, knee) = (5e6, 4.7e6);
    let mut k = KneeFinder::new(1_000_000.0, 100_000.0, true);
    let mut rate = natural;
    let mut rates = Vec::new();
    for i in 0..300u32 {
        rate += 0.5 * (k.target().min(natural) - rate);
        let eff = if rate > knee { knee / rate } else { 1.0 };
        let noise = 1.0 + 0.002 * f64::from(i % 7) - 0.006;
        k.observe(&Observation {
            settled: (rate - k.target().min(natural)).abs() <= 0.05 * rate,
            ..period(5e9 * eff * noise, rate, natural, natural >= k.target())
        });
        rates.push(rate);
    }
    let tail = &rates[200..];
    assert!(
        tail.iter().all(|&r| r <= knee),
        "target {:.0}, too high {:?}, rates {:?}",
        k.target(),
        k.too_high(),
        &tail[..10]
    );
}

#[test]
fn a_load_let_go_is_not_caught_again_by_its_own_noise() {
    // A healthy box whose load makes 1.9 M/s +-5% on its own. The climb (1.25, 1.56,
    // 1.95 M/s) lets go of it at 1.95 M/s, inside its noise: every peak over the target
    // is held at the smallest delay, which on a coarse grid halves the rate (2 us on a
    // queue whose packets come 2 us apart) and is kept there for a while (gen-4-6: the
    // rate swinging 1.05-2.0 M/s, settle-later 710 ms). A target that lets go clears the
    // load's own rate.
    let mut k = KneeFinder::new(1_000_000.0, 100_000.0, true);
    // Periods the fast loop keeps a peak held (its smoothing and relax steps).
    let mut hold = 0u32;
    let mut held_late = 0;
    for i in 0..400u32 {
        let wander = [0.0, 0.9, -0.5, 1.0, -1.0, 0.4, -0.8][(i / 5) as usize % 7];
        let natural = 1.9e6 * (1.0 + 0.05 * wander);
        if natural > k.target() {
            hold = 3;
        }
        let rate = if hold > 0 { natural / 2.0 } else { natural };
        k.observe(&period(5e9, rate, natural, hold > 0));
        if hold > 0 && i >= 60 {
            held_late += 1;
        }
        hold = hold.saturating_sub(1);
    }
    assert_eq!(held_late, 0, "target {:.0}", k.target());
}

#[test]
fn work_that_comes_in_waves_is_not_a_knee() {
    // A light load on a healthy box whose work per period comes in waves (one period in
    // three carries most of it: gen-4-23, 0.27 and 0.87 GB/s in turn) and whose own rate
    // is 1.4 M/s. A window that holds one wave less than its baseline reads as a 30-45%
    // loss: the first version undid the step that let go of the load on one such period
    // (and on a window's mean, any loss beyond 1% however noisy) and held the light load
    // at 0.9 M/s, its p95 8.7x `moderation=none`.
    let natural: f64 = 1.4e6;
    let mut k = KneeFinder::new(1_000_000.0, 100_000.0, true);
    for i in 0..300u32 {
        let rate = natural.min(k.target());
        let wave = if i % 3 == 0 { 8.7e8 } else { 2.7e8 };
        k.observe(&period(wave, rate, natural, natural >= k.target()));
    }
    assert_eq!(k.too_high(), None, "a knee was remembered");
    assert!(k.target() >= natural, "held at {:.0}/s", k.target());
}

#[test]
fn a_load_back_after_a_pause_settles_at_once() {
    // The held-out `settle-later` target: 2.4 s runs with bursts at 0-35% and 55-85%,
    // settled within 300 ms of the second burst. The search finished in the first burst:
    // the second is the same load, and the target found for it stands.
    for (knee, natural) in [(2e6, 5e6), (1e9, 3e6)] {
        let (t, _) = bursts(knee, natural, &[(0, 84), (132, 204)], 240);
        let s = settles(&t, 132, 168, 204);
        assert!(
            s.is_some_and(|s| s <= 30),
            "knee {knee:.0}, natural {natural:.0}: settled after {s:?} periods: {:?}",
            &t[132..204]
        );
    }
    // On a high knee a short first burst leaves the search part way up: the second goes
    // on from there (never from lower ground) and never far past the knee.
    let (knee, natural) = (4.4e6, 6e6);
    let (t, _) = bursts(knee, natural, &[(0, 40), (132, 204)], 240);
    // The highest target kept in the first burst (a probe past it was under way).
    let reached = bursts(knee, natural, &[(0, 40)], 40).1.proven;
    assert!(reached > 2e6, "the first burst kept {reached:.0}/s");
    assert!(
        t[134..204]
            .iter()
            .all(|&x| x >= 0.99 * reached && x <= knee * 1.2),
        "reached {reached:.0}: {:?}",
        &t[134..204]
    );
}

#[test]
fn a_step_up_never_lowers_the_target() {
    // Under a rate found too high, the room above is smaller than the step: the first
    // version "stepped up" to 70% of that rate, 21% below where it was, and kept it.
    let mut k = KneeFinder::new(1_267_000.0, 100_000.0, true);
    k.too_high = 1_410_000.0;
    k.step = RECHECK_STEP;
    assert!(!k.step_target(Dir::Up));
    assert_eq!(k.target(), 1_267_000.0);
}

#[test]
fn a_natural_rate_just_above_the_start_is_let_go_once() {
    // A load whose natural rate wanders 0.93-1.13 M/s around a 1 M/s start, on a healthy
    // platform: once a probe lets go of it without loss, the target stays let go. The first
    // version undid such a probe as "the load left" and probed again, the rate swinging
    // between held (0.67 M/s on a coarse delay grid) and free every 200 ms.
    let mut k = KneeFinder::new(1_000_000.0, 100_000.0, true);
    let mut moves = 0;
    let mut last = k.target();
    for i in 0..400u32 {
        let natural: f64 = 1.03e6 + 1e5 * [0.0, 0.9, -0.5, 1.0, -1.0, 0.4, -0.8][i as usize % 7];
        let rate = natural.min(k.target());
        k.observe(&period(5e9, rate, 1.12e6, natural >= k.target()));
        if i >= 100 && k.target() != last {
            moves += 1;
        }
        last = k.target();
    }
    assert!(moves <= 1, "{moves} target moves after the first second");
    assert!(k.target() >= 1.13e6, "target {:.0}", k.target());
}

#[test]
fn a_periodic_recheck_does_not_probe_down_from_a_steady_rate() {
    // Parked under a knee it found, the target cannot step up (it sits at the margin under
    // the rate found too high). A periodic recheck used to probe down instead, every 1, 2, 4 s:
    // on a steady rate a deliberate disturbance that buys nothing (held-out gen-5-16: the
    // recheck fell into a later burst and the rate dipped by a quarter 350 ms after it
    // began). A knee that moved under the target shows as a restless rate, or as a collapse
    // of the work (a new search).
    let (start, knee) = (1_000_000.0, 2_000_000.0);
    let t = search(start, knee, 3000);
    // The climb crosses the knee within 30 periods and is undone.
    let parked = t[60];
    let low = t[60..].iter().copied().fold(f64::INFINITY, f64::min);
    assert!(
        low >= parked * 0.999,
        "parked at {parked:.0}/s, a recheck went down to {low:.0}/s"
    );
}

/// The targets, period by period over 15 s, of a finder before a load at line rate on a
/// platform that collapses past `knee`: its capacity falls as knee / rate, and the work stays
/// at the line rate until the capacity drops under it (at 1/0.9 of the knee).
fn line_rate_targets(knee: f64) -> Vec<f64> {
    let mut k = KneeFinder::new(1_000_000.0, 100_000.0, true);
    let mut targets = Vec::new();
    for i in 0..1500u32 {
        let rate = k.target();
        let capacity = if rate > knee { knee / rate } else { 1.0 };
        let noise = 1.0 + 0.002 * f64::from(i % 7) - 0.006;
        k.observe(&period(
            1e10 * capacity.min(0.9) * noise,
            rate,
            3_000_000.0,
            true,
        ));
        targets.push(k.target());
    }
    targets
}

#[test]
fn a_descent_at_line_rate_ends_on_the_safe_side_of_the_knee() {
    // A load at line rate on a platform that collapses past 700 k/s: the platform's capacity
    // falls as knee / rate, but the work stays at the line rate until the capacity drops under
    // it (here at 1/0.9 of the knee). A descent from a collapse buys completions step by step;
    // the step that buys nothing more may start from a target inside that flat stretch, past
    // the knee, where the work hides a platform at 90% efficiency (every burst there crosses
    // further). The lower target of that step is where the descent ends.
    let knee = 700_000.0;
    let targets = line_rate_targets(knee);
    assert!(
        targets.iter().any(|&t| t > knee / 0.9),
        "the search never saw the collapse"
    );
    let parked = targets[targets.len() - 200..]
        .iter()
        .copied()
        .fold(0.0, f64::max);
    assert!(
        parked <= knee,
        "parked at {parked:.0}/s, past the knee {knee:.0}/s"
    );
}

#[test]
fn rechecks_do_not_climb_back_over_a_descents_safe_side() {
    // The line-rate load above (held-out gen-82-47: a DIM 40G NIC at line rate past a 0.70
    // M/s knee): the descent ends on the safe side, and the work stays flat from there up to
    // where the platform's capacity falls under the line rate. The periodic rechecks stepped
    // up through that flat stretch, each kept because it cost nothing: a climb of 60 ms steps
    // back towards the ambiguity the descent had resolved. A recheck that buys nothing under
    // the descent's upper target is not kept.
    let knee = 700_000.0;
    let targets = line_rate_targets(knee);
    // Parked after the descent by period 100; the rechecks at 1, 2, 4 and 8 s probe above
    // it for a window each and come back.
    let (ended, last) = (targets[100], targets[targets.len() - 1]);
    let above = targets[100..].iter().filter(|&&t| t > ended).count();
    assert!(
        last <= ended && above <= 60,
        "parked at {ended:.0}/s after the descent, at {last:.0}/s at the end, {above} periods above"
    );
}

#[test]
fn the_fast_loops_last_correction_before_a_step_is_not_a_knee() {
    // Request/response traffic on a healthy platform: the work follows the interrupt rate.
    // The period in which a step up is decided, the fast loop may still correct the rate
    // under the old target (here 6% down, inside its 10% band); that correction is measured
    // in the probe's first period. Read as the probe's loss (5% within its first periods),
    // it undid a step the platform had no trouble with, and the target parked at 70% of it
    // (a plant of the moderator's own: 3.8 M/s "not held", target 2.67 M/s against a load
    // of 6.4 M/s).
    let mut k = KneeFinder::new(1_000_000.0, 100_000.0, true);
    let mut prev = k.target();
    for i in 0..300u32 {
        let natural = 10_000_000.0;
        let noise = 1.0 + 0.002 * f64::from(i % 7) - 0.006;
        // The rate of a period is what the fast loop decided the period before: the target
        // then, a correction 6% under it in the period the target moved.
        let rate = if k.target() != prev {
            0.94 * prev
        } else {
            k.target().min(natural)
        };
        prev = k.target();
        k.observe(&period(
            300.0 * rate * noise,
            rate,
            natural,
            natural > k.target(),
        ));
    }
    assert_eq!(k.too_high(), None, "a knee was found at {:?}", k.too_high());
    assert!(k.target() >= 10_000_000.0, "target {:.0}/s", k.target());
}

/// Periods until the finder's target first lets go of a load whose own rate is 10x the
/// start, on a healthy platform (no knee), the fast loop holding the rate at the target:
/// `work(rate)` is what the devices complete at that rate, `jitter` the relative
/// amplitude of the counters' per-period noise.
fn periods_to_let_go(work: impl Fn(f64) -> f64, jitter: f64) -> Option<usize> {
    let natural = 10_000_000.0;
    let mut k = KneeFinder::new(1_000_000.0, 100_000.0, true);
    for i in 0..300u32 {
        let rate = k.target().min(natural);
        let noise = 1.0 + jitter * (f64::from(i % 7) / 3.0 - 1.0);
        k.observe(&period(
            work(rate) * noise,
            rate,
            natural,
            natural >= k.target(),
        ));
        if k.target() >= natural {
            return Some(i as usize);
        }
    }
    None
}

#[test]
fn a_climb_that_buys_completions_does_not_wait_out_every_window() {
    // The held-out `settle-first` and `ripple` targets judge the rate from 720 ms of a load's
    // arrival: a climb from the 1 M/s start to a load 10x above it (gen-7-11: 18.5 M/s of
    // request/response traffic on a healthy box) took 6 periods a 25% step, 11 steps, and
    // was still under way there. A step whose first measured periods already show a gain
    // beyond the noise is kept then: a load whose every step buys transactions (noise
    // 0.6%) is let go within 55 periods, with room left for a crossing undone.
    let bought = periods_to_let_go(|r| 1e10 * (r / 1e7).sqrt(), 0.006);
    assert!(
        bought.is_some_and(|p| p <= 55),
        "let go after {bought:?} periods"
    );
    // Flat work is judged by whole windows (a loss may build up over one): the climb ends
    // as before.
    let flat = periods_to_let_go(|_| 1e10, 0.001);
    assert!(
        flat.is_some_and(|p| p <= 70),
        "flat: let go after {flat:?} periods"
    );
}

/// Period `i` of a load of `natural` interrupts/s of its own doing `work(rate)`: it arrives
/// at period 0, seen with nothing held back; after that the fast loop holds it at the finder's
/// target and lets its delays go by half the way a period (`rate` carries the rate over).
fn arriving(
    k: &KneeFinder,
    work: &dyn Fn(f64) -> f64,
    natural: f64,
    rate: &mut f64,
    i: u32,
) -> Observation {
    let noise = 1.0 + 0.002 * f64::from(i % 7) - 0.006;
    if i == 0 {
        *rate = natural;
        return Observation {
            unheld: true,
            ..period(work(natural) * noise, natural, natural, true)
        };
    }
    let to = k.target().min(natural);
    *rate = if to > *rate {
        *rate + 0.5 * (to - *rate)
    } else {
        to
    };
    period(
        work(*rate) * noise,
        *rate,
        natural,
        natural >= 0.9 * k.target(),
    )
}

#[test]
fn a_kept_jump_asks_the_ground_it_skipped_even_when_the_next_step_is_undone() {
    // Request/response traffic on a healthy platform with few CPUs (held-out gen-26-45: 8.1
    // M/s of its own on 24 CPUs): every interrupt costs CPU time the transactions need, so
    // under the load's own rate fewer interrupts buy work, down to where the delays cost more
    // than the CPU they save (here 3 M/s). The arrival does more work than the 1 M/s start
    // leaves the load, so the first probe jumps to the load's own rate and is kept (its
    // window measured on the way up, through the best rates); the next step lets go of the
    // load and loses. The target went back to 70% of that and parked there, on ground no probe
    // had seen (5.97 M/s, where a fixed target of 3.5 M/s did 24% more; a periodic recheck
    // cannot step up from there and does not probe down from a steady rate). Within two
    // seconds the search must have asked the ground under it.
    let natural = 8_000_000.0;
    let work = |r: f64| 1e10 * (r / 3e6).min(1.0) * (1.0 - 0.09 * (r - 3e6).max(0.0) / 1e6);
    let mut k = KneeFinder::new(1_000_000.0, 100_000.0, true);
    let mut rate: f64 = natural;
    for i in 0..200u32 {
        let obs = arriving(&k, &work, natural, &mut rate, i);
        k.observe(&obs);
    }
    let t = k.target().min(natural);
    assert!(
        k.too_high().is_some(),
        "the step past the jump was never undone"
    );
    assert!(
        work(t) >= 0.95 * work(3e6),
        "parked at {t:.0}/s: {:.1}% of the best work",
        100.0 * work(t) / work(3e6)
    );
}

#[test]
fn a_step_below_undone_over_the_loads_own_rate_lets_its_delays_go() {
    // Held-out gen-67-32 (request/response beside drives at medium load on a healthy
    // platform, 8.8 M/s of its own): every interrupt held back costs transactions. The jump
    // to the load's own rate is kept and asks one step below; the step loses and the target
    // goes back over the load's own rate, where nothing binds. The step's delays (38-68 us on
    // 75 queues) used to relax 12.5% a period for 220 ms: p99 1.29x `none`. They go at once.
    let natural = 8_800_000.0;
    let work = |r: f64| 1e10 * (r / natural).min(1.0);
    let mut k = KneeFinder::new(1_000_000.0, 100_000.0, true);
    let mut rate: f64 = natural;
    let (mut was_over, mut stepped_below, mut undone) = (false, false, None);
    for i in 0..100u32 {
        let obs = arriving(&k, &work, natural, &mut rate, i);
        k.observe(&obs);
        let released = k.take_release();
        let over = k.target() > natural;
        if over && stepped_below {
            undone = Some((i, released));
            break;
        }
        stepped_below |= was_over && !over;
        was_over |= over;
    }
    let (i, released) = undone.expect("no step below the load's own rate was undone");
    assert!(
        released,
        "period {i}: the undone step's delays were left to relax"
    );
}

#[test]
fn a_descent_steps_from_the_rate_the_delays_grid_held() {
    // Held-out gen-28-43 (healthy, CPU-bound request/response, 14.6 M/s of its own, best
    // near 4 M/s): the jump to the load's own rate is kept and steps down buy work, but the
    // coarsest delay (2 us) already holds the rate at 60% of the load's own, under targets a
    // step or two below it. A step down from the target then left the rate where it was,
    // "bought nothing more", and the descent parked at 8.95 M/s with the rate at 8.2 M/s
    // (20.2 -> 25.4 Gb/s, static 28.4). The step must start from the rate that was held.
    let natural = 14_000_000.0;
    let grid = 0.6 * natural;
    let work = |r: f64| 1e10 * (r / 4e6).min(1.0) * (1.0 - 0.03 * (r - 4e6).max(0.0) / 1e6);
    let mut k = KneeFinder::new(1_000_000.0, 100_000.0, true);
    for i in 0..300u32 {
        let noise = 1.0 + 0.002 * f64::from(i % 7) - 0.006;
        let target = k.target();
        let obs = if i == 0 {
            Observation {
                unheld: true,
                ..period(work(natural) * noise, natural, natural, true)
            }
        } else if target >= natural {
            period(work(natural) * noise, natural, natural, false)
        } else {
            // Any delay at all takes the rate to the grid's first point at least.
            let rate = target.min(grid);
            period(work(rate) * noise, rate, natural, true)
        };
        k.observe(&obs);
    }
    let rate = k.target().min(grid);
    assert!(
        work(rate) >= 0.95 * work(4e6),
        "parked at {:.0}/s, the rate at {rate:.0}/s: {:.1}% of the best work",
        k.target(),
        100.0 * work(rate) / work(4e6)
    );
}

#[test]
fn a_step_down_starts_from_a_rate_held_under_the_band_of_its_target() {
    // Held-out gen-237-37 (request/response on a 400G NIC beside 3 drives, past a 0.78 M/s
    // knee): the jump to 5.05 M/s was kept with the rate at 4.1-4.5 M/s, under the fast loop's
    // band (sources held elsewhere: drives at their grid's bound), though within a step of the
    // target. A step from the target itself, to 4.04 M/s, moved the rate 3%, read nothing, and
    // the search parked at the jump, where the drives did 0.52 of GSIM's reads. The step
    // starts from the rate the window held. Here the work peaks at 4 M/s and is flat from
    // 7 M/s up, where the rate is held: a step that moves the rate by less than a step reads
    // nothing there.
    let natural = 10_000_000.0;
    let held = 9_000_000.0;
    let work = |r: f64| 1e10 * (r / 4e6).min(1.0) * (1.0 - 0.4 * ((r - 4e6) / 3e6).clamp(0.0, 1.0));
    let hold = |t: f64| (0.95 * t).min(held);
    let k = held_after_arrival((work(natural), natural), &work, natural, &hold);
    let rate = hold(k.target());
    assert!(
        work(rate) >= 0.95 * work(4e6),
        "parked at {:.0}/s, the rate at {rate:.0}/s: {:.1}% of the best work",
        k.target(),
        100.0 * work(rate) / work(4e6)
    );
}

/// One period of a fast loop with a hysteresis band, as the moderator's: a rate above the
/// target goes to the middle of the band (95% of it), one under 90% of it relaxes up to that
/// middle (or to the load's own rate), and one inside the band stays where it is. Returns the
/// rate this period and whether the target binds (holds the load under its own rate). A loop
/// that held nothing back stays so while the load's own rate is under the target.
fn banded_rate(prev: f64, target: f64, natural: f64, held: bool) -> (f64, bool) {
    if !held && natural <= target {
        return (natural, false);
    }
    let aim = 0.95 * target;
    let rate = if prev > target || prev < 0.9 * target {
        aim.min(natural)
    } else {
        prev.min(natural)
    };
    (rate, rate < natural)
}

/// One period of a load whose own rate is `natural` under [`banded_rate`] (nothing held back
/// while `natural` stays under the target): the finder observes `work(rate)`, with a little
/// noise, as an unheld period when the loop held nothing back. Returns the rate and whether
/// the loop held the load back.
fn banded_period(
    k: &mut KneeFinder,
    i: u32,
    (rate, held): (f64, bool),
    natural: f64,
    work: impl Fn(f64) -> f64,
) -> (f64, bool) {
    let (rate, held) = banded_rate(rate, k.target(), natural, held);
    let noise = 1.0 + 0.002 * f64::from(i % 7) - 0.006;
    k.observe(&Observation {
        unheld: !held,
        ..period(work(rate) * noise, rate, natural, held)
    });
    (rate, held)
}

/// Runs the search for `periods` over a held load of this own rate under [`banded_rate`],
/// with a little noise on the work; returns the last period's rate.
fn run_banded(k: &mut KneeFinder, work: &dyn Fn(f64) -> f64, natural: f64, periods: u32) -> f64 {
    run_banded_noted(k, &|_, r| work(r), natural, periods).0
}

/// [`run_banded`] with work that may depend on the period (`work(period, rate)`); returns the
/// last period's rate and the search's notes.
fn run_banded_noted(
    k: &mut KneeFinder,
    work: &dyn Fn(u32, f64) -> f64,
    natural: f64,
    periods: u32,
) -> (f64, Vec<String>) {
    let mut rate = natural;
    let mut notes = Vec::new();
    for i in 0..periods {
        let noise = 1.0 + 0.002 * f64::from(i % 7) - 0.006;
        let (r, binding) = banded_rate(rate, k.target(), natural, true);
        rate = r;
        k.observe(&period(work(i, rate) * noise, rate, natural, binding));
        notes.extend(k.take_note());
    }
    (rate, notes)
}

#[test]
fn the_margin_under_a_rejected_step_is_not_kept_where_it_costs_completions() {
    // Request/response traffic whose transactions follow its interrupts up to where the
    // platform collapses (held-out gen-29-25 and gen-30-16: kept at 1.95 M/s with +8% and
    // +26%, a step to 2.44 M/s lost 24-31%). The margin put the target at 70% of the rejected
    // rate, 1.71 M/s, under the kept 1.95 M/s, and the search parked there at once, on ground
    // no window had measured: 10-18% of the work gone for good.
    let work = |r: f64| 1e10 * (r / 2e6).min(1.05) * (2.1e6 / r).min(1.0).powi(4);
    let natural = 10e6;
    let mut k = KneeFinder::new(1_000_000.0, 100_000.0, true);
    let rate = run_banded(&mut k, &work, natural, 400);
    let best = work(2.1e6);
    assert!(k.too_high().is_some(), "no step was undone");
    assert!(
        work(rate) >= 0.85 * best,
        "parked at {:.0}/s (rate {rate:.0}/s): {:.1}% of the best work",
        k.target(),
        100.0 * work(rate) / best
    );
}

#[test]
fn a_margin_that_costs_completions_bisects_the_ground_under_the_rate_found_too_high() {
    // Request/response whose transactions follow its interrupts up to a knee at 1.6 M/s
    // (held-out gen-87-42: past a 0.75 M/s DMA knee, static's 1.42 M/s did 7% more than the
    // 1 M/s the search parked at). The first step up's window reads 1-2% low (a single
    // window's noise); the margin under it costs completions, the target goes back to 1
    // M/s, and the search used to park there: no later step up could pass the margin under
    // the rate that read low. Now the ground between is bisected, each step judged as any.
    let knee = 1.6e6;
    let work = |r: f64| 1e10 * (r / knee).min(1.0).powf(0.3) * (knee / r).min(1.0).powi(4);
    let natural = 3e6;
    let mut k = KneeFinder::new(1_000_000.0, 100_000.0, true);
    // The first step up's window: 8% under what its rate does.
    let low = |i: u32, r: f64| if i < 30 && r > 1.1e6 { 0.92 } else { 1.0 };
    let (rate, notes) = run_banded_noted(&mut k, &|i, r| work(r) * low(i, r), natural, 400);
    assert!(
        notes
            .iter()
            .any(|n| n.contains("margin's target cost completions")),
        "the margin was not checked: {notes:?}"
    );
    assert!(
        k.target() >= 1.1e6 && rate <= knee,
        "parked at {:.0}/s (rate {rate:.0}/s): {notes:?}",
        k.target()
    );
}

#[test]
fn a_margin_that_buys_nothing_after_a_small_loss_goes_back_to_the_higher_target() {
    // Reads that a rate limit fixes (held-out gen-82-41: 21 drives at a fio rate limit), its
    // CPUs short of the work past 5.2 M/s for a while: the climb's steps there read 2% low.
    // The step to 5.5 M/s was undone, the margin put the target at 3.9 M/s, under the 4.7
    // M/s the step started from, and its check read no difference: the search parked there,
    // holding the reads back more for nothing. With no difference the higher target wins.
    let work = |_: f64| 1e10;
    let natural = 12e6;
    let mut k = KneeFinder::new(1_000_000.0, 100_000.0, true);
    let short = |i: u32, r: f64| if i < 120 && r > 5.2e6 { 0.98 } else { 1.0 };
    let (_, notes) = run_banded_noted(&mut k, &|i, r| work(r) * short(i, r), natural, 300);
    assert!(
        notes.iter().any(|n| n.contains("cost completions")),
        "no step up was undone: {notes:?}"
    );
    assert!(
        k.target() >= 4.5e6,
        "parked at {:.0}/s: {notes:?}",
        k.target()
    );
}

#[test]
fn a_rechecks_small_loss_keeps_the_parked_target() {
    // A load at its own 0.985 M/s under the 1 M/s start (held-out gen-79-18: request/response
    // at medium load), asked once whether a step down buys completions (it does not: the
    // target parks clear of the load's own rate), later a little above the target, which then
    // holds it. A periodic recheck's 5% step up reads
    // 1.5% low: the margin used to put the target at 70% of the step for 130 ms before its
    // check sent it back (p99 1.27x `none`); the parked target stands.
    let work = |_: f64| 1e10;
    let mut k = KneeFinder::new(1_000_000.0, 100_000.0, true);
    let mut state = (0.985e6, false);
    let mut notes = Vec::new();
    let mut lowest_after_ask = f64::INFINITY;
    let mut parked = f64::INFINITY;
    for i in 0..400 {
        let natural = if i < 80 { 0.985e6 } else { 1.1e6 };
        if i == 80 {
            parked = k.target();
        }
        let recheck = i >= 80 && k.target() > parked * 1.01;
        let low = if recheck { 0.985 } else { 1.0 };
        state = banded_period(&mut k, i, state, natural, |r| work(r) * low);
        notes.extend(k.take_note());
        if i >= 80 {
            lowest_after_ask = lowest_after_ask.min(k.target());
        }
    }
    assert!(
        notes.iter().any(|n| n.contains("cost completions")),
        "no recheck was undone: {notes:?}"
    );
    assert!(
        lowest_after_ask >= 0.99 * parked,
        "the target fell from {parked:.0}/s to {lowest_after_ask:.0}/s: {notes:?}"
    );
}

#[test]
fn a_first_probe_undone_asks_the_ground_below_with_a_step_that_moves_the_rate() {
    // A line-rate bulk load on a platform whose knee (0.5 M/s) is half the starting target
    // (held-out gen-31-13: 48 queues of 3280 B at 40 Gb/s). The first probe up is undone; the
    // margin leaves no room above, so the search looks below, but with a 5% step: inside the
    // fast loop's 10% band the rate did not move, the step "bought nothing" and the search
    // parked for good at 0.88 M/s, the platform past its knee (0.62 of the healthy platform).
    let knee = 500_000.0;
    let work = |r: f64| 1e10 * (knee / r).min(1.0).powf(1.5);
    let natural = 3e6;
    let mut k = KneeFinder::new(1_000_000.0, 100_000.0, true);
    let rate = run_banded(&mut k, &work, natural, 400);
    assert!(
        work(rate) >= 0.95 * work(knee),
        "parked at {:.0}/s (rate {rate:.0}/s): {:.1}% of the work under the knee",
        k.target(),
        100.0 * work(rate) / work(knee)
    );
}

#[test]
fn a_load_that_collapses_past_the_knee_on_its_own_is_caught() {
    // A bulk load at line rate whose own rate (1.3 M/s) is just under the knee (1.43 M/s),
    // let go by the search (held-out gen-29-37: 24 queues of 1076 B on a 400G NIC). Its arrival
    // ran past the knee unheld (3.4 M/s, DMA at 42%), and that rate set the let-go target
    // above it. Later the load crossed the knee by itself: past it DMA slows, fewer packets
    // share an interrupt and the rate feeds on itself, to 3.4 M/s at 42% of the work, under a
    // target that held nothing back: the collapse stood for the rest of the run.
    let knee = 1_430_000.0;
    let work = |r: f64| 1e10 * (knee / r).min(1.0);
    let (own, collapsed) = (1_300_000.0, 3_400_000.0);
    let mut k = KneeFinder::new(1_000_000.0, 100_000.0, true);
    let (mut rate, mut natural_seen, mut in_collapse) = (collapsed, collapsed, true);
    let mut held = true;
    for i in 0..400u32 {
        if i == 200 {
            in_collapse = true; // the load crosses the knee on its own
        }
        let natural = if in_collapse { collapsed } else { own };
        let (r, binding) = if i == 0 {
            (collapsed, true)
        } else {
            banded_rate(rate, k.target(), natural, held)
        };
        (rate, held) = (r, binding);
        let unheld = !binding && rate >= natural;
        if unheld || i == 0 {
            natural_seen = rate;
        }
        // Held under the knee, the collapse ends.
        if rate < knee {
            in_collapse = false;
        }
        let noise = 1.0 + 0.002 * f64::from(i % 7) - 0.006;
        k.observe(&Observation {
            unheld: unheld || i == 0,
            ..period(work(rate) * noise, rate, natural_seen, binding)
        });
        if i == 150 {
            assert!(
                work(rate) >= 0.99 * 1e10,
                "the load was never let go under the knee: {rate:.0}/s"
            );
        }
    }
    assert!(
        work(rate) >= 0.95 * 1e10,
        "after the collapse: {rate:.0}/s, target {:.0}/s, {:.0}% of the work",
        k.target(),
        100.0 * work(rate) / 1e10
    );
}

/// A bulk load at line rate whose demand is `demand` interrupts/s, on a platform whose DMA
/// runs at `(knee / rate)^gamma` past `knee`: unheld, its own rate is where its collapse
/// settles (fewer completions, fewer interrupts: `rate = demand x efficiency`). Its first
/// period, the platform's rate window still filling, runs halfway between the demand and the
/// collapse (on a healthy platform it does 2% less than later: the load still ramping up).
/// Runs the search under [`banded_rate`] for `periods`; returns the finder, the work per
/// period over the line rate, and whether each period held the load back.
fn collapsing_load(
    knee: f64,
    demand: f64,
    gamma: f64,
    periods: u32,
) -> (KneeFinder, Vec<f64>, Vec<bool>) {
    let eff = |r: f64| (knee / r).min(1.0).powf(gamma);
    let mut own = demand;
    for _ in 0..200 {
        own = demand * eff(own);
    }
    let mut k = KneeFinder::new(1_000_000.0, 100_000.0, true);
    let (mut rate, mut held) = (own, false);
    let (mut work, mut holds) = (Vec::new(), Vec::new());
    for i in 0..periods {
        (rate, held) = banded_rate(rate, k.target(), own, held);
        let noise = 1.0 + 0.002 * f64::from(i % 7) - 0.006;
        let (r, w) = match i {
            0 if own < demand => ((demand + own) / 2.0, (1.0 + eff(own)) / 2.0),
            0 => (rate, 0.98),
            _ => (rate, eff(rate)),
        };
        k.observe(&Observation {
            unheld: !held,
            ..period(1e10 * w * noise, r, own, held)
        });
        work.push(w);
        holds.push(held);
    }
    (k, work, holds)
}

#[test]
fn a_load_collapsed_under_the_target_is_asked_a_step_down() {
    // A 10G bulk load on a platform whose knee (0.5 M/s) is half the starting target
    // (held-out gen-34-23: 22 queues of 1911 B, knee 0.51 M/s). Its own rate past the knee
    // settles at 0.8 M/s, under the target, at 73% of its line rate: nothing binds, so no
    // search ever started, and the collapse stood for the whole run (0.63 of the healthy
    // platform, as GSIM and static).
    let (k, work, _) = collapsing_load(500_000.0, 1_100_000.0, 0.67, 300);
    let last = work[work.len() - 50..].iter().copied().fold(1.0, f64::min);
    assert!(
        last >= 0.95,
        "target {:.0}/s: {:.0}% of the line rate over the last 50 periods",
        k.target(),
        100.0 * last
    );
}

#[test]
fn an_unheld_load_on_a_healthy_platform_is_asked_once_and_briefly() {
    // A healthy platform: a load at 80% of the target is asked once whether a step down buys
    // completions (nothing in the counts tells it from a collapse under the target), for a
    // few periods only, and not again while its work stays; one at 30% is never asked.
    for (demand, most) in [(800_000.0, 4), (300_000.0, 0)] {
        let (k, work, holds) = collapsing_load(1e9, demand, 0.67, 600);
        let held = holds.iter().filter(|&&h| h).count();
        assert!(
            work[1..].iter().all(|&w| w >= 0.999),
            "demand {demand:.0}: work lost"
        );
        assert_eq!(k.target(), 1_000_000.0, "demand {demand:.0}: target moved");
        assert!(held <= most, "demand {demand:.0}: held {held} periods");
        assert!(
            holds[100..].iter().all(|&h| !h),
            "demand {demand:.0}: asked again"
        );
    }
}

#[test]
fn an_unheld_load_whose_work_follows_its_interrupts_is_let_go_after_one_period() {
    // Request/response on a healthy platform: every interrupt held back costs a transaction
    // (held-out gen-36-10: a 9-period probe put its p99 at 1.19x `none`). The step's first
    // measured period shows the loss, and the load runs unheld again from the next.
    let own = 800_000.0;
    let mut k = KneeFinder::new(1_000_000.0, 100_000.0, true);
    let (mut rate, mut held) = (own, false);
    let mut holds = Vec::new();
    for i in 0..400u32 {
        (rate, held) = banded_period(&mut k, i, (rate, held), own, |r| 1e10 * (r / own));
        holds.push(held);
    }
    let held = holds.iter().filter(|&&h| h).count();
    assert!((1..=3).contains(&held), "held {held} periods");
    assert_eq!(k.target(), 1_000_000.0);
}

#[test]
fn a_restless_unheld_load_is_not_asked() {
    // A low bulk load of many paced flows (held-out gen-38-15: 512 flows at 5% of a 200G
    // link, 0.86 M/s) swings 30% from period to period by itself: one period of a step says
    // nothing there (a swing read as +32%, and the search descended: p95 22x `none`).
    let own = 800_000.0;
    let mut k = KneeFinder::new(1_000_000.0, 100_000.0, true);
    let (mut rate, mut held) = (own, false);
    for i in 0..600u32 {
        (rate, held) = banded_rate(rate, k.target(), own, held);
        let swing = [1.0, 1.3, 0.8, 1.1, 0.7, 1.2, 0.9][i as usize % 7];
        k.observe(&Observation {
            unheld: !held,
            ..period(1e10 * swing, rate, own, held)
        });
        assert!(!held, "held at period {i}");
    }
    assert_eq!(k.target(), 1_000_000.0);
}

#[test]
fn an_unheld_load_that_fewer_interrupts_do_not_help_is_asked_once() {
    // A healthy platform: a load at 80% of the target whose work fell 10% after its first
    // period (the load itself slowed) is asked one step down, which buys nothing: the
    // target goes back to where it was, the load runs unheld, and it is not asked again.
    let own = 800_000.0;
    let mut k = KneeFinder::new(1_000_000.0, 100_000.0, true);
    let (mut rate, mut held, mut periods_held) = (own, false, 0);
    for i in 0..600u32 {
        let w = if i == 0 { 1.0 } else { 0.9 };
        (rate, held) = banded_period(&mut k, i, (rate, held), own, |_| 1e10 * w);
        periods_held += u32::from(held);
        if i >= 500 {
            assert!(!held, "still held at period {i}");
        }
    }
    assert_eq!(k.target(), 1_000_000.0, "target moved");
    assert!(
        (1..=20).contains(&periods_held),
        "held {periods_held} periods"
    );
}

/// A bulk load of paced flows that pause together: its own rate `natural`, one period in nine
/// (from `phase`) at two thirds of its work and of its interrupts. The fast loop holds the
/// rate at the target's band while the target is under the load's own rate; the finder sees
/// the rate smoothed as the moderator's is (half the newest period). Past `knee` the work
/// falls as knee / rate while the interrupts go on. Returns the finder after `periods`.
fn lulls(natural: f64, knee: f64, phase: u32, periods: u32) -> KneeFinder {
    let mut k = KneeFinder::new(1_000_000.0, 100_000.0, true);
    let (mut smoothed, mut seen) = (natural, natural);
    for i in 0..periods {
        let lull = (i + phase) % 9 == 8;
        let share = if lull { 2.0 / 3.0 } else { 1.0 };
        let held = natural > k.target();
        let raw = if held { 0.95 * k.target() } else { natural } * share;
        smoothed += 0.5 * (raw - smoothed);
        if !held {
            seen = smoothed;
        }
        let eff = if raw > knee { knee / raw } else { 1.0 };
        let noise = 1.0 + 0.002 * f64::from(i % 7) - 0.006;
        k.observe(&Observation {
            raw_rate: raw,
            unheld: !held,
            ..period(2e9 * share * eff * noise, smoothed, seen, held)
        });
    }
    k
}

#[test]
fn a_lull_of_the_load_itself_is_not_a_knee() {
    // Held-out gen-36-19 (healthy, a 200G NIC at 7.5% of line rate: 1.09 M/s of its own,
    // 96 queues): the first probe let go of the load (1.0 -> 1.15 M/s), and the period in
    // which its flows paused together (two thirds of the work, the interrupts falling with
    // it) read as "let go, cost completions (-32.6%)". The 1 M/s start was remembered as too
    // high and the load held at 700 k/s for good, its p95 2.4x `moderation=none`.
    for phase in 0..9 {
        let k = lulls(1.09e6, 1e9, phase, 400);
        assert_eq!(
            k.too_high(),
            None,
            "lulls from {phase}: a knee was remembered, target {:.0}",
            k.target()
        );
        assert!(
            k.target() >= 1.09e6,
            "lulls from {phase}: held at {:.0}/s",
            k.target()
        );
    }
    // The same load past a knee under its own rate: the work falls while the interrupts go
    // on, and the step that let go of it is undone, lulls or not.
    for phase in 0..9 {
        let k = lulls(1.5e6, 1.2e6, phase, 400);
        assert!(
            k.target() < 1.2e6,
            "knee 1.2 M/s, lulls from {phase}: target {:.0}",
            k.target()
        );
    }
}

#[test]
fn a_collapse_the_fast_loop_lets_in_lowers_the_target_to_where_the_work_was_good() {
    // A medium load past a low knee, with two ways to run (held-out gen-52-3: 46 queues of
    // 1618 B, a 0.52 M/s knee). Held back, its queues' delays clear the platform's backlog
    // and it makes its own 0.55 M/s at full work; let go above 0.6 M/s, DMA slows, every
    // queue always has a packet waiting and the rate runs to 1.3 M/s at 58% of the work,
    // until the fast loop holds it again. A target above 0.6 M/s sees the held load under
    // its band for a few periods, lets it go, and the cycle comes back: the search parked
    // in it at 1.37 M/s.
    let (own, cliff, collapsed): (f64, f64, f64) = (550_000.0, 600_000.0, 1_300_000.0);
    let mut k = KneeFinder::new(1_000_000.0, 100_000.0, true);
    // Periods since the platform collapsed (`None`: running well), and since it recovered.
    let (mut since_collapse, mut since_recovery) = (Some(0u32), 0u32);
    let (mut good, mut periods) = (0u32, 0u32);
    for i in 0..600u32 {
        let target = k.target();
        let rate = match since_collapse {
            // Let go: the rate runs away.
            Some(0) => collapsed,
            // Held at the middle of the band; a period of that clears the backlog.
            Some(_) => (0.95 * target).min(collapsed),
            None => own.min(0.95 * target),
        };
        since_collapse = match since_collapse {
            Some(c) if c < 1 => Some(c + 1),
            Some(_) => {
                since_recovery = 0;
                None
            }
            None => {
                since_recovery += 1;
                // Under the band for a few periods: the loop lets the held queues go.
                (own < 0.9 * target && 0.95 * target > cliff && since_recovery >= 6).then_some(0)
            }
        };
        let work = if rate > cliff { 0.58e10 } else { 1e10 };
        let noise = 1.0 + 0.002 * f64::from(i % 7) - 0.006;
        k.observe(&period(work * noise, rate, collapsed, true));
        // After the first cycle (on main the runaway rule took it down 10% a cycle, 45
        // collapsed periods of these).
        if i >= 40 {
            periods += 1;
            good += u32::from(work >= 1e10);
        }
    }
    assert!(
        good + 5 >= periods,
        "{good} of the last {periods} periods at full work (target {:.0}/s)",
        k.target()
    );
}

#[test]
fn one_bursty_period_of_an_unheld_load_is_no_collapse() {
    // A light load on a healthy platform, nothing held back (held-out gen-62-33: a 10G NIC at
    // 4% load, 383 k/s under a 1 M/s target). Now and then one period carries a burst's
    // interrupts and less of its work (458 k/s, a third less): more interrupts and less work,
    // as past a knee, but gone the next period. A collapse stands; a burst is no knee, and
    // the target that lets the load go stays (on main it went to 421 k/s at the first burst,
    // and the queues were held 31-184 us for the rest of the run).
    let own = 383_000.0;
    let mut k = KneeFinder::new(1_000_000.0, 100_000.0, true);
    let (mut rate, mut held) = (own, false);
    let mut holds = 0;
    for i in 0..600u32 {
        let burst = i % 37 == 20;
        let natural = if burst { 1.2 * own } else { own };
        let work = if burst { 0.66e10 } else { 1e10 };
        (rate, held) = banded_period(&mut k, i, (rate, held), natural, |_| work);
        holds += u32::from(held);
    }
    assert_eq!(k.target(), 1_000_000.0, "held {holds} periods");
    assert_eq!(holds, 0);
}

#[test]
fn a_load_that_arrives_past_the_knee_and_climbs_to_its_own_rate_is_asked_a_step_down() {
    // A bulk load arriving past a 0.52 M/s knee (held-out gen-62-34: a 25G NIC on 36 queues
    // of 3401 B): its first periods run at 1.04 M/s, over the 1 M/s target, then its own rate
    // settles at 0.97 M/s with half the work (DMA at knee / rate). Held at the target, steps
    // up bought nothing (the held-back interrupts cost nothing), the search climbed past the
    // load's own rate and let it go, and no step down was ever asked: 53% of the healthy
    // platform for the whole run.
    // Past 0.9 M/s the collapse stands still: the work no longer follows small moves of
    // the rate (a step from 1 M/s to 1.1 M/s: -0.3%); under it, DMA at knee / rate.
    let knee = 520_000.0;
    let work = |r: f64| 1e10 * (knee / r.min(900_000.0)).min(1.0);
    let mut k = KneeFinder::new(1_000_000.0, 100_000.0, true);
    let (mut rate, mut held) = (1_040_000.0, true);
    let mut late = Vec::new();
    for i in 0..600u32 {
        // Let go, it runs to where its collapse settles.
        let natural = if i < 5 { 1_040_000.0 } else { 970_000.0 };
        (rate, held) = banded_period(&mut k, i, (rate, held), natural, work);
        if i >= 500 {
            late.push(work(rate) / 1e10);
        }
    }
    let least = late.iter().copied().fold(1.0, f64::min);
    assert!(
        least >= 0.9,
        "target {:.0}/s: {:.0}% of the work over the last 100 periods",
        k.target(),
        100.0 * least
    );
}

#[test]
fn a_long_climb_to_a_load_let_go_is_not_followed_by_a_step_down() {
    // A heavy load on a healthy platform whose own rate (3 M/s) is three times the start:
    // the climb crossed every rate a knee would show in and each step bought nothing lost,
    // so the load it lets go of is not held back again (a step down there was seen to cost
    // held-out healthy machines 150-230 ms of settling, and a burst's second arrival its
    // 300 ms bound).
    let own = 3_000_000.0;
    let mut k = KneeFinder::new(1_000_000.0, 100_000.0, true);
    let (mut rate, mut held) = (own, true);
    let mut holds = Vec::new();
    for i in 0..400u32 {
        (rate, held) = banded_period(&mut k, i, (rate, held), own, |_| 1e10);
        holds.push(held);
    }
    let free = holds.iter().position(|&h| !h).expect("never let go");
    assert!(
        holds[free..].iter().all(|&h| !h),
        "held again after the let-go at period {free}"
    );
}

/// A heavy load whose own rate sits under a target that holds nothing back, on a platform
/// where a rate that high tips now and then into a standing collapse (held-out gen-67-1: a
/// 200G NIC on 8 CPUs at 0.72 M/s, a 0.86 M/s knee, tipping every few hundred ms as the
/// queues' interrupts bunch up). A tip runs two periods before the fast loop holds it (the
/// first only partly collapsed); held under `safe`, the load never tips. Returns the periods
/// at which a tip began and the finder.
fn tipping(own: f64, safe: f64, every: u32, periods: u32) -> (Vec<u32>, KneeFinder) {
    let mut k = KneeFinder::new(1_000_000.0, 100_000.0, true);
    let (mut rate, mut held) = (own, false);
    let mut tips = Vec::new();
    let mut tip_left = 0u32;
    for i in 0..periods {
        if tip_left == 0 && !(i % every == every - 1 && rate > safe) {
            (rate, held) = banded_period(&mut k, i, (rate, held), own, |_| 1e10);
            continue;
        }
        if tip_left == 0 {
            tips.push(i);
            tip_left = 3;
        }
        tip_left -= 1;
        // The collapse as the moderator's counters see it: partly, fully, then held.
        let (r, w, binding, unheld) = match tip_left {
            2 => (1.37 * own, 0.80, false, true),
            1 => (2.2 * own, 0.42, true, true),
            _ => (2.2 * own, 0.59, true, false),
        };
        (rate, held) = (r, true);
        let noise = 1.0 + 0.002 * f64::from(i % 7) - 0.006;
        k.observe(&Observation {
            unheld,
            ..period(1e10 * w * noise, r, own, binding)
        });
    }
    (tips, k)
}

#[test]
fn a_load_that_tips_into_a_collapse_by_itself_is_held_under_the_rate_it_tipped_from() {
    // On main each tip was caught by the fast loop, which let the load go again once it had
    // recovered: a tip every 300 ms for as long as the load ran.
    let own = 715_000.0;
    let (tips, k) = tipping(own, 0.9 * own, 30, 1000);
    assert!(
        tips.len() <= 3,
        "{} tips in 10 s (at periods {tips:?}), target {:.0}/s",
        tips.len(),
        k.target()
    );
    assert!(k.target() < 0.9 * own, "target {:.0}/s", k.target());
    // Where a lower rate costs nothing, not far under it either: the margin.
    assert!(k.target() >= 0.65 * own, "target {:.0}/s", k.target());
}

/// Work of a NIC (bytes/s) and of drives (I/Os/s) with the fast loop holding `rate`: the
/// platform past `knee` loses both as knee / rate; under it the drives, which hold `floor`
/// interrupts whatever the target, gain `per_rate` of their I/Os per interrupt/s the NIC gives
/// up, and the NIC, which takes every cut, loses its bytes with its interrupts.
fn traded_work(rate: f64, knee: f64, floor: f64, per_rate: f64) -> Observation {
    let eff = (knee / rate).min(1.0);
    let nic_rate = (rate - floor).max(0.05 * floor);
    let nic_share = (nic_rate / (knee - floor)).min(1.0);
    let drives = 5e6 * eff * (1.0 + per_rate * (knee - rate).max(0.0));
    Observation {
        work: vec![
            ("eth0".into(), 3e9 * eff * nic_share, nic_rate),
            ("nvme0".into(), drives, floor),
        ],
        ..period(0.0, rate, 8_000_000.0, true)
    }
}

#[test]
fn a_descent_does_not_end_on_a_step_that_costs_one_device_for_another() {
    // A descent from a collapse, each step buying completions, reaches 1.81 M/s; the step
    // under it buys nothing on the whole: the drives gain about what the NIC loses, weighed
    // by their interrupts (held-out gen-47-29: NIC -38%, drives +13%). On main the search
    // parked under it and later went on down to 0.11 M/s, the NIC at 10% of the bytes it had
    // at 1.81 M/s; now the step is undone and the NIC keeps them.
    let (knee, floor, per_rate) = (2_500_000.0, 1_200_000.0, 6.0e-7);
    let mut k = KneeFinder::new(8_000_000.0, 100_000.0, true);
    let mut nic = Vec::new();
    for i in 0..1500u32 {
        let mut obs = traded_work(k.target(), knee, floor, per_rate);
        let noise = 1.0 + 0.002 * f64::from(i % 7) - 0.006;
        for w in &mut obs.work {
            w.1 *= noise;
        }
        nic.push(obs.work[0].1);
        k.observe(&obs);
    }
    let at_step = traded_work(1_810_101.0, knee, floor, per_rate).work[0].1;
    let end = nic[nic.len() - 100..]
        .iter()
        .copied()
        .fold(f64::MAX, f64::min);
    assert!(
        end >= 0.95 * at_step,
        "the NIC ends at {:.0}% of its bytes at 1.81 M/s, target {:.0}/s",
        100.0 * end / at_step,
        k.target()
    );
}

#[test]
fn the_first_period_out_of_a_collapse_is_no_baseline_for_the_next_step() {
    // Held-out gen-82-47 (a 40G NIC on 4 queues of 6 kB past a 0.70 M/s knee): the load ran
    // unheld at 0.98 M/s, 26% under its line rate; asked a step down to 0.79 M/s, still past
    // the knee, its one measured period drained the backlog the collapse had left (101% of
    // the line rate), and the next step, to 0.57 M/s and the full line rate, read 1.4% less
    // than that period: the target stayed past the knee, at 96% of the line rate. The
    // platform here: past the knee the work falls as (knee / rate)^0.2; the first two held
    // periods after the collapse add 5% of the line rate (the backlog).
    let (knee, own) = (700_000.0, 980_000.0);
    let eff = |r: f64| (knee / r).min(1.0).powf(0.2);
    let mut k = KneeFinder::new(1_000_000.0, 100_000.0, true);
    let (mut rate, mut held, mut since_collapse) = (own, false, 0u32);
    let mut work = Vec::new();
    for i in 0..400u32 {
        (rate, held) = banded_rate(rate, k.target(), own, held);
        since_collapse = if held { since_collapse + 1 } else { 0 };
        let drain = if (1..=2).contains(&since_collapse) {
            0.05
        } else {
            0.0
        };
        let w = (eff(rate) + drain) * (1.0 + 0.002 * f64::from(i % 7) - 0.006);
        k.observe(&Observation {
            unheld: !held,
            ..period(1e10 * w, rate, own, held)
        });
        work.push(eff(rate));
    }
    let last = work[work.len() - 100..].iter().copied().fold(1.0, f64::min);
    assert!(
        last >= 0.99,
        "target {:.0}/s: {:.1}% of the line rate over the last 100 periods",
        k.target(),
        100.0 * last
    );
}

/// A request/response NIC beside drives, the fast loop holding `rate`: the drives take
/// `drive_rate` interrupts whatever the target and lose their reads past `knee` as knee /
/// rate; the NIC takes the rest, and its transactions follow its interrupts (a closed loop
/// waits out every delay), past the knee too, a little less.
fn crossing_work(rate: f64, knee: f64, drive_rate: f64) -> Observation {
    let eff = (knee / rate).min(1.0);
    let nic_rate = (rate - drive_rate).max(0.05 * drive_rate);
    Observation {
        work: vec![
            ("eth0".into(), 20.0 * nic_rate * eff.sqrt(), nic_rate),
            ("nvme0".into(), 2e6 * eff, drive_rate),
        ],
        ..period(0.0, rate, 12_000_000.0, true)
    }
}

#[test]
fn a_step_up_that_costs_one_device_more_than_it_buys_another_is_undone() {
    // Held-out gen-78-16 (request/response on 192 queues beside 7 drives, knee 1.92 M/s):
    // the first step up bought the NIC 251% more transactions and cost every drive 84% of
    // its reads, +217% weighted by interrupts, and was kept: the drives ended at a third of
    // GSIM's reads. Weighted by interrupts the NIC gains here with every step; a step is kept
    // only while the drives fall less short of their best than the NIC was before it, so the
    // drives keep most of their reads under the knee (here they end near 90%).
    let (knee, drive_rate) = (1_900_000.0, 150_000.0);
    let mut k = KneeFinder::new(1_000_000.0, 100_000.0, true);
    let mut drives = Vec::new();
    for i in 0..1500u32 {
        let mut obs = crossing_work(k.target(), knee, drive_rate);
        let noise = 1.0 + 0.002 * f64::from(i % 7) - 0.006;
        for w in &mut obs.work {
            w.1 *= noise;
        }
        drives.push(obs.work[1].1);
        k.observe(&obs);
    }
    let low = drives[drives.len() - 300..]
        .iter()
        .copied()
        .fold(f64::MAX, f64::min);
    assert!(
        low >= 0.8 * 2e6,
        "the drives end at {:.0}% of their reads under the knee, target {:.0}/s",
        100.0 * low / 2e6,
        k.target()
    );
}

/// A request/response NIC beside two NVMe controllers on a healthy platform: the NIC's
/// transactions follow its interrupts; the drives do the same reads whatever the target,
/// split between the controllers by the setting the fast loop gave each (it spreads them
/// across controllers to reach a rate between two points of their grid), so one controller
/// does 20% more and the other 20% less depending on the target.
fn spread_work(rate: f64) -> Observation {
    let drives_rate = 200_000.0;
    let nic_rate = (rate - drives_rate).max(10_000.0);
    let side = if (rate / 37_000.0) as u64 % 2 == 0 {
        0.2
    } else {
        -0.2
    };
    let controllers = ["nvme0".to_string(), "nvme1".to_string()];
    Observation {
        work: vec![
            ("eth0".into(), 20.0 * nic_rate.min(3_000_000.0), nic_rate),
            (
                controllers[0].clone(),
                1e6 * (1.0 + side),
                drives_rate / 2.0,
            ),
            (
                controllers[1].clone(),
                1e6 * (1.0 - side),
                drives_rate / 2.0,
            ),
        ],
        pool: Some(("nvme".to_string(), controllers.to_vec())),
        ..period(0.0, rate, 3_400_000.0, rate < 3_200_000.0)
    }
}

#[test]
fn controllers_that_share_the_drives_reads_between_them_are_no_trade() {
    // Held-out gen-49-40 (a healthy platform, a NIC beside 7 drives): the first step up moved
    // some controllers' reads by -18% and others' by +21-30% while the drives' sum moved 1%;
    // read controller by controller, that was a trade, and the target stayed at the 1 M/s
    // start (the drives then did 11% fewer reads than with the load let go).
    let mut k = KneeFinder::new(1_000_000.0, 100_000.0, true);
    for _ in 0..300u32 {
        let obs = spread_work(k.target());
        k.observe(&obs);
    }
    assert!(
        k.target() >= 3_000_000.0,
        "the target stayed at {:.0}/s",
        k.target()
    );
}

/// A request/response NIC (eth1, most of the interrupts) beside a bulk NIC (eth0) on a
/// platform past its knee at `rate`: the closed loop's transactions grow with its interrupts
/// even past the knee (a little less each), the bulk NIC's bytes hold at line rate until the
/// platform's falling DMA capacity binds them (at 1.5x the knee), then fall with it.
fn rpc_beside_bulk(rate: f64) -> (f64, f64) {
    let eff = (1_200_000.0 / rate).min(1.0);
    (1e9 * (1.5 * eff).min(1.0), 900.0 * rate * eff.powf(0.25))
}

/// The largest shortfall of either NIC at `rate` from the most it does at any rate up to
/// `natural`.
fn worst_short(rate: f64, natural: f64) -> f64 {
    let (bulk, rpc) = rpc_beside_bulk(rate);
    let (bulk_best, rpc_best) = (1e9, rpc_beside_bulk(natural).1);
    (1.0 - bulk / bulk_best).max(1.0 - rpc / rpc_best)
}

#[test]
fn a_step_down_that_buys_one_device_more_than_it_costs_another_is_kept() {
    // Held-out gen-62-44 (a bulk 10G NIC beside a request/response 100G NIC past a 1.16 M/s
    // knee): the jump to the load's own rate was kept; the step down from it bought the bulk
    // NIC 41% and cost the request/response NIC 13% of its transactions, -8.6% weighted by
    // interrupts (the request/response NIC makes 13 times the bulk one's), and was undone:
    // the target stayed at 3.8 M/s with the bulk NIC 29% short of what it did at the start.
    // The target must end where the NIC worst off is about as short of its best as it can
    // be made (within 5 points).
    let natural = 4_000_000.0;
    let obs_at = |rate: f64, noise: f64, unheld: bool, target: f64| {
        let (bulk, rpc) = rpc_beside_bulk(rate);
        Observation {
            work: vec![
                ("eth0".into(), bulk * noise, 0.1 * rate),
                ("eth1".into(), rpc * noise, 0.9 * rate),
            ],
            unheld,
            ..period(0.0, rate, natural, natural >= target)
        }
    };
    let mut k = KneeFinder::new(1_000_000.0, 100_000.0, true);
    for i in 0..300u32 {
        let noise = 1.0 + 0.002 * f64::from(i % 7) - 0.006;
        let rate = if i == 0 {
            natural
        } else {
            k.target().min(natural)
        };
        k.observe(&obs_at(rate, noise, i == 0, k.target()));
    }
    let best = (100..=400)
        .map(|r| worst_short(f64::from(r) * 10_000.0, natural))
        .fold(f64::MAX, f64::min);
    let end = worst_short(k.target().min(natural), natural);
    assert!(
        end <= best + 0.05,
        "target {:.0}/s: the NIC worst off is {:.0}% short of its best, {:.0}% at best",
        k.target(),
        100.0 * end,
        100.0 * best
    );
}

#[test]
fn a_climb_that_costs_nothing_grows_its_steps() {
    // A healthy platform and a bulk load making ten times the starting target on its own
    // (held-out gen-92-6: 16 M/s of a 400G NIC): every step up costs nothing and buys
    // nothing. In 25% steps the climb to 10 M/s took 11 steps, more than 600 ms held back
    // for nothing; steps that keep costing nothing now double past the second.
    let t = search(1_000_000.0, f64::INFINITY, 50);
    assert!(
        t[49] >= 9_000_000.0,
        "after 500 ms the target is {:.0}/s: {t:?}",
        t[49]
    );
}

#[test]
fn grown_steps_still_end_under_any_knee() {
    // The price of grown steps: a probe may land up to twice past the highest rate kept.
    // Past a knee it loses its work at once and is undone; the search narrows from there
    // and parks under the knee, wherever that lies, having spent few periods past it.
    for knee in [1.3e6, 1.8e6, 2.5e6, 3.5e6, 5e6, 7e6, 9.5e6] {
        let t = search(1_000_000.0, knee, 1500);
        let last = *t.last().unwrap();
        let highest = t.iter().copied().fold(0.0, f64::max);
        let past = t.iter().filter(|&&x| x > knee * (1.0 + MIN_EFFECT)).count();
        // (A step just past the knee loses less than the least effect that counts.)
        assert!(
            last <= knee * (1.0 + MIN_EFFECT) && last >= 0.55 * knee,
            "knee {knee:.0}: parked at {last:.0}/s"
        );
        assert!(
            highest <= 2.0 * knee * (1.0 + MIN_EFFECT),
            "knee {knee:.0}: a probe went to {highest:.0}/s"
        );
        assert!(past <= 40, "knee {knee:.0}: {past} of 1500 periods past it");
    }
}

/// Runs the search from the 1 M/s start over a load that arrived unheld at `arrival` (its
/// first period did 10% more than `work` there: a platform's collapse had not yet built up)
/// and binds up to `natural`; returns the target after 3 s.
fn after_arrival(work: &dyn Fn(f64) -> f64, arrival: f64, natural: f64) -> f64 {
    let first = (1.1 * work(arrival), arrival);
    held_after_arrival(first, work, natural, &|t| t.min(natural)).target()
}

/// Runs the search from the 1 M/s start for 3 s over a load that arrived unheld doing
/// `first` (work, rate) and then binds, its rate `held(target)` under a target, its own rate
/// `natural`; returns the finder.
fn held_after_arrival(
    first: (f64, f64),
    work: &dyn Fn(f64) -> f64,
    natural: f64,
    held: &dyn Fn(f64) -> f64,
) -> KneeFinder {
    let mut k = KneeFinder::new(1_000_000.0, 100_000.0, true);
    for i in 0..300u32 {
        let noise = 1.0 + 0.002 * f64::from(i % 7) - 0.006;
        let obs = if i == 0 {
            Observation {
                unheld: true,
                ..period(first.0 * noise, first.1, first.1, true)
            }
        } else {
            let rate = held(k.target());
            period(work(rate) * noise, rate, natural, true)
        };
        k.observe(&obs);
    }
    k
}

#[test]
fn a_kept_jump_the_load_still_binds_at_asks_the_ground_below() {
    // Held-out gen-67-26 (a 100G NIC of 313 B packets past a 2.84 M/s knee): at the 1 M/s
    // start the load is held back (its work follows its interrupts up to 1.5 M/s), and its
    // arrival, unheld at 9.2 M/s past the knee, did more than that: the first probe jumps to
    // its own rate and is kept, measured 3% over the start. The load, less held there, binds
    // at it still, and the climb went on upwards from the jump, never asking the ground it
    // skipped: 1.02 of GSIM where climbing from the start gave 1.84. A kept jump now asks one
    // step down whether the load binds there or not, and the descent finds the knee.
    let knee = 2_840_000.0;
    // Past the knee the platform's DMA efficiency falls, to a floor of 70% by 9 M/s.
    let work = |r: f64| 1e10 * (r / 1.47e6).min(1.0) * (knee / r).min(1.0).powf(0.3).max(0.7);
    let t = after_arrival(&work, 9_200_000.0, 12_000_000.0);
    assert!(
        work(t) >= 0.9 * work(knee),
        "parked at {t:.0}/s: {:.1}% of the work at the knee",
        100.0 * work(t) / work(knee)
    );
}

#[test]
fn a_kept_jump_that_bought_much_still_asks_the_ground_below() {
    // Held-out gen-82-3 (request/response on a 400G NIC of 206 queues beside 2 drives): held
    // back at the 1 M/s start the load does a sixth of its work; it arrived unheld at 38 M/s,
    // the jump there was kept (+503%) and, bought much, climbed on to 48 M/s: 0.70 of GSIM.
    // Its work peaks at 10 M/s (a knee of its own: past it every interrupt costs more than
    // it brings), falls to half by 36 M/s and stays there: a step up from the jump costs
    // nothing, a step down buys. A kept jump asks one step down however much it bought.
    let (peak, flat) = (10_000_000.0, 36_000_000.0);
    let work = |r: f64| {
        let past = ((r - peak) / (flat - peak)).clamp(0.0, 1.0);
        1e10 * (r / peak).min(1.0) * (1.0 - 0.5 * past)
    };
    let t = after_arrival(&work, 38_000_000.0, 60_000_000.0);
    assert!(
        work(t) >= 0.9 * work(peak),
        "parked at {t:.0}/s: {:.1}% of the work at the peak",
        100.0 * work(t) / work(peak)
    );
}

/// Three seconds of a load that arrives unheld at its own rate `natural`, periods swinging
/// +-4% (the pattern started `phase` periods in), the rate at the target or the load's own
/// where that is lower. Returns the finder and its notes with the target each left.
fn swinging_after_arrival(
    work: &dyn Fn(f64) -> f64,
    natural: f64,
    phase: usize,
) -> (KneeFinder, Vec<(String, f64)>) {
    let mut k = KneeFinder::new(1_000_000.0, 100_000.0, true);
    let swing = [0.04, -0.03, 0.01, -0.04, 0.03, -0.01, 0.0];
    let mut notes = Vec::new();
    for i in 0..300usize {
        let noise = 1.0 + swing[(i + phase) % swing.len()];
        let obs = if i == 0 {
            Observation {
                unheld: true,
                ..period(work(natural) * noise, natural, natural, true)
            }
        } else {
            let rate = k.target().min(natural);
            period(work(rate) * noise, rate, natural, k.target() < natural)
        };
        k.observe(&obs);
        if let Some(n) = k.take_note() {
            notes.push((n, k.target()));
        }
    }
    (k, notes)
}

#[test]
fn a_jumps_step_down_that_gains_under_its_noise_asks_one_step_further() {
    // Held-out gen-172-19 (request/response on 96 queues of 105 B packets past a 1.53 M/s
    // knee): held back at the 1 M/s start the load does half its best; it arrived unheld at
    // 7.9 M/s, where the platform runs at a fifth of its DMA, and the jump there was kept
    // (+23%). Its work peaks near 2.8 M/s and is nearly flat over the top of the skipped
    // ground: the one step down a kept jump asks (to 6.3 M/s) gained +4.5%, under the noise
    // of a collapsing platform's periods, and the search parked at the jump with 0.61 of
    // the transactions a target of 2.8 M/s gives. Work per period here swings +-4%.
    let work = |r: f64| {
        let climb = (r / 2_000_000.0).min(1.0);
        // Past 2.8 M/s the work falls to 0.6 of the peak by 6 M/s and slowly after that.
        let past = if r <= 2_800_000.0 {
            1.0
        } else if r <= 6_000_000.0 {
            1.0 - 0.4 * (r - 2_800_000.0) / 3_200_000.0
        } else {
            0.6 - 0.03 * (r - 6_000_000.0) / 2_000_000.0
        };
        1e10 * climb * past
    };
    let natural = 7_520_000.0;
    let (k, _) = swinging_after_arrival(&work, natural, 0);
    // The rate the load runs at: the target, or its own rate where that is lower.
    let t = k.target().min(natural);
    assert!(
        work(t) >= 0.9 * work(2_800_000.0),
        "runs at {t:.0}/s: {:.1}% of the work at the peak",
        100.0 * work(t) / work(2_800_000.0)
    );
}

#[test]
fn a_jumps_second_step_down_that_buys_nothing_goes_back_to_the_jump() {
    // The same question on a load that the jump let go of and that no knee binds (a bulk
    // load on a healthy platform, held back under 1.5 M/s, flat above): the first step down
    // reads a gain inside its noise, the second, judged against the jump's window, nothing.
    // The jump's target wins (nothing held back), not the first step's, which won nothing
    // proven and holds the load under its own rate.
    let work = |r: f64| 1e10 * (r / 1_500_000.0).min(1.0);
    let natural = 7_520_000.0;
    let (_, notes) = swinging_after_arrival(&work, natural, 1);
    let asked = notes
        .iter()
        .position(|(n, _)| n.contains("one step further"));
    assert!(
        asked.is_some(),
        "the first step down did not read a gain under its noise: {notes:#?}"
    );
    // The verdict on the second step, and the target it left.
    let (_, after) = &notes[asked.unwrap_or(0) + 1];
    assert!(
        *after >= natural,
        "parked at {after:.0}/s, under the load's own {natural:.0}/s: {notes:#?}"
    );
}

#[test]
fn a_margin_that_costs_what_the_step_started_from_did_goes_back_there_before_looking_below() {
    // Held-out gen-79-18 (request/response at medium load, its own 0.99 M/s under the 1 M/s
    // target, every interrupt held back a transaction lost): a periodic recheck's step up read
    // a dip of the load's own as a loss, the margin put the target at 0.7 M/s, and the step
    // below it (a loss) sent it back to 0.7 M/s, never compared with 1 M/s: the load held
    // back for the rest of the run, p95 2x `moderation=none`. Here the work dips 2% whenever
    // a probe runs above the start.
    let own = 985_000.0;
    let mut k = KneeFinder::new(1_000_000.0, 100_000.0, true);
    let (mut rate, mut held) = (own, false);
    let (mut rechecks, mut under) = (0, 0);
    for i in 0..1500u32 {
        let probing = k.target() > 1_000_000.0;
        let dip = if probing { 0.98 } else { 1.0 };
        (rate, held) = banded_period(&mut k, i, (rate, held), own, |r| {
            1e10 * dip * (r / own).min(1.0).sqrt()
        });
        rechecks += u32::from(!probing && k.target() > 1_000_000.0);
        under += u32::from(i >= 100 && k.target() < 0.99e6);
    }
    assert!(rechecks >= 1, "{rechecks} rechecks");
    assert!(k.target() >= 1_000_000.0, "parked at {:.0}/s", k.target());
    assert!(
        under <= 100,
        "{under} of 1400 periods under the load's own rate"
    );
}

#[test]
fn a_margin_that_costs_nothing_asks_the_ground_below_it() {
    // Held-out gen-87-7 and gen-87-37: request/response on CPUs its own interrupts keep busy,
    // so that fewer interrupts buy transactions down to 0.5 M/s; from 0.9 M/s to 1.3 M/s the
    // work is flat, and letting the load go to its own 1.45 M/s costs 20%. The
    // first step up was kept, the let-go undone, and the margin's target (1.02 M/s, no worse
    // than 1.25 M/s) was where the search parked: 80% of the work at 0.5 M/s.
    let work = |r: f64| {
        let under = if r < 0.5e6 {
            1.2 * r / 0.5e6
        } else {
            1.0 + 0.5 * (0.9 - r / 1e6).max(0.0)
        };
        1e10 * under * (1.3e6 / r).min(1.0).powi(2)
    };
    let natural = 1.45e6;
    let mut k = KneeFinder::new(1_000_000.0, 100_000.0, true);
    let rate = run_banded(&mut k, &work, natural, 400);
    let best = work(0.5e6);
    assert!(
        work(rate) >= 0.9 * best,
        "parked at {:.0}/s (rate {rate:.0}/s): {:.1}% of the best work",
        k.target(),
        100.0 * work(rate) / best
    );
}

/// One period of a load whose own rate is `natural`: held at the target under it, its work
/// falls as (target / natural)^`slope` (a closed loop whose work follows its interrupts; 0: a
/// load its interrupts do not hold back); let go, it runs at `natural`, its work `gain` times
/// higher while TX completions run at the driver's own moderation. Deterministic noise.
fn let_go(k: &KneeFinder, i: u32, natural: f64, slope: f64, gain: f64, scale: f64) -> Observation {
    let noise = 1.0 + 0.002 * f64::from(i % 7) - 0.006;
    let held = k.target() < natural;
    let rate = if held { k.target() } else { natural };
    let g = if k.tx_held() { gain } else { 1.0 };
    Observation {
        unheld: !held,
        // Packets too far apart for an unheld load's short step down to be asked.
        nic_gap_us: 100.0,
        ..period(
            scale * (rate / natural).powf(slope) * g * noise,
            rate,
            natural,
            held,
        )
    }
}

/// Runs a finder (the TX question on) from a 1 M/s start against [`let_go`]'s load. Returns,
/// period by period, whether TX completions ran at the driver's own moderation, and the notes.
fn tx_question(natural: f64, slope: f64, gain: f64, periods: u32) -> (Vec<bool>, Vec<String>) {
    let mut k = KneeFinder::new(1_000_000.0, 100_000.0, true).with_tx_question(true);
    let (mut held, mut notes) = (Vec::new(), Vec::new());
    for i in 0..periods {
        let obs = let_go(&k, i, natural, slope, gain, 1e10);
        k.observe(&obs);
        held.push(k.tx_held());
        notes.extend(k.take_note());
    }
    (held, notes)
}

/// The notes about TX completions.
fn tx_notes(notes: &[String]) -> Vec<&String> {
    notes.iter().filter(|n| n.contains("TX")).collect()
}

#[test]
fn tx_completions_held_by_the_driver_are_kept_where_they_buy_completions() {
    let (held, notes) = tx_question(4_000_000.0, 0.3, 1.03, 600);
    // Asked once the search let the load go, then kept for good.
    let first = held.iter().position(|&h| h).expect("never asked");
    assert!(held[first..].iter().all(|&h| h), "{notes:?}");
    let tx = tx_notes(&notes);
    assert_eq!(tx.len(), 2, "{notes:?}");
    assert!(tx[1].contains("bought completions"), "{notes:?}");
}

#[test]
fn tx_completions_that_buy_nothing_go_back_and_are_not_asked_again() {
    let (held, notes) = tx_question(4_000_000.0, 0.3, 1.0, 600);
    let asked = held.iter().filter(|&&h| h).count();
    assert!(
        asked <= (SETTLE_MAX + MEASURE) as usize,
        "held for {asked} periods: {notes:?}"
    );
    assert!(asked > 0, "never asked: {notes:?}");
    assert!(!held.last().unwrap());
    let tx = tx_notes(&notes);
    assert_eq!(tx.len(), 2, "asked once: {notes:?}");
    assert!(tx[1].contains("bought nothing"), "{notes:?}");
}

#[test]
fn a_load_its_interrupts_do_not_hold_back_is_not_asked_about_tx_completions() {
    // Bulk at line rate on a healthy platform: the climb to its own rate bought nothing, and
    // the question would only move its rate for a while.
    let (held, notes) = tx_question(4_000_000.0, 0.0, 1.5, 600);
    assert!(held.iter().all(|&h| !h), "{notes:?}");
    assert!(tx_notes(&notes).is_empty(), "{notes:?}");
    // Nor one whose climb bought under `SHARP_GAIN` in all: here its first step, 3.6%, and
    // nothing past 1.25 M/s.
    let mut k = KneeFinder::new(1_000_000.0, 100_000.0, true).with_tx_question(true);
    let mut notes = Vec::new();
    for i in 0..600 {
        let mut obs = let_go(&k, i, 4_000_000.0, 0.0, 1.5, 1e10);
        obs.work[0].1 *= (obs.rate.min(1_250_000.0) / 1_250_000.0).powf(0.16);
        k.observe(&obs);
        assert!(!k.tx_held(), "{notes:?}");
        notes.extend(k.take_note());
    }
    assert!(
        notes.iter().any(|n| n.contains("kept (work +3")),
        "the first step bought: {notes:?}"
    );
    assert!(tx_notes(&notes).is_empty(), "{notes:?}");
}

#[test]
fn a_load_under_the_starting_target_is_never_asked_about_tx_completions() {
    // The low-load promise: latency as with no moderation, an interrupt per completion.
    let (held, notes) = tx_question(600_000.0, 0.3, 1.5, 600);
    assert!(held.iter().all(|&h| !h), "{notes:?}");
    assert!(tx_notes(&notes).is_empty(), "{notes:?}");
}

#[test]
fn tx_completions_that_cost_one_device_its_work_are_not_kept() {
    // A request/response NIC gains 5% while a bulk NIC beside it loses 4% (its packets wait
    // in the RX polls for the completions): more work in all, but not kept.
    let mut k = KneeFinder::new(1_000_000.0, 100_000.0, true).with_tx_question(true);
    let mut notes = Vec::new();
    for i in 0..600 {
        let mut obs = let_go(&k, i, 4_000_000.0, 0.3, 1.0, 1.0);
        let w = obs.work[0].1;
        let (a, b) = if k.tx_held() {
            (1.05, 0.96)
        } else {
            (1.0, 1.0)
        };
        obs.work = vec![
            ("eth0".into(), 2e9 * w * a, 0.75 * obs.rate),
            ("eth1".into(), 1e9 * w * b, 0.25 * obs.rate),
        ];
        k.observe(&obs);
        notes.extend(k.take_note());
    }
    assert!(!k.tx_held(), "{notes:?}");
    assert!(notes.iter().any(|n| n.contains("cost eth1")), "{notes:?}");
}

#[test]
fn tx_completions_go_back_when_the_load_falls_under_the_starting_target() {
    let mut k = KneeFinder::new(1_000_000.0, 100_000.0, true).with_tx_question(true);
    let mut notes = Vec::new();
    let mut was_held = false;
    for i in 0..800u32 {
        let obs = if i < 500 {
            let_go(&k, i, 4_000_000.0, 0.3, 1.03, 1e10)
        } else {
            // The load leaves for a light one: 0.3 M/s, nothing held back.
            Observation {
                unheld: true,
                nic_gap_us: 100.0,
                ..period(1e9, 300_000.0, 300_000.0, false)
            }
        };
        k.observe(&obs);
        notes.extend(k.take_note());
        if i == 499 {
            was_held = k.tx_held();
        }
    }
    assert!(was_held, "{notes:?}");
    assert!(!k.tx_held(), "{notes:?}");
    assert!(notes.iter().any(|n| n.contains("fell to")), "{notes:?}");
}

#[test]
fn drives_with_no_nic_beside_them_are_never_asked_about_tx_completions() {
    // The load the first TX test keeps it for, but with no busy NIC queue (an NVMe-only box):
    // there are no TX completions to hold, and the question would only name a setting the
    // machine lacks (held-out gen-142-11) and hold the search for its periods.
    let mut k = KneeFinder::new(1_000_000.0, 100_000.0, true).with_tx_question(true);
    let mut notes = Vec::new();
    for i in 0..600 {
        let obs = Observation {
            nic_gap_us: 0.0,
            ..let_go(&k, i, 4_000_000.0, 0.3, 1.03, 1e10)
        };
        k.observe(&obs);
        assert!(!k.tx_held(), "period {i}: {notes:?}");
        notes.extend(k.take_note());
    }
    assert!(tx_notes(&notes).is_empty(), "{notes:?}");
}

#[test]
fn a_step_up_from_a_target_the_rate_stays_above_moves_the_rate_by_a_step() {
    // Held-out gen-152-1: drives at the floor of their timer's grid beside request/response
    // keep the rate at 1.2 M/s under the 1 M/s start. A step from the target (to 1.33 M/s)
    // moved the rate 5%, and its window read only what that much traded (-1.3%): undone, and
    // the search parked at 1.1 M/s, where 2.2 M/s does 1.7x the transactions. The step starts
    // from the rate the baseline held in every period.
    let held = 1.2e6;
    let mut k = KneeFinder::new(1_000_000.0, 100_000.0, true);
    let mut first = None;
    for i in 0..200u32 {
        let rate = (0.95 * k.target()).max(held);
        let noise = 1.0 + 0.002 * f64::from(i % 7) - 0.006;
        k.observe(&period(1e10 * noise, rate, 8e6, true));
        if first.is_none() && k.target() > 1_000_000.0 {
            first = Some(k.target());
        }
    }
    let first = first.expect("no step up");
    assert!(
        first >= held * 1.2,
        "the first step up went to {first:.0}/s from a rate held at {held:.0}/s"
    );
}

#[test]
fn a_descent_that_overshoots_bisects_the_ground_above_the_step_that_cost() {
    // Held-out gen-82-7's shape: past the knee (590 k/s) every interrupt costs DMA, and under
    // 560 k/s the load pays for fewer interrupts (drives whose thresholds outgrow their reads
    // in flight). The descent from the collapse buys completions step by step, each nearly its
    // own size; its growing step lands under the peak and costs them. Parking at that step's
    // upper target left a fifth of the interrupts past the knee; the middle of the ground
    // between is asked once instead.
    let knee = 590_000.0;
    let work = |r: f64| {
        let eff = if r > knee { knee / r } else { 1.0 };
        eff * (r / 560_000.0).min(1.0).powi(3)
    };
    let mut k = KneeFinder::new(1_000_000.0, 100_000.0, true);
    let mut targets = Vec::new();
    for i in 0..1200u32 {
        let rate = k.target();
        let noise = 1.0 + 0.002 * f64::from(i % 7) - 0.006;
        k.observe(&period(1e10 * work(rate) * noise, rate, 3_000_000.0, true));
        targets.push(rate);
    }
    let parked = targets[targets.len() - 200..]
        .iter()
        .copied()
        .fold(0.0, f64::max);
    assert!(
        work(parked) >= 0.95,
        "parked at {parked:.0}/s: {:.3} of the most this load does",
        work(parked)
    );
}

#[test]
fn a_step_down_that_calms_a_restless_load_but_costs_work_is_not_kept() {
    // Held-out gen-182-10 (drives at iodepth 5 on a healthy platform, in bursts): the load's
    // own rate swings by a fifth period to period, and every interrupt held back costs reads
    // (its period's work falls with the share of its own rate it is held to). The jump to
    // its own rate was kept; the step down it asks calmed the rate (held at the target,
    // period after period) while losing reads: read as a cliff's edge calmed, it was kept,
    // and the load ran at 0.89 of `none`'s reads with 1.9x its p99. A restless rate is a
    // cliff's edge only if calming it costs nothing: here the load must end unheld. Without
    // the rule the search parked at 3.3 M/s.
    let natural = 5_000_000.0;
    let swing = [0.0, 0.35, -0.1, 0.3, -0.08, 0.35, -0.1, 0.15];
    let mut k = KneeFinder::new(1_000_000.0, 100_000.0, true);
    let mut notes = Vec::new();
    for i in 0..300usize {
        let own = natural * (1.0 + swing[i % swing.len()]);
        // The load arrives unheld (its first period), then runs under the target.
        let held = i > 0 && k.target() < own;
        let rate = if held { k.target() } else { own };
        let noise = 1.0 + 0.002 * (i % 7) as f64 - 0.006;
        let work = 1e10 * (rate / own).powf(0.15) * noise;
        k.observe(&Observation {
            unheld: i == 0,
            ..period(work, rate, natural, held || rate >= k.target())
        });
        if let Some(n) = k.take_note() {
            notes.push((n, k.target()));
        }
    }
    let t = k.target();
    assert!(
        t >= natural,
        "parked at {t:.0}/s under the load's own {natural:.0}/s: {notes:#?}"
    );
}

#[test]
fn an_arrival_that_one_device_gains_from_goes_to_the_loads_own_rate() {
    // Held-out gen-192-12: a request/response NIC (70-byte packets) beside a bulk NIC whose
    // bytes no delay holds back. Held at the 1 M/s start the small-packet NIC does a fraction
    // of its transactions; unheld at its arrival (9.4 M/s of its own) it did them all, and the
    // two NICs' bytes together rose 2%, under the early bar. The first probe goes to the
    // load's own rate, as for one device that gains: it is judged per device, as every step
    // is, not on a sum of bytes. Climbing from the start in 25% steps held the load back for
    // 580 ms (p99 2.1x `moderation=none`).
    let natural = 9_400_000.0;
    let obs = |rate: f64, i: u32, unheld: bool| {
        let noise = 1.0 + 0.002 * f64::from(i % 7) - 0.006;
        let share = (rate / natural).min(1.0);
        Observation {
            // Bulk bytes are flat; the small-packet NIC's follow its interrupts (60% of them).
            work: vec![
                ("bulk".into(), 2e10 * noise, 0.4 * rate),
                ("rpc".into(), 4e8 * share * noise, 0.6 * rate),
            ],
            unheld,
            ..period(0.0, rate, natural, true)
        }
    };
    let mut k = KneeFinder::new(1_000_000.0, 100_000.0, true);
    k.observe(&obs(natural, 0, true));
    for i in 1..20u32 {
        let rate = k.target().min(natural);
        k.observe(&obs(rate, i, false));
    }
    assert!(
        k.target() >= natural,
        "after 200 ms the target is {:.0}/s, the load's own rate {natural:.0}/s",
        k.target()
    );
}

#[test]
fn a_steady_unheld_load_is_asked_a_short_step() {
    // Held-out gen-207-46: a bulk load at half the target, its work steady within 0.2%, was
    // asked a 25% step down: 2-18 us on its queues for two periods of a 3 s run, and its
    // probe's p99 went to 1.21x `none`. A steady load's bar is `SHARP_GAIN`, and its step
    // twice that (10%), no more.
    let own = 800_000.0;
    let mut k = KneeFinder::new(1_000_000.0, 100_000.0, true);
    let (mut rate, mut held) = (own, false);
    let mut least = f64::INFINITY;
    for i in 0..200u32 {
        (rate, held) = banded_period(&mut k, i, (rate, held), own, |_| 1e10);
        least = least.min(k.target());
    }
    assert!(
        least >= own / (1.0 + SHARP_STEP) * 0.999 && least < own,
        "the question went to {least:.0}/s from {own:.0}/s"
    );
    assert_eq!(k.target(), 1_000_000.0);
}

#[test]
fn a_steady_load_collapsed_under_the_target_is_found_by_the_short_step() {
    // The collapse the short step is asked for: a steady load whose own rate (0.8 M/s) lies
    // past a 0.6 M/s knee, where the platform's DMA follows the interrupts (gamma 1). The 10%
    // step buys about 10%, twice its bar, and the descent that follows reaches the knee.
    let (knee, own) = (600_000.0, 800_000.0);
    let eff = |r: f64| (knee / r).min(1.0);
    let mut k = KneeFinder::new(1_000_000.0, 100_000.0, true);
    let (mut rate, mut held) = (own, false);
    let mut work = Vec::new();
    for i in 0..400u32 {
        (rate, held) = banded_period(&mut k, i, (rate, held), own, |r| 1e10 * eff(r));
        work.push(eff(rate));
    }
    let last = work[work.len() - 50..].iter().copied().fold(1.0, f64::min);
    assert!(
        last >= 0.95,
        "target {:.0}/s: {:.0}% of the healthy work over the last 50 periods",
        k.target(),
        100.0 * last
    );
}

/// Drives held over a 1 M/s target they cannot reach (their reads-in-flight bound, `least`),
/// a bound that falls as the grid's steps past it are kept (4.4 M/s to 2.4 M/s over half a
/// second); the host is CPU-bound and does more the fewer interrupts it takes. Returns the
/// targets, period by period.
fn drives_over_an_unreachable_target(periods: u32) -> Vec<f64> {
    let mut k = KneeFinder::new(1e6, 100_000.0, true);
    let natural = 6.4e6;
    let mut targets = Vec::new();
    for i in 0..periods {
        let least = (4.4e6 - 4e4 * f64::from(i)).max(2.4e6);
        let rate = k.target().max(least).min(natural);
        let noise = 1.0 + 0.0005 * f64::from(i % 7);
        let work = 1e9 * (1.0 - rate / 2e7) * noise;
        k.observe(&Observation {
            least,
            settled: true,
            ..period(work, rate, natural, true)
        });
        targets.push(k.target());
    }
    targets
}

#[test]
fn a_step_up_whose_interrupts_fell_is_not_credited_with_what_fewer_bought() {
    // The load's own rate costs work (undone); the margin's 3.7 M/s, under the drives' rate
    // then, gains 1.3% while their rate falls from 3.9 M/s to 3.6 M/s: the gain is the
    // grid's, and fewer interrupts bought it. Kept (held-out gen-42-18), the target sat over
    // the drives' rate and stopped the grid's steps at 0.92 of GSIM's reads.
    let t = drives_over_an_unreachable_target(100);
    assert!(t.iter().any(|&x| x > 3e6), "never asked");
    let last = *t.last().unwrap();
    assert!(last <= 1.1e6, "target {last:.0}/s");
}

#[test]
fn an_unheld_load_asked_for_nothing_is_let_go_clear_of_its_own_rate() {
    // Held-out gen-242-32 (a 200G NIC at medium load, its own rate 984 k/s under the 1 M/s
    // start): the short step down an unheld load is asked bought nothing, and the target went
    // back to the 1 M/s it was asked under, inside the fast loop's band over the load's own
    // rate. The backlog the step left drained at 1.03 M/s, the fast loop held 9 queues at 2-8
    // us, and the band kept them for 1.1 s (p95 1.46x `none`). As a climb's let-go does, the
    // target clears the load's own rate by `LET_GO_CLEAR`.
    let mut k = KneeFinder::new(1_000_000.0, 100_000.0, true);
    let natural = 0.985e6;
    let mut state = (natural, false);
    let mut notes = Vec::new();
    for i in 0..100 {
        state = banded_period(&mut k, i, state, natural, |_| 1e10);
        notes.extend(k.take_note());
    }
    assert!(
        notes.iter().any(|n| n.contains("asking once")),
        "the load was not asked: {notes:?}"
    );
    assert!(
        k.target() >= natural * (1.0 + LET_GO_CLEAR) * 0.999,
        "target {:.0}/s: {notes:?}",
        k.target()
    );
}
