//! The machine a run was measured on: CPU model, kernel, virtualisation, mitigations from the
//! kernel command line, SMT, governor. Parsers take text; [`Environment::detect`] reads the live
//! `/proc` and `/sys`.

use serde::Serialize;

/// Facts printed above every result table (notify.md §4: "record the system state").
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Environment {
    /// `model name` from `/proc/cpuinfo`.
    pub cpu_model: Option<String>,
    /// `cpu family`, `model` and `stepping` from `/proc/cpuinfo` (a VM's model name is often
    /// generic; the family tells the microarchitecture).
    pub cpu_family_model: Option<String>,
    /// `/proc/sys/kernel/osrelease`.
    pub kernel: Option<String>,
    /// The CPU reports the `hypervisor` flag: a virtual machine, whose IPI and wake-up costs
    /// differ from bare metal.
    pub virtual_machine: bool,
    /// Mitigation-related tokens of `/proc/cmdline` (`mitigations=`, `pti=`, `nopti`, ...);
    /// empty means the kernel's defaults.
    pub mitigations: Vec<String>,
    /// Tuning-related tokens of `/proc/cmdline` (`isolcpus=`, `nohz_full=`, `idle=`, ...).
    pub tuning: Vec<String>,
    /// `/sys/devices/system/cpu/smt/control` (`on`, `off`, `notsupported`, ...).
    pub smt: Option<String>,
    /// Online CPUs (`/sys/devices/system/cpu/online`).
    pub online_cpus: Option<String>,
    /// `scaling_governor` of CPU 0, if cpufreq is exposed.
    pub governor: Option<String>,
    /// `/proc/loadavg` when the run started (1, 5, 15 minutes): other work on the machine.
    pub load_average: Option<String>,
}

const MITIGATION_KEYS: &[&str] = &[
    "mitigations",
    "pti",
    "nopti",
    "spectre_v2",
    "spectre_v2_user",
    "nospectre_v1",
    "nospectre_v2",
    "spec_store_bypass_disable",
    "retbleed",
    "mds",
    "tsx_async_abort",
    "l1tf",
    "mmio_stale_data",
    "srbds",
    "gather_data_sampling",
    "spec_rstack_overflow",
    "reg_file_data_sampling",
];

const TUNING_KEYS: &[&str] = &[
    "isolcpus",
    "nohz_full",
    "rcu_nocbs",
    "irqaffinity",
    "idle",
    "intel_idle.max_cstate",
    "processor.max_cstate",
    "cpuidle_haltpoll.force",
    "haltpoll.guest_halt_poll_ns",
    "threadirqs",
    "preempt",
];

fn key_of(token: &str) -> &str {
    token.split('=').next().unwrap_or(token)
}

/// Tokens of a kernel command line whose key is in `keys`, in order. Stops at `--` (what follows
/// belongs to init).
fn tokens_with_keys(cmdline: &str, keys: &[&str]) -> Vec<String> {
    cmdline
        .split_whitespace()
        .take_while(|t| *t != "--")
        .filter(|t| keys.contains(&key_of(t)))
        .map(str::to_string)
        .collect()
}

/// Mitigation tokens of `/proc/cmdline`.
pub fn parse_mitigations(cmdline: &str) -> Vec<String> {
    tokens_with_keys(cmdline, MITIGATION_KEYS)
}

/// Tuning tokens of `/proc/cmdline`.
pub fn parse_tuning(cmdline: &str) -> Vec<String> {
    tokens_with_keys(cmdline, TUNING_KEYS)
}

/// `model name` of the first CPU in `/proc/cpuinfo` text.
pub fn parse_cpu_model(cpuinfo: &str) -> Option<String> {
    cpuinfo
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.trim().to_string())
}

/// `family F model M stepping S` of the first CPU in `/proc/cpuinfo` text.
pub fn parse_family_model(cpuinfo: &str) -> Option<String> {
    let field = |name: &str| {
        cpuinfo
            .lines()
            .filter_map(|l| l.split_once(':'))
            .find(|(k, _)| k.trim() == name)
            .map(|(_, v)| v.trim().to_string())
    };
    let family = field("cpu family")?;
    let model = field("model")?;
    Some(match field("stepping") {
        Some(s) => format!("family {family} model {model} stepping {s}"),
        None => format!("family {family} model {model}"),
    })
}

/// Whether the first `flags` line of `/proc/cpuinfo` text has `hypervisor`.
pub fn parse_hypervisor(cpuinfo: &str) -> bool {
    cpuinfo
        .lines()
        .find(|l| l.starts_with("flags"))
        .is_some_and(|l| l.split_whitespace().any(|w| w == "hypervisor"))
}

fn read_trimmed(path: &str) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

impl Environment {
    /// Reads the live machine. Missing files become `None`, never guesses.
    pub fn detect() -> Environment {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let cmdline = std::fs::read_to_string("/proc/cmdline").unwrap_or_default();
        Environment {
            cpu_model: parse_cpu_model(&cpuinfo),
            cpu_family_model: parse_family_model(&cpuinfo),
            kernel: read_trimmed("/proc/sys/kernel/osrelease"),
            virtual_machine: parse_hypervisor(&cpuinfo),
            mitigations: parse_mitigations(&cmdline),
            tuning: parse_tuning(&cmdline),
            smt: read_trimmed("/sys/devices/system/cpu/smt/control"),
            online_cpus: read_trimmed("/sys/devices/system/cpu/online"),
            governor: read_trimmed("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor"),
            load_average: read_trimmed("/proc/loadavg")
                .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" ")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cmdline_tokens() {
        let c = "mitigations=auto,no_guest_host console=ttyS0 nopti isolcpus=2-3 \
                 haltpoll.guest_halt_poll_ns=0 -- --init-arg mitigations=off";
        assert_eq!(
            parse_mitigations(c),
            vec!["mitigations=auto,no_guest_host", "nopti"]
        );
        assert_eq!(
            parse_tuning(c),
            vec!["isolcpus=2-3", "haltpoll.guest_halt_poll_ns=0"]
        );
        assert!(parse_mitigations("quiet").is_empty());
    }

    #[test]
    fn cpuinfo_fields() {
        let c = "processor\t: 0\nmodel name\t: AMD EPYC\nflags\t\t: fpu hypervisor avx\n";
        assert_eq!(parse_cpu_model(c).as_deref(), Some("AMD EPYC"));
        assert!(parse_hypervisor(c));
        assert!(!parse_hypervisor("flags : fpu avx\n"));
        assert_eq!(parse_cpu_model(""), None);
        let c = "cpu family\t: 26\nmodel\t\t: 2\nmodel name\t: AMD EPYC\nstepping\t: 1\n";
        assert_eq!(
            parse_family_model(c).as_deref(),
            Some("family 26 model 2 stepping 1")
        );
        assert_eq!(parse_family_model("model name : x\n"), None);
    }
}
