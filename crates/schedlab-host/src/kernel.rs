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

/// Whether the running kernel is a PREEMPT_DYNAMIC build (so built with
/// CONFIG_PREEMPTION whatever its boot-time model), with where that was read:
/// debugfs's sched/preempt (which only such a kernel has), the boot log's
/// "Dynamic Preempt:" line (which only such a kernel prints), or the kernel
/// config in /boot. None if nothing says.
pub fn preempt_dynamic() -> Option<(bool, String)> {
    if fs::metadata("/sys/kernel/debug/sched/preempt").is_ok() {
        return Some((true, "/sys/kernel/debug/sched/preempt exists".to_string()));
    }
    if kernel_log().is_some_and(|log| log.contains("Dynamic Preempt:")) {
        return Some((true, "the boot log (\"Dynamic Preempt:\")".to_string()));
    }
    let release = fs::read_to_string("/proc/sys/kernel/osrelease").ok()?;
    let config = fs::read_to_string(format!("/boot/config-{}", release.trim())).ok()?;
    Some((config.lines().any(|l| l.trim() == "CONFIG_PREEMPT_DYNAMIC=y"), format!("/boot/config-{}", release.trim())))
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

/// The value of `sched_vcpu_pack=` on the kernel command line: a non-upstream
/// placement option of this project's hosts' vendor kernel. None where absent.
pub fn vcpu_pack_option() -> Option<String> {
    let s = fs::read_to_string("/proc/cmdline").ok()?;
    s.split_whitespace().find_map(|w| w.strip_prefix("sched_vcpu_pack=")).map(str::to_string)
}

/// The running kernel's release (`uname -r`), e.g. `6.18.44-fc-v669`.
pub fn release() -> String {
    // SAFETY: utsname is plain data; uname fills it with NUL-terminated strings.
    let mut uts: libc::utsname = unsafe { std::mem::zeroed() };
    if unsafe { libc::uname(&mut uts) } != 0 {
        return "unknown".to_string();
    }
    let bytes: Vec<u8> = uts.release.iter().take_while(|&&c| c != 0).map(|&c| c as u8).collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// (major, minor) of a release string such as `6.18.44-fc-v669`.
pub fn major_minor(release: &str) -> Option<(u32, u32)> {
    let mut it = release.split(|c: char| !c.is_ascii_digit());
    Some((it.next()?.parse().ok()?, it.next()?.parse().ok()?))
}

/// The schedlab policy modelling a Linux release: the newest modelled fair
/// scheduler at or below it (6.18+ → eevdf@6.18, 6.12-6.17 → eevdf@6.12,
/// 6.6-6.11 → eevdf@6.6, 5.15-6.5 → cfs@5.15, 5.10-5.14 → cfs@5.10,
/// 4.19-5.9 → cfs@4.19). None below 4.19.
pub fn policy_for_release(release: &str) -> Option<&'static str> {
    let v = major_minor(release)?;
    let table: [((u32, u32), &str); 6] = [
        ((6, 18), "eevdf@6.18"),
        ((6, 12), "eevdf@6.12"),
        ((6, 6), "eevdf@6.6"),
        ((5, 15), "cfs@5.15"),
        ((5, 10), "cfs@5.10"),
        ((4, 19), "cfs@4.19"),
    ];
    table.iter().find(|(from, _)| v >= *from).map(|(_, p)| *p)
}

/// The stable-branch switches of `policy` that a release's sublevel has
/// (docs/policies/eevdf.md, "Stable backports"): 6.18.2+ forfeits the vruntime
/// on yield (79104becf42b), 6.18.3+ has the newidle cost bump reverted
/// (d206fbad9328); a 6.18.35 tree has v6.19's proportional newidle balance
/// (NI_RANDOM), wakeup-preemption rework (WAKEUP_PREEMPT_619) and a lag clamp of
/// the longest queued slice plus a tick (LAG_CLAMP_MAX_SLICE), taken from
/// 6.18.35 on (the first sublevel read with them); 6.18.39 counts only a task's
/// allowed CPUs in the slow path's group statistics (SG_WAKEUP_ALLOWED,
/// 82d6e01a0699); the reweight that keeps the running entity's protection
/// (REWEIGHT_KEEPS_VPROT) works once `vlag` and `vprot` are separate fields, in
/// the pushes after 6.18.44. Only for a 6.18 release modelled by eevdf@6.18.
pub fn stable_switches(release: &str, policy: &str) -> String {
    let sub: u32 =
        release.split(|c: char| !c.is_ascii_digit()).filter(|p| !p.is_empty()).nth(2).and_then(|p| p.parse().ok()).unwrap_or(0);
    if policy != "eevdf@6.18" || major_minor(release) != Some((6, 18)) {
        return String::new();
    }
    STABLE_6_18.iter().filter(|&&(from, _)| sub >= from).map(|&(_, switch)| format!("+{switch}")).collect()
}

/// eevdf@6.18's stable switches with the first 6.18 sublevel that has each, in
/// the order they are printed.
const STABLE_6_18: [(u32, &str); 7] = [
    (3, "NO_NEWIDLE_COST_BUMP"),
    (2, "YIELD_FORFEIT"),
    (35, "NI_RANDOM"),
    (35, "WAKEUP_PREEMPT_619"),
    (35, "LAG_CLAMP_MAX_SLICE"),
    (39, "SG_WAKEUP_ALLOWED"),
    (45, "REWEIGHT_KEEPS_VPROT"),
];

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
    use super::*;

    #[test]
    fn releases_map_to_the_newest_model_at_or_below() {
        assert_eq!(policy_for_release("6.18.44-fc-v669"), Some("eevdf@6.18"));
        assert_eq!(policy_for_release("6.19.0"), Some("eevdf@6.18"));
        assert_eq!(policy_for_release("6.17.2"), Some("eevdf@6.12"));
        assert_eq!(policy_for_release("6.6.0"), Some("eevdf@6.6"));
        assert_eq!(policy_for_release("6.5.13"), Some("cfs@5.15"));
        assert_eq!(policy_for_release("5.4.0"), Some("cfs@4.19"));
        assert_eq!(policy_for_release("4.14.1"), None);
        assert_eq!(policy_for_release("unknown"), None);
        assert_eq!(
            stable_switches("6.18.44-fc-v669", "eevdf@6.18"),
            "+NO_NEWIDLE_COST_BUMP+YIELD_FORFEIT+NI_RANDOM+WAKEUP_PREEMPT_619+LAG_CLAMP_MAX_SLICE+SG_WAKEUP_ALLOWED"
        );
        assert_eq!(
            stable_switches("6.18.38", "eevdf@6.18"),
            "+NO_NEWIDLE_COST_BUMP+YIELD_FORFEIT+NI_RANDOM+WAKEUP_PREEMPT_619+LAG_CLAMP_MAX_SLICE"
        );
        assert!(stable_switches("6.18.45", "eevdf@6.18").ends_with("+SG_WAKEUP_ALLOWED+REWEIGHT_KEEPS_VPROT"));
        assert_eq!(stable_switches("6.18.34", "eevdf@6.18"), "+NO_NEWIDLE_COST_BUMP+YIELD_FORFEIT");
        assert_eq!(stable_switches("6.18.2", "eevdf@6.18"), "+YIELD_FORFEIT");
        assert_eq!(stable_switches("6.18.0", "eevdf@6.18"), "");
        assert_eq!(stable_switches("6.19.1", "eevdf@6.18"), "");
        assert_eq!(stable_switches("6.12.30", "eevdf@6.12"), "");
    }

    #[test]
    fn the_mode_read_is_one_of_the_four() {
        if let Some(h) = super::preempt_mode() {
            assert!(["none", "voluntary", "full", "lazy"].contains(&h.mode.as_str()), "{h:?}");
            assert!(!h.source.is_empty());
        }
    }
}
