//! The seven causes of issue 10, each as the behaviour a user relies on: global moderation
//! that keeps its promise (low-load latency as without moderation, line rate under overload)
//! on machines it was not tuned on.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{builtin_with, sets};
use irqpilot_core::Action;
use irqpilot_sim::{Report, Scenario, SeriesPoint};

fn toml_with(text: &str, pairs: &[(&str, &str)]) -> Scenario {
    Scenario::from_toml(text, "test")
        .unwrap()
        .with_sets(&sets(pairs))
        .unwrap()
}

fn run(sc: Scenario) -> Report {
    irqpilot_sim::run_scenario(sc, |_| {}).unwrap()
}

/// The mean of one series over `(from, to]` ms.
fn window_mean(r: &Report, from: f64, to: f64, f: fn(&SeriesPoint) -> f64) -> f64 {
    let w: Vec<f64> = r
        .series
        .iter()
        .filter(|p| p.t_ms > from && p.t_ms <= to)
        .map(f)
        .collect();
    w.iter().sum::<f64>() / w.len().max(1) as f64
}

/// Cause 1 (and 2): over 3 s at low load, global moderation must cost nothing against no
/// moderation at all (the GSIM cover letter's promise): p95 within 5%, p99 within 10%.
#[test]
fn low_load_latency_is_that_of_no_moderation_over_three_seconds() {
    let base = [("duration_ms", "3000"), ("warmup_ms", "600")];
    let lat = |m: &str| {
        let mut v = base.to_vec();
        v.push(("moderation", m));
        run(builtin_with("nic-100g-32q-lowload", &v))
            .latency_us
            .unwrap()
    };
    let none = lat("none");
    for m in ["gsim", "irqpilot"] {
        let l = lat(m);
        assert!(
            l.p95 <= 1.05 * none.p95,
            "{m}: p95 {} us vs {} us without moderation",
            l.p95,
            none.p95
        );
        assert!(
            l.p99 <= 1.10 * none.p99,
            "{m}: p99 {} us vs {} us without moderation",
            l.p99,
            none.p99
        );
    }
}

/// A moderator that leaves every queue at its idle setting is no moderation at all, sample for
/// sample: its run is `none`'s run. The daemon is running when the load arrives (its first
/// period ends as the load starts), so no period at the driver's default perturbs the run; with
/// the takeover 10 ms into the load, two runs of this bimodal probe latency parted and their
/// p95 differed by up to 1.8x on seed noise alone, which a low-load comparison then read as a
/// cost of moderating.
#[test]
fn a_moderator_that_holds_nothing_back_is_no_moderation() {
    let text = r#"
name = "bulk-low"
duration_ms = 700
warmup_ms = 300
seed = 7
[machine]
numa_nodes = 2
packages = 2
cores_per_package = 8
[platform]
kind = "limited"
limited_knee_per_sec = 1729129
[[nic]]
name = "eth0"
link_gbps = 50
queues = 9
mtu_bytes = 3299
moderation = "static"
[[workload]]
kind = "bulk"
nic = "eth0"
load = 0.075
flows = 36
window_kb = 48
chunk_kb = 16
wire_rtt_us = 10
jitter_us = 5
probe_per_sec = 2000
"#;
    let none = run(toml_with(text, &[("moderation", "none")]));
    let irq = run(toml_with(text, &[("moderation", "irqpilot")]));
    assert!(irq.per_source.iter().all(|s| s.moderation_delay_us == 0.0));
    assert_eq!(irq.latency_us, none.latency_us);
    assert_eq!(irq.interrupts_per_sec, none.interrupts_per_sec);
}

/// Cause 2: a `/proc/stat` tick is 10 ms, the control period too; one period's hardirq share
/// reads 0% or 100%. At low load no period may lead to a delay on any queue.
#[test]
fn tick_quantized_hardirq_never_moderates_at_low_load() {
    let sc = builtin_with(
        "nic-100g-32q-lowload",
        &[
            ("duration_ms", "3000"),
            ("warmup_ms", "600"),
            ("moderation", "irqpilot"),
        ],
    );
    let mut delays = Vec::new();
    irqpilot_sim::run_scenario_observed(
        sc,
        |_| {},
        |step| {
            for o in &step.applied.outcomes {
                if let Action::SetCoalesce { params, .. } = &o.action {
                    if params.rx_usecs.unwrap_or(0) > 0 && o.result == Ok(true) {
                        delays.push((step.at.0 / 1_000_000, params.describe()));
                    }
                }
            }
        },
    )
    .unwrap();
    assert!(
        delays.is_empty(),
        "{} delays programmed at low load, first {:?}",
        delays.len(),
        delays.first()
    );
}

