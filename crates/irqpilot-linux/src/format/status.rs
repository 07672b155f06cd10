//! `/proc/PID/status` and `/proc/PID/task/TID/status`: the CPUs a thread may run on
//! (`Cpus_allowed_list`, its `sched_setaffinity` mask as `taskset -cp` shows it).

use crate::error::ParseError;
use irqpilot_core::CpuSet;

/// The `Cpus_allowed_list` of a status file.
pub fn cpus_allowed(text: &str) -> Result<CpuSet, ParseError> {
    for (i, line) in text.lines().enumerate() {
        if let Some(v) = line.strip_prefix("Cpus_allowed_list:") {
            return CpuSet::parse_list(v.trim())
                .map_err(|e| ParseError::new(i + 1, format!("Cpus_allowed_list {v:?}: {e}")));
        }
    }
    Err(ParseError::new(0, "no Cpus_allowed_list line"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_allowed_list() {
        let text = "Name:\tnginx\nState:\tS (sleeping)\nCpus_allowed:\t0003\nCpus_allowed_list:\t0-1\nMems_allowed_list:\t0\n";
        assert_eq!(cpus_allowed(text).unwrap().to_string(), "0-1");
        let e = cpus_allowed("Name:\tx\n").unwrap_err();
        assert!(e.message.contains("Cpus_allowed_list"), "{e}");
        let e = cpus_allowed("Cpus_allowed_list:\tzz\n").unwrap_err();
        assert_eq!(e.line, 1);
    }
}
