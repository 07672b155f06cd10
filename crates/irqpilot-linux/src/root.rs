//! `Root`: the directory standing for `/`. Every file irqpilot reads or writes is addressed
//! relative to it (`proc/interrupts`, `sys/kernel/irq/24/actions`), through this one helper.

use irqpilot_core::{GapReason, PlatformError};
use std::io;
use std::path::{Path, PathBuf};

/// Writes `text` to a knob file. On procfs and sysfs it is one `write(2)`: the kernel parses
/// each write as one request (a split write would be two requests) and readers see the old
/// value or the new one. Anywhere else (a fixture, the twin's exported tree) a plain file would
/// read empty between the truncate and the write, so the text goes to a temporary file beside
/// it that is renamed over it: readers see the whole old text or the whole new one, as on a
/// kernel. Either way the file must exist and be writable by us (the same errors as a kernel
/// file: ENOENT, EACCES).
pub(crate) fn write_once(path: &Path, text: &str) -> io::Result<()> {
    use std::io::Write;
    if !on_kernel_fs(path) {
        // Opened for writing only to meet the same refusals a kernel file would give.
        drop(std::fs::OpenOptions::new().write(true).open(path)?);
        return replace_atomically(path, text);
    }
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(path)?;
    let n = f.write(text.as_bytes())?;
    if n != text.len() {
        return Err(io::Error::new(
            io::ErrorKind::WriteZero,
            format!("short write: {n} of {} bytes", text.len()),
        ));
    }
    Ok(())
}

/// `text` into a temporary file next to `path` (same permissions), renamed over `path`.
fn replace_atomically(path: &Path, text: &str) -> io::Result<()> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = path.with_file_name(format!(".{name}.irqpilot-{}", std::process::id()));
    let perms = std::fs::metadata(path)?.permissions();
    let result = std::fs::write(&tmp, text)
        .and_then(|()| std::fs::set_permissions(&tmp, perms))
        .and_then(|()| std::fs::rename(&tmp, path));
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// Swaps the files at `a` and `b` in one step (`renameat2(2)` with `RENAME_EXCHANGE`): both
/// names exist throughout, and whatever was at `b` is afterwards at `a`, where the caller can
/// look at it. The twin's exported tree puts its own text in place this way, so that a file an
/// outside tool put there a moment earlier is never lost unseen. Filesystems without the
/// exchange answer `EINVAL` (and old kernels `ENOSYS`).
pub fn exchange(a: &Path, b: &Path) -> io::Result<()> {
    use rustix::fs::{CWD, RenameFlags, renameat_with};
    // A path holding a NUL byte is refused as `EINVAL` (InvalidInput), as any path call does.
    renameat_with(CWD, a, CWD, b, RenameFlags::EXCHANGE).map_err(io::Error::from)
}

/// File the digital twin writes at the top of its exported tree once the tree is whole (its
/// content is the twin's pid): the tree's kernel is the simulator, alive while that pid is.
pub const TWIN_READY_FILE: &str = ".irqpilot-twin-ready";

/// File the twin rewrites after every step of simulated time with the step's number: a writer
/// knows the twin has taken its writes once the number has moved on by two (one whole step began
/// after the writes).
pub const TWIN_STEP_FILE: &str = ".irqpilot-twin-step";

/// What answers for the kernel under a root: who takes writes, and whether
/// `effective_affinity_list` means anything.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backing {
    /// A real kernel: `<root>/proc` is a procfs mount (this machine's `/`, or a host's `/proc`
    /// bind-mounted under another root). Writes are taken or refused synchronously.
    Kernel,
    /// The digital twin's exported tree while the twin runs (`sim --export-root`): writes are
    /// taken at the twin's next step, and effective affinities are simulated.
    Twin {
        /// The twin's process.
        pid: u32,
    },
    /// Plain files (a captured or generated fixture): every write "holds", and nothing ever
    /// changes an effective affinity.
    Fixture,
}

/// A root directory (`/` on a live machine, a fixture or an exported simulator tree otherwise).
#[derive(Clone, Debug)]
pub struct Root {
    dir: PathBuf,
}

impl Default for Root {
    fn default() -> Self {
        Root::new("/")
    }
}

impl Root {
    /// A root at `dir`.
    pub fn new(dir: impl Into<PathBuf>) -> Root {
        Root { dir: dir.into() }
    }

    /// The root directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Whether this root is this machine's own `/` (resolved, so `/`, `//` and `/proc/..` all
    /// are): the only root whose network interfaces, NVMe devices and ethtool requests are
    /// this machine's. The one "is this the live machine?" check.
    pub fn is_live(&self) -> bool {
        std::fs::canonicalize(&self.dir).is_ok_and(|p| p == Path::new("/"))
    }

