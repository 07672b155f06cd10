//! What `dist/` ships, checked against the code: the example configuration (parses, holds every
//! key the configuration types accept with its default), the systemd unit (the capabilities,
//! socket families and devices of `irqpilot_linux::privileges`; `systemd-analyze verify`), and
//! the shell completions.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use irqpilot::config::Config;
use serde_reflection::{ContainerFormat, Format, Registry, Tracer, TracerConfig};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_irqpilot");

fn dist(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../dist")
        .join(name)
}

fn read(name: &str) -> String {
    std::fs::read_to_string(dist(name)).unwrap()
}

/// Every leaf key the configuration types accept, dotted (`placement.pin.cpus`), found by
/// tracing their `Deserialize` implementations (so a new field is found without a list here).
fn accepted_keys() -> BTreeSet<String> {
    let mut tracer = Tracer::new(TracerConfig::default());
    // Enums first: the tracer needs to have seen each variant before a struct holds one.
    tracer
        .trace_simple_type::<irqpilot_core::moderation::global::Idle>()
        .unwrap();
    tracer
        .trace_simple_type::<irqpilot_core::moderation::global::IdleTx>()
        .unwrap();
    tracer.trace_simple_type::<Config>().unwrap();
    let registry = tracer.registry().unwrap();
    let mut out = BTreeSet::new();
    walk(&registry, "Config", "", &mut out);
    out
}

fn walk(registry: &Registry, ty: &str, prefix: &str, out: &mut BTreeSet<String>) {
    let Some(ContainerFormat::Struct(fields)) = registry.get(ty) else {
        panic!("{ty} is not a struct: {:?}", registry.get(ty));
    };
    for f in fields {
        let key = if prefix.is_empty() {
            f.name.clone()
        } else {
            format!("{prefix}.{}", f.name)
        };
        let mut fmt = &f.value;
        // Option<T> and Vec<T> of a struct hold the struct's keys.
        while let Format::Option(inner) | Format::Seq(inner) = fmt {
            fmt = inner;
        }
        match fmt {
            Format::TypeName(name)
                if matches!(registry.get(name), Some(ContainerFormat::Struct(_))) =>
            {
                walk(registry, name, &key, out)
            }
            _ => {
                out.insert(key);
            }
        }
    }
}

/// Keys set in the example, dotted, and those only shown commented out (`#key = value`, with no
/// space after `#`), and the text with those uncommented.
fn example_keys(text: &str) -> (BTreeSet<String>, BTreeSet<String>, String) {
    let (mut active, mut commented) = (BTreeSet::new(), BTreeSet::new());
    let mut table = String::new();
    let mut uncommented = String::new();
    for line in text.lines() {
        let (setting, is_commented) = match line.strip_prefix('#') {
            Some(rest) if rest.starts_with(|c: char| c.is_ascii_alphabetic() || c == '[') => {
                (rest, true)
            }
            Some(_) => {
                uncommented.push_str(line);
                uncommented.push('\n');
                continue;
            }
            None => (line, false),
        };
        uncommented.push_str(setting);
        uncommented.push('\n');
        let setting = setting.trim();
        if setting.is_empty() {
            continue;
        }
        if let Some(t) = setting.strip_prefix('[') {
            table = t.trim_matches(|c| c == '[' || c == ']').to_string();
            continue;
        }
        let key = setting.split('=').next().unwrap().trim();
        let dotted = format!("{table}.{key}");
        if is_commented {
            commented.insert(dotted);
        } else {
            active.insert(dotted);
        }
    }
    (active, commented, uncommented)
}

