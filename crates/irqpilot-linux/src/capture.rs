//! Capturing a machine's `/proc` and `/sys` files into a fixture tree (`irqpilot capture`).
//!
//! [`capture`] copies exactly the files irqpilot's parsers read (the inventory's sources with
//! their fallbacks, plus the counters: `proc/interrupts`, `proc/stat`, `proc/softirqs`,
//! `proc/net/dev` and `proc/diskstats`) from one root into
//! an empty directory, so that [`crate::inventory::read_machine`] over the copy sees what it saw
//! on the machine. Symbolic links met on the way (`sys/bus/pci/devices/X`, `.../driver`) are
//! recreated with the same relative text, and their targets inside the tree are created, so
//! they resolve within the copy; a link leading out of the tree is never followed. Files that
//! cannot be read are listed in `MANIFEST.toml` rather than failing the capture.
//!
//! git does not keep empty directories, yet some are facts (`net/eth0`): every empty directory
//! gets a `.keep` file, which the reader ignores.

use crate::format::{cpu, pci, procirq, sysirq};
use crate::root::Root;
use std::collections::BTreeSet;
use std::io;
use std::path::{Path, PathBuf};

/// Why a capture stopped. Source problems never stop it (they are listed in the report); only
/// the destination can.
#[derive(Debug, thiserror::Error)]
pub enum CaptureError {
    /// The destination exists and is not an empty directory.
    #[error("{0}: destination is not an empty directory")]
    NotEmpty(PathBuf),
    /// Writing the destination failed.
    #[error("{path}: {source}")]
    Io {
        /// The destination path.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: io::Error,
    },
}

/// A source path left out of the capture, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Skipped {
    /// Path relative to the root.
    pub path: String,
    /// Why (`permission denied`, `link leaves the tree`, the OS error).
    pub reason: String,
}

/// What a capture wrote.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CaptureReport {
    /// Regular files copied.
    pub files: usize,
    /// Symbolic links recreated.
    pub links: usize,
    /// Sources that exist but could not be copied.
    pub skipped: Vec<Skipped>,
    /// `/proc/sys/kernel/osrelease` of the source.
    pub kernel_release: Option<String>,
    /// Online CPUs of the source, when readable.
    pub online_cpus: Option<usize>,
}

/// Options of [`capture_with`].
#[derive(Clone, Debug, Default)]
pub struct CaptureOptions {
    /// What the machine is, for `MANIFEST.toml` (e.g. "2-vCPU Firecracker guest").
    pub description: String,
}

/// Captures `from` into `to` (created if absent; must be empty) with a default description.
pub fn capture(from: &Root, to: &Path) -> Result<CaptureReport, CaptureError> {
    capture_with(from, to, &CaptureOptions::default())
}

/// Captures `from` into `to` and writes `to/MANIFEST.toml`.
pub fn capture_with(
    from: &Root,
    to: &Path,
    opts: &CaptureOptions,
) -> Result<CaptureReport, CaptureError> {
    // A root without its one mandatory file is no machine: say so rather than "0 files".
    let interrupts = from.join("proc/interrupts");
    if let Err(source) = std::fs::metadata(&interrupts) {
        return Err(CaptureError::Io {
            path: interrupts,
            source,
        });
    }
    match crate::tree::destination(to) {
        Ok(crate::tree::Destination::Occupied) => {
            return Err(CaptureError::NotEmpty(to.to_path_buf()));
        }
        Ok(crate::tree::Destination::Empty) => {}
        Ok(crate::tree::Destination::Absent) => mkdir(to)?,
        Err(source) => {
            return Err(CaptureError::Io {
                path: to.to_path_buf(),
                source,
            });
        }
    }
    let mut c = Copier {
        from,
        to,
        report: CaptureReport::default(),
        done: BTreeSet::new(),
    };
    c.proc()?;
    c.sys_irq()?;
    c.cpus()?;
    c.pci()?;
    add_keep_files(to)?;
    c.report.kernel_release = from
        .read_optional("proc/sys/kernel/osrelease")
        .ok()
        .flatten()
        .map(|s| s.trim().to_string());
    c.report.online_cpus = from
        .read_optional("sys/devices/system/cpu/online")
        .ok()
        .flatten()
        .and_then(|t| cpu::parse_cpulist(&t).ok())
        .map(|s| s.len());
    let manifest = manifest(from, opts, &c.report, unix_now());
    let path = to.join("MANIFEST.toml");
    std::fs::write(&path, manifest).map_err(|source| CaptureError::Io { path, source })?;
    Ok(c.report)
}

fn mkdir(path: &Path) -> Result<(), CaptureError> {
    std::fs::create_dir_all(path).map_err(|source| CaptureError::Io {
        path: path.to_path_buf(),
        source,
    })
}

