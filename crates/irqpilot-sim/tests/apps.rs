//! Application threads where they run (`app_cpus`, `app_schedule`, `steering`): the path RSS
//! queue -> IRQ CPU -> (RFS or RPS) -> thread CPU, its costs, scheduled threads, and placement
//! near the application.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use irqpilot_sim::report::CpuReport;
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

/// Bad application CPU lists, steering and schedule values are refused, naming the key
/// (scenario_errors.rs has them in a file, at their line and column).
#[test]
fn bad_app_settings_are_refused() {
    let sc = builtin("app-pinned-2node").unwrap().unwrap();
    let sets = |kv: &[(&str, &str)]| {
        let kv: Vec<_> = kv
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        sc.with_sets(&kv).map_err(|e| e.to_string())
    };
    let set = |k: &str, v: &str| sets(&[(k, v)]);
    let e = set("workload.0.steering", "rss").unwrap_err();
    assert!(
        e.contains("workload.0.steering") && e.contains("`rps`"),
        "{e}"
    );
    let e = set("workload.0.app_cpus", "64-65").unwrap_err();
    assert!(
        e.contains("workload.0.app_cpus") && e.contains("names no CPU of the machine (0-7)"),
        "{e}"
    );
    let e = set("workload.0.app_cpus", "0-").unwrap_err();
    assert!(
        e.contains("workload.0.app_cpus = \"0-\": must be a CPU list"),
        "{e}"
    );
    let e = sets(&[
        ("workload.0.steering", "rps"),
        ("workload.0.rps_cpus", "8-9"),
    ])
    .unwrap_err();
    assert!(
        e.contains("workload.0.rps_cpus = \"8-9\": names no CPU"),
        "{e}"
    );
    let e = set("workload.0.rps_cpus", "4-7").unwrap_err();
    assert!(
        e.contains("workload.0.rps_cpus") && e.contains("needs steering = \"rps\""),
        "{e}"
    );
    let e = set("workload.0.app_schedule", "floating").unwrap_err();
    assert!(
        e.contains("workload.0.app_schedule") && e.contains("`scheduled`"),
        "{e}"
    );
    let e = set("costs.wakeup_ipi_us", "-1").unwrap_err();
    assert!(e.contains("costs.wakeup_ipi_us"), "{e}");
    // A CPU list of one CPU reads as a number on the command line; it is taken as the list.
    let one = sets(&[("workload.0.steering", "rps"), ("workload.0.rps_cpus", "3")]);
    assert!(one.is_ok(), "{one:?}");
}

/// A scenario of this file's own: one NIC queue (its IRQ on CPU 4, node 1) and an `rpc`
/// server without `app_cpus` (requests served where their stack runs), light load.
const ONE_QUEUE: &str = r#"
name = "one-queue"
duration_ms = 500
warmup_ms = 250
[machine]
numa_nodes = 2
packages = 2
cores_per_package = 4
[[nic]]
name = "eth0"
moderation = "static"
link_gbps = 100
queues = 1
node = 1
cpus = "4"
[[workload]]
kind = "rpc"
nic = "eth0"
clients = 16
think_us = 200.0
service_us = 2.0
wire_rtt_us = 10.0
"#;

fn run_text(text: &str, pairs: &[(&str, &str)]) -> Report {
    let sets: Vec<_> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let sc = irqpilot_sim::Scenario::from_toml(text, "test")
        .unwrap()
        .with_sets(&sets)
        .unwrap();
    run_scenario(sc, |_| {}).unwrap()
}

/// One figure of each CPU in `cpus`.
fn of_cpus(r: &Report, cpus: std::ops::Range<u32>, f: fn(&CpuReport) -> f64) -> Vec<f64> {
    r.per_cpu
        .iter()
        .filter(|c| cpus.contains(&c.cpu))
        .map(f)
        .collect()
}

