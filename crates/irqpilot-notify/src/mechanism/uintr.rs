//! x86 user interrupts (UINTR, `SENDUIPI`): detection only.
//!
//! Both the CPU and the kernel must support it: the CPU reports it in
//! `CPUID.(EAX=7,ECX=0):EDX[5]`; the kernel support exists only in Intel's out-of-tree RFC
//! branches (syscalls 471-476, `uintr_register_handler` = 471), never in mainline. Mainline
//! returned ENOSYS for 471 until Linux 7.0 gave that number to `rseq_slice_yield`, so a
//! non-ENOSYS answer alone proves nothing; a kernel that enabled UINTR also lists `uintr` in
//! `/proc/cpuinfo`. No delivery backend is implemented: with both facts present the mechanism is
//! still reported unavailable, saying so. A backend would add an `Endpoint` that registers a
//! handler (471), creates a vector fd (473), registers the peer as sender (474) and sends with
//! `senduipi`.

use serde::Serialize;

/// The RFC's `uintr_register_handler` syscall number (x86-64).
pub const SYS_UINTR_REGISTER_HANDLER: libc::c_long = 471;

/// What this machine says about UINTR.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct UintrSupport {
    /// `CPUID.(EAX=7,ECX=0):EDX[5]`.
    pub cpu: bool,
    /// `/proc/cpuinfo` lists the `uintr` flag (a kernel that knows and enabled the feature).
    pub kernel_flag: bool,
    /// What syscall 471 answered: `Err(errno)` or `Ok(return value)` (JSON: `"ENOSYS"`,
    /// `"errno N"` or `"returned N"`).
    #[serde(serialize_with = "ser_syscall")]
    pub syscall_471: Result<i64, i32>,
}

fn ser_syscall<S: serde::Serializer>(r: &Result<i64, i32>, s: S) -> Result<S::Ok, S::Error> {
    match r {
        Err(e) if *e == libc::ENOSYS => s.serialize_str("ENOSYS"),
        Err(e) => s.serialize_str(&format!("errno {e}")),
        Ok(v) => s.serialize_str(&format!("returned {v}")),
    }
}

impl UintrSupport {
    /// Whether hardware and kernel both support user interrupts.
    pub fn supported(&self) -> bool {
        self.cpu && self.kernel_flag && self.syscall_471 != Err(libc::ENOSYS)
    }

    /// Both facts in words, for the `reason` of an unavailable row.
    pub fn reason(&self) -> String {
        let cpu = if self.cpu {
            "CPU: supports UINTR (CPUID.(EAX=7,ECX=0):EDX[5] = 1)"
        } else {
            "CPU: no UINTR (CPUID.(EAX=7,ECX=0):EDX[5] = 0)"
        };
        let syscall = match self.syscall_471 {
            Err(e) if e == libc::ENOSYS => {
                "syscall 471 (RFC uintr_register_handler) returns ENOSYS".to_string()
            }
            Err(e) => format!("syscall 471 answers errno {e}"),
            Ok(v) => format!(
                "syscall 471 exists (returned {v}; Linux 7.0+ assigns 471 to rseq_slice_yield)"
            ),
        };
        let flag = if self.kernel_flag {
            "/proc/cpuinfo lists uintr"
        } else {
            "no uintr flag in /proc/cpuinfo"
        };
        let verdict = if self.supported() {
            "hardware and kernel support UINTR, but this build has no delivery backend"
        } else {
            "UINTR was never merged into mainline Linux"
        };
        format!("{cpu}; kernel: {syscall}, {flag}; {verdict}")
    }
}

/// CPUID.(EAX=7,ECX=0):EDX bit 5.
#[cfg(target_arch = "x86_64")]
pub fn cpu_has_uintr() -> bool {
    use core::arch::x86_64::__cpuid_count;
    // `__cpuid_count` is an unsafe fn on older toolchains and safe on newer ones.
    #[allow(unused_unsafe)]
    // SAFETY: CPUID exists on every x86-64 CPU; leaf 0 reports the highest leaf, and leaf 7 is
    // only read when it exists.
    let (max_leaf, edx7) = unsafe {
        let max = __cpuid_count(0, 0).eax;
        let edx = if max >= 7 { __cpuid_count(7, 0).edx } else { 0 };
        (max, edx)
    };
    max_leaf >= 7 && edx7 & (1 << 5) != 0
}

/// Not x86-64: no UINTR.
#[cfg(not(target_arch = "x86_64"))]
pub fn cpu_has_uintr() -> bool {
    false
}

/// Whether `/proc/cpuinfo` text lists the `uintr` flag.
pub fn cpuinfo_lists_uintr(cpuinfo: &str) -> bool {
    cpuinfo
        .lines()
        .filter(|l| l.starts_with("flags"))
        .any(|l| l.split_whitespace().any(|w| w == "uintr"))
}

/// Probes CPU, `/proc/cpuinfo` and syscall 471.
pub fn probe() -> UintrSupport {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    // On the RFC kernel, uintr_register_handler(NULL, flags with an unknown bit) is rejected
    // with EINVAL before anything is registered; mainline up to 6.x answers ENOSYS; 7.0+ runs
    // rseq_slice_yield, which takes no arguments and has no effect outside a slice extension.
    // SAFETY: a raw syscall with integer arguments; see above for each kernel's behaviour.
    let rc = unsafe { libc::syscall(SYS_UINTR_REGISTER_HANDLER, 0usize, 1usize << 31) };
    let syscall_471 = if rc < 0 {
        Err(std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::ENOSYS))
    } else {
        Ok(rc)
    };
    UintrSupport {
        cpu: cpu_has_uintr(),
        kernel_flag: cpuinfo_lists_uintr(&cpuinfo),
        syscall_471,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_name_both_facts() {
        let none = UintrSupport {
            cpu: false,
            kernel_flag: false,
            syscall_471: Err(libc::ENOSYS),
        };
        assert!(!none.supported());
        let r = none.reason();
        assert!(r.contains("EDX[5] = 0") && r.contains("ENOSYS"), "{r}");
        let spr_mainline = UintrSupport {
            cpu: true,
            kernel_flag: false,
            syscall_471: Ok(0),
        };
        assert!(!spr_mainline.supported());
        assert!(spr_mainline.reason().contains("rseq_slice_yield"));
        let rfc = UintrSupport {
            cpu: true,
            kernel_flag: true,
            syscall_471: Err(libc::EINVAL),
        };
        assert!(rfc.supported());
        assert!(rfc.reason().contains("no delivery backend"));
    }

    #[test]
    fn cpuinfo_flag_parsing() {
        assert!(cpuinfo_lists_uintr(
            "processor : 0\nflags : fpu uintr avx\n"
        ));
        assert!(!cpuinfo_lists_uintr("flags : fpu uintr_x avx\n"));
        assert!(!cpuinfo_lists_uintr(""));
    }

    #[test]
    fn probe_runs() {
        let s = probe();
        assert!(!s.reason().is_empty());
    }
}