struct Copier<'a> {
    from: &'a Root,
    to: &'a Path,
    report: CaptureReport,
    done: BTreeSet<String>,
}

/// `base/target` with `.` and `..` applied, or `None` if it climbs above the root.
fn normalize(base: &str, target: &str) -> Option<String> {
    let mut parts: Vec<&str> = base.split('/').filter(|p| !p.is_empty()).collect();
    for comp in target.split('/') {
        match comp {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            c => parts.push(c),
        }
    }
    Some(parts.join("/"))
}

fn parent(rel: &str) -> &str {
    rel.rsplit_once('/').map_or("", |(p, _)| p)
}

impl Copier<'_> {
    fn skip(&mut self, path: &str, reason: impl Into<String>) {
        let reason = reason.into();
        if !self.report.skipped.iter().any(|s| s.path == path) {
            self.report.skipped.push(Skipped {
                path: path.to_string(),
                reason,
            });
        }
    }

    /// Recreates the symlink at `rel` (whose parent is a physical path) and returns the
    /// physical path it leads to; `None` if it leaves the tree.
    fn follow_link(&mut self, rel: &str, depth: u32) -> Result<Option<String>, CaptureError> {
        let src = self.from.join(rel);
        let Ok(target) = std::fs::read_link(&src) else {
            return Ok(None);
        };
        let text = target.to_string_lossy().into_owned();
        let resolved = match (target.is_relative(), normalize(parent(rel), &text)) {
            (true, Some(r)) if depth < 40 => r,
            _ => {
                self.skip(rel, format!("link to {text} leaves the tree"));
                return Ok(None);
            }
        };
        let dst = self.to.join(rel);
        if std::fs::symlink_metadata(&dst).is_err() {
            mkdir(&self.to.join(parent(rel)))?;
            std::os::unix::fs::symlink(&target, &dst)
                .map_err(|source| CaptureError::Io { path: dst, source })?;
            self.report.links += 1;
        }
        self.resolve(&resolved, depth + 1)
    }

    /// The physical path of `rel` in the source, recreating the links met on the way in the
    /// destination; `None` when it does not exist or leaves the tree.
    fn resolve(&mut self, rel: &str, depth: u32) -> Result<Option<String>, CaptureError> {
        let mut cur = String::new();
        for comp in rel.split('/').filter(|c| !c.is_empty()) {
            let cand = if cur.is_empty() {
                comp.to_string()
            } else {
                format!("{cur}/{comp}")
            };
            let Ok(meta) = std::fs::symlink_metadata(self.from.join(&cand)) else {
                return Ok(None);
            };
            if meta.file_type().is_symlink() {
                match self.follow_link(&cand, depth)? {
                    Some(p) => cur = p,
                    None => return Ok(None),
                }
            } else {
                cur = cand;
            }
        }
        Ok(Some(cur))
    }

    fn file(&mut self, rel: &str) -> Result<(), CaptureError> {
        if !self.done.insert(rel.to_string()) {
            return Ok(());
        }
        let Some(phys) = self.resolve(rel, 0)? else {
            return Ok(());
        };
        match std::fs::read(self.from.join(&phys)) {
            Ok(bytes) => {
                mkdir(&self.to.join(parent(&phys)))?;
                let dst = self.to.join(&phys);
                std::fs::write(&dst, bytes)
                    .map_err(|source| CaptureError::Io { path: dst, source })?;
                self.report.files += 1;
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {
                self.skip(rel, "permission denied")
            }
            Err(e) => self.skip(rel, e.to_string()),
        }
        Ok(())
    }

    /// Creates directory `rel` (resolving links), e.g. `cpuN` or an interface under `net/`.
    fn dir(&mut self, rel: &str) -> Result<(), CaptureError> {
        if let Some(phys) = self.resolve(rel, 0)? {
            mkdir(&self.to.join(phys))?;
        }
        Ok(())
    }

    /// Recreates a symlink itself (`driver`), and an empty directory at its target.
    fn link(&mut self, rel: &str) -> Result<(), CaptureError> {
        let Some(dir) = self.resolve(parent(rel), 0)? else {
            return Ok(());
        };
        let name = rel.rsplit('/').next().unwrap_or(rel);
        let phys = format!("{dir}/{name}");
        if let Some(target) = self.follow_link(&phys, 0)? {
            mkdir(&self.to.join(target))?;
        }
        Ok(())
    }

    /// Entry names of a source directory; unreadable ones are noted and give nothing.
    fn list(&mut self, rel: &str) -> Vec<String> {
        match self.from.list_dir(rel) {
            Ok(names) => names.unwrap_or_default(),
            Err(reason) => {
                let why = match reason {
                    irqpilot_core::GapReason::Missing => "missing".to_string(),
                    irqpilot_core::GapReason::PermissionDenied => "permission denied".to_string(),
                    irqpilot_core::GapReason::Unparsable(msg) => msg,
                };
                self.skip(rel, why);
                Vec::new()
            }
        }
    }

    fn proc(&mut self) -> Result<(), CaptureError> {
        for f in [
            "proc/interrupts",
            "proc/stat",
            "proc/softirqs",
            "proc/net/dev",
            "proc/diskstats",
            "proc/cmdline",
            "proc/sys/kernel/osrelease",
            "proc/irq/default_smp_affinity",
        ] {
            self.file(f)?;
        }
        for name in self.list("proc/irq") {
            if procirq::parse_irq_dir_name(&name).is_none() {
                continue;
            }
            self.dir(&format!("proc/irq/{name}"))?;
            for f in [
                procirq::SMP_AFFINITY,
                procirq::SMP_AFFINITY_LIST,
                procirq::EFFECTIVE_AFFINITY,
                procirq::EFFECTIVE_AFFINITY_LIST,
                procirq::AFFINITY_HINT,
                procirq::NODE,
            ] {
                self.file(&format!("proc/irq/{name}/{f}"))?;
            }
        }
        Ok(())
    }

    fn sys_irq(&mut self) -> Result<(), CaptureError> {
        for name in self.list("sys/kernel/irq") {
            if procirq::parse_irq_dir_name(&name).is_none() {
                continue;
            }
            self.dir(&format!("sys/kernel/irq/{name}"))?;
            for f in [
                sysirq::CHIP_NAME,
                sysirq::HWIRQ,
                sysirq::TYPE,
                sysirq::NAME,
                sysirq::ACTIONS,
                sysirq::PER_CPU_COUNT,
                sysirq::WAKEUP,
            ] {
                self.file(&format!("sys/kernel/irq/{name}/{f}"))?;
            }
        }
        // debugfs: usually absent or root-only; a missing directory is simply not captured.
        let debug = "sys/kernel/debug/irq/irqs";
        if std::fs::symlink_metadata(self.from.join(debug)).is_ok() {
            for name in self.list(debug) {
                if procirq::parse_irq_dir_name(&name).is_some() {
                    self.file(&format!("{debug}/{name}"))?;
                }
            }
        }
        Ok(())
    }

    fn cpus(&mut self) -> Result<(), CaptureError> {
        let base = "sys/devices/system/cpu";
        for f in [
            "online",
            "possible",
            "present",
            "offline",
            "isolated",
            "nohz_full",
        ] {
            self.file(&format!("{base}/{f}"))?;
        }
        for name in self.list(base) {
            if cpu::parse_cpu_dir_name(&name).is_none() {
                continue;
            }
            self.dir(&format!("{base}/{name}"))?;
            for f in [
                "physical_package_id",
                "die_id",
                "cluster_id",
                "core_id",
                "core_cpus_list",
                "thread_siblings_list",
                "cluster_cpus_list",
                "die_cpus_list",
                "package_cpus_list",
                "core_siblings_list",
            ] {
                self.file(&format!("{base}/{name}/topology/{f}"))?;
            }
            for index in self.list(&format!("{base}/{name}/cache")) {
                if cpu::parse_cache_index_name(&index).is_none() {
                    continue;
                }
                for f in ["level", "type", "size", "shared_cpu_list", "id"] {
                    self.file(&format!("{base}/{name}/cache/{index}/{f}"))?;
                }
            }
        }
        let nodes = "sys/devices/system/node";
        for name in self.list(nodes) {
            if cpu::parse_node_dir_name(&name).is_some() {
                self.file(&format!("{nodes}/{name}/cpulist"))?;
            }
        }
        Ok(())
    }

    fn pci(&mut self) -> Result<(), CaptureError> {
        let base = "sys/bus/pci/devices";
        for addr in self.list(base) {
            if irqpilot_core::PciAddr::parse(&addr).is_none() {
                continue;
            }
            let dev = format!("{base}/{addr}");
            for f in [
                pci::CLASS,
                pci::VENDOR,
                pci::DEVICE,
                pci::NUMA_NODE,
                pci::LOCAL_CPULIST,
                pci::LOCAL_CPUS,
                pci::IRQ,
            ] {
                self.file(&format!("{dev}/{f}"))?;
            }
            let entries = self.list(&dev);
            let has = |n: &str| entries.iter().any(|e| e == n);
            if has(pci::DRIVER) {
                self.link(&format!("{dev}/{}", pci::DRIVER))?;
            }
            if has(pci::MSI_IRQS) {
                let msi = format!("{dev}/{}", pci::MSI_IRQS);
                self.dir(&msi)?;
                for irq in self.list(&msi) {
                    // Newer kernels: a file saying msi/msix; older: a directory holding `mode`.
                    let entry = format!("{msi}/{irq}");
                    let is_dir =
                        std::fs::metadata(self.from.join(&entry)).is_ok_and(|m| m.is_dir());
                    if is_dir {
                        self.file(&format!("{entry}/mode"))?;
                        self.dir(&entry)?;
                    } else {
                        self.file(&entry)?;
                    }
                }
            }
            let mut dirs: Vec<String> = [pci::NET, pci::NVME]
                .iter()
                .filter(|d| has(d))
                .map(|d| format!("{dev}/{d}"))
                .collect();
            for child in entries.iter().filter(|e| e.starts_with("virtio")) {
                let net = format!("{dev}/{child}/{}", pci::NET);
                if std::fs::symlink_metadata(self.from.join(&net)).is_ok() {
                    dirs.push(net);
                }
            }
            for d in dirs {
                self.dir(&d)?;
                for entry in self.list(&d) {
                    self.dir(&format!("{d}/{entry}"))?;
                }
            }
        }
        Ok(())
    }
}

