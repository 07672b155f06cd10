//! Placement in the twin: the published shapes (Kamble 2002, seed 002; Lal 2020, seed 004), the
//! arithmetic behind them, and the kernel rules every affinity write meets.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{builtin_with as scenario, sets};
use irqpilot_core::{Action, ApplyError, CpuId, CpuSet, IrqNum, Plan, Platform};
use irqpilot_sim::placement::{Rotation, static_plan};
use irqpilot_sim::scenarios::builtin;
use irqpilot_sim::{Report, Scenario, Sim, SimPlatform};

fn run(name: &str, pairs: &[(&str, &str)]) -> Report {
    irqpilot_sim::run_scenario(scenario(name, pairs), |_| {}).unwrap()
}

fn tps(r: &Report) -> f64 {
    r.transactions_per_sec.unwrap()
}

/// A machine of `k` one-thread cores and `k` single-queue NICs, no traffic.
fn k_by_k(k: u32) -> Scenario {
    let mut text = format!("name = \"mc\"\n[machine]\ncores_per_package = {k}\n");
    for i in 0..k {
        text += &format!("[[nic]]\nname = \"eth{i}\"\nlink_gbps = 10\nqueues = 1\n");
    }
    Scenario::from_toml(&text, "mc").unwrap()
}

#[test]
fn rotation_spreads_k_irqs_over_k_cpus_with_probability_k_factorial_over_k_to_the_k() {
    // Kamble: "the chance of each of these heavy interrupt sources moving to separate CPUs is:
    // (4/4)*(3/4)*(2/4)*(1/4) = 3/16". The product is 24/256 = 3/32 (k!/k^k for k = 4); 3/16
    // is a slip in the mail, and the twin's rotation lands on 3/32, not 3/16. For 2 IRQs on 2
    // CPUs, 1/2 as he says.
    for k in [2u32, 3, 4] {
        let expect = (1..=k).product::<u32>() as f64 / (k as f64).powi(k as i32);
        let sc = k_by_k(k);
        let mut rot = Rotation::new(sc.seed, 20);
        let mut p = SimPlatform::new(Sim::new(sc).unwrap());
        let rounds = 20_000;
        let mut spread = 0;
        for _ in 0..rounds {
            let plan = rot.plan(&p.machine().unwrap());
            assert_eq!(plan.actions.len(), k as usize);
            assert_eq!(p.apply(&plan).failures(), 0);
            let cpus: std::collections::BTreeSet<CpuId> = p
                .machine()
                .unwrap()
                .irqs
                .values()
                .map(|i| i.effective.as_ref().unwrap().first().unwrap())
                .collect();
            spread += (cpus.len() == k as usize) as u32;
        }
        let got = spread as f64 / rounds as f64;
        let sigma = (expect * (1.0 - expect) / rounds as f64).sqrt();
        assert!(
            (got - expect).abs() < 4.0 * sigma,
            "k={k}: balanced {got:.4}, expected {expect:.4} +- {:.4}",
            4.0 * sigma
        );
        if k == 4 {
            assert!((expect - 3.0 / 32.0).abs() < 1e-12);
            assert!((got - 3.0 / 16.0).abs() > 8.0 * sigma, "{got}");
        }
    }
}

/// Mean transactions/s of the rotation over a few seeds (Kamble's figure is a mean too).
fn rotation_mean(name: &str) -> (f64, u64) {
    let mut sum = 0.0;
    let mut migrations = 0;
    let seeds = ["1", "2", "3", "4"];
    for s in seeds {
        let r = run(name, &[("placement", "rotate"), ("seed", s)]);
        sum += tps(&r);
        migrations += r.migrations;
    }
    (sum / seeds.len() as f64, migrations)
}

#[test]
fn p4_netperf_static_binding_beats_rotation_by_ten_percent_and_never_moves() {
    let name = "balance-p4-4nic-netperf";
    let stat = run(name, &[("placement", "static")]);
    let (rot, rot_moves) = rotation_mean(name);
    // Published: 56.20K vs 50.05K (+12.28%).
    assert!(
        tps(&stat) >= 1.10 * rot,
        "static {} vs rotation {rot}",
        tps(&stat)
    );
    assert!((50_000.0..64_000.0).contains(&tps(&stat)), "{}", tps(&stat));
    assert_eq!(stat.migrations, 0);
    // Four IRQs, a round every 20 ms over 700 ms measured, 4 seeds: 7/8 of draws move.
    assert!(rot_moves > 4 * 4 * 25, "{rot_moves} moves");
    // One NIC per package, on the packages' first threads.
    let mut cpus: Vec<u32> = stat.per_source.iter().map(|s| s.cpu).collect();
    cpus.sort();
    assert_eq!(cpus, vec![0, 1, 2, 3]);
    // The layout the devices start with (everything on CPU 0) is far worse.
    let none = run(name, &[]);
    assert!(tps(&none) < 0.7 * tps(&stat));
}