    /// What stands behind the root's files ([`Backing`]): procfs at `<root>/proc` is a kernel;
    /// a twin's ready file naming a running process is the twin; anything else is a fixture.
    pub fn backing(&self) -> Backing {
        if is_procfs(&self.join("proc")) {
            return Backing::Kernel;
        }
        let pid = std::fs::read_to_string(self.join(TWIN_READY_FILE))
            .ok()
            .and_then(|t| t.trim().parse::<u32>().ok());
        match pid {
            Some(pid) if process_exists(pid) => Backing::Twin { pid },
            _ => Backing::Fixture,
        }
    }

    /// `rel` (e.g. `proc/interrupts`) under the root. A leading `/` in `rel` is ignored.
    pub fn join(&self, rel: &str) -> PathBuf {
        self.dir.join(rel.trim_start_matches('/'))
    }

    /// Reads a whole file as text.
    pub fn read(&self, rel: &str) -> Result<String, PlatformError> {
        let path = self.join(rel);
        std::fs::read_to_string(&path).map_err(|source| PlatformError::Io { path, source })
    }

    /// Reads a whole file into `buf` (cleared first), reusing its allocation.
    pub fn read_into(&self, rel: &str, buf: &mut String) -> Result<(), PlatformError> {
        use std::io::Read;
        buf.clear();
        let path = self.join(rel);
        std::fs::File::open(&path)
            .and_then(|mut f| f.read_to_string(buf))
            .map(|_| ())
            .map_err(|source| PlatformError::Io { path, source })
    }

    /// Reads a file that may legitimately be absent: `Ok(None)` when missing, `Err(reason)` when
    /// present but unreadable.
    pub fn read_optional(&self, rel: &str) -> Result<Option<String>, GapReason> {
        match std::fs::read_to_string(self.join(rel)) {
            Ok(s) => Ok(Some(s)),
            Err(e) => match e.kind() {
                io::ErrorKind::NotFound => Ok(None),
                io::ErrorKind::PermissionDenied => Err(GapReason::PermissionDenied),
                _ => Err(GapReason::Unparsable(e.to_string())),
            },
        }
    }

    /// Names of the entries of a directory, sorted; `Ok(None)` when it does not exist.
    pub fn list_dir(&self, rel: &str) -> Result<Option<Vec<String>>, GapReason> {
        let rd = match std::fs::read_dir(self.join(rel)) {
            Ok(rd) => rd,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {
                return Err(GapReason::PermissionDenied);
            }
            Err(e) => return Err(GapReason::Unparsable(e.to_string())),
        };
        let mut names: Vec<String> = rd
            .filter_map(|e| e.ok())
            .filter_map(|e| e.file_name().into_string().ok())
            .collect();
        names.sort();
        Ok(Some(names))
    }

    /// Target of a symbolic link's last component (e.g. the driver name of `.../driver`).
    pub fn link_basename(&self, rel: &str) -> Option<String> {
        let target = std::fs::read_link(self.join(rel)).ok()?;
        target.file_name()?.to_str().map(str::to_string)
    }
}

/// `PROC_SUPER_MAGIC` (include/uapi/linux/magic.h).
const PROC_SUPER_MAGIC: i64 = 0x9fa0;
/// `SYSFS_MAGIC` (include/uapi/linux/magic.h).
const SYSFS_MAGIC: i64 = 0x6265_6572;

/// The file system magic of the mount holding `path`, if it can be asked.
fn fs_magic(path: &Path) -> Option<i64> {
    let st = rustix::fs::statfs(path).ok()?;
    #[allow(clippy::unnecessary_cast)] // f_type's width differs between targets.
    Some(st.f_type as i64)
}

/// Whether `dir` is on a procfs mount.
fn is_procfs(dir: &Path) -> bool {
    fs_magic(dir) == Some(PROC_SUPER_MAGIC)
}

/// Whether `path` is a kernel file (procfs or sysfs), whose writes are requests to the kernel.
fn on_kernel_fs(path: &Path) -> bool {
    matches!(fs_magic(path), Some(PROC_SUPER_MAGIC | SYSFS_MAGIC))
}

