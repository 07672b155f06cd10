use super::*;
use std::path::Path;

/// `cat /proc/irq/soft_moderation` on a v3 kernel (format strings of `moderation_show()`).
pub(crate) const V3_READOUT: &str = "\
# CPU     irq/s  my_irq/s  cpus  delay_ns       irq_hi    my_irq_hi   hardirq_hi    timer_set      enqueue  stray_irq
    0    120000     60000     2     18000           10           12            0          500        12000          0
    1         0         0     0         0            0            0            0            0            0          0

enabled              yes
enable_list          'nvme_irq(),eth*'
delay_us             100
target_intr_rate     1000000
hardirq_percent      70
update_ms            5
scale_cpus           200
intr_rate            120000
irq_high             10
my_irq_high          12
hardirq_percent_high 0
total_interrupts     123456
total_cpus           789
";

fn write(dir: &Path, rel: &str, text: &str) {
    let p = dir.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

/// A v4 tree: `/proc/irq/soft_moderation/` with one file per parameter and `stats`.
pub(crate) fn v4_tree(dir: &Path) {
    for (name, v) in [
        ("delay_us", "100\n"),
        ("target_intr_rate", "1000000\n"),
        ("hardirq_percent", "70\n"),
        ("update_ms", "5\n"),
        ("scale_cpus", "150\n"),
    ] {
        write(dir, &format!("proc/irq/soft_moderation/{name}"), v);
    }
    write(
        dir,
        "proc/irq/soft_moderation/stats",
        "# CPU     irq/s   loc_irq/s  cpus\n    0         0           0     0\n\ndelay_us 100\n",
    );
}

fn params(pairs: &[(&str, u64)]) -> BTreeMap<String, u64> {
    pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
}

#[test]
fn v3_readout_keeps_parameters_only() {
    let p = parse_single_file(V3_READOUT);
    assert_eq!(
        p,
        params(&[
            ("delay_us", 100),
            ("hardirq_percent", 70),
            ("scale_cpus", 200),
            ("target_intr_rate", 1_000_000),
            ("update_ms", 5),
        ])
    );
}

#[test]
fn single_file_parser_is_tolerant() {
    let text = "delay_us=50\ntarget_irq_rate: 900000\ngarbage line\nupdate_ms 7 ms\n\
                hardirq_percent -1\nscale_cpus 99999999999999999999999\nunknown_param 5\n\n";
    assert_eq!(
        parse_single_file(text),
        params(&[("delay_us", 50), ("target_irq_rate", 900_000)])
    );
    assert!(parse_single_file("").is_empty());
    assert!(parse_single_file("\u{0}\u{1}==::").is_empty());
}

#[test]
fn detects_each_layout() {
    let none = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(none.path().join("proc/irq")).unwrap();
    assert_eq!(detect(&Root::new(none.path())), Ok(None));

    let v3 = tempfile::tempdir().unwrap();
    write(v3.path(), "proc/irq/soft_moderation", V3_READOUT);
    assert_eq!(detect(&Root::new(v3.path())), Ok(Some(SINGLE_FILE)));

    let v4 = tempfile::tempdir().unwrap();
    v4_tree(v4.path());
    assert_eq!(detect(&Root::new(v4.path())), Ok(Some(DIRECTORY)));

    let sw = tempfile::tempdir().unwrap();
    write(sw.path(), "proc/irq/sw_moderation/delay_us", "0\n");
    assert_eq!(detect(&Root::new(sw.path())), Ok(Some(SW_DIRECTORY)));
}

#[test]
fn reads_both_forms_into_the_model() {
    let v3 = tempfile::tempdir().unwrap();
    write(v3.path(), "proc/irq/soft_moderation", V3_READOUT);
    let s = read_soft(&Root::new(v3.path())).unwrap().unwrap();
    assert_eq!(s.form, SoftModerationForm::SingleFile);
    assert_eq!(s.params["delay_us"], 100);
    assert!(!s.params.contains_key("intr_rate"));

    let v4 = tempfile::tempdir().unwrap();
    v4_tree(v4.path());
    let s = read_soft(&Root::new(v4.path())).unwrap().unwrap();
    assert_eq!(s.form, SoftModerationForm::Directory);
    assert_eq!(
        s.params,
        params(&[
            ("delay_us", 100),
            ("hardirq_percent", 70),
            ("scale_cpus", 150),
            ("target_intr_rate", 1_000_000),
            ("update_ms", 5),
        ])
    );

    let none = tempfile::tempdir().unwrap();
    assert_eq!(read_soft(&Root::new(none.path())), Ok(None));
}

#[test]
fn a_malformed_parameter_file_is_a_gap_naming_it() {
    let d = tempfile::tempdir().unwrap();
    v4_tree(d.path());
    write(d.path(), "proc/irq/soft_moderation/update_ms", "fast\n");
    match read_soft(&Root::new(d.path())) {
        Err(GapReason::Unparsable(m)) => {
            assert!(
                m.starts_with("proc/irq/soft_moderation/update_ms:1:"),
                "{m}"
            )
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn renders_writes_for_each_form() {
    assert_eq!(
        render_param_write(&SINGLE_FILE, "delay_us", 100),
        (
            "proc/irq/soft_moderation".to_string(),
            "delay_us=100\n".to_string()
        )
    );
    assert_eq!(
        render_param_write(&DIRECTORY, "target_intr_rate", 1_000_000),
        (
            "proc/irq/soft_moderation/target_intr_rate".to_string(),
            "1000000\n".to_string()
        )
    );
    assert_eq!(
        render_param_write(&SW_DIRECTORY, "hardirq_percent", 70).0,
        "proc/irq/sw_moderation/hardirq_percent"
    );
    assert_eq!(
        irq_flag_path(&DIRECTORY, IrqNum(45)),
        "proc/irq/45/soft_moderation"
    );
    assert_eq!(
        irq_flag_path(&SW_DIRECTORY, IrqNum(45)),
        "proc/irq/45/allow_sw_moderation"
    );
    assert_eq!(render_irq_flag(true), "1\n");
    assert_eq!(render_irq_flag(false), "0\n");
}

#[test]
fn irq_flags_and_names() {
    assert_eq!(parse_irq_flag("on\n"), Ok(true));
    assert_eq!(parse_irq_flag("off\n"), Ok(false));
    assert_eq!(parse_irq_flag("1"), Ok(true));
    assert_eq!(parse_irq_flag("N\n"), Ok(false));
    assert!(parse_irq_flag("maybe\n").is_err());
    assert!(parse_irq_flag("on\noff\n").is_err());
    assert!(is_param_name("delay_us"));
    for bad in ["", "stats", "../x", "Delay", "a=b", &"x".repeat(33)] {
        assert!(!is_param_name(bad), "{bad:?}");
    }
    assert_eq!(param_range("delay_us"), Some(0..=500));
    assert_eq!(param_range("update_ms"), Some(1..=100));
    assert_eq!(param_range("nonsense"), None);
    assert_eq!(alias("target_intr_rate"), Some("target_irq_rate"));
}