fn p99(r: &Report) -> f64 {
    r.latency_us.as_ref().unwrap().p99
}

/// RPS moves the stack off the IRQ CPU onto the CPUs of `rps_cpus` (by default the NIC's
/// node, 4-7), each flow to the CPU its hash picks; the CPUs other than the IRQ's own get
/// their requests after an IPI, which shows in the latency of a light load.
#[test]
fn rps_spreads_the_stack_over_its_cpus_and_costs_an_ipi() {
    let none = run_text(ONE_QUEUE, &[]);
    let rps = run_text(ONE_QUEUE, &[("workload.0.steering", "rps")]);
    let soft = |r: &Report| of_cpus(r, 0..8, |c| c.softirq_pct);
    // Without steering the IRQ CPU runs every packet's stack and serves every request.
    let s = soft(&none);
    assert!(
        s.iter().enumerate().all(|(c, &p)| (c == 4) == (p > 0.0)),
        "{s:?}"
    );
    assert!(none.rps_ipis_per_sec.is_none());
    // With RPS every CPU of the node runs stacks and, without app_cpus, serves requests; no
    // CPU of the other node does.
    let s = soft(&rps);
    assert!(s[4..].iter().all(|&p| p > 0.1), "{s:?}");
    assert!(s[..4].iter().all(|&p| p == 0.0), "{s:?}");
    let app = of_cpus(&rps, 4..8, |c| c.app_pct);
    assert!(app.iter().all(|&p| p > 1.0), "{app:?}");
    // The IRQ CPU keeps the driver's part (and a quarter of the stacks, its own flows'): its
    // softirq time falls, by less than the stack's share of a packet as the poll's fixed
    // cost stays.
    assert!(
        s[4] < 0.9 * soft(&none)[4],
        "{} vs {}",
        s[4],
        soft(&none)[4]
    );
    // An IPI for another CPU's backlog, at most one per request, and its latency with it.
    let ipis = rps.rps_ipis_per_sec.unwrap();
    assert!(
        ipis > 0.3 * tps(&rps) && ipis <= tps(&rps),
        "{ipis} vs {}",
        tps(&rps)
    );
    assert!(
        p50(&rps) > p50(&none) + 0.5,
        "{} vs {}",
        p50(&rps),
        p50(&none)
    );
    // RPS to the IRQ CPU alone is no steering at all: the same work, no IPI.
    let own = run_text(
        ONE_QUEUE,
        &[("workload.0.steering", "rps"), ("workload.0.rps_cpus", "4")],
    );
    assert_eq!(own.rps_ipis_per_sec, Some(0.0));
    assert!((tps(&own) - tps(&none)).abs() < 0.01 * tps(&none));
    assert!(
        (p50(&own) - p50(&none)).abs() < 0.2,
        "{} vs {}",
        p50(&own),
        p50(&none)
    );
    // Free IPIs: the latency RPS adds is the IPI's.
    let free = run_text(
        ONE_QUEUE,
        &[("workload.0.steering", "rps"), ("costs.wakeup_ipi_us", "0")],
    );
    assert!(
        p50(&free) < p50(&rps) - 0.5,
        "{} vs {}",
        p50(&free),
        p50(&rps)
    );
}

