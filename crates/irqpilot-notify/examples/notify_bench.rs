//! Runs the notification benchmark on this machine until `irqpilot bench notify` exists.
//!
//! ```text
//! cargo run --release -p irqpilot-notify --example notify_bench -- [--format table|json|markdown]
//!     [--iterations N] [--gap-iterations N] [--gaps 100us,1ms] [--scale F] [--processes]
//!     [--duration SECS|none] [--mechanisms spin-raw,spin,...] [--placements same-cpu,...]
//!     [--rounds N] [--max-spin-ns N] [--save-json FILE]
//! ```
//!
//! The topology reader here is a stop-gap (online list, SMT siblings, package ids, cache sharing
//! from `/sys/devices/system/cpu`); the CLI uses the real reader of `irqpilot-linux`.

use irqpilot_core::{Cache, CacheKind, CpuSet, CpuTopo, Topology};
use irqpilot_notify::{BenchConfig, Mechanism, Mode, PlacementKind, parse_gap, run_with_progress};
use std::fs;
use std::path::Path;

fn read(path: &Path) -> Option<String> {
    fs::read_to_string(path).ok().map(|s| s.trim().to_string())
}

fn read_topology() -> Result<Topology, String> {
    let base = Path::new("/sys/devices/system/cpu");
    let online = read(&base.join("online")).ok_or("cannot read /sys/devices/system/cpu/online")?;
    let online = CpuSet::parse_list(&online).map_err(|e| e.to_string())?;
    let mut topo = Topology {
        online: online.clone(),
        ..Topology::default()
    };
    for cpu in &online {
        let dir = base.join(format!("cpu{}", cpu.0));
        let t = dir.join("topology");
        let list = |name: &str| read(&t.join(name)).and_then(|s| CpuSet::parse_list(&s).ok());
        let mut caches = Vec::new();
        for idx in 0..16 {
            let c = dir.join(format!("cache/index{idx}"));
            let Some(level) = read(&c.join("level")).and_then(|s| s.parse().ok()) else {
                break;
            };
            let kind = match read(&c.join("type")).as_deref() {
                Some("Data") => CacheKind::Data,
                Some("Instruction") => CacheKind::Instruction,
                _ => CacheKind::Unified,
            };
            let Some(shared_cpus) =
                read(&c.join("shared_cpu_list")).and_then(|s| CpuSet::parse_list(&s).ok())
            else {
                continue;
            };
            caches.push(Cache {
                level,
                kind,
                size_bytes: None,
                shared_cpus,
                id: read(&c.join("id")).and_then(|s| s.parse().ok()),
            });
        }
        caches.sort_by_key(|c| c.level);
        topo.cpus.insert(
            cpu,
            CpuTopo {
                package: read(&t.join("physical_package_id")).and_then(|s| s.parse().ok()),
                core: read(&t.join("core_id")).and_then(|s| s.parse().ok()),
                thread_siblings: list("thread_siblings_list"),
                package_cpus: list("package_cpus_list").or_else(|| list("core_siblings_list")),
                caches,
                ..CpuTopo::default()
            },
        );
    }
    Ok(topo)
}

fn list<T: std::str::FromStr>(s: &str) -> Result<Vec<T>, String>
where
    T::Err: std::fmt::Display,
{
    s.split(',')
        .filter(|x| !x.is_empty())
        .map(|x| x.trim().parse::<T>().map_err(|e| e.to_string()))
        .collect()
}

fn main() {
    if let Err(e) = real_main() {
        eprintln!("notify_bench: {e}");
        std::process::exit(2);
    }
}

fn real_main() -> Result<(), String> {
    let mut config = BenchConfig::default();
    let mut save_json: Option<String> = None;
    let mut format = "table".to_string();
    let mut args = std::env::args().skip(1);
    let mut scale: Option<f64> = None;
    let mut overrides: Vec<(String, String)> = Vec::new();
    while let Some(a) = args.next() {
        let mut val = || args.next().ok_or(format!("{a} needs a value"));
        match a.as_str() {
            "--format" => format = val()?,
            "--scale" => scale = Some(val()?.parse().map_err(|e| format!("--scale: {e}"))?),
            "--processes" => overrides.push(("processes".into(), String::new())),
            "--iterations" | "--gap-iterations" | "--gaps" | "--mechanisms" | "--placements"
            | "--max-spin-ns" | "--warmup" | "--duration" | "--rounds" | "--save-json" => {
                overrides.push((a.clone(), val()?))
            }
            "-h" | "--help" => {
                println!(
                    "notify_bench [--format table|json|markdown] [--iterations N] [--warmup N] \
                     [--gap-iterations N] [--gaps 100us,1ms|none] [--scale F] [--processes] \
                     [--duration SECS|none] [--rounds N] [--save-json FILE] \
                     [--mechanisms a,b] [--placements a,b] [--max-spin-ns N]\n\nmechanisms: {}\n\
                     placements: {}",
                    Mechanism::ALL.map(|m| m.name()).join(","),
                    PlacementKind::ALL.map(|p| p.name()).join(",")
                );
                return Ok(());
            }
            other => return Err(format!("unknown argument {other:?} (try --help)")),
        }
    }
    if let Some(f) = scale {
        config = BenchConfig::scaled(f);
    }
    for (k, v) in overrides {
        let num = |v: &str| v.parse::<u64>().map_err(|e| format!("{k}: {e}"));
        match k.as_str() {
            "processes" => config.mode = Mode::Processes,
            "--save-json" => save_json = Some(v.clone()),
            "--iterations" => config.iterations = num(&v)?,
            "--warmup" => config.warmup = num(&v)?,
            "--rounds" => config.rounds = u32::try_from(num(&v)?).map_err(|e| e.to_string())?,
            "--gap-iterations" => config.gap_iterations = num(&v)?,
            "--gaps" if v == "none" => config.gaps.clear(),
            "--duration" if v == "none" => config.time_budget = None,
            "--duration" => {
                let secs: f64 = v.parse().map_err(|e| format!("--duration: {e}"))?;
                config.time_budget = Some(std::time::Duration::from_secs_f64(secs.max(0.001)));
            }
            "--gaps" => {
                config.gaps = v
                    .split(',')
                    .map(parse_gap)
                    .collect::<Result<_, _>>()
                    .map_err(|e| e.to_string())?;
            }
            "--mechanisms" => config.mechanisms = list(&v)?,
            "--placements" => config.placements = list(&v)?,
            "--max-spin-ns" => {
                config.hybrid.max_spin_ns = u32::try_from(num(&v)?).map_err(|e| e.to_string())?
            }
            _ => {}
        }
    }
    let topology = read_topology()?;
    let report = run_with_progress(&config, &topology, |row| {
        let what = match (&row.rtt_ns, &row.error) {
            (Some(r), _) => format!("p50 {} ns, p99 {} ns", r.p50, r.p99),
            (None, Some(e)) => format!("failed: {e}"),
            (None, None) => "unavailable".to_string(),
        };
        eprintln!(
            "{:<20} {:<13} gap {:>8} ns: {what}",
            row.mechanism.name(),
            row.placement.name(),
            row.gap_ns
        );
    });
    if let Some(path) = save_json {
        let json = serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?;
        fs::write(&path, json).map_err(|e| format!("writing {path}: {e}"))?;
    }
    match format.as_str() {
        "json" => println!(
            "{}",
            serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?
        ),
        "markdown" => println!("{}", report.render_markdown()),
        _ => println!("{}", report.render_table()),
    }
    Ok(())
}