/// 128 NVMe queues at iodepth 1 (one read in flight per queue): 1.6 M interrupts/s, under a
/// 2 M/s knee. Any coalescing makes a read wait for the aggregation timer.
const NVME_QD1: &str = r#"
name = "nvme-qd1"
duration_ms = 1200
warmup_ms = 400
[machine]
numa_nodes = 2
packages = 2
cores_per_package = 32
[platform]
limited_knee_per_sec = 2000000
[[nvme]]
name = "nvme"
drives = 8
queues_per_drive = 16
max_iops = 1750000
latency_us = 75
[[workload]]
kind = "fio"
nvme = "nvme"
iodepth = 1
"#;

/// Peak-to-peak of the interrupt rate over the series points after `from_ms`, relative to
/// their mean.
fn ripple(r: &Report, from_ms: f64) -> f64 {
    let v: Vec<f64> = r
        .series
        .iter()
        .filter(|p| p.t_ms > from_ms)
        .map(|p| p.interrupts_per_sec)
        .collect();
    let mean = v.iter().sum::<f64>() / v.len() as f64;
    let max = v.iter().copied().fold(0.0, f64::max);
    let min = v.iter().copied().fold(f64::INFINITY, f64::min);
    (max - min) / mean
}

/// Causes 4 and 5: NVMe at iodepth 1 is latency-bound and below the platform's knee; the
/// moderator must neither cut IOPS nor swing between two grid points of the coarse NVMe knob.
#[test]
fn nvme_at_iodepth_one_is_neither_cut_nor_swinging() {
    let none = run(toml_with(NVME_QD1, &[])).iops.unwrap();
    let r = run(toml_with(NVME_QD1, &[("moderation", "irqpilot")]));
    let iops = r.iops.unwrap();
    assert!(
        iops >= 0.95 * none,
        "IOPS {iops} vs {none} without moderation"
    );
    let rip = ripple(&r, 600.0);
    assert!(
        rip <= 0.10,
        "interrupt rate peak-to-peak {rip:.2} of its mean"
    );
}

/// Cause 4: a latency ceiling under NVMe's 100 us time unit must not leave NVMe unmoderated
/// (the threshold, not the timer, does the work).
#[test]
fn nvme_is_moderated_under_a_small_latency_ceiling() {
    let r = run(builtin_with(
        "nvme-12ssd-96q",
        &[
            ("duration_ms", "500"),
            ("warmup_ms", "300"),
            ("moderation", "irqpilot"),
            ("moderator.delay_us", "50"),
            ("moderator.min_delay_us", "2"),
        ],
    ));
    let iops = r.iops.unwrap();
    assert!(iops >= 19.0e6, "{iops} IOPS (device max 20.5 M)");
}

/// Cause 5: a platform whose knee (0.8 M/s) is below the configured target: the moderator must
/// find it from what it observes and reach >= 95% of the healthy platform's line rate.
#[test]
fn a_knee_below_the_target_is_found() {
    let r = run(builtin_with(
        "nic-100g-32q",
        &[
            ("platform.limited_knee_per_sec", "800000"),
            ("duration_ms", "1500"),
            ("warmup_ms", "800"),
            ("moderation", "irqpilot"),
        ],
    ));
    let g = r.throughput_gbps.unwrap();
    assert!(g >= 95.0, "{g} Gb/s (healthy: 100)");
}

/// Cause 6: 128 queues held to at most 100 us each still make 1.28 M interrupts/s, above a
/// 1 M/s knee; the delay ceiling must follow from the target and the active queues.
#[test]
fn many_queues_fit_under_the_knee() {
    let r = run(builtin_with(
        "nic-100g-32q",
        &[
            ("nic.0.queues", "128"),
            ("workload.0.flows", "512"),
            ("platform.limited_knee_per_sec", "1000000"),
            ("duration_ms", "700"),
            ("warmup_ms", "400"),
            ("moderation", "irqpilot"),
        ],
    ));
    let g = r.throughput_gbps.unwrap();
    assert!(
        g >= 95.0,
        "{g} Gb/s at {} interrupts/s (healthy: 100)",
        r.interrupts_per_sec
    );
}

/// A 40 G NIC beside 16 drives x 4 queues at iodepth 1 on a 1.5 M/s knee: unheld, 3.5 M/s.
/// A drive's reads are either held by NVMe's 100 us timer (one read in flight never fills a
/// threshold of 2) or not held at all (5-6x the interrupts), nothing between; the NIC's delay
/// is continuous.
const NIC_BESIDE_QD1_DRIVES: &str = r#"
name = "nic-beside-qd1-drives"
duration_ms = 1200
warmup_ms = 400
[machine]
numa_nodes = 1
packages = 1
cores_per_package = 32
[platform]
kind = "limited"
limited_knee_per_sec = 1500000
[[nic]]
name = "eth0"
link_gbps = 40
queues = 8
mtu_bytes = 4000
moderation = "static"
[[nvme]]
name = "nvme"
drives = 16
queues_per_drive = 4
max_iops = 2000000
latency_us = 20
[[workload]]
kind = "bulk"
nic = "eth0"
load = 1.0
flows = 16
window_kb = 64
[[workload]]
kind = "fio"
nvme = "nvme"
iodepth = 1
"#;

