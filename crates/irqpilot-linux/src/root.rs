//! `Root`: the directory standing for `/`. Every file irqpilot reads or writes is addressed
//! relative to it (`proc/interrupts`, `sys/kernel/irq/24/actions`), through this one helper.

use irqpilot_core::{GapReason, PlatformError};
use std::io;
use std::path::{Path, PathBuf};

/// Writes `text` to a kernel file in one `write(2)`: procfs and sysfs parse each write as one
/// request, so a split write would be two different requests.
pub(crate) fn write_once(path: &Path, text: &str) -> io::Result<()> {
    use std::io::Write;
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

#[cfg(test)]
mod tests {
    use super::*;

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
