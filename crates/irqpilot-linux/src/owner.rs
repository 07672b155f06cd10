//! One writer per root (DESIGN.md rule 11): an advisory lock (`flock(2)`) on
//! `<root>/var/lib/irqpilot/lock`, taken by every command that changes a knob before it reads
//! the machine and the journal, and held until it has written them; the daemon holds it for its
//! whole life. A second writer finds it held and is told who holds it (pid, command, journal):
//! the file names its holder.
//!
//! The kernel drops the lock with its holder's last descriptor, so a process killed with
//! SIGKILL leaves nothing stale; the file itself stays (removing a lock file races with the next
//! taker), and its text is only informative.

use crate::root::Root;
use serde::{Deserialize, Serialize};
use std::fs::File;
use std::io::{self, Read, Seek, Write};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The lock file, relative to the root (beside the default journal: the one directory every
/// writer may write, `StateDirectory=irqpilot` under systemd).
pub const LOCK_FILE: &str = "var/lib/irqpilot/lock";

/// The command name the daemon registers with: other writers do not wait for it.
pub const DAEMON: &str = "daemon";

/// Who holds a root: written into the lock file by its holder.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Holder {
    /// Process id.
    pub pid: u32,
    /// The irqpilot command (`daemon`, `apply`, `revert`, `isolate --apply`, ...).
    pub command: String,
    /// The journal it writes.
    pub journal: String,
}

impl std::fmt::Display for Holder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "irqpilot {} (pid {}, journal {})",
            self.command, self.pid, self.journal
        )
    }
}

/// Why the root could not be taken.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// Another process holds it.
    #[error("{}", held_text(.path, .holder.as_ref()))]
    Held {
        /// The lock file.
        path: PathBuf,
        /// Who holds it, when the file says (absent when unreadable or being rewritten).
        holder: Option<Holder>,
    },
    /// The lock file could not be created or locked.
    #[error("lock {path}: {source}")]
    Io {
        /// The lock file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: io::Error,
    },
}

fn held_text(path: &Path, holder: Option<&Holder>) -> String {
    match holder {
        Some(h) => format!("{} is held by {h}", path.display()),
        None => format!("{} is held by another irqpilot process", path.display()),
    }
}

/// The root's lock, held until dropped.
#[derive(Debug)]
pub struct RootLock {
    file: File,
    path: PathBuf,
}

/// `flock(fd, LOCK_EX | LOCK_NB)`: `Ok(false)` when another open file holds it.
fn try_flock(file: &File) -> io::Result<bool> {
    // SAFETY: flock(2) on a descriptor this `File` owns; no memory is passed.
    let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if rc == 0 {
        return Ok(true);
    }
    let e = io::Error::last_os_error();
    if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
        Ok(false)
    } else {
        Err(e)
    }
}

impl RootLock {
    /// Takes `root` for `holder`. While another one-shot command holds it, waits up to `wait`
    /// (they finish in a moment); a daemon holds it for good, so its holder is reported at
    /// once.
    pub fn acquire(root: &Root, holder: &Holder, wait: Duration) -> Result<RootLock, LockError> {
        let path = root.join(LOCK_FILE);
        let io_err = |source| LockError::Io {
            path: path.clone(),
            source,
        };
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(io_err)?;
        }
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(io_err)?;
        let deadline = Instant::now() + wait;
        loop {
            if try_flock(&file).map_err(io_err)? {
                break;
            }
            let other = read_holder(&path);
            let is_daemon = other.as_ref().is_some_and(|h| h.command == DAEMON);
            if is_daemon || Instant::now() >= deadline {
                return Err(LockError::Held {
                    path,
                    holder: other,
                });
            }
            std::thread::sleep(Duration::from_millis(25));
        }
        let text = serde_json::to_string(holder).unwrap_or_default();
        file.set_len(0)
            .and_then(|()| file.rewind())
            .and_then(|()| file.write_all(format!("{text}\n").as_bytes()))
            .map_err(io_err)?;
        Ok(RootLock { file, path })
    }

    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for RootLock {
    fn drop(&mut self) {
        // Say nobody holds it any more; the lock itself goes with the descriptor.
        let _ = self.file.set_len(0);
    }
}

/// Who holds `root` now, if anybody does and the file says.
pub fn holder(root: &Root) -> Option<Holder> {
    read_holder(&root.join(LOCK_FILE))
}

fn read_holder(path: &Path) -> Option<Holder> {
    let mut text = String::new();
    File::open(path).ok()?.read_to_string(&mut text).ok()?;
    serde_json::from_str(text.trim()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn who(command: &str) -> Holder {
        Holder {
            pid: std::process::id(),
            command: command.into(),
            journal: "j.json".into(),
        }
    }

    #[test]
    fn one_holder_at_a_time_and_the_refusal_names_it() {
        let d = tempfile::tempdir().unwrap();
        let root = Root::new(d.path());
        let first = RootLock::acquire(&root, &who("apply"), Duration::ZERO).unwrap();
        assert_eq!(holder(&root), Some(who("apply")));
        // flock conflicts between two opens of the file, even in one process.
        let started = Instant::now();
        match RootLock::acquire(&root, &who("revert"), Duration::from_millis(100)) {
            Err(LockError::Held { holder, .. }) => assert_eq!(holder, Some(who("apply"))),
            other => panic!("{other:?}"),
        }
        assert!(started.elapsed() >= Duration::from_millis(100), "it waited");
        drop(first);
        assert_eq!(holder(&root), None);
        let second = RootLock::acquire(&root, &who("revert"), Duration::ZERO).unwrap();
        assert!(second.path().ends_with(LOCK_FILE));
    }

    #[test]
    fn a_daemon_is_reported_at_once() {
        let d = tempfile::tempdir().unwrap();
        let root = Root::new(d.path());
        let _daemon = RootLock::acquire(&root, &who(DAEMON), Duration::ZERO).unwrap();
        let started = Instant::now();
        let e = RootLock::acquire(&root, &who("apply"), Duration::from_secs(30)).unwrap_err();
        assert!(started.elapsed() < Duration::from_secs(5));
        let text = e.to_string();
        assert!(
            text.contains("irqpilot daemon (pid ") && text.contains("journal j.json"),
            "{text}"
        );
    }

    #[test]
    fn an_unwritable_root_is_an_io_error() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("var"), "a file where a directory should be").unwrap();
        let e = RootLock::acquire(&Root::new(d.path()), &who("apply"), Duration::ZERO);
        assert!(matches!(e, Err(LockError::Io { .. })), "{e:?}");
    }
}