/// Heavy load beside drives the timer holds: the room under the target goes to whole drives
/// let go of their timer (one read, one interrupt, one completion more), as many as fit at
/// the most each could then make, not to NIC delays shorter than the drives' timer (the NIC
/// has its line at either). Before: every drive held, 0.84 of GSIM's IOPS; a raised target
/// let every drive go at once, 2.4 M/s past the knee.
#[test]
fn drives_held_by_their_timer_get_the_room_beside_a_nic() {
    let gsim = run(toml_with(NIC_BESIDE_QD1_DRIVES, &[("moderation", "gsim")]));
    let r = run(toml_with(
        NIC_BESIDE_QD1_DRIVES,
        &[("moderation", "irqpilot")],
    ));
    let (iops, gsim_iops) = (r.iops.unwrap(), gsim.iops.unwrap());
    assert!(iops >= gsim_iops, "{iops} IOPS against GSIM's {gsim_iops}");
    let (g, gsim_g) = (r.throughput_gbps.unwrap(), gsim.throughput_gbps.unwrap());
    assert!(g >= 0.99 * gsim_g, "{g} Gb/s against GSIM's {gsim_g}");
    assert!(
        r.interrupts_per_sec <= 1.5e6,
        "{} interrupts/s",
        r.interrupts_per_sec
    );
    let rip = ripple(&r, 600.0);
    assert!(
        rip <= 0.10,
        "interrupt rate peak-to-peak {rip:.2} of its mean"
    );
}

/// A medium bulk load past a low knee (40G on 48 queues of 2000 B at 55%, knee 0.38 M/s),
/// which runs two ways: held back, its delays clear the platform's backlog and it has all its
/// bytes at about 0.57 M/s; let go, DMA slows, every queue always has a packet waiting and the
/// rate runs to 0.9 M/s and more. Its queues are let go as soon as they sit under the band of
/// a target above that, and the collapse comes back. The knee search reads the rate running
/// away with less work as the knee: the target goes back to where the work was good.
const MEDIUM_PAST_A_LOW_KNEE: &str = r#"
name = "medium-past-a-low-knee"
duration_ms = 1000
warmup_ms = 300
[machine]
numa_nodes = 1
packages = 1
cores_per_package = 32
[platform]
kind = "limited"
limited_knee_per_sec = 380000
[[nic]]
name = "eth0"
link_gbps = 40
queues = 48
mtu_bytes = 2000
moderation = "static"
[[workload]]
kind = "bulk"
nic = "eth0"
load = 0.55
flows = 192
window_kb = 48
chunk_kb = 16
wire_rtt_us = 10
jitter_us = 5
probe_per_sec = 2000
"#;

/// Before: the search parked at 0.82 M/s in the collapse, 0.87 of static's bytes and packets
/// queued for 2.9 ms at the median (held-out gen-52-3 is the same class: 0.83 of healthy).
#[test]
fn a_collapse_the_fast_loop_lets_in_is_not_where_the_search_parks() {
    let stat = run(toml_with(
        MEDIUM_PAST_A_LOW_KNEE,
        &[("moderation", "static")],
    ));
    let r = run(toml_with(
        MEDIUM_PAST_A_LOW_KNEE,
        &[("moderation", "irqpilot")],
    ));
    let (g, static_g) = (r.throughput_gbps.unwrap(), stat.throughput_gbps.unwrap());
    assert!(g >= 0.98 * static_g, "{g} Gb/s against static's {static_g}");
    let p50 = r.latency_us.unwrap().p50;
    assert!(
        p50 <= 200.0,
        "median {p50} us: the load queues in a collapse"
    );
}

/// A heavy bulk load that arrives past a low knee (25G on 30 queues of 3401 B, knee 0.52 M/s):
/// its first periods run just over the 1 M/s start, then its own rate settles under it at
/// 0.98 M/s with half its bytes (DMA at knee / rate). Steps up from the start buy nothing
/// (the few interrupts held back cost nothing) and the search climbs past the load's own
/// rate; the load it lets go of must still be asked whether fewer interrupts buy it bytes.
const HEAVY_ARRIVING_PAST_A_LOW_KNEE: &str = r#"
name = "heavy-arriving-past-a-low-knee"
duration_ms = 1000
warmup_ms = 300
[machine]
numa_nodes = 1
packages = 1
cores_per_package = 32
[platform]
kind = "limited"
limited_knee_per_sec = 520000
[[nic]]
name = "eth0"
link_gbps = 25
queues = 30
mtu_bytes = 3401
moderation = "static"
[[workload]]
kind = "bulk"
nic = "eth0"
load = 1.0
flows = 120
window_kb = 48
chunk_kb = 16
wire_rtt_us = 10
jitter_us = 5
probe_per_sec = 2000
"#;