#[test]
fn p4_netperf_siblings_cost_throughput() {
    // Two NICs on the two threads of one core vs on two packages: the SMT contention model.
    let name = "balance-p4-4nic-netperf";
    let layout = |cpus: [u32; 4]| {
        let sc = scenario(name, &[("duration_ms", "900")]);
        let mut p = SimPlatform::new(Sim::new(sc).unwrap());
        let plan = Plan {
            actions: cpus
                .iter()
                .enumerate()
                .map(|(i, c)| Action::SetAffinity {
                    irq: IrqNum(24 + i as u32),
                    cpus: CpuSet::single(CpuId(*c)),
                })
                .collect(),
            notes: vec![],
        };
        assert_eq!(p.apply(&plan).failures(), 0);
        p.sleep(u64::MAX / 2);
        tps(&p.into_sim().report())
    };
    let packages = layout([0, 1, 2, 3]);
    let siblings = layout([0, 4, 2, 3]);
    let same_cpu = layout([0, 0, 2, 3]);
    assert!(siblings < 0.97 * packages, "{siblings} vs {packages}");
    assert!(same_cpu < siblings, "{same_cpu} vs {siblings}");
}

#[test]
fn p4_netperf_lowload_placement_hardly_matters() {
    // Kamble: the rotation "works well ... with light load of interrupts".
    let name = "balance-p4-4nic-netperf-lowload";
    let stat = run(name, &[("placement", "static")]);
    let rot = run(name, &[("placement", "rotate")]);
    assert!(
        tps(&rot) > 0.97 * tps(&stat),
        "{} vs {}",
        tps(&rot),
        tps(&stat)
    );
}

#[test]
fn rotation_is_deterministic() {
    let a = run(
        "balance-p4-4nic-netperf",
        &[("placement", "rotate"), ("duration_ms", "800")],
    );
    let b = run(
        "balance-p4-4nic-netperf",
        &[("placement", "rotate"), ("duration_ms", "800")],
    );
    assert_eq!(
        serde_json::to_string(&a).unwrap(),
        serde_json::to_string(&b).unwrap()
    );
    let placement = a.placement.unwrap();
    assert_eq!(placement.policy, "rotate");
    assert!(placement.migrations_total >= a.migrations);
}

#[test]
fn affinity_writes_meet_the_vector_matrix() {
    // 3 CPUs with room for 2 vectors each; NIC queues start on CPUs 0, 1, 2 and the managed
    // NVMe vector on CPU 1, which is therefore full.
    let text = r#"
name = "cap"
[machine]
cores_per_package = 3
vectors_per_cpu = 2
[[nic]]
name = "a"
link_gbps = 10
queues = 3
[[nvme]]
drives = 1
queues_per_drive = 1
max_iops = 100000
cpus = "1"
"#;
    let sc = Scenario::from_toml(text, "cap").unwrap();
    let mut p = SimPlatform::new(Sim::new(sc).unwrap());
    let set = |irq: u32, list: &str| Action::SetAffinity {
        irq: IrqNum(irq),
        cpus: CpuSet::parse_list(list).unwrap(),
    };
    let eff = |p: &mut SimPlatform, irq: u32| {
        p.machine().unwrap().irqs[&IrqNum(irq)]
            .effective
            .clone()
            .unwrap()
            .to_list_string()
    };
    let r = p.apply(&Plan {
        actions: vec![
            set(24, "1"),
            set(24, "2"),
            set(26, "0,2"),
            set(25, "0,2"),
            set(27, "0"),
            set(24, "5"),
        ],
        notes: vec![],
    });
    let results: Vec<_> = r.outcomes.iter().map(|o| o.result.clone()).collect();
    assert_eq!(
        results,
        vec![
            Err(ApplyError::NoVectorSpace),
            Ok(true),
            Ok(true),
            Ok(true),
            Err(ApplyError::Managed),
            Err(ApplyError::Invalid),
        ]
    );
    // A refused write changes nothing; a mask holding the current CPU keeps it even when
    // another CPU of the mask has fewer vectors; otherwise the emptiest CPU with room.
    assert_eq!(eff(&mut p, 24), "2");
    assert_eq!(eff(&mut p, 26), "2");
    assert_eq!(eff(&mut p, 25), "0");
    assert_eq!(p.sim().report().migrations, 2);
}

