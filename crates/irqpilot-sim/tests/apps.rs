//! Application threads where they run (`app_cpus`, `steering`): the path RSS queue -> IRQ CPU
//! -> (RFS) -> thread CPU, its costs, and placement near the application.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use irqpilot_sim::scenarios::builtin;
use irqpilot_sim::{Report, run_scenario};

fn run(name: &str, pairs: &[(&str, &str)]) -> Report {
    let mut sets = vec![
        ("duration_ms".to_string(), "500".to_string()),
        ("warmup_ms".to_string(), "250".to_string()),
    ];
    sets.extend(pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    let sc = builtin(name).unwrap().unwrap().with_sets(&sets).unwrap();
    run_scenario(sc, |_| {}).unwrap()
}

fn tps(r: &Report) -> f64 {
    r.transactions_per_sec.unwrap()
}

fn p50(r: &Report) -> f64 {
    r.latency_us.as_ref().unwrap().p50
}

fn app_pct(r: &Report, cpus: std::ops::Range<u32>) -> f64 {
    r.per_cpu
        .iter()
        .filter(|c| cpus.contains(&c.cpu))
        .map(|c| c.app_pct)
        .sum()
}

/// The threads run on their own CPUs, not where the softirq ran; every request crosses to them.
#[test]
fn requests_are_served_on_the_application_cpus() {
    let r = run("app-pinned-2node", &[]);
    assert!(app_pct(&r, 0..2) > 150.0, "{:?}", r.per_cpu);
    assert!(app_pct(&r, 2..8) < 5.0, "{:?}", r.per_cpu);
    let w = r.remote_wakeups_per_sec.unwrap();
    assert!((w - tps(&r)).abs() < 0.01 * tps(&r), "{w} vs {}", tps(&r));
    // Without app_cpus the request is served where it was received (no remote wake-up field).
    let mut plain = builtin("numa-remote-2node").unwrap().unwrap();
    plain.duration_ms = 300;
    plain.warmup_ms = 100;
    assert!(
        run_scenario(plain, |_| {})
            .unwrap()
            .remote_wakeups_per_sec
            .is_none()
    );
}

/// Crossing sockets costs more than crossing cores of one socket, and a thread on the very CPU
/// of its softirq pays nothing extra (same machine, threads moved).
#[test]
fn cross_socket_wakeups_cost_more_than_same_socket() {
    // IRQs on 4-7 (node 1): threads on node 0, on node 1 beside them, on the IRQ CPUs.
    let remote = run(
        "app-pinned-2node-lowload",
        &[("workload.0.app_cpus", "0-1")],
    );
    let local = run(
        "app-pinned-2node-lowload",
        &[("workload.0.app_cpus", "4-5")],
    );
    assert!(
        p50(&remote) > p50(&local) + 0.5,
        "{} vs {}",
        p50(&remote),
        p50(&local)
    );
    // No wake-up latency and no cache cost at all when every cost is zero: the same latency.
    let free = [
        ("costs.wakeup_ipi_us", "0"),
        ("costs.remote_cache_us", "0"),
        ("costs.remote_node_app_us", "0"),
    ];
    let mut a = free.to_vec();
    a.push(("workload.0.app_cpus", "0-1"));
    let mut b = free.to_vec();
    b.push(("workload.0.app_cpus", "4-5"));
    let (a, b) = (
        run("app-pinned-2node-lowload", &a),
        run("app-pinned-2node-lowload", &b),
    );
    assert!(
        (p50(&a) - p50(&b)).abs() < 0.3,
        "{} vs {}",
        p50(&a),
        p50(&b)
    );
}

/// RFS moves the stack to the thread's CPU: the IRQ CPUs' softirq time falls, the application
/// CPUs do more, and with no cache lines crossing the server answers faster.
#[test]
fn rfs_moves_the_stack_to_the_application_cpu() {
    let none = run("app-pinned-2node", &[]);
    let rfs = run("app-pinned-2node", &[("workload.0.steering", "rfs")]);
    let soft = |r: &Report| r.per_cpu.iter().map(|c| c.softirq_pct).sum::<f64>();
    let per_req = |r: &Report| soft(r) / tps(r);
    assert!(
        per_req(&rfs) < 0.85 * per_req(&none),
        "{} vs {}",
        per_req(&rfs),
        per_req(&none)
    );
    assert!(tps(&rfs) > tps(&none), "{} vs {}", tps(&rfs), tps(&none));
}

/// irqpilot sees where the threads run and puts the queue IRQs beside them (other CPUs of
/// their cache, not their own); near the device (the kernel's and the static placement) loses.
#[test]
fn placement_near_the_application_wins() {
    let none = run("app-pinned-2node", &[("placement", "none")]);
    let stat = run("app-pinned-2node", &[("placement", "static")]);
    let ours = run("app-pinned-2node", &[("placement", "irqpilot")]);
    assert!(
        tps(&ours) > 1.1 * tps(&none),
        "{} vs {}",
        tps(&ours),
        tps(&none)
    );
    assert!(
        tps(&ours) > 1.1 * tps(&stat),
        "{} vs {}",
        tps(&ours),
        tps(&stat)
    );
    assert!(p50(&ours) < p50(&none));
    let irqs_on = |r: &Report, cpus: std::ops::Range<u32>| -> f64 {
        r.per_cpu
            .iter()
            .filter(|c| cpus.contains(&c.cpu))
            .map(|c| c.interrupts_per_sec)
            .sum()
    };
    assert_eq!(irqs_on(&ours, 0..2), 0.0, "never on the application's CPUs");
    assert!(irqs_on(&ours, 2..4) > 0.0);
    // Same seed, same report.
    assert_eq!(ours, run("app-pinned-2node", &[("placement", "irqpilot")]));
}

/// Bad application CPU lists and steering values are refused, naming the key.
#[test]
fn bad_app_settings_are_refused() {
    let sc = builtin("app-pinned-2node").unwrap().unwrap();
    let set = |k: &str, v: &str| sc.with_sets(&[(k.to_string(), v.to_string())]);
    let e = set("workload.0.steering", "rps").unwrap_err().to_string();
    assert!(e.contains("steering"), "{e}");
    let bad = set("workload.0.app_cpus", "64-65").unwrap();
    let e = irqpilot_sim::Sim::new(bad).unwrap_err().to_string();
    assert!(e.contains("app_cpus") && e.contains("no CPU"), "{e}");
    let e = set("costs.wakeup_ipi_us", "-1").unwrap_err().to_string();
    assert!(e.contains("costs.wakeup_ipi_us"), "{e}");
}