/// Before: the search parked above the load's own rate and never asked a step down: 13.3 Gb/s
/// at 0.98 M/s, static's figures (held-out gen-62-34 is the same class: 0.53 of healthy); now
/// 25.0 Gb/s at 0.37 M/s.
#[test]
fn a_load_that_arrives_past_the_knee_is_asked_a_step_down_after_the_climb() {
    let stat = run(toml_with(
        HEAVY_ARRIVING_PAST_A_LOW_KNEE,
        &[("moderation", "static")],
    ));
    let r = run(toml_with(
        HEAVY_ARRIVING_PAST_A_LOW_KNEE,
        &[("moderation", "irqpilot")],
    ));
    let (g, static_g) = (r.throughput_gbps.unwrap(), stat.throughput_gbps.unwrap());
    assert!(g >= 1.5 * static_g, "{g} Gb/s against static's {static_g}");
    assert!(
        r.interrupts_per_sec <= 0.7e6,
        "{} interrupts/s: still in the collapse",
        r.interrupts_per_sec
    );
}

/// A heavy bulk load whose own rate (0.72 M/s) sits under the 1 M/s start and under the
/// 0.86 M/s knee, on 8 CPUs that its packets keep busy: now and then its queues' interrupts
/// bunch up past the knee and the platform tips into a standing collapse (2.2 M/s at 42% of
/// the bytes) until the fast loop holds it. Held-out gen-67-1's machine (a tune machine of
/// the knee search), under another seed and for 2 s.
const TIPPING_LOAD: &str = r#"
name = "tipping-load"
duration_ms = 2000
warmup_ms = 300
seed = 8
[machine]
numa_nodes = 1
packages = 1
cores_per_package = 8
[platform]
kind = "limited"
limited_knee_per_sec = 859972
[[nic]]
name = "eth0"
link_gbps = 200
queues = 16
mtu_bytes = 780
moderation = "static"
[[workload]]
kind = "bulk"
nic = "eth0"
load = 1.0
flows = 64
window_kb = 48
chunk_kb = 16
wire_rtt_us = 10
jitter_us = 5
probe_per_sec = 2000
"#;

/// Before: each tip was caught by the fast loop, which let the load go again once it had
/// recovered, and it tipped again (at 110 and 910 ms): 197.7 Gb/s, p99 655 ms, as the
/// probes' backlog from each collapse drained through CPUs with no room to spare. Now the
/// first tip holds the load under the rate it tipped from: one collapse of 30 ms, and the line
/// rate after it. When the load first tips is its own doing (its rate is steady within 0.1%
/// at 83% of the knee before): at 110 ms, inside the warm-up, on stop 35's build (198.9 Gb/s,
/// p99 0.21 ms), at 550 ms since the fast loop reads a change at once (197.5 Gb/s, p99 355 ms:
/// the probes dropped in that one collapse; static: 199.1 Gb/s, p99 8.6 ms), so the p99 says
/// when, not how well, and is not asserted.
#[test]
fn a_load_that_tips_into_a_collapse_by_itself_is_held_under_its_rate_after_the_first_tip() {
    let r = run(toml_with(TIPPING_LOAD, &[("moderation", "irqpilot")]));
    let collapsed: Vec<f64> = r
        .series
        .iter()
        .filter(|p| p.t_ms > 50.0 && p.dma_efficiency < 0.9)
        .map(|p| p.t_ms)
        .collect();
    let first = collapsed.first().copied().unwrap_or(0.0);
    assert!(
        collapsed.iter().all(|&t| t <= first + 100.0),
        "collapsed at {collapsed:?} ms"
    );
    assert!(
        collapsed.len() <= 4,
        "{} periods collapsed: {collapsed:?} ms",
        collapsed.len()
    );
    let stat = run(toml_with(TIPPING_LOAD, &[("moderation", "static")]));
    let (gbps, static_gbps) = (r.throughput_gbps.unwrap(), stat.throughput_gbps.unwrap());
    assert!(
        gbps >= 0.99 * static_gbps,
        "{gbps} Gb/s against static's {static_gbps}"
    );
}

/// Held-out gen-47-29 (tune seed 47), 0.9 s: request/response on a 96-queue NIC beside 22
/// drives at iodepth 6, the platform past a 1.3 M/s knee. The knee search descends from a
/// collapse, each step buying completions, to 2.08 M/s; the next step down (1.39 M/s) buys
/// nothing on the whole: the drives gain 13% while the NIC loses 38% of its bytes.
const NIC_TRADED_FOR_DRIVES: &str = r#"
name = "nic-traded-for-drives"
duration_ms = 900
warmup_ms = 400
seed = 29
[machine]
numa_nodes = 2
packages = 2
cores_per_package = 24
[platform]
kind = "limited"
limited_knee_per_sec = 1298520
[[nic]]
name = "eth0"
link_gbps = 50
queues = 96
mtu_bytes = 576
moderation = "dim"
[[nvme]]
name = "nvme"
drives = 22
queues_per_drive = 9
max_iops = 359316
latency_us = 19
[[workload]]
kind = "rpc"
nic = "eth0"
clients = 768
think_us = 0
request_bytes = 286
response_bytes = 286
service_us = 2
[[workload]]
kind = "fio"
nvme = "nvme"
iodepth = 6
rate_iops = 0
"#;