/// Vectors a driver requests without an affinity of its own go where x86's vector matrix
/// puts them (`matrix_find_best_cpu`: the CPU of the default affinity with the most free
/// vectors, the first on ties): a second NIC's queues follow the first's instead of landing on
/// the same CPUs, and `irqaffinity=` bounds them.
#[test]
fn nic_queues_without_cpus_follow_the_vector_matrix() {
    let nics = "[[nic]]\nname = \"a\"\nlink_gbps = 10\nqueues = 2\n\
                [[nic]]\nname = \"b\"\nlink_gbps = 10\nqueues = 2\n";
    let layout = |cmdline: &str| {
        let text = format!(
            "name = \"m\"\n[machine]\ncores_per_package = 4\ncmdline = \"{cmdline}\"\n{nics}"
        );
        let mut p = SimPlatform::new(Sim::new(Scenario::from_toml(&text, "m").unwrap()).unwrap());
        p.machine()
            .unwrap()
            .irqs
            .values()
            .map(|i| {
                format!(
                    "{}@{}",
                    i.requested.as_ref().unwrap().to_list_string(),
                    i.effective.as_ref().unwrap().to_list_string()
                )
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(layout(""), vec!["0-3@0", "0-3@1", "0-3@2", "0-3@3"]);
    assert_eq!(
        layout("irqaffinity=2-3"),
        vec!["2-3@2", "2-3@3", "2-3@2", "2-3@3"]
    );
}

#[test]
fn static_binding_respects_isolation_nodes_and_capacity() {
    let text = r#"
name = "iso"
[machine]
numa_nodes = 2
packages = 2
cores_per_package = 4
cmdline = "isolcpus=managed_irq,domain,2-3,6-7 irqaffinity=0-1,4-5"
vectors_per_cpu = 2
[[nic]]
name = "a"
link_gbps = 10
queues = 6
node = 1
"#;
    let sc = Scenario::from_toml(text, "iso").unwrap();
    let mut p = SimPlatform::new(Sim::new(sc).unwrap());
    let m = p.machine().unwrap();
    assert_eq!(m.housekeeping().to_list_string(), "0-1,4-5");
    let plan = static_plan(&m, 2);
    let targets: Vec<String> = plan
        .actions
        .iter()
        .map(|a| match a {
            Action::SetAffinity { cpus, .. } => cpus.to_list_string(),
            _ => unreachable!(),
        })
        .collect();
    // Node 1's housekeeping CPUs are 4 and 5, two vectors each; the other two queues stay.
    // IRQs 28 and 29 already sit on CPUs 4 and 5 and stay there.
    assert_eq!(targets, vec!["4", "5", "4", "5"]);
    assert_eq!(plan.notes.len(), 2);
    assert_eq!(p.apply(&plan).failures(), 0);
}

#[test]
fn placement_set_alias() {
    let sc = builtin("balance-p4-4nic-netperf").unwrap().unwrap();
    for v in ["none", "rotate", "static", "irqpilot", "irqbalance"] {
        let s = sc
            .with_sets(&sets(&[("placement", v)]))
            .unwrap_or_else(|e| panic!("{v}: {e}"));
        assert_eq!(s.placement.policy.name(), v);
    }
    assert!(sc.with_sets(&sets(&[("placement", "random")])).is_err());
    let e = irqpilot_sim::run_scenario(
        sc.with_sets(&sets(&[("placement", "irqbalance")])).unwrap(),
        |_| {},
    )
    .unwrap_err();
    assert!(
        matches!(e, irqpilot_sim::SimError::IrqbalanceOutside),
        "{e}"
    );
    assert!(e.to_string().contains("vs-irqbalance"), "{e}");
}

// ----- irqpilot's placement policy in the twin ----------------------------------------------

/// Mean transactions/s and the largest measured-interval migration count of a policy over
/// seeds 1-4.
fn mean_over_seeds(name: &str, policy: &str) -> (f64, u64, Vec<Report>) {
    let mut sum = 0.0;
    let mut most = 0;
    let mut reports = Vec::new();
    for s in ["1", "2", "3", "4"] {
        let r = run(name, &[("placement", policy), ("seed", s)]);
        sum += tps(&r);
        most = most.max(r.migrations);
        reports.push(r);
    }
    (sum / 4.0, most, reports)
}

#[test]
fn p4_netperf_irqpilot_matches_static_binding_and_beats_rotation() {
    let name = "balance-p4-4nic-netperf";
    let (ours, ours_moves, reports) = mean_over_seeds(name, "irqpilot");
    let (stat, _, _) = mean_over_seeds(name, "static");
    let (rot, rot_moves) = rotation_mean(name);
    // The same layout up to symmetry: a tie within 0.5%, never a loss beyond it.
    assert!(ours >= 0.995 * stat, "irqpilot {ours} vs static {stat}");
    assert!(ours >= 1.10 * rot, "irqpilot {ours} vs rotation {rot}");
    // Placed during warm-up, never moved again.
    assert_eq!(ours_moves, 0);
    assert!(rot_moves > 100);
    for r in &reports {
        let mut packages: Vec<u32> = r.per_source.iter().map(|s| s.cpu % 4).collect();
        packages.sort();
        assert_eq!(packages, vec![0, 1, 2, 3], "one NIC per package");
        let p = r.placement.as_ref().unwrap();
        assert!(p.refused.is_empty(), "{:?}", p.refused);
    }
}

#[test]
fn isolation_irqpilot_cuts_queues_to_the_housekeeping_cpus_and_keeps_them_clean() {
    let name = "isolation-rt-24cpu";
    let ours = run(name, &[("placement", "irqpilot")]);
    let p = ours.placement.as_ref().unwrap();
    // Never beyond the vector capacity: no ENOSPC (nor any other refusal).
    assert!(p.refused.is_empty(), "{:?}", p.refused);
    // `irqpilot isolate` recommended and set 4 queues, one per housekeeping CPU.
    assert_eq!(p.channels.get("eth0"), Some(&4));
    assert_eq!(p.isolated_cpus.len(), 20);
    assert_eq!(p.isolated_interrupts_per_sec, 0.0);
    for c in &ours.per_cpu {
        if c.cpu >= 4 {
            assert_eq!(c.interrupts_per_sec, 0.0, "CPU {}", c.cpu);
            assert_eq!(c.softirq_pct, 0.0, "CPU {}", c.cpu);
        }
    }
    // The recommendation itself, from the isolation planner on the machine as booted.
    let sc = scenario(name, &[("placement", "irqpilot")]);
    let ip = irqpilot_sim::placement::Irqpilot::of(&sc).unwrap().unwrap();
    let mut p2 = SimPlatform::new(Sim::new(sc).unwrap());
    let (plan, applied) = ip.isolate(&mut p2).unwrap();
    assert_eq!(plan.channels.len(), 1);
    assert_eq!(
        (plan.channels[0].queues, plan.channels[0].recommended),
        (24, 4)
    );
    assert!(!plan.vectors.fits && plan.fits_after_channels);
    assert_eq!(applied.failures(), 0);
    // The first plan already leaves out the 20 IRQs the cut removes: none of its writes would
    // meet a vanished IRQ (ENOENT) even without planning again.
    let removed: Vec<IrqNum> = plan
        .must_leave
        .iter()
        .filter(|l| l.removed)
        .map(|l| l.irq)
        .collect();
    assert_eq!(removed.len(), 20);
    assert!(plan.plan.actions.iter().all(|a| match a {
        Action::SetAffinity { irq, .. } => !removed.contains(irq),
        _ => true,
    }));
    // Lal's measurement: 4 streams on 4 housekeeping CPUs cost TCP little.
    let none = run(name, &[]);
    // The baseline with no placer reports what its isolated CPUs take: the RSS spread lands there.
    let np = none.placement.as_ref().unwrap();
    assert_eq!(np.policy, "none");
    assert!(np.isolated_interrupts_per_sec > 100_000.0, "{np:?}");
    let gbps = |r: &Report| r.throughput_gbps.unwrap();
    assert!(
        gbps(&ours) > 0.97 * gbps(&none),
        "{} vs {}",
        gbps(&ours),
        gbps(&none)
    );
    // What irqpilot avoids: moving everything without cutting queues runs out of vectors and
    // leaves queues on isolated CPUs; the 2.5 rotation meets ENOSPC and noise everywhere.
    let stat = run(name, &[("placement", "static")]);
    assert!(stat.placement.unwrap().isolated_interrupts_per_sec > 1000.0);
    let rot = run(name, &[("placement", "rotate")]);
    let rp = rot.placement.unwrap();
    assert!(rp.refused.get("no-vector-space").is_some_and(|n| *n > 0));
    assert!(rp.isolated_interrupts_per_sec > 1000.0);
}

#[test]
fn numa_irqpilot_serves_the_device_from_its_node() {
    let name = "numa-remote-2node";
    let ours = run(name, &[("placement", "irqpilot")]);
    let stat = run(name, &[("placement", "static")]);
    let none = run(name, &[]);
    let rot = run(name, &[("placement", "rotate")]);
    // Node 1 is CPUs 4-7.
    assert!(ours.per_source.iter().all(|s| (4..8).contains(&s.cpu)));
    assert_eq!(ours.migrations, 0);
    assert!(
        tps(&ours) >= 0.995 * tps(&stat),
        "{} vs {}",
        tps(&ours),
        tps(&stat)
    );
    assert!(
        tps(&ours) > 1.02 * tps(&none),
        "{} vs remote {}",
        tps(&ours),
        tps(&none)
    );
    assert!(
        tps(&ours) > 1.05 * tps(&rot),
        "{} vs rotation {}",
        tps(&ours),
        tps(&rot)
    );
    let p99 = |r: &Report| r.latency_us.as_ref().unwrap().p99;
    assert!(p99(&ours) <= p99(&none), "{} vs {}", p99(&ours), p99(&none));
}

#[test]
fn churn_irqpilot_follows_the_load_with_few_moves() {
    let name = "placement-churn-8q";
    let ours = run(name, &[("placement", "irqpilot")]);
    let stat = run(name, &[("placement", "static")]);
    let rot = run(name, &[("placement", "rotate")]);
    assert!(
        tps(&ours) > 1.05 * tps(&stat),
        "{} vs static {}",
        tps(&ours),
        tps(&stat)
    );
    assert!(
        tps(&ours) > tps(&rot),
        "{} vs rotation {}",
        tps(&ours),
        tps(&rot)
    );
    // A handful of moves where the rotation makes hundreds, each paying the cold cache.
    assert!(
        ours.migrations * 10 < rot.migrations,
        "{} vs {}",
        ours.migrations,
        rot.migrations
    );
    assert!(ours.migrations <= 12, "{}", ours.migrations);
    // Light load: nothing to gain, so (almost) nothing moves and nothing is lost.
    let lo = run("placement-churn-8q-lowload", &[("placement", "irqpilot")]);
    let lo_stat = run("placement-churn-8q-lowload", &[("placement", "static")]);
    assert!(tps(&lo) >= 0.99 * tps(&lo_stat));
    assert!(lo.migrations <= 8, "{}", lo.migrations);
}

#[test]
fn placement_table_has_every_scenario_under_every_policy() {
    let text = irqpilot_sim::tables::table("placement", |_| {}).unwrap();
    let rows: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("| ") && !l.starts_with("| scenario"))
        .collect();
    assert_eq!(rows.len(), 20, "{text}");
    let row = |sc: &str, pol: &str| {
        rows.iter()
            .find(|r| r.starts_with(&format!("| {sc} |")) && r.contains(&format!("| {pol} |")))
            .map(|r| r.split('|').map(str::trim).collect::<Vec<_>>())
            .unwrap_or_else(|| panic!("no row {sc} {pol} in {text}"))
    };
    // Columns: "", scenario, published, placement, throughput, p99, busy, isolated, migrations, refused.
    assert_eq!(row("isolation-rt-24cpu", "irqpilot")[7], "0");
    assert_ne!(row("isolation-rt-24cpu", "none")[7], "0");
    assert!(row("isolation-rt-24cpu", "rotate")[9].contains("no-vector-space"));
    assert_eq!(row("balance-p4-4nic-netperf", "irqpilot")[8], "0");
    assert_ne!(row("balance-p4-4nic-netperf", "rotate")[8], "0");
}
