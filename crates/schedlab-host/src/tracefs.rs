//! A private tracefs instance for recording scheduler events.
//!
//! The instance is a directory under `instances/` of its own (`schedlab-<pid>`), so
//! the top-level buffer and any other user's tracing are untouched. Dropping the
//! [`Instance`] stops it, removes it, and unmounts tracefs if this process mounted it.
//! An instance left by a run that was killed outright (SIGKILL, power loss) is
//! recognised by its dead pid and removed when the next one opens.

use std::fs;
use std::path::{Path, PathBuf};

use crate::HostError;

/// The scheduler tracepoints a recording enables: the ones the project's trace
/// parser reads and its simulated traces write.
pub use schedlab_trace::SCHED_EVENTS;

/// Where tracefs is usually mounted (since Linux 4.1).
const DEFAULT_MOUNT: &str = "/sys/kernel/tracing";
const INSTANCE_PREFIX: &str = "schedlab-";

/// An open, private tracefs instance.
#[derive(Debug)]
pub struct Instance {
    dir: PathBuf,
    /// The mount point, when this process mounted tracefs itself.
    mounted_by_us: Option<PathBuf>,
}

impl Instance {
    /// Creates `instances/schedlab-<pid>` with `buffer_kb` per CPU and the
    /// [`SCHED_EVENTS`] enabled but tracing off. Mounts tracefs if it is not mounted.
    pub fn open(buffer_kb: u32) -> Result<Instance, HostError> {
        if !cfg!(target_os = "linux") {
            return Err(HostError::new("tracefs", "recording needs Linux"));
        }
        remove_stale_private_mounts();
        let (root, mounted_by_us) = match find_mount() {
            Some(root) => (root, None),
            None => {
                mount_tracefs(Path::new(DEFAULT_MOUNT))?;
                (PathBuf::from(DEFAULT_MOUNT), Some(PathBuf::from(DEFAULT_MOUNT)))
            }
        };
        remove_stale_instances(&root.join("instances"));
        let dir = root.join("instances").join(format!("{INSTANCE_PREFIX}{}", std::process::id()));
        // From here on, Drop removes what was made even if a step below fails.
        let inst = Instance { dir: dir.clone(), mounted_by_us };
        fs::create_dir(&dir).map_err(|e| HostError::new(format!("creating tracefs instance {}", dir.display()), e))?;
        inst.write("tracing_on", "0")?;
        inst.write("buffer_size_kb", &buffer_kb.to_string())?;
        for ev in SCHED_EVENTS {
            inst.write(&format!("events/sched/{ev}/enable"), "1")?;
        }
        Ok(inst)
    }

    /// Enables one more scheduler tracepoint (`events/sched/<name>`).
    pub fn enable(&self, name: &str) -> Result<(), HostError> {
        self.write(&format!("events/sched/{name}/enable"), "1")
    }

    /// Sets the instance's own clock (`trace_clock`: `local`, `mono`, ...): its
    /// timestamps then compare with that clock's readings in user space.
    pub fn set_trace_clock(&self, clock: &str) -> Result<(), HostError> {
        self.write("trace_clock", clock)
    }

    /// The instance's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Starts or stops recording.
    pub fn set_on(&self, on: bool) -> Result<(), HostError> {
        self.write("tracing_on", if on { "1" } else { "0" })
    }

    /// The recorded text as the kernel formats it (`trace`, header included).
    pub fn read_trace(&self) -> Result<String, HostError> {
        let path = self.dir.join("trace");
        fs::read_to_string(&path).map_err(|e| HostError::new(format!("reading {}", path.display()), e))
    }

    fn write(&self, file: &str, value: &str) -> Result<(), HostError> {
        let path = self.dir.join(file);
        fs::write(&path, value).map_err(|e| HostError::new(format!("writing '{value}' to {}", path.display()), e))
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        if self.dir.exists() {
            let _ = self.write("tracing_on", "0");
            // rmdir of an instance frees its buffers; the kernel refuses while a
            // file in it is open, and nothing here keeps one open.
            let _ = fs::remove_dir(&self.dir);
        }
        if let Some(mount) = &self.mounted_by_us {
            let _ = unmount(mount);
        }
    }
}

/// The id of tracepoint `<subsystem>:<event>` (`events/<subsystem>/<event>/id`),
/// for counting it with perf_event_open. Where tracefs is not mounted, mounts it
/// for the read at a private directory of its own (so that no other user of a
/// mount of it is disturbed) and unmounts it again; the id stays valid.
pub fn event_id(subsystem: &str, event: &str) -> Result<u64, HostError> {
    let read = |root: &Path| {
        let path = root.join("events").join(subsystem).join(event).join("id");
        let text = fs::read_to_string(&path).map_err(|e| HostError::new(format!("reading {}", path.display()), e))?;
        text.trim().parse().map_err(|_| HostError::new(format!("reading {}", path.display()), format!("not a number: {text:?}")))
    };
    remove_stale_private_mounts();
    if let Some(root) = find_mount() {
        return read(&root);
    }
    static MOUNTS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = MOUNTS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("{INSTANCE_PREFIX}tracefs-{}-{n}", std::process::id()));
    fs::create_dir_all(&dir).map_err(|e| HostError::new(format!("creating {}", dir.display()), e))?;
    let id = mount_tracefs(&dir).and_then(|()| {
        let id = read(&dir);
        let _ = unmount(&dir);
        id
    });
    let _ = fs::remove_dir(&dir);
    id
}