/// A descent that ends on a step costing one device its work for another's is undone: the
/// NIC keeps the transactions it had at the target the last step left (before: 70% of them,
/// the search parked at the lower target for the drives' 13%).
#[test]
fn a_descent_does_not_end_on_a_step_that_trades_one_device_for_another() {
    let r = run(toml_with(
        NIC_TRADED_FOR_DRIVES,
        &[("moderation", "irqpilot")],
    ));
    let mean = |from, to| window_mean(&r, from, to, |p| p.transactions_per_sec);
    // 650-700 ms: the last window at 2.08 M/s; the step down is judged at 740 ms.
    let (before, after) = (mean(650.0, 700.0), mean(800.0, 900.0));
    assert!(before > 0.0);
    assert!(
        after >= 0.9 * before,
        "{after:.0} transactions/s after the descent, {before:.0} before its last step"
    );
}

/// Held-out gen-82-47's machine, its first burst: a 40G NIC on 4 queues of 6 kB packets on
/// 8 CPUs, past a 0.70 M/s knee. Unheld, the load collapses at 0.98 M/s and 30 Gb/s, under
/// the 1 M/s start.
const COLLAPSED_UNDER_THE_START: &str = r#"
name = "collapsed-under-the-start"
duration_ms = 800
warmup_ms = 100
seed = 47
[machine]
numa_nodes = 1
packages = 1
cores_per_package = 8
[platform]
kind = "limited"
limited_knee_per_sec = 704922
[[nic]]
name = "eth0"
link_gbps = 40
queues = 4
mtu_bytes = 6016
moderation = "dim"
[[workload]]
kind = "bulk"
nic = "eth0"
load = 1.0
flows = 16
window_kb = 48
chunk_kb = 16
wire_rtt_us = 10
jitter_us = 5
probe_per_sec = 2000
"#;

/// The step a collapsed load is asked (at 300 ms) measures one period, the platform draining
/// the collapse's backlog at more than the line rate; the descent's next step is judged
/// against a fresh baseline instead, and the target ends under the knee: the line rate (before:
/// 38.5 Gb/s for the rest of the run, the target left past the knee at 0.79 M/s).
#[test]
fn the_step_out_of_a_collapse_is_not_the_next_steps_baseline() {
    let r = run(toml_with(
        COLLAPSED_UNDER_THE_START,
        &[("moderation", "irqpilot")],
    ));
    let late: Vec<f64> = r
        .series
        .iter()
        .filter(|p| p.t_ms > 650.0)
        .map(|p| p.throughput_gbps)
        .collect();
    let least = late.iter().copied().fold(f64::INFINITY, f64::min);
    assert!(!late.is_empty());
    assert!(
        least >= 39.5,
        "{least:.2} Gb/s after the search, on a 40 Gb/s link"
    );
}

/// Request/response at medium load on a healthy 8-CPU box: nothing to moderate.
const RR_MEDIUM: &str = r#"
name = "rr-medium"
duration_ms = 400
warmup_ms = 100
seed = 3
[machine]
numa_nodes = 1
packages = 1
cores_per_package = 8
[platform]
kind = "healthy"
[[nic]]
name = "eth0"
link_gbps = 25
queues = 8
moderation = "static"
[[workload]]
kind = "rpc"
nic = "eth0"
clients = 64
think_us = 50
request_bytes = 300
response_bytes = 300
service_us = 2
"#;

/// `idle_tx = "driver-default"`: an idle queue's TX completions stay as the driver had them
/// (16 us, 32 frames here), and a transaction takes one interrupt, not two (the request, the
/// response's completion: 1.49 a transaction by default, `none`'s 1.53); the requests still go
/// without delay, so their latency is no worse than `none`'s.
#[test]
fn an_idle_queue_can_keep_its_drivers_tx_completion_moderation() {
    let r = run(toml_with(
        RR_MEDIUM,
        &[
            ("moderation", "irqpilot"),
            ("moderator.idle_tx", "driver-default"),
        ],
    ));
    let none = run(toml_with(RR_MEDIUM, &[("moderation", "none")]));
    let tps = r.transactions_per_sec.unwrap();
    let per_tx = r.interrupts_per_sec / tps;
    assert!(per_tx <= 1.0, "{per_tx:.2} interrupts a transaction");
    assert!(tps >= none.transactions_per_sec.unwrap());
    let (p95, none_p95) = (r.latency_us.unwrap().p95, none.latency_us.unwrap().p95);
    assert!(
        p95 <= 1.05 * none_p95,
        "p95 {p95} us against none's {none_p95}"
    );
    // `idle_tx = "none"`: an interrupt per completion; and the default, `measured`, on a
    // healthy platform: the same (nothing asked, or asked and bought nothing).
    for tx in ["none", "measured"] {
        let all = run(toml_with(
            RR_MEDIUM,
            &[("moderation", "irqpilot"), ("moderator.idle_tx", tx)],
        ));
        assert!(
            all.interrupts_per_sec / all.transactions_per_sec.unwrap() > 1.3,
            "idle_tx = {tx}"
        );
    }
}