/// Puts a `.keep` file in every empty directory under `dir` (links are not followed).
fn add_keep_files(dir: &Path) -> Result<(), CaptureError> {
    let io_err = |path: &Path| {
        let path = path.to_path_buf();
        move |source| CaptureError::Io { path, source }
    };
    let mut empty = true;
    for entry in std::fs::read_dir(dir).map_err(io_err(dir))? {
        let entry = entry.map_err(io_err(dir))?;
        empty = false;
        if entry.file_type().map_err(io_err(dir))?.is_dir() {
            add_keep_files(&entry.path())?;
        }
    }
    if empty {
        let keep = dir.join(".keep");
        std::fs::write(&keep, "").map_err(io_err(&keep))?;
    }
    Ok(())
}

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// `secs` since the epoch as `YYYY-MM-DDTHH:MM:SSZ` (civil-from-days, proleptic Gregorian).
fn utc_timestamp(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// A TOML basic string.
pub(crate) fn toml_str(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for ch in s.chars() {
        match ch {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn manifest(from: &Root, opts: &CaptureOptions, r: &CaptureReport, now: u64) -> String {
    let mut m = String::from(
        "# A machine's /proc and /sys files as irqpilot reads them (irqpilot capture).\n",
    );
    let description = if opts.description.is_empty() {
        "captured by irqpilot capture"
    } else {
        &opts.description
    };
    m.push_str(&format!("description = {}\n", toml_str(description)));
    if let Some(k) = &r.kernel_release {
        m.push_str(&format!("kernel_release = {}\n", toml_str(k)));
    }
    if let Some(n) = r.online_cpus {
        m.push_str(&format!("online_cpus = {n}\n"));
    }
    m.push_str(&format!(
        "captured_at = {}\n",
        toml_str(&utc_timestamp(now))
    ));
    m.push_str(&format!(
        "source_root = {}\n",
        toml_str(&from.dir().to_string_lossy())
    ));
    m.push_str(&format!(
        "irqpilot_version = {}\n",
        toml_str(env!("CARGO_PKG_VERSION"))
    ));
    m.push_str(&format!("files = {}\nlinks = {}\n", r.files, r.links));
    for s in &r.skipped {
        m.push_str(&format!(
            "\n[[skipped]]\npath = {}\nreason = {}\n",
            toml_str(&s.path),
            toml_str(&s.reason)
        ));
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps() {
        assert_eq!(utc_timestamp(0), "1970-01-01T00:00:00Z");
        assert_eq!(utc_timestamp(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(utc_timestamp(1_795_315_663), "2026-11-22T02:47:43Z");
        assert_eq!(utc_timestamp(4_102_444_799), "2099-12-31T23:59:59Z");
    }

    #[test]
    fn normalizing_links() {
        assert_eq!(
            normalize(
                "sys/bus/pci/devices",
                "../../../devices/pci0000:00/0000:00:01.0"
            )
            .as_deref(),
            Some("sys/devices/pci0000:00/0000:00:01.0")
        );
        assert_eq!(normalize("sys", "../../etc"), None);
        assert_eq!(normalize("a/b", "./c/../d").as_deref(), Some("a/b/d"));
    }

    #[test]
    fn toml_strings() {
        assert_eq!(toml_str("a\"b\\c\n\u{1}"), "\"a\\\"b\\\\c\\n\\u0001\"");
    }
}
