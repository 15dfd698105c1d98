//! What the running kernel is configured to do, as far as an unprivileged (or
//! locked-down) process can read it.

use std::fs;

/// The host kernel's preemption model and where it was read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostPreempt {
    /// `none`, `voluntary`, `full` or `lazy`.
    pub mode: String,
    pub source: String,
}

/// Reads the preemption model in force, most authoritative source first:
/// debugfs `sched/preempt` (the current mode in parentheses; unreadable under
/// lockdown), a `preempt=` on the command line, the boot log's "Dynamic Preempt:"
/// line, then the kernel config's `CONFIG_PREEMPT_*` choice (/proc/config.gz is
/// compressed; /boot/config-RELEASE is read when present). None if nothing says.
pub fn preempt_mode() -> Option<HostPreempt> {
    let found = |mode: &str, source: &str| {
        let mode = mode.trim().to_ascii_lowercase();
        ["none", "voluntary", "full", "lazy"].contains(&mode.as_str()).then(|| HostPreempt { mode, source: source.to_string() })
    };
    if let Ok(s) = fs::read_to_string("/sys/kernel/debug/sched/preempt") {
        if let Some(m) = s.split_whitespace().find_map(|w| w.strip_prefix('(').and_then(|w| w.strip_suffix(')'))) {
            if let Some(h) = found(m, "/sys/kernel/debug/sched/preempt") {
                return Some(h);
            }
        }
    }
    if let Ok(s) = fs::read_to_string("/proc/cmdline") {
        if let Some(m) = s.split_whitespace().find_map(|w| w.strip_prefix("preempt=")) {
            if let Some(h) = found(m, "preempt= on /proc/cmdline") {
                return Some(h);
            }
        }
    }
    if let Some(log) = kernel_log() {
        if let Some(line) = log.lines().find(|l| l.contains("Dynamic Preempt:")) {
            let m = line.rsplit("Dynamic Preempt:").next().unwrap_or("");
            if let Some(h) = found(m, "the boot log (\"Dynamic Preempt:\")") {
                return Some(h);
            }
        }
    }
    let release = fs::read_to_string("/proc/sys/kernel/osrelease").ok()?;
    let config = fs::read_to_string(format!("/boot/config-{}", release.trim())).ok()?;
    let choice = [
        ("CONFIG_PREEMPT_NONE=y", "none"),
        ("CONFIG_PREEMPT_VOLUNTARY=y", "voluntary"),
        ("CONFIG_PREEMPT=y", "full"),
        ("CONFIG_PREEMPT_LAZY=y", "lazy"),
    ];
    choice
        .iter()
        .find(|(line, _)| config.lines().any(|l| l == *line))
        .and_then(|(_, m)| found(m, "the kernel config's CONFIG_PREEMPT_* choice"))
}

/// Whether the kernel puts each new session in its own autogroup
/// (`/proc/sys/kernel/sched_autogroup_enabled`, CONFIG_SCHED_AUTOGROUP). None if
/// the file is absent (no CONFIG_SCHED_AUTOGROUP) or unreadable.
pub fn autogroup_enabled() -> Option<bool> {
    let s = fs::read_to_string("/proc/sys/kernel/sched_autogroup_enabled").ok()?;
    Some(s.trim() != "0")
}

/// The kernel's message buffer (`syslog(SYSLOG_ACTION_READ_ALL)`), if readable.
fn kernel_log() -> Option<String> {
    const SYSLOG_ACTION_READ_ALL: libc::c_int = 3;
    const SYSLOG_ACTION_SIZE_BUFFER: libc::c_int = 10;
    // SAFETY: klogctl with a null buffer only returns the size.
    let size = unsafe { libc::klogctl(SYSLOG_ACTION_SIZE_BUFFER, std::ptr::null_mut(), 0) };
    if size <= 0 {
        return None;
    }
    let mut buf = vec![0u8; size as usize];
    // SAFETY: the buffer is `size` bytes long.
    let n = unsafe { libc::klogctl(SYSLOG_ACTION_READ_ALL, buf.as_mut_ptr().cast(), size) };
    if n <= 0 {
        return None;
    }
    buf.truncate(n as usize);
    Some(String::from_utf8_lossy(&buf).into_owned())
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_mode_read_is_one_of_the_four() {
        if let Some(h) = super::preempt_mode() {
            assert!(["none", "voluntary", "full", "lazy"].contains(&h.mode.as_str()), "{h:?}");
            assert!(!h.source.is_empty());
        }
    }
}