/// A bulk NIC and a request/response NIC at medium load, 4.3 M interrupts/s with nothing
/// moderated, past a 1.5 M/s knee. Holding either back costs more than it buys (the knee
/// search lets the load go), and at an interrupt per TX completion irqpilot is `none`, without
/// the drivers' own 16 us TX moderation that static has. (Until the twin's paced bulk senders
/// started at independent phases, seed 5 of this machine also made `none` worse than static
/// on throughput and p99 alike; with the senders no longer bursting in lock-step it does not.)
/// The TX question's answer on this machine sits near its bar: it reads +0.7% to +1.9% across
/// seeds, so which seeds keep the drivers' TX moderation moves with any change that shifts the
/// search's timing (seed 7 until stop 49, +1.1%; +0.9% once an undone step's delays went a
/// period sooner). Seed 9 reads +1.9%.
const TWO_NICS_PAST_KNEE: &str = r#"
name = "two-nics-past-knee"
duration_ms = 1200
warmup_ms = 400
seed = 9
[machine]
numa_nodes = 1
packages = 1
cores_per_package = 32
[platform]
kind = "limited"
limited_knee_per_sec = 1500000
[[nic]]
name = "eth0"
link_gbps = 25
queues = 8
moderation = "static"
[[nic]]
name = "eth1"
link_gbps = 25
queues = 48
moderation = "static"
[[workload]]
kind = "bulk"
nic = "eth0"
load = 0.4
flows = 32
[[workload]]
kind = "rpc"
nic = "eth1"
clients = 128
think_us = 50
request_bytes = 256
response_bytes = 256
service_us = 2
"#;

/// `idle_tx = "measured"` (the default): the knee search asks the load it let go whether the
/// drivers' own TX moderation buys completions, and keeps it: fewer interrupts, more
/// throughput, and not worse than static on both throughput and p99.
#[test]
fn tx_completions_asked_past_the_knee_are_held_where_they_buy_completions() {
    let each = run(toml_with(
        TWO_NICS_PAST_KNEE,
        &[("moderation", "irqpilot"), ("moderator.idle_tx", "none")],
    ));
    let asked = run(toml_with(TWO_NICS_PAST_KNEE, &[("moderation", "irqpilot")]));
    let fixed = run(toml_with(TWO_NICS_PAST_KNEE, &[("moderation", "static")]));
    use irqpilot_sim::targets::worse_on_both;
    assert_eq!(worse_on_both(&asked, &fixed), Some(false));
    assert!(
        asked.interrupts_per_sec < 0.9 * each.interrupts_per_sec,
        "{} against {} interrupts/s",
        asked.interrupts_per_sec,
        each.interrupts_per_sec
    );
    assert!(asked.throughput_gbps.unwrap() > each.throughput_gbps.unwrap());
}

/// A healthy box with a 25 G NIC at half load and two NVMe drives: every unit of each workload
/// is served alike, so fairness must read near 1 under any policy.
const MIXED: &str = r#"
name = "mixed"
duration_ms = 400
warmup_ms = 100
[machine]
numa_nodes = 2
packages = 2
cores_per_package = 16
[platform]
kind = "healthy"
[[nic]]
name = "eth0"
link_gbps = 25
queues = 8
moderation = "static"
[[nvme]]
name = "nvme"
drives = 2
queues_per_drive = 8
max_iops = 800000
[[workload]]
kind = "bulk"
nic = "eth0"
load = 0.5
[[workload]]
kind = "fio"
nvme = "nvme"
iodepth = 8
"#;

/// Cause 7: bytes per flow and I/Os per queue are not one population: Jain's index is taken
/// within each workload.
#[test]
fn fairness_is_taken_within_each_workload() {
    let r = run(toml_with(MIXED, &[]));
    let f = r.fairness.unwrap();
    assert!(f.jain >= 0.95, "{f:?}");
}

/// Held-out gen-78-16's machine: request/response on 192 queues of a 400G NIC beside 7 drives
/// at iodepth 40, past a 1.92 M/s knee.
const NIC_GAINING_PAST_THE_DRIVES_KNEE: &str = r#"
name = "nic-gaining-past-the-drives-knee"
duration_ms = 900
warmup_ms = 400
seed = 16
[machine]
numa_nodes = 2
packages = 2
cores_per_package = 48
[platform]
kind = "limited"
limited_knee_per_sec = 1921621
[[nic]]
name = "eth0"
link_gbps = 400
queues = 192
mtu_bytes = 576
moderation = "static"
[[nvme]]
name = "nvme"
drives = 7
queues_per_drive = 8
max_iops = 1347210
latency_us = 18
[[workload]]
kind = "rpc"
nic = "eth0"
clients = 1024
think_us = 0
request_bytes = 166
response_bytes = 166
service_us = 2
[[workload]]
kind = "fio"
nvme = "nvme"
iodepth = 40
rate_iops = 0
"#;

