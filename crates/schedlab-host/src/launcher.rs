//! A launcher for real runs whose wake_wide() history is zero.
//!
//! Linux copies a parent's task_struct into its child and nothing in
//! `sched_fork()` resets `wakee_flips` (v3.12+, still in v6.18), so a real run's
//! first task, and every worker it forks, starts with the count of whatever
//! process launched it: how often that process switched the task it woke
//! lately. That count decides `wake_wide()` for a hackbench receiver, which
//! rarely wakes anyone itself: on this project's hosts pipe messaging migrated
//! 1 081 times (median of 5) from a launcher at 0 and 181 from one at 3-4, and
//! `schedlab validate`'s own process carried anything from 0 to 5 from one run to
//! the next (tools/host-wake-affine/README.md). So real runs start from a
//! launcher process of their own, brought to zero once, which then wakes nobody:
//!
//! - it halves its count to zero the way `record_wakee()` does: it wakes one
//!   helper, then the same helper again every 1.1 s, [`HALVINGS`] times (a
//!   wakeup more than a second after the last halving halves the count, and
//!   one of the last wakee adds nothing), while two spinners keep every CPU
//!   busy so that the wakeups take upstream's placement path and its
//!   `record_wakee()` (the hosts' `sched_vcpu_pack` returns before it when a CPU
//!   has room);
//! - it then forks each run and waits for it; it reports on a pipe that its
//!   owner reads without blocking, so its writes wake nobody either.
//!
//! The simulated side then starts from `Launcher::default()` (zero).

use std::io::{BufRead, Read, Write};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use crate::run::Outcome;
use crate::sys::{pipe, set_nonblocking, wait_for, wait_readable, write_all};
use crate::{signals, HostError};

/// Halvings of the launcher's count: any count below 2^HALVINGS reaches zero
/// (the hosts' processes carried 0 to 25).
pub const HALVINGS: u32 = 6;

