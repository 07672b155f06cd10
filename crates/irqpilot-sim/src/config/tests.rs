use super::*;

const MIN: &str = r#"
name = "t"
[machine]
cores_per_package = 4
[[nic]]
name = "eth0"
link_gbps = 10
queues = 4
[[workload]]
kind = "bulk"
nic = "eth0"
load = 0.5
"#;

#[test]
fn minimal_scenario_gets_defaults() {
    let s = Scenario::from_toml(MIN, "t").unwrap();
    assert_eq!(s.duration_ms, 1000);
    assert_eq!(s.costs.hardirq_us, 1.0);
    assert_eq!(s.nic[0].moderation, NicModeration::Dim);
    assert_eq!(s.platform.knee_per_sec(), 2_000_000.0);
}

#[test]
fn unknown_keys_rejected() {
    let e = Scenario::from_toml(&format!("{MIN}\n[costs]\nhardirq = 1.0\n"), "t").unwrap_err();
    assert!(e.to_string().contains("hardirq"), "{e}");
    let e =
        Scenario::from_toml(&MIN.replace("load = 0.5", "load = 0.5\nspeed = 3"), "t").unwrap_err();
    assert!(e.to_string().contains("speed"), "{e}");
}

#[test]
fn sets_apply_and_errors_name_the_key() {
    let s = Scenario::from_toml(MIN, "t").unwrap();
    let set = |k: &str, v: &str| s.with_sets(&[(k.to_string(), v.to_string())]);
    assert_eq!(
        set("moderation", "static").unwrap().nic[0].moderation,
        NicModeration::Static
    );
    assert_eq!(set("aim_mode", "2").unwrap().nic[0].aim_mode, 2);
    assert_eq!(
        set("platform", "healthy").unwrap().platform.kind,
        PlatformKind::Healthy
    );
    assert_eq!(set("seed", "42").unwrap().seed, 42);
    assert_eq!(set("nic.0.queues", "8").unwrap().nic[0].queues, 8);
    assert_eq!(
        set("costs.hardirq_us", "0.5").unwrap().costs.hardirq_us,
        0.5
    );
    // Text that reads as a number, for a key that takes text: a CPU list of one CPU.
    assert_eq!(
        set("nic.0.cpus", "3").unwrap().nic[0].cpus.as_deref(),
        Some("3")
    );
    // A dotted path's value of the wrong type or range: the range, not serde's words.
    assert_eq!(
        set("duration_ms", "-1").unwrap_err().to_string(),
        "--set duration_ms: must be a whole number >= 1"
    );
    assert_eq!(
        set("nic.0.queues", "x").unwrap_err().to_string(),
        "--set nic.0.queues: must be a whole number in 1-4294967295"
    );
    for (k, v) in [
        ("moderation", "turbo"),
        ("aim_mode", "7"),
        ("platform", "fast"),
        ("seed", "x"),
        ("costs.hardirq", "1"),
        ("nic.3.queues", "1"),
        ("bogus", "1"),
    ] {
        let e = set(k, v).unwrap_err();
        assert!(
            matches!(&e, ConfigError::BadSet { key, .. } if key == k),
            "{k}: {e}"
        );
    }
}

#[test]
fn validation() {
    assert!(
        Scenario::from_toml(
            &MIN.replace("nic = \"eth0\"\nload", "nic = \"eth9\"\nload"),
            "t"
        )
        .is_err()
    );
    assert!(Scenario::from_toml(&MIN.replace("queues = 4", "queues = 0"), "t").is_err());
}