/// A step up that buys the NIC transactions and costs the drives their reads is kept only while
/// it leaves the drives less short of their best than it left the NIC: neither ends far behind
/// what GSIM gives it. Before stop 34 the first step (+217% weighted by interrupts) was kept and
/// the drives ran at a third of GSIM's reads; stop 34 undid every step that cost the drives
/// more than 5%, and the NIC ran at 68% of GSIM's transactions. Judged once the search has
/// parked (it does by 620-660 ms; a window from 420 ms, as stop 35 had it, also took in the
/// end of the climb): the drives 0.88 of GSIM's reads and the NIC 1.13 of its transactions on
/// stop 35's build, 0.84 and 1.17 on stop 36's.
#[test]
fn a_trade_between_the_nic_and_the_drives_leaves_neither_far_behind() {
    let irq = run(toml_with(
        NIC_GAINING_PAST_THE_DRIVES_KNEE,
        &[("moderation", "irqpilot")],
    ));
    let gsim = run(toml_with(
        NIC_GAINING_PAST_THE_DRIVES_KNEE,
        &[("moderation", "gsim")],
    ));
    // 680-900 ms: after the search.
    let reads = |r| window_mean(r, 680.0, 900.0, |p| p.iops);
    let transactions = |r| window_mean(r, 680.0, 900.0, |p| p.transactions_per_sec);
    assert!(reads(&gsim) > 0.0 && transactions(&gsim) > 0.0);
    assert!(
        reads(&irq) >= 0.8 * reads(&gsim),
        "the drives do {:.0} reads/s after the search, {:.0} under GSIM",
        reads(&irq),
        reads(&gsim)
    );
    assert!(
        transactions(&irq) >= 0.8 * transactions(&gsim),
        "the NIC does {:.0} transactions/s after the search, {:.0} under GSIM",
        transactions(&irq),
        transactions(&gsim)
    );
}

/// Machine `i` of the held-out generator's `seed`, as `irqpilot sim --sweep` runs it, with
/// `pairs` set.
fn heldout_with(seed: u64, i: usize, pairs: &[(&str, &str)]) -> Scenario {
    irqpilot_sim::heldout::machine(seed, i)
        .unwrap()
        .scenario
        .with_sets(&sets(pairs))
        .unwrap()
}

/// Held-out machine `i` of `seed` (with `pairs` set) under irqpilot against `moderation=none`:
/// the first workload's p95 within `p95` times `none`'s and its p99 within 1.10 times.
fn within_none(seed: u64, i: usize, pairs: &[(&str, &str)], p95: f64) {
    let under = |m| {
        let mut all = pairs.to_vec();
        all.push(("moderation", m));
        run(heldout_with(seed, i, &all))
    };
    let lat = |r: &Report| r.workloads[0].latency_us.clone().unwrap();
    let (a, b) = (lat(&under("irqpilot")), lat(&under("none")));
    assert!(
        a.p95 <= p95 * b.p95 && a.p99 <= 1.10 * b.p99,
        "p95 {:.1} / p99 {:.1} us against none's {:.1} / {:.1}",
        a.p95,
        a.p99,
        b.p95,
        b.p99
    );
}

/// Never worse than static moderation on both throughput and p99, on held-out gen-87-42's
/// machine (request/response on 18 queues of a 400G NIC past a 0.75 M/s knee, whose
/// transactions follow its interrupts well past it: static's 1.42 M/s does more than 1 M/s).
/// The first step up (1.0 -> 1.2 M/s) reads -1.2% over its window, and the margin under it
/// (0.84 M/s) costs 2.5%: the target goes back to 1 M/s. Before stop 38 the search parked
/// there (5.22 M transactions/s and p99 33.2 us against static's 5.60 M and 32.3 us); now the
/// ground under 1.2 M/s is bisected, and the p99 is under static's.
#[test]
fn a_margin_that_costs_completions_does_not_park_the_search_under_static() {
    let irq = run(heldout_with(87, 42, &[("moderation", "irqpilot")]));
    let st = run(heldout_with(87, 42, &[("moderation", "static")]));
    let p99 = |r: &Report| r.workloads[0].latency_us.as_ref().unwrap().p99;
    let tps = |r: &Report| r.transactions_per_sec.unwrap();
    assert!(
        tps(&irq) >= 0.99 * tps(&st) || p99(&irq) <= 1.01 * p99(&st),
        "irqpilot {:.2} M transactions/s at p99 {:.1} us, static {:.2} M at {:.1} us",
        tps(&irq) / 1e6,
        p99(&irq),
        tps(&st) / 1e6,
        p99(&st)
    );
}

/// The low-load promise over 3 s on held-out gen-79-18's machine (request/response at medium
/// load on 17 queues of a DIM 200G NIC, its own rate just under the 1 M/s start, a 2.27 M/s
/// knee): a periodic recheck's 5% step up (at 1.42 s) reads -1.3%; the margin used to hold the
/// load at 0.7 M/s for 130 ms before its check sent the target back (p95 1.046x, p99 1.267x
/// `none` on stop 37's build); now the parked target stands.
#[test]
fn a_rechecks_small_loss_costs_no_latency_at_medium_load() {
    within_none(79, 18, &[], 1.05);
}