#[test]
fn the_example_configuration_holds_every_key_with_its_default() {
    let text = read("irqpilot.toml");
    let parsed = Config::parse(&text, "dist/irqpilot.toml").unwrap();
    assert_eq!(
        parsed,
        Config::default(),
        "every value in dist/irqpilot.toml must be the default"
    );
    let accepted = accepted_keys();
    assert!(
        accepted.contains("moderation.target_intr_rate"),
        "{accepted:?}"
    );
    assert!(accepted.contains("placement.pin.cpus"), "{accepted:?}");
    let (active, commented, uncommented) = example_keys(&text);
    assert!(
        active.is_disjoint(&commented),
        "set and commented out: {:?}",
        active.intersection(&commented).collect::<Vec<_>>()
    );
    let shown: BTreeSet<String> = active.union(&commented).cloned().collect();
    let missing: Vec<&String> = accepted.difference(&shown).collect();
    let unknown: Vec<&String> = shown.difference(&accepted).collect();
    assert!(
        missing.is_empty(),
        "keys missing from dist/irqpilot.toml: {missing:?}"
    );
    assert!(
        unknown.is_empty(),
        "keys the configuration does not accept: {unknown:?}"
    );
    // The commented-out examples are valid too.
    let c = Config::parse(&uncommented, "dist/irqpilot.toml uncommented")
        .unwrap_or_else(|e| panic!("{e:#}\n{uncommented}"));
    assert_eq!(c.placement.pin.len(), 3);
    assert!(c.metrics.listen.is_some() && c.daemon.journal.is_some());
}

