//! Held-out machines: a generator of varied scenarios that no policy was tuned on.
//!
//! `generate(n, seed)` gives `n` machines; the same seed gives the same machines (each one's
//! parameters come from its own named stream `machine.<i>` of the seed). Ranges (issue 10):
//!
//! * CPUs: 1-2 packages (one NUMA node each) of 8-64 cores;
//! * platform: limited (70%) with its knee log-uniform in 0.5-5 M interrupts/s, else healthy;
//! * devices: one NIC, two NICs of different speeds, a NIC and NVMe drives, or NVMe only;
//!   NICs 10-400 Gb/s with 4-512 queues (at most two per CPU), mlx5's static moderation or
//!   DIM; packets log-uniform in 64-9000 bytes (below 576 bytes, request/response traffic of
//!   that size; from 576 bytes, the MTU of bulk traffic); 1-24 NVMe drives of 4-32
//!   queues, 0.3-1.8 M IOPS and 10-100 us media latency each, 1-256 reads outstanding per queue;
//! * load: idle, low (about 5% of capacity), medium (30-50%), heavy (saturating) or
//!   burst-then-idle (saturating bursts with idle gaps, to see settling and letting go).
//!
//! Every bulk workload carries a latency probe (2,000 small requests/s), so latency is known
//! everywhere. Runs of idle, low and medium machines last 3.3 s (3 s measured), heavy ones
//! 1.2 s, bursty ones 2.4 s.

use crate::config::{ConfigError, Scenario};
use crate::rng::Stream;
use std::fmt::Write as _;

/// The load class of a generated machine.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Load {
    /// A trickle of requests.
    Idle,
    /// About 5% of capacity.
    Low,
    /// 30-50% of capacity.
    Medium,
    /// As much as the machine takes.
    Heavy,
    /// Saturating bursts (0-35% and 55-85% of the run) with idle gaps.
    BurstThenIdle,
}

impl Load {
    /// Its name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Load::Idle => "idle",
            Load::Low => "low",
            Load::Medium => "medium",
            Load::Heavy => "heavy",
            Load::BurstThenIdle => "burst-then-idle",
        }
    }
}

/// One generated machine.
#[derive(Clone, Debug)]
pub struct Generated {
    /// The scenario (name `gen-<seed>-<i>`).
    pub scenario: Scenario,
    /// Its load class.
    pub load: Load,
    /// The scenario as TOML (what `irqpilot sim --generate` writes).
    pub toml: String,
}

/// `n` machines from `seed`.
pub fn generate(n: usize, seed: u64) -> Result<Vec<Generated>, ConfigError> {
    (0..n).map(|i| machine(seed, i)).collect()
}

fn log_uniform(r: &mut Stream, lo: f64, hi: f64) -> f64 {
    (lo.ln() + r.unit() * (hi.ln() - lo.ln())).exp()
}

fn pick<T: Copy>(r: &mut Stream, v: &[T]) -> T {
    v[r.below(v.len() as u64) as usize]
}

