//! Running a real command as its own session, and never leaving it behind.

use std::process::{Command, ExitStatus};
use std::time::Duration;

use crate::{signals, HostError};

/// A child started with `setsid()`: it leads its own session and process group (so
/// it gets its own autogroup on a kernel with autogroup, like a command started from
/// a new terminal), and everything it forks stays in that group unless it leaves
/// on purpose. Dropping it kills the whole group.
#[derive(Debug)]
pub struct Supervised {
    pid: libc::pid_t,
    reaped: bool,
}

/// How a supervised command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Exited(ExitStatus),
    /// SIGINT/SIGTERM/SIGHUP arrived first; the session was killed.
    Interrupted,
    /// The time limit passed first; the session was killed.
    TimedOut,
}

impl Supervised {
    /// Starts `argv` in a new session. The child also dies with us
    /// (PR_SET_PDEATHSIG), even if we are killed outright.
    pub fn spawn(argv: &[String]) -> Result<Supervised, HostError> {
        use std::os::unix::process::CommandExt;
        let Some((prog, args)) = argv.split_first() else {
            return Err(HostError::new("command", "empty"));
        };
        let mut cmd = Command::new(prog);
        cmd.args(args);
        // SAFETY: only async-signal-safe calls between fork and exec.
        unsafe {
            cmd.pre_exec(|| {
                if libc::setsid() < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong);
                Ok(())
            });
        }
        let child = cmd.spawn().map_err(|e| HostError::new(format!("starting '{prog}'"), e))?;
        Ok(Supervised { pid: child.id() as libc::pid_t, reaped: false })
    }

    pub fn pid(&self) -> libc::pid_t {
        self.pid
    }

    /// Waits for the command, at most `limit`, woken by its exit (a pidfd), by
    /// SIGINT/SIGTERM or at least once a second (`SUPERVISOR_WAIT_MAX`; every
    /// 10 ms on a kernel without pidfds). Whatever the outcome, the session's
    /// remaining processes are killed.
    pub fn wait(&mut self, limit: Duration) -> Result<Outcome, HostError> {
        use std::os::fd::AsRawFd;
        let start = std::time::Instant::now();
        let pidfd = crate::sys::pidfd_open(self.pid);
        let outcome = loop {
            let mut status: libc::c_int = 0;
            // SAFETY: waitpid on our own child.
            let r = unsafe { libc::waitpid(self.pid, &mut status, libc::WNOHANG) };
            if r == self.pid {
                self.reaped = true;
                use std::os::unix::process::ExitStatusExt;
                break Outcome::Exited(ExitStatus::from_raw(status));
            }
            if r < 0 {
                let e = std::io::Error::last_os_error();
                if e.raw_os_error() != Some(libc::EINTR) {
                    return Err(HostError::new("waiting for the command", e));
                }
            }
            if signals::interrupted() {
                break Outcome::Interrupted;
            }
            if start.elapsed() >= limit {
                break Outcome::TimedOut;
            }
            match &pidfd {
                Some(fd) => {
                    crate::sys::wait_readable(fd.as_raw_fd(), limit.saturating_sub(start.elapsed()))
                        .map_err(|e| HostError::new("waiting for the command", e))?;
                }
                None => std::thread::sleep(Duration::from_millis(10)),
            }
        };
        self.kill_session();
        Ok(outcome)
    }

    /// SIGKILL to the whole process group, then reap the leader if still unreaped.
    fn kill_session(&mut self) {
        // SAFETY: signalling our own child's process group.
        unsafe { libc::kill(-self.pid, libc::SIGKILL) };
        if !self.reaped {
            let mut status = 0;
            // SAFETY: blocking wait for our own child, which was just SIGKILLed.
            unsafe { libc::waitpid(self.pid, &mut status, 0) };
            self.reaped = true;
        }
    }
}

impl Drop for Supervised {
    fn drop(&mut self) {
        self.kill_session();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tracefs::pid_alive;

    fn sh(script: &str) -> Vec<String> {
        vec!["/bin/sh".into(), "-c".into(), script.into()]
    }

    #[test]
    fn exit_status_is_reported() {
        let mut c = Supervised::spawn(&sh("exit 3")).unwrap();
        match c.wait(Duration::from_secs(10)).unwrap() {
            Outcome::Exited(s) => assert_eq!(s.code(), Some(3)),
            o => panic!("{o:?}"),
        }
    }

    #[test]
    fn a_time_limit_kills_the_whole_session_including_grandchildren() {
        // The shell starts a background sleeper and prints its pid, then waits.
        let out = std::env::temp_dir().join(format!("schedlab-run-test-{}", std::process::id()));
        let script = format!("sleep 30 & echo $! > {}; wait", out.display());
        let mut c = Supervised::spawn(&sh(&script)).unwrap();
        let grandchild = loop {
            if let Some(pid) = std::fs::read_to_string(&out).ok().and_then(|s| s.trim().parse::<i32>().ok()) {
                break pid;
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        assert_eq!(c.wait(Duration::from_millis(100)).unwrap(), Outcome::TimedOut);
        // SIGKILL is delivered asynchronously; give the grandchild a moment to go
        // (init reaps it once its parent shell is gone).
        let gone = (0..200).any(|_| {
            std::thread::sleep(Duration::from_millis(5));
            !pid_alive(grandchild)
                || std::fs::read_to_string(format!("/proc/{grandchild}/stat")).map_or(true, |s| s.contains(") Z "))
        });
        let _ = std::fs::remove_file(&out);
        assert!(gone, "grandchild {grandchild} survived");
    }

    #[test]
    fn a_missing_program_is_an_error_naming_it() {
        let e = Supervised::spawn(&["/nonexistent/schedlab-test-prog".to_string()]).unwrap_err();
        assert!(e.to_string().contains("/nonexistent/schedlab-test-prog"), "{e}");
    }
}