/// What a terminal sends the whole foreground group; the owner handles them.
const TERMINAL_SIGNALS: [libc::c_int; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

/// What the launcher prints when it is ready.
const QUIET: &str = "quiet";

/// The owner's end: a launcher process started from `argv` (a command that
/// runs [`serve`]), its requests and its replies.
pub struct QuietLauncher {
    proc: Child,
    requests: ChildStdin,
    replies: ChildStdout,
    pending: String,
    runs: u64,
}

impl QuietLauncher {
    /// Starts the launcher (`argv` runs [`serve`]) and waits until its count is
    /// down, about 0.3 + 1.1 × halvings seconds, or until a signal arrives.
    pub fn start(argv: &[String]) -> Result<QuietLauncher, HostError> {
        use std::os::unix::process::CommandExt;
        let Some((prog, args)) = argv.split_first() else {
            return Err(HostError::new("launcher command", "empty"));
        };
        let mut cmd = Command::new(prog);
        cmd.args(args).stdin(Stdio::piped()).stdout(Stdio::piped());
        // SAFETY: only async-signal-safe calls between fork and exec.
        unsafe {
            cmd.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong);
                Ok(())
            });
        }
        let mut proc = cmd.spawn().map_err(|e| HostError::new(format!("starting the launcher '{prog}'"), e))?;
        let requests = proc.stdin.take().expect("piped");
        let replies = proc.stdout.take().expect("piped");
        set_nonblocking(replies.as_raw_fd()).map_err(|e| HostError::new("the launcher's pipe", e))?;
        let mut l = QuietLauncher { proc, requests, replies, pending: String::new(), runs: 0 };
        let limit = Duration::from_secs(10 + 2 * u64::from(HALVINGS));
        let start = Instant::now();
        loop {
            match l.next_reply()? {
                Some(line) if line == QUIET => return Ok(l),
                Some(line) => return Err(HostError::new("the launcher", format!("said '{line}' before it was ready"))),
                None if signals::interrupted() => return Err(HostError::new("the launcher", "interrupted")),
                None if start.elapsed() > limit => return Err(HostError::new("the launcher", "not ready in time")),
                None => {
                    // A launcher that died leaves its pipe hung up (readable at once).
                    if let Ok(Some(status)) = l.proc.try_wait() {
                        return Err(HostError::new("the launcher", format!("ended before it was ready ({status})")));
                    }
                    wait_readable(l.replies.as_raw_fd(), limit.saturating_sub(start.elapsed()))
                        .map_err(|e| HostError::new("the launcher's pipe", e))?;
                }
            }
        }
    }

    /// Runs `argv` as a session of its own, the launcher's child, with its
    /// standard output captured; waits at most `limit`, woken by the launcher's
    /// replies (its start and its end), by SIGINT/SIGTERM or at least once a
    /// second (`SUPERVISOR_WAIT_MAX`): a poller waking every 10 ms preempted the
    /// run's tasks a hundred times a second. Whatever the outcome, the session's
    /// remaining processes are killed.
    pub fn run(&mut self, argv: &[String], limit: Duration) -> Result<(Outcome, String), HostError> {
        self.runs += 1;
        let out = std::env::temp_dir().join(format!("schedlab-real-{}-{}.out", std::process::id(), self.runs));
        let result = self.run_into(argv, &out, limit);
        let text = std::fs::read_to_string(&out).unwrap_or_default();
        let _ = std::fs::remove_file(&out);
        result.map(|o| (o, text))
    }

    fn run_into(&mut self, argv: &[String], out: &Path, limit: Duration) -> Result<Outcome, HostError> {
        let request = serde_json::json!({ "argv": argv, "stdout": out });
        writeln!(self.requests, "{request}").map_err(|e| HostError::new("asking the launcher", e))?;
        let start = Instant::now();
        let mut session: Option<libc::pid_t> = None;
        let mut outcome = None;
        loop {
            while let Some(line) = self.next_reply()? {
                let (word, rest) = line.split_once(' ').unwrap_or((line.as_str(), ""));
                match word {
                    "started" => session = rest.parse().ok(),
                    "exited" => {
                        use std::os::unix::process::ExitStatusExt;
                        let raw: i32 = rest.parse().map_err(|e| HostError::new("the launcher's reply", e))?;
                        kill_session(session);
                        return Ok(outcome.unwrap_or(Outcome::Exited(std::process::ExitStatus::from_raw(raw))));
                    }
                    _ => return Err(HostError::new("the launcher", line)),
                }
            }
            if outcome.is_none() {
                if signals::interrupted() {
                    outcome = Some(Outcome::Interrupted);
                } else if start.elapsed() >= limit {
                    outcome = Some(Outcome::TimedOut);
                }
            }
            if outcome.is_some() {
                // Again each time round: the session may have started since.
                kill_session(session);
            }
            if let Ok(Some(status)) = self.proc.try_wait() {
                return Err(HostError::new("the launcher", format!("ended ({status})")));
            }
            // Until the next reply, a signal, the limit, or a second (the
            // launcher's end shows as a hang-up; try_wait() above sees it).
            let left = if outcome.is_some() { Duration::from_millis(10) } else { limit.saturating_sub(start.elapsed()) };
            wait_readable(self.replies.as_raw_fd(), left).map_err(|e| HostError::new("the launcher's pipe", e))?;
        }
    }

    /// The next whole line the launcher wrote, without blocking.
    fn next_reply(&mut self) -> Result<Option<String>, HostError> {
        let mut buf = [0u8; 512];
        loop {
            match self.replies.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => self.pending.push_str(&String::from_utf8_lossy(&buf[..n])),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(HostError::new("reading the launcher", e)),
            }
        }
        let Some(end) = self.pending.find('\n') else { return Ok(None) };
        let line = self.pending[..end].to_string();
        self.pending.drain(..=end);
        Ok(Some(line))
    }
}

impl Drop for QuietLauncher {
    fn drop(&mut self) {
        let _ = self.proc.kill();
        let _ = self.proc.wait();
    }
}

/// SIGKILL to a run's whole process group (its session leader's pid).
fn kill_session(session: Option<libc::pid_t>) {
    if let Some(pid) = session.filter(|&p| p > 0) {
        // SAFETY: signalling a process group this process started through its launcher.
        unsafe { libc::kill(-pid, libc::SIGKILL) };
    }
}

#[derive(serde::Deserialize)]
struct Request {
    argv: Vec<String>,
    stdout: PathBuf,
}