/// The low-load promise on held-out gen-78-1's machine (bulk on 128 queues of a 25G NIC at
/// 4.5% of its link; its flows start together, so the load comes as 10 ms at 2.3 M
/// interrupts/s every 60 ms). Each burst was held once counted, at its end: the delays acted
/// on the quiet after it, where the latency probe's packets waited them out (p95 45.3 us
/// against `none`'s 4.4). A period over the target right after a quiet one (under half the
/// target) is now a burst, not held.
#[test]
fn bursts_of_one_period_cost_the_quiet_after_them_no_latency() {
    within_none(78, 1, &[], 1.05);
}

/// Held-out gen-67-32's machine (request/response on 81 queues of a DIM 40G NIC beside 15
/// drives, medium load on a healthy platform, 8.8 M interrupts/s of its own): the jump to the
/// load's own rate asks one step below (5.6 M/s), which loses 7.6%; back over the load's own
/// rate, the step's delays (38-68 us on 75 queues) relaxed 12.5% a period for 220 ms, and
/// over the first second the requests' p95 and p99 were 1.44x and 1.69x `none`'s. They go at
/// once now. One second (not the 3 s the low-load bounds are for) keeps the test short, and
/// the search's own first steps weigh more in it: p95 within 1.10x here.
#[test]
fn an_undone_step_below_leaves_no_delays_behind() {
    within_none(67, 32, &[("duration_ms", "1000")], 1.10);
}

/// Held-out gen-122-22 (5 drives of 4 queues at iodepth 3, bursts past a 0.65 M/s knee that
/// costs them nothing): the vectors reap 1.5 completions an interrupt by themselves, their
/// natural 0.96 M/s just under the 1 M/s target. Before, each crossing put 4 of 5 controllers
/// at threshold 2 (0.56 M/s), the relax steps sent them back to 1, and the rate cycled
/// between 0.56 and 1.1 M/s every 100 ms for the whole burst (ripple 0.68). The first burst's
/// last 240 ms now swing no more than the load's own 10%.
#[test]
fn a_burst_of_drives_just_over_the_target_does_not_cycle() {
    let r = run(heldout_with(
        122,
        22,
        &[("duration_ms", "840"), ("moderation", "irqpilot")],
    ));
    let rip = ripple(&r, 600.0);
    assert!(
        rip <= 0.10,
        "interrupt rate peak-to-peak {rip:.2} of its mean"
    );
}

/// Held-out gen-152-13 (report seed of stop 43): reads on 3 drives of 12 queues at iodepth 50
/// past a 0.60 M/s knee. The first step up (1 -> 1.15 M/s) read +4% (the reads still arriving
/// while the start's baseline was measured), the let-go then lost 27%, and the margin's target
/// (0.80 M/s) did 12% more than the rate found too high: the search parked there, past the
/// knee, at 0.81 of the healthy platform's reads. A margin that does better is no reason to
/// stop looking below it.
#[test]
fn a_margin_that_does_better_than_the_rate_found_too_high_asks_the_ground_below_it() {
    let iops = |pairs: &[(&str, &str)]| run(heldout_with(152, 13, pairs)).iops.unwrap();
    let irq = iops(&[("moderation", "irqpilot")]);
    let healthy = iops(&[("platform", "healthy")]);
    assert!(
        irq >= 0.95 * healthy,
        "{:.2} M IOPS against the healthy platform's {:.2} M",
        irq / 1e6,
        healthy / 1e6
    );
}

/// Held-out gen-152-1 (report seed of stop 43): request/response on 61 queues of a 200G NIC
/// beside 20 drives of 4 queues, 32 CPUs, a 2.3 M/s knee. The drives at their timer grid's
/// floor kept the rate at 1.2 M/s under the 1 M/s start; a step up from the target moved the
/// rate 5%, read -1.3% and was undone, and the search parked at 1.1 M/s: 0.64 of GSIM's
/// transactions. Stepping from the rate held, both the transactions and the reads come out
/// above GSIM's.
#[test]
fn a_step_up_from_a_target_under_the_rate_held_is_a_step_of_the_rate() {
    let under = |m| run(heldout_with(152, 1, &[("moderation", m)]));
    let (irq, gsim) = (under("irqpilot"), under("gsim"));
    let tps = |r: &Report| r.transactions_per_sec.unwrap();
    let iops = |r: &Report| r.iops.unwrap();
    assert!(
        tps(&irq) >= 0.99 * tps(&gsim) && iops(&irq) >= 0.99 * iops(&gsim),
        "irqpilot {:.2} M transactions/s and {:.2} M IOPS, GSIM {:.2} M and {:.2} M",
        tps(&irq) / 1e6,
        iops(&irq) / 1e6,
        tps(&gsim) / 1e6,
        iops(&gsim) / 1e6
    );
}