/// Machine `i` of `seed`.
pub fn machine(seed: u64, i: usize) -> Result<Generated, ConfigError> {
    let r = &mut Stream::new(seed, &format!("machine.{i}"));
    let name = format!("gen-{seed}-{i}");
    let packages = 1 + r.below(2) as u32;
    let cores = pick(r, &[8u32, 12, 16, 24, 32, 48, 64]);
    let ncpu = packages * cores;
    let limited = r.unit() < 0.7;
    let knee = log_uniform(r, 0.5e6, 5.0e6).round();
    let load = match r.unit() {
        u if u < 0.12 => Load::Idle,
        u if u < 0.30 => Load::Low,
        u if u < 0.48 => Load::Medium,
        u if u < 0.82 => Load::Heavy,
        _ => Load::BurstThenIdle,
    };
    let (duration, warmup) = match load {
        Load::Heavy => (1200, 400),
        Load::BurstThenIdle => (2400, 100),
        _ => (3300, 300),
    };
    let mix = r.unit();
    let (nics, nvme) = match mix {
        m if m < 0.15 => (0, true),
        m if m < 0.30 => (1, true),
        m if m < 0.45 => (2, false),
        _ => (1, false),
    };
    let mut t = String::new();
    let mut desc = vec![format!("{ncpu} CPUs")];
    let _ = writeln!(t, "name = \"{name}\"");
    let _ = writeln!(
        t,
        "duration_ms = {duration}\nwarmup_ms = {warmup}\nseed = {i}"
    );
    let _ = writeln!(
        t,
        "[machine]\nnuma_nodes = {packages}\npackages = {packages}\ncores_per_package = {cores}"
    );
    if limited {
        let _ = writeln!(
            t,
            "[platform]\nkind = \"limited\"\nlimited_knee_per_sec = {knee}"
        );
        desc.push(format!("limited platform, knee {:.2} M/s", knee / 1e6));
    } else {
        let _ = writeln!(t, "[platform]\nkind = \"healthy\"");
        desc.push("healthy platform".into());
    }
    // Bursts: on at 0-35% and 55-85% of the run.
    let burst = |frac: f64| (duration as f64 * frac) as u64;
    let mut workloads = String::new();
    let mut link_used = Vec::new();
    for n in 0..nics {
        let link = loop {
            let l = pick(r, &[10u32, 25, 40, 50, 100, 200, 400]);
            if !link_used.contains(&l) {
                break l;
            }
        };
        link_used.push(link);
        let queues = (log_uniform(r, 4.0, 512.0).round() as u32).clamp(4, 2 * ncpu);
        let packet = log_uniform(r, 64.0, 9000.0).round() as u32;
        let dim = r.unit() < 0.25;
        // TCP needs an MTU of at least 576 bytes (IPv4's minimum datagram): smaller packets are
        // request/response traffic.
        let mtu = packet.max(576);
        let nic = format!("eth{n}");
        let _ = writeln!(
            t,
            "[[nic]]\nname = \"{nic}\"\nlink_gbps = {link}\nqueues = {queues}\nmtu_bytes = {mtu}\nmoderation = \"{}\"",
            if dim { "dim" } else { "static" }
        );
        desc.push(format!(
            "{link}G NIC, {queues} queues, {packet} B packets, {}",
            if dim { "DIM" } else { "static" }
        ));
        let small = packet < 576;
        let flows = (4 * queues).min(2048);
        let bulk = |load: f64, extra: &str| {
            format!(
                "[[workload]]\nkind = \"bulk\"\nnic = \"{nic}\"\nload = {load:.3}\nflows = {flows}\nwindow_kb = 48\nchunk_kb = 16\nwire_rtt_us = 10\njitter_us = 5\nprobe_per_sec = 2000\n{extra}"
            )
        };
        let rpc = |clients: u32, think: f64, extra: &str| {
            format!(
                "[[workload]]\nkind = \"rpc\"\nnic = \"{nic}\"\nclients = {clients}\nthink_us = {think:.0}\nrequest_bytes = {packet}\nresponse_bytes = {packet}\nservice_us = 2\n{extra}"
            )
        };
        let w = match (load, small) {
            (Load::Idle, _) => rpc(4, 1000.0, ""),
            (Load::Low, false) => bulk(0.03 + 0.05 * r.unit(), ""),
            (Load::Low, true) => rpc(queues.div_ceil(2), 200.0, ""),
            (Load::Medium, false) => bulk(0.3 + 0.2 * r.unit(), ""),
            (Load::Medium, true) => rpc(2 * queues, 50.0, ""),
            (Load::Heavy, false) => bulk(1.0, ""),
            (Load::Heavy, true) => rpc((8 * queues).min(1024), 0.0, ""),
            (Load::BurstThenIdle, _) => {
                let a = bulk(1.0, &format!("stop_ms = {}\n", burst(0.35)));
                let b = bulk(
                    1.0,
                    &format!("start_ms = {}\nstop_ms = {}\n", burst(0.55), burst(0.85)),
                );
                format!("{a}{b}")
            }
        };
        workloads.push_str(&w);
    }
    if nvme {
        let drives = 1 + r.below(24) as u32;
        // NVMe makes at most one I/O queue per CPU (the twin refuses more, as the driver
        // never asks for them).
        let qpd = pick(r, &[4u32, 8, 16, 32])
            .min((4 * ncpu).div_ceil(drives).max(1))
            .min(ncpu);
        let max_iops = log_uniform(r, 0.3e6, 1.8e6).round();
        let latency = log_uniform(r, 10.0, 100.0).round();
        let depth = log_uniform(r, 1.0, 256.0).round() as u32;
        let _ = writeln!(
            t,
            "[[nvme]]\nname = \"nvme\"\ndrives = {drives}\nqueues_per_drive = {qpd}\nmax_iops = {max_iops}\nlatency_us = {latency}"
        );
        desc.push(format!(
            "{drives} NVMe x {qpd} queues, {:.2} M IOPS and {latency} us each, iodepth {depth}",
            max_iops / 1e6
        ));
        let per_queue = drives as f64 * max_iops / (drives * qpd) as f64;
        let fio = |rate: f64, extra: &str| {
            format!(
                "[[workload]]\nkind = \"fio\"\nnvme = \"nvme\"\niodepth = {depth}\nrate_iops = {rate:.0}\n{extra}"
            )
        };
        let w = match load {
            Load::Idle => fio((0.005 * per_queue).max(50.0), ""),
            Load::Low => fio(0.05 * per_queue, ""),
            Load::Medium => fio((0.3 + 0.2 * r.unit()) * per_queue, ""),
            Load::Heavy => fio(0.0, ""),
            Load::BurstThenIdle => {
                let a = fio(0.0, &format!("stop_ms = {}\n", burst(0.35)));
                let b = fio(
                    0.0,
                    &format!("start_ms = {}\nstop_ms = {}\n", burst(0.55), burst(0.85)),
                );
                let idle = fio((0.005 * per_queue).max(50.0), "");
                format!("{a}{b}{idle}")
            }
        };
        workloads.push_str(&w);
    }
    desc.push(format!("{} load", load.name()));
    let head = format!("description = \"{}\"\n", desc.join("; "));
    let toml = format!("{head}{t}{workloads}");
    let scenario = Scenario::from_toml(&toml, &name)?;
    Ok(Generated {
        scenario,
        load,
        toml,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Seed 8's machine 21 (16 queues per drive on 12 CPUs) was refused by the twin and ended
    /// a whole sweep: every generated machine must build, on any seed.
    #[test]
    fn every_generated_machine_builds_a_simulator() {
        for seed in 0..24 {
            for g in generate(50, seed).unwrap() {
                if let Err(e) = crate::sim::Sim::new(g.scenario.clone()) {
                    panic!("{}: {e}\n{}", g.scenario.name, g.toml);
                }
            }
        }
    }

    #[test]
    fn same_seed_same_machines_and_every_one_loads() {
        let a = generate(40, 7).unwrap();
        let b = generate(40, 7).unwrap();
        assert_eq!(
            a.iter().map(|g| &g.toml).collect::<Vec<_>>(),
            b.iter().map(|g| &g.toml).collect::<Vec<_>>()
        );
        let c = generate(40, 8).unwrap();
        assert_ne!(a[0].toml, c[0].toml);
        // Every class and device mix appears in a set of this size.
        for load in [
            Load::Idle,
            Load::Low,
            Load::Medium,
            Load::Heavy,
            Load::BurstThenIdle,
        ] {
            assert!(a.iter().any(|g| g.load == load), "{load:?}");
        }
        assert!(a.iter().any(|g| g.scenario.nic.is_empty()));
        assert!(a.iter().any(|g| g.scenario.nvme.is_empty()));
        assert!(a.iter().any(|g| g.scenario.nic.len() == 2));
        for g in &a {
            for n in &g.scenario.nic {
                assert!((4..=512).contains(&n.queues), "{}", g.toml);
                assert!((10.0..=400.0).contains(&n.link_gbps));
            }
            for d in &g.scenario.nvme {
                assert!((1..=24).contains(&d.drives));
            }
        }
    }
}