/// The launcher's side (a process of its own, single-threaded): dies with its
/// owner, brings its wake_wide() count to zero with `halvings` halvings, says
/// so, then runs each request on its standard input until it closes.
pub fn serve(halvings: u32) -> Result<(), HostError> {
    // SAFETY: plain prctl and signal dispositions. The owner handles a
    // terminal's signals (it kills the running session and then us); each run
    // gets the default dispositions back.
    unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong);
        for sig in TERMINAL_SIGNALS {
            libc::signal(sig, libc::SIG_IGN);
        }
    }
    quiet_wake_history(halvings)?;
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "{QUIET}").and_then(|_| stdout.flush()).map_err(|e| HostError::new("replying", e))?;
    for line in std::io::stdin().lock().lines() {
        let line = line.map_err(|e| HostError::new("reading a request", e))?;
        let req: Request = serde_json::from_str(&line).map_err(|e| HostError::new("a request", e))?;
        let reply = match launch(&req) {
            Ok(pid) => {
                writeln!(stdout, "started {pid}").and_then(|_| stdout.flush()).map_err(|e| HostError::new("replying", e))?;
                let status = wait_for(pid).map_err(|e| HostError::new("waiting for a run", e))?;
                format!("exited {status}")
            }
            Err(e) => format!("failed {e}"),
        };
        writeln!(stdout, "{reply}").and_then(|_| stdout.flush()).map_err(|e| HostError::new("replying", e))?;
    }
    Ok(())
}

/// Forks `req.argv` as a session of its own with its output in `req.stdout`.
/// A plain fork and exec, not `std::process::Command`: Command learns of a
/// failed exec through a close-on-exec pipe it reads until the exec, so the
/// child's exec would wake the launcher, a wakee the child (the run's first
/// task) would count in its own wakee_flips.
fn launch(req: &Request) -> Result<libc::pid_t, HostError> {
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;
    let args: Vec<CString> = req
        .argv
        .iter()
        .map(|a| CString::new(a.as_bytes()))
        .collect::<Result<_, _>>()
        .map_err(|e| HostError::new("a request's command", e))?;
    if args.is_empty() {
        return Err(HostError::new("a request's command", "empty"));
    }
    let mut ptrs: Vec<*const libc::c_char> = args.iter().map(|a| a.as_ptr()).collect();
    ptrs.push(std::ptr::null());
    let path = CString::new(req.stdout.as_os_str().as_bytes()).map_err(|e| HostError::new("a request's output", e))?;
    // SAFETY: the child makes only async-signal-safe calls (setsid, prctl,
    // open, dup2, execvp, _exit) on data prepared before the fork.
    unsafe {
        match libc::fork() {
            -1 => Err(HostError::new("forking a run", std::io::Error::last_os_error())),
            0 => {
                libc::setsid();
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong);
                for sig in TERMINAL_SIGNALS {
                    libc::signal(sig, libc::SIG_DFL);
                }
                let out = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC | libc::O_CLOEXEC, 0o600);
                let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC);
                if out < 0 || null < 0 || libc::dup2(out, 1) < 0 || libc::dup2(null, 0) < 0 {
                    libc::_exit(126);
                }
                libc::execvp(ptrs[0], ptrs.as_ptr());
                libc::_exit(127)
            }
            pid => Ok(pid),
        }
    }
}

/// `record_wakee()`'s halving, `halvings` times, on this task's count.
fn quiet_wake_history(halvings: u32) -> Result<(), HostError> {
    let ncpus = std::thread::available_parallelism().map_or(2, |n| n.get());
    let (helper_in, wake) = pipe().map_err(|e| HostError::new("the launcher's helper pipe", e))?;
    let mut spinners = Vec::new();
    // SAFETY: the children only spin, or read and exit (async-signal-safe
    // calls), and die with the launcher.
    let helper = unsafe {
        for _ in 0..ncpus {
            match libc::fork() {
                0 => {
                    libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong);
                    loop {
                        std::hint::spin_loop();
                    }
                }
                pid if pid > 0 => spinners.push(pid),
                _ => {}
            }
        }
        match libc::fork() {
            0 => {
                // Its copy of the write end closed, it sees the end of the
                // pipe once the launcher closes its own.
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong);
                libc::close(wake.as_raw_fd());
                let mut c = 0u8;
                while libc::read(helper_in.as_raw_fd(), (&mut c as *mut u8).cast(), 1) == 1 {}
                libc::_exit(0)
            }
            pid => pid,
        }
    };
    drop(helper_in);
    // With no helper, the first write fails (no reader).
    let mut woke = Ok(());
    for i in 0..=halvings {
        // PELT needs a moment to see the spinners' CPUs as full.
        std::thread::sleep(Duration::from_millis(if i == 0 { 300 } else { 1100 }));
        woke = write_all(wake.as_raw_fd(), b"w");
        if woke.is_err() {
            break;
        }
    }
    for &pid in &spinners {
        // SAFETY: killing a spinner this process forked.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
    drop(wake);
    for pid in spinners.into_iter().chain((helper > 0).then_some(helper)) {
        let _ = wait_for(pid);
    }
    woke.map_err(|e| HostError::new("the launcher's halvings", e))
}
