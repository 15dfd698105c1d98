//! SIGINT and SIGTERM as a flag. A real run waits in a loop that checks
//! [`interrupted`], so an interrupted recording still kills its child session and
//! removes its tracefs instance (Rust drops do not run when a signal kills us).

use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

static INTERRUPTED: AtomicBool = AtomicBool::new(false);
/// The last of them to arrive.
static LAST_SIGNAL: AtomicI32 = AtomicI32::new(0);

extern "C" fn note_signal(sig: libc::c_int) {
    LAST_SIGNAL.store(sig, Ordering::SeqCst);
    INTERRUPTED.store(true, Ordering::SeqCst);
}

const SIGNALS: [libc::c_int; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

/// Installs the handlers (idempotent). Without SA_RESTART, a blocking call returns
/// EINTR so the waiting loop sees the flag promptly.
pub fn install() {
    for sig in SIGNALS {
        set_handler(sig);
    }
}

/// Installs the handler for `sig` and returns the disposition it replaced.
fn set_handler(sig: libc::c_int) -> libc::sigaction {
    // SAFETY: the handler only stores to an atomic, which is async-signal-safe;
    // sigaction() is given valid structs.
    unsafe {
        let mut act: libc::sigaction = std::mem::zeroed();
        act.sa_sigaction = note_signal as extern "C" fn(libc::c_int) as usize;
        libc::sigemptyset(&mut act.sa_mask);
        act.sa_flags = 0;
        let mut old: libc::sigaction = std::mem::zeroed();
        libc::sigaction(sig, &act, &mut old);
        old
    }
}

/// The handlers for one step that must clean up before it stops (a recording
/// inside a longer command): on drop the previous dispositions come back, so the
/// rest of the command answers a signal as it did before.
pub struct Scoped {
    old: Vec<(libc::c_int, libc::sigaction)>,
}

/// Installs the handlers until the returned guard is dropped.
pub fn install_scoped() -> Scoped {
    Scoped { old: SIGNALS.iter().map(|&sig| (sig, set_handler(sig))).collect() }
}

impl Scoped {
    /// Restores the previous dispositions and, if a signal arrived meanwhile,
    /// raises it again under them (the default ends the process as the signal
    /// would have; a caller's own handler sees it).
    pub fn finish(self) {
        let arrived = interrupted().then(|| LAST_SIGNAL.load(Ordering::SeqCst)).filter(|&s| s != 0);
        drop(self);
        if let Some(sig) = arrived {
            // SAFETY: raise() with the signal number the handler was given.
            unsafe { libc::raise(sig) };
        }
    }
}

impl Drop for Scoped {
    fn drop(&mut self) {
        for (sig, old) in &self.old {
            // SAFETY: restoring a disposition sigaction() returned.
            unsafe { libc::sigaction(*sig, old, std::ptr::null_mut()) };
        }
    }
}

/// Whether SIGINT, SIGTERM or SIGHUP arrived since [`install`].
pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
}