/// With the threads on another node than the IRQs (app-pinned-2node), RPS over the
/// application's CPUs moves the stack there, but the flows that hash to the other thread's
/// CPU then pay a wake-up; RFS puts each flow's stack on its own thread's CPU. RFS beats RPS,
/// and both beat no steering (costmodel 1.8: RFS over RPS, 174 K -> 223 K tps).
#[test]
fn rfs_beats_rps_when_the_application_runs_elsewhere() {
    let none = run("app-pinned-2node", &[]);
    let rps = run("app-pinned-2node", &[("workload.0.steering", "rps")]);
    let rfs = run("app-pinned-2node", &[("workload.0.steering", "rfs")]);
    assert!(tps(&rfs) > tps(&rps), "{} vs {}", tps(&rfs), tps(&rps));
    assert!(
        tps(&rps) > 1.2 * tps(&none),
        "{} vs {}",
        tps(&rps),
        tps(&none)
    );
    assert!(p50(&rfs) < p50(&rps), "{} vs {}", p50(&rfs), p50(&rps));
    assert!(p99(&rfs) < p99(&rps), "{} vs {}", p99(&rfs), p99(&rps));
    // Under RPS the stack runs in the application CPUs' backlogs (softirq time there); the
    // requests whose flow hashed to the other thread's CPU cross to it.
    let soft = of_cpus(&rps, 0..2, |c| c.softirq_pct);
    assert!(soft.iter().all(|&p| p > 1.0), "{soft:?}");
    let w = rps.remote_wakeups_per_sec.unwrap();
    assert!(
        w > 0.2 * tps(&rps) && w < 0.8 * tps(&rps),
        "{w} vs {}",
        tps(&rps)
    );
    assert!(rps.rps_ipis_per_sec.unwrap() > 0.0);
}

/// Scheduled threads (a thread per connection, allowed on all of app_cpus) spread over their
/// set and wake on an idle CPU when theirs is busy: beside a pinned workload that keeps CPU 0
/// busy, they leave it for CPU 1, where pinned ones would queue behind it half the time.
#[test]
fn scheduled_threads_spread_and_use_an_idle_cpu() {
    let two = format!(
        "{}[[workload]]\nkind = \"rpc\"\nnic = \"eth0\"\nclients = 16\nthink_us = 0.0\n\
         service_us = 20.0\napp_cpus = \"0\"\n",
        ONE_QUEUE.replace("think_us = 200.0", "think_us = 200.0\napp_cpus = \"0-1\"")
    );
    let pinned = run_text(&two, &[]);
    let sched = run_text(&two, &[("workload.0.app_schedule", "scheduled")]);
    // Pinned, the threads on CPU 0 wait behind the other workload (p99 ~360 us); scheduled,
    // they moved to CPU 1 (during warm-up) and stay there, where it is idle.
    let lat = |r: &Report| r.workloads[0].latency_us.clone().unwrap();
    let (a, b) = (lat(&sched), lat(&pinned));
    assert!(a.p99 < 0.2 * b.p99, "{} vs {}", a.p99, b.p99);
    assert!(a.mean < 0.5 * b.mean, "{} vs {}", a.mean, b.mean);
    let cpu1 = |r: &Report| of_cpus(r, 1..2, |c| c.app_pct)[0];
    assert!(
        cpu1(&sched) > 1.5 * cpu1(&pinned),
        "{} vs {}",
        cpu1(&sched),
        cpu1(&pinned)
    );
    assert!(pinned.thread_migrations_per_sec.is_none());
    // Spread over a set of their own: every CPU of 0-3 serves.
    let sets = [
        ("workload.0.app_cpus", "0-3"),
        ("workload.0.app_schedule", "scheduled"),
    ];
    let spread = run("app-pinned-2node", &sets);
    let app = of_cpus(&spread, 0..4, |c| c.app_pct);
    assert!(app.iter().all(|&p| p > 50.0), "{app:?}");
    assert!(spread.thread_migrations_per_sec.unwrap() > 0.0);
    // Pooling the CPUs does better than one pinned thread per CPU, at the tail most.
    let pinned4 = run("app-pinned-2node", &[("workload.0.app_cpus", "0-3")]);
    assert!(
        tps(&spread) > tps(&pinned4),
        "{} vs {}",
        tps(&spread),
        tps(&pinned4)
    );
    assert!(
        p99(&spread) < p99(&pinned4),
        "{} vs {}",
        p99(&spread),
        p99(&pinned4)
    );
    // Same seed, same report.
    assert_eq!(spread, run("app-pinned-2node", &sets));
}
