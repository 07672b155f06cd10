//! Kernel-managed interrupts in the twin, one test per kernel rule (`src/managed.rs` names the
//! kernel code each follows): what the machine shows, where interrupts fire, what user space
//! can and cannot do.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use irqpilot_core::{Action, ApplyError, CpuSet, IrqNum, Machine, Plan, Platform};
use irqpilot_sim::{Scenario, Sim, SimPlatform};

/// One node, 4 cores x 2 threads (siblings 0/4, 1/5, 2/6, 3/7), one NVMe drive with `queues`
/// queue vectors under fio, and `cmdline`.
fn host(queues: u32, cmdline: &str, extra: &str) -> Scenario {
    let text = format!(
        r#"
name = "managed"
duration_ms = 20
[machine]
cores_per_package = 4
threads_per_core = 2
cmdline = "{cmdline}"
[[nvme]]
drives = 1
queues_per_drive = {queues}
max_iops = 1000000
latency_us = 20
[[workload]]
kind = "fio"
nvme = "nvme"
iodepth = 4
{extra}
"#
    );
    Scenario::from_toml(&text, "managed").unwrap()
}

fn machine(sc: Scenario) -> (SimPlatform, Machine) {
    let mut p = SimPlatform::new(Sim::new(sc).unwrap());
    let m = p.machine().unwrap();
    (p, m)
}

/// `(requested, effective)` of each managed vector, as `/proc/irq/N/{smp,effective}_affinity_list`.
fn lists(m: &Machine) -> Vec<(String, String)> {
    m.irqs
        .values()
        .filter(|i| i.managed == Some(true))
        .map(|i| {
            (
                i.requested.as_ref().unwrap().to_list_string(),
                i.effective.as_ref().unwrap().to_list_string(),
            )
        })
        .collect()
}

/// Rule 1, `group_cpus_evenly`: the queue masks cover every CPU once, SMT siblings together;
/// rule 3, `matrix_find_best_cpu_managed`: the effective CPU is the mask's CPU with the fewest
/// managed vectors, the last one on equal counts.
#[test]
fn masks_spread_over_the_cpus_and_the_effective_cpu_is_the_matrix_choice() {
    let (_, m) = machine(host(2, "", ""));
    assert_eq!(
        lists(&m),
        vec![
            ("0-1,4-5".to_string(), "5".to_string()),
            ("2-3,6-7".to_string(), "7".to_string())
        ]
    );
    let (_, m) = machine(host(8, "", ""));
    let effective: Vec<String> = lists(&m).into_iter().map(|(_, e)| e).collect();
    assert_eq!(effective, vec!["0", "1", "2", "3", "4", "5", "6", "7"]);
}

/// Rule 4, `irq_do_set_affinity` under `isolcpus=managed_irq`: a mask with a housekeeping CPU
/// is served there; a mask of isolated CPUs only stays on them, and its interrupts (for the
/// I/O the fio jobs submit on those CPUs' queue) are taken on an isolated CPU.
#[test]
fn managed_irq_moves_only_masks_that_hold_a_housekeeping_cpu() {
    let cmdline = "isolcpus=managed_irq,domain,1-3,5-7";
    let (mut p, m) = machine(host(2, cmdline, ""));
    assert_eq!(
        lists(&m),
        vec![
            ("0-1,4-5".to_string(), "4".to_string()),
            ("2-3,6-7".to_string(), "7".to_string())
        ]
    );
    // Per CPU, one vector each: 0 and 4 are housekeeping.
    let (_, m8) = machine(host(8, cmdline, ""));
    let effective: Vec<String> = lists(&m8).into_iter().map(|(_, e)| e).collect();
    assert_eq!(effective, vec!["0", "1", "2", "3", "4", "5", "6", "7"]);
    p.sleep(20_000_000);
    let r = p.sim().report();
    let on = |cpu: u32| r.per_cpu[cpu as usize].interrupts_per_sec;
    assert!(on(4) > 0.0 && on(7) > 0.0, "{:?}", r.per_cpu);
    // Without managed_irq the first mask is served on 5, its last CPU.
    let (_, plain) = machine(host(2, "isolcpus=domain,1-3,5-7", ""));
    assert_eq!(lists(&plain)[0].1, "5");
}

/// Rule 2, `irq_matrix_reserve_managed`: a managed vector holds a slot on every CPU of its mask,
/// not only on the CPU it fires on, so an affinity write that needs one of those slots fails
/// with ENOSPC.
#[test]
fn managed_masks_reserve_a_vector_on_every_cpu() {
    let extra = r#"
[[nic]]
name = "eth0"
link_gbps = 10
queues = 1
cpus = "0"
"#;
    let mut sc = host(2, "", extra);
    sc.nvme[0].cpus = Some("4-7".into());
    sc.machine.vectors_per_cpu = 1;
    let (mut p, m) = machine(sc);
    // The queues' masks are 4-5 and 6-7, served on 5 and 7; CPUs 4 and 6 take no interrupt
    // but hold the reservations. The NIC's IRQ is 24.
    assert_eq!(
        lists(&m),
        vec![
            ("4-5".to_string(), "5".to_string()),
            ("6-7".to_string(), "7".to_string())
        ]
    );
    let set = |cpus: &str| Plan {
        actions: vec![Action::SetAffinity {
            irq: IrqNum(24),
            cpus: CpuSet::parse_list(cpus).unwrap(),
        }],
        notes: vec![],
    };
    assert_eq!(
        p.apply(&set("6")).outcomes[0].result,
        Err(ApplyError::NoVectorSpace)
    );
    assert_eq!(p.apply(&set("1")).outcomes[0].result, Ok(true));
}

/// Rule 5, `write_irq_affinity`: user space cannot move a managed vector (EPERM, EIO before
/// 6.12); nothing changes.
#[test]
fn user_writes_to_a_managed_vector_are_refused_and_change_nothing() {
    let (mut p, m) = machine(host(2, "", ""));
    let irq = *m.irqs.keys().next().unwrap();
    let r = p.apply(&Plan {
        actions: vec![Action::SetAffinity {
            irq,
            cpus: CpuSet::parse_list("0").unwrap(),
        }],
        notes: vec![],
    });
    assert_eq!(r.outcomes[0].result, Err(ApplyError::Managed));
    assert_eq!(lists(&p.machine().unwrap()), lists(&m));
}

/// NVMe creates at most one I/O queue per CPU: a scenario asking for more is refused, naming it.
#[test]
fn more_queues_than_cpus_is_an_error() {
    let e = Sim::new(host(9, "", "")).unwrap_err().to_string();
    assert!(e.contains("9 queues per drive on 8 CPUs"), "{e}");
}