#[test]
fn the_example_configuration_is_accepted_by_the_binary() {
    let out = Command::new(BIN)
        .arg("--config")
        .arg(dist("irqpilot.toml"))
        .args(["--root"])
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/firecracker-2cpu"))
        .args(["status", "--sample", "0"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `Key=` values of a unit (one line each).
fn unit_values(unit: &str, key: &str) -> Vec<String> {
    unit.lines()
        .filter_map(|l| l.strip_prefix(&format!("{key}=")))
        .map(str::to_string)
        .collect()
}

fn words(unit: &str, key: &str) -> BTreeSet<String> {
    let lines = unit_values(unit, key);
    assert_eq!(
        lines.len(),
        1,
        "{key}= on exactly one line (scripts read it)"
    );
    lines[0].split_whitespace().map(str::to_string).collect()
}

#[test]
fn the_unit_grants_what_the_code_needs_and_no_more() {
    use irqpilot_linux::privileges::{ADDRESS_FAMILIES, CAPABILITIES, DEVICES};
    let unit = read("irqpilot.service");
    let caps: BTreeSet<String> = CAPABILITIES
        .iter()
        .map(|p| p.capability.to_string())
        .collect();
    assert_eq!(words(&unit, "CapabilityBoundingSet"), caps);
    let families: BTreeSet<String> = ADDRESS_FAMILIES
        .iter()
        .map(|(f, _)| f.to_string())
        .collect();
    assert_eq!(words(&unit, "RestrictAddressFamilies"), families);
    let devices: Vec<String> = DEVICES.iter().map(|(d, m, _)| format!("{d} {m}")).collect();
    assert_eq!(unit_values(&unit, "DeviceAllow"), devices);
    assert_eq!(unit_values(&unit, "DevicePolicy"), ["closed"]);
    for line in [
        "Type=notify",
        "ExecStart=/usr/bin/irqpilot daemon",
        "ExecReload=/bin/kill -HUP $MAINPID",
        "Conflicts=irqbalance.service",
        "ReadWritePaths=/proc/irq",
    ] {
        assert!(unit.lines().any(|l| l == line), "{line} missing");
    }
    assert!(!unit_values(&unit, "WatchdogSec").is_empty());
    // What would stop it from moderating, or from placing: ProtectKernelTunables=yes leaves
    // /proc/irq read-only whatever ReadWritePaths= says (systemd 252, the VM lab).
    for bad in [
        "PrivateNetwork=yes",
        "PrivateDevices=yes",
        "ProtectProc=invisible",
        "ProtectKernelTunables=yes",
    ] {
        assert!(!unit.lines().any(|l| l == bad), "{bad}");
    }
    // The exporter needs nothing.
    let exporter = read("irqpilot-exporter.service");
    assert_eq!(unit_values(&exporter, "CapabilityBoundingSet"), [""]);
    assert!(exporter.lines().any(|l| l == "DynamicUser=yes"));
}

/// `systemd-analyze verify` on both units (ExecStart pointed at the binary under test; the man
/// pages the .deb installs are not installed here).
#[test]
fn systemd_analyze_verifies_the_units() {
    if Command::new("systemd-analyze")
        .arg("--version")
        .output()
        .is_err()
    {
        assert_ne!(
            std::env::var("CI").as_deref(),
            Ok("true"),
            "systemd-analyze missing under CI=true"
        );
        eprintln!("skipped: no systemd-analyze");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    for name in ["irqpilot.service", "irqpilot-exporter.service"] {
        let path = dir.path().join(name);
        std::fs::write(&path, read(name).replace("/usr/bin/irqpilot", BIN)).unwrap();
        let out = Command::new("systemd-analyze")
            .args(["verify", "--man=no"])
            .arg(&path)
            .output()
            .unwrap();
        assert!(
            out.status.success() && out.stderr.is_empty(),
            "{name}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn completions_cover_every_subcommand() {
    for shell in ["bash", "zsh", "fish"] {
        let out = Command::new(BIN)
            .args(["completions", shell])
            .output()
            .unwrap();
        assert!(out.status.success(), "{shell}");
        let text = String::from_utf8(out.stdout).unwrap();
        for sub in [
            "status",
            "daemon",
            "exporter",
            "completions",
            "per-cpu-irqs",
        ] {
            assert!(text.contains(sub), "{shell}: {sub} missing");
        }
    }
    let out = Command::new(BIN)
        .args(["completions", "tcsh"])
        .output()
        .unwrap();
    assert!(!out.status.success());
}

/// Metric names (`irqpilot_...`) in a text.
fn metric_names(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut rest = text;
    while let Some(i) = rest.find("irqpilot_") {
        let tail = &rest[i..];
        let end = tail
            .find(|c: char| !(c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'))
            .unwrap_or(tail.len());
        let before = rest[..i].chars().next_back();
        if !before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_') {
            out.insert(tail[..end].to_string());
        }
        rest = &tail[end..];
    }
    out
}

/// The metric names a daemon with every option serves (a scrape of a running one).
fn emitted_metric_names() -> BTreeSet<String> {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    let mut copy = Command::new("cp");
    copy.arg("-a")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/firecracker-2cpu"))
        .arg(&root);
    assert!(copy.status().unwrap().success());
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let addr = format!("127.0.0.1:{port}");
    let mut child = Command::new(BIN)
        .args(["--config", "/dev/null", "--root"])
        .arg(&root)
        .args(["daemon", "--force", "--per-cpu-irqs", "--metrics", &addr])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut text = String::new();
    for _ in 0..500 {
        if let Ok(mut s) = std::net::TcpStream::connect(&addr) {
            use std::io::{Read, Write};
            write!(s, "GET /metrics HTTP/1.0\r\n\r\n").unwrap();
            s.read_to_string(&mut text).unwrap();
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
    // Every family the endpoint declares (`# TYPE` names its samples in the classic format);
    // some have no series on this small machine (no moderation knob, no imbalance to show).
    let names: BTreeSet<String> = text
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .map(|l| l.split(' ').next().unwrap().to_string())
        .collect();
    let sampled = text
        .lines()
        .filter(|l| l.starts_with("irqpilot_"))
        .map(|l| l.split(['{', ' ']).next().unwrap().to_string());
    for s in sampled {
        assert!(names.contains(&s), "{s} has no # TYPE");
    }
    names
}

#[test]
fn every_dashboard_and_alert_query_names_an_emitted_metric() {
    let emitted = emitted_metric_names();
    assert!(
        emitted.contains("irqpilot_irq_cpu_interrupts_total"),
        "{emitted:?}"
    );
    assert!(
        emitted.contains("irqpilot_placement_migrations_total"),
        "{emitted:?}"
    );
    let dash: serde_json::Value = serde_json::from_str(&read("grafana-dashboard.json")).unwrap();
    let mut exprs = String::new();
    let mut stack = vec![&dash];
    while let Some(v) = stack.pop() {
        match v {
            serde_json::Value::Object(m) => {
                for (k, x) in m {
                    match (k.as_str(), x) {
                        ("expr" | "definition", serde_json::Value::String(s)) => {
                            exprs.push_str(s);
                            exprs.push('\n');
                        }
                        _ => stack.push(x),
                    }
                }
            }
            serde_json::Value::Array(a) => stack.extend(a),
            _ => {}
        }
    }
    let used = metric_names(&exprs);
    assert!(used.len() >= 12, "{used:?}");
    let alerts = metric_names(&read("prometheus-alerts.yml"));
    assert!(alerts.len() >= 6, "{alerts:?}");
    for (what, names) in [("dashboard", &used), ("alert rules", &alerts)] {
        let unknown: Vec<&String> = names.difference(&emitted).collect();
        assert!(
            unknown.is_empty(),
            "{what} query metrics nobody emits: {unknown:?}"
        );
    }
}