/// Whether process `pid` exists (signal 0: existence and permission check only).
pub(crate) fn process_exists(pid: u32) -> bool {
    let Some(pid) = i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
    else {
        return false;
    };
    match rustix::process::test_kill_process(pid) {
        Ok(()) => true,
        // EPERM: it exists but belongs to someone else.
        Err(e) => e == rustix::io::Errno::PERM,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The exchange swaps two files in place, and its errors are the kernel's, by kind.
    #[test]
    fn exchange_swaps_two_files() {
        let d = tempfile::tempdir().unwrap();
        let (a, b) = (d.path().join("a"), d.path().join("b"));
        std::fs::write(&a, "mine\n").unwrap();
        std::fs::write(&b, "theirs\n").unwrap();
        exchange(&a, &b).unwrap();
        assert_eq!(std::fs::read_to_string(&a).unwrap(), "theirs\n");
        assert_eq!(std::fs::read_to_string(&b).unwrap(), "mine\n");
        // Both names must exist: a missing one is ENOENT, nothing moves.
        let gone = d.path().join("gone");
        let e = exchange(&a, &gone).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ENOENT));
        assert_eq!(std::fs::read_to_string(&a).unwrap(), "theirs\n");
        let e = exchange(Path::new("a\0b"), &b).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
    }

    /// On plain files a knob write replaces the file whole: a reader polling it while values
    /// are written never sees it empty or half written.
    #[test]
    fn writes_to_plain_files_are_atomic_for_readers() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("smp_affinity_list");
        std::fs::write(&path, "0-3\n").unwrap();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let reader = {
            let (path, stop) = (path.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut reads = 0u64;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let t = std::fs::read_to_string(&path).unwrap();
                    assert!(t == "0-3\n" || t == "12\n", "read {t:?}");
                    reads += 1;
                }
                reads
            })
        };
        for i in 0..2000 {
            write_once(&path, if i % 2 == 0 { "12\n" } else { "0-3\n" }).unwrap();
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        assert!(reader.join().unwrap() > 0);
        // No temporary file is left behind, and a missing or read-only file is refused as a
        // kernel file would be.
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 1);
        let e = write_once(&d.path().join("gone"), "1\n").unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
    }

    #[test]
    fn join_ignores_leading_slash() {
        let r = Root::new("/tmp/x");
        assert_eq!(
            r.join("/proc/interrupts"),
            PathBuf::from("/tmp/x/proc/interrupts")
        );
        assert_eq!(r.join("proc/stat"), PathBuf::from("/tmp/x/proc/stat"));
    }

    #[test]
    fn live_and_backing() {
        assert!(Root::new("/").is_live());
        assert!(Root::new("//").is_live());
        assert!(Root::new("/proc/..").is_live());
        let d = tempfile::tempdir().unwrap();
        let r = Root::new(d.path());
        assert!(!r.is_live());
        assert!(!Root::new("/nonexistent-root").is_live());
        assert_eq!(r.backing(), Backing::Fixture);
        if is_procfs(Path::new("/proc")) {
            assert_eq!(Root::new("/").backing(), Backing::Kernel);
        }
        // A twin tree names its process: alive (this test) is a twin, gone is a fixture.
        std::fs::write(
            d.path().join(TWIN_READY_FILE),
            format!("{}\n", std::process::id()),
        )
        .unwrap();
        assert_eq!(
            r.backing(),
            Backing::Twin {
                pid: std::process::id()
            }
        );
        std::fs::write(d.path().join(TWIN_READY_FILE), "0\n").unwrap();
        assert_eq!(r.backing(), Backing::Fixture);
    }

    /// The mount and process checks that decide "is this root live?" (statfs and kill(pid, 0)).
    #[test]
    fn kernel_file_systems_and_processes_are_recognised() {
        assert!(is_procfs(Path::new("/proc")));
        assert!(on_kernel_fs(Path::new("/proc/interrupts")));
        assert!(on_kernel_fs(Path::new("/sys/kernel")));
        let d = tempfile::tempdir().unwrap();
        assert!(!is_procfs(d.path()));
        assert!(!on_kernel_fs(d.path()));
        assert_eq!(fs_magic(Path::new("/nonexistent-root")), None);
        assert!(process_exists(std::process::id()));
        assert!(
            process_exists(1),
            "init exists, whoever owns it (EPERM counts)"
        );
        assert!(!process_exists(0));
        assert!(!process_exists(u32::MAX));
        assert!(!process_exists(i32::MAX as u32));
    }

    #[test]
    fn optional_reads() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("proc")).unwrap();
        std::fs::write(d.path().join("proc/cmdline"), "quiet\n").unwrap();
        let r = Root::new(d.path());
        assert_eq!(r.read_optional("proc/cmdline"), Ok(Some("quiet\n".into())));
        assert_eq!(r.read_optional("proc/nothing"), Ok(None));
        assert_eq!(r.list_dir("proc"), Ok(Some(vec!["cmdline".into()])));
        assert_eq!(r.list_dir("nothing"), Ok(None));
        assert!(matches!(
            r.read("proc/nothing"),
            Err(PlatformError::Io { .. })
        ));
    }
}