/// The tracefs mount point from /proc/mounts, if any.
fn find_mount() -> Option<PathBuf> {
    let mounts = fs::read_to_string("/proc/mounts").ok()?;
    mounts.lines().find_map(|l| {
        let mut f = l.split_whitespace();
        let (_dev, dir, kind) = (f.next()?, f.next()?, f.next()?);
        (kind == "tracefs").then(|| PathBuf::from(dir))
    })
}

fn c_path(p: &Path) -> std::ffi::CString {
    use std::os::unix::ffi::OsStrExt;
    std::ffi::CString::new(p.as_os_str().as_bytes()).expect("paths from this module have no NUL")
}

fn mount_tracefs(at: &Path) -> Result<(), HostError> {
    let target = c_path(at);
    // SAFETY: plain system call with NUL-terminated strings that outlive it.
    let rc = unsafe { libc::mount(c"nodev".as_ptr(), target.as_ptr(), c"tracefs".as_ptr(), 0, std::ptr::null()) };
    if rc != 0 {
        let e = std::io::Error::last_os_error();
        return Err(HostError::new(
            format!("mounting tracefs at {}", at.display()),
            format!("{e} (recording needs root, or tracefs mounted and writable)"),
        ));
    }
    Ok(())
}

fn unmount(at: &Path) -> std::io::Result<()> {
    let target = c_path(at);
    // SAFETY: plain system call.
    if unsafe { libc::umount(target.as_ptr()) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// The entries of `dir` named `<prefix><pid>` or `<prefix><pid>-<rest>` whose
/// process no longer runs: what a killed schedlab left behind.
fn dead_pids_entries(dir: &Path, prefix: &str) -> Vec<PathBuf> {
    let Ok(entries) = fs::read_dir(dir) else { return Vec::new() };
    entries
        .flatten()
        .filter(|e| {
            let name = e.file_name();
            let pid = name.to_str().and_then(|n| n.strip_prefix(prefix)).and_then(|rest| rest.split('-').next());
            pid.and_then(|p| p.parse::<i32>().ok()).is_some_and(|pid| !pid_alive(pid))
        })
        .map(|e| e.path())
        .collect()
}

/// Removes `schedlab-<pid>` instances whose pid no longer runs.
fn remove_stale_instances(instances: &Path) {
    for dir in dead_pids_entries(instances, INSTANCE_PREFIX) {
        let _ = fs::remove_dir(dir);
    }
}

/// Unmounts and removes the private mounts `event_id()` makes
/// (`<tmp>/schedlab-tracefs-<pid>-<n>`) whose process no longer runs: one
/// killed between its mount and its unmount left tracefs mounted there, and
/// `find_mount()` would take that for the system's mount.
fn remove_stale_private_mounts() {
    for dir in dead_pids_entries(&std::env::temp_dir(), &format!("{INSTANCE_PREFIX}tracefs-")) {
        let _ = unmount(&dir);
        let _ = fs::remove_dir(dir);
    }
}

/// Whether a process with this pid exists (kill with signal 0).
pub fn pid_alive(pid: i32) -> bool {
    if pid <= 0 {
        return false;
    }
    // SAFETY: signal 0 only checks for existence and permission.
    let rc = unsafe { libc::kill(pid, 0) };
    rc == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A private mount left by a process that died is unmounted and removed;
    /// one of a live process is left alone. Needs root (skipped otherwise).
    #[test]
    fn a_dead_processs_private_mount_is_removed() {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let dead = child.id() as i32;
        child.wait().unwrap();
        let stale = std::env::temp_dir().join(format!("{INSTANCE_PREFIX}tracefs-{dead}-7"));
        let live = std::env::temp_dir().join(format!("{INSTANCE_PREFIX}tracefs-{}-99", std::process::id()));
        fs::create_dir_all(&stale).unwrap();
        fs::create_dir_all(&live).unwrap();
        if mount_tracefs(&stale).is_err() {
            let _ = fs::remove_dir(&stale);
            let _ = fs::remove_dir(&live);
            return; // not root: nothing to test here
        }
        let mounted = |p: &Path| fs::read_to_string("/proc/mounts").unwrap().contains(&format!(" {} tracefs", p.display()));
        assert!(mounted(&stale));
        remove_stale_private_mounts();
        assert!(!mounted(&stale) && !stale.exists(), "the dead process's mount stayed");
        assert!(live.exists(), "a live process's directory was removed");
        fs::remove_dir(&live).unwrap();
    }

    #[test]
    fn our_own_pid_is_alive_and_pid_zero_is_not() {
        assert!(pid_alive(std::process::id() as i32));
        assert!(!pid_alive(0));
        assert!(!pid_alive(-1));
    }

    #[test]
    fn stale_instances_of_dead_pids_are_removed_and_others_kept() {
        let dir = std::env::temp_dir().join(format!("schedlab-stale-test-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        // pid_max is at most 2^22 on Linux: this pid cannot run.
        let dead = dir.join("schedlab-4194305");
        let alive = dir.join(format!("schedlab-{}", std::process::id()));
        let other = dir.join("someone-else");
        for d in [&dead, &alive, &other] {
            fs::create_dir(d).unwrap();
        }
        remove_stale_instances(&dir);
        assert!(!dead.exists());
        assert!(alive.exists() && other.exists());
        fs::remove_dir_all(&dir).unwrap();
    }
}
