//! Files the commands write. Every output path is checked before any work starts:
//! it must name a regular file (or nothing yet) in an existing, writable
//! directory; a symlink is followed and its target written; the same file may not
//! be given for two outputs. Output is written whole to a temporary file beside
//! the target and renamed over it, so a failed or interrupted command leaves the
//! target as it was; temporary files are removed on every error and, for commands
//! that call [`remove_temporaries_on_signals`], on SIGINT, SIGTERM and SIGHUP.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use schedlab_core::error::SpecError;

/// Temporary files being written, removed if a signal ends the process.
static TEMPORARIES: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// Symlink hops followed before giving up (the kernel's MAXSYMLINKS is 40).
const MAX_LINKS: usize = 40;

/// Checks `path` as the output `field` and returns the file to write: the path
/// itself, or where its symlinks lead.
pub fn check(field: &str, path: &Path) -> Result<PathBuf, SpecError> {
    let shown = path.display().to_string();
    let refuse =
        |why: &str| SpecError::new(field, shown.clone(), format!("a regular file in an existing, writable directory ({why})"));
    let mut target = path.to_path_buf();
    for _ in 0..=MAX_LINKS {
        match std::fs::symlink_metadata(&target) {
            Ok(m) if m.file_type().is_symlink() => {
                let link = std::fs::read_link(&target).map_err(|e| refuse(&e.to_string()))?;
                target = match target.parent() {
                    Some(dir) if link.is_relative() => dir.join(link),
                    _ => link,
                };
            }
            Ok(m) => {
                let t = m.file_type();
                let kind = if t.is_file() {
                    None
                } else if t.is_dir() {
                    Some("it is a directory")
                } else if t.is_fifo() {
                    Some("it is a FIFO")
                } else if t.is_char_device() || t.is_block_device() {
                    Some("it is a device")
                } else {
                    Some("it is a socket or other special file")
                };
                if let Some(why) = kind {
                    return Err(refuse(why));
                }
                if !writable(&target) {
                    return Err(refuse("the file is not writable"));
                }
                return Ok(target);
            }
            Err(_) => {
                let dir = target.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
                if target.file_name().is_none() {
                    return Err(refuse("no file name"));
                }
                if !dir.is_dir() {
                    return Err(refuse("its directory does not exist"));
                }
                if !writable(dir) {
                    return Err(refuse("its directory is not writable"));
                }
                return Ok(target);
            }
        }
    }
    Err(refuse("too many levels of symbolic links"))
}

/// `access(path, W_OK)`.
fn writable(path: &Path) -> bool {
    let Ok(c) = CString::new(path.as_os_str().as_bytes()) else { return false };
    // SAFETY: a valid NUL-terminated path.
    unsafe { libc::access(c.as_ptr(), libc::W_OK) == 0 }
}

/// Refuses two outputs that name the same file (after following symlinks).
pub fn distinct(outputs: &[(&str, &Path)]) -> Result<(), SpecError> {
    let key = |p: &Path| {
        let dir = p.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
        let dir = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
        dir.join(p.file_name().unwrap_or_default())
    };
    for (i, (a, pa)) in outputs.iter().enumerate() {
        for (b, pb) in &outputs[i + 1..] {
            if key(pa) == key(pb) {
                return Err(SpecError::new(
                    *b,
                    pb.display().to_string(),
                    format!("a different file from --{a} (both name {})", key(pa).display()),
                ));
            }
        }
    }
    Ok(())
}

/// A temporary file beside `target`, hidden, named after it and this process.
pub fn temporary_beside(target: &Path, what: &str) -> PathBuf {
    let name = target.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "out".into());
    let tmp = target.with_file_name(format!(".{name}.{what}.{}", std::process::id()));
    TEMPORARIES.lock().expect("no panics while holding the list").push(tmp.clone());
    tmp
}

/// Forgets a temporary file that was renamed into place or removed.
pub fn done_with(tmp: &Path) {
    TEMPORARIES.lock().expect("no panics while holding the list").retain(|p| p != tmp);
}

/// Writes `bytes` to `target` whole: a temporary file beside it, renamed over it.
pub fn write_atomically(field: &str, target: &Path, bytes: &[u8]) -> Result<(), String> {
    let tmp = temporary_beside(target, "tmp");
    let r = std::fs::write(&tmp, bytes).and_then(|_| std::fs::rename(&tmp, target));
    if r.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    done_with(&tmp);
    r.map_err(|e| format!("writing {field} {}: {e}", target.display()))
}

/// From here on SIGINT, SIGTERM and SIGHUP remove the temporary files being
/// written and end the process with 128 + the signal's number. Call it before
/// any other thread starts: the signals are blocked in every thread and taken by
/// one that waits for them.
pub fn remove_temporaries_on_signals() {
    // SAFETY: plain signal-set calls on a local set; pthread_sigmask on this thread.
    let set = unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
            libc::sigaddset(&mut set, sig);
        }
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        set
    };
    std::thread::spawn(move || {
        let mut sig: libc::c_int = 0;
        // SAFETY: `set` is initialised; sigwait only writes `sig`.
        if unsafe { libc::sigwait(&set, &mut sig) } != 0 {
            return;
        }
        let list = TEMPORARIES.lock().map(|l| l.clone()).unwrap_or_default();
        for p in list {
            let _ = std::fs::remove_file(p);
        }
        eprintln!("schedlab: interrupted; nothing written");
        std::process::exit(128 + sig);
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir() -> PathBuf {
        let d = std::env::temp_dir().join(format!("schedlab-outputs-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn refuses_what_is_not_a_regular_file() {
        let d = dir();
        let e = check("trace", &d).unwrap_err().to_string();
        assert!(e.contains("trace") && e.contains("directory"), "{e}");
        let e = check("trace", Path::new("/dev/null")).unwrap_err().to_string();
        assert!(e.contains("device"), "{e}");
        let e = check("plot", &d.join("no/such/dir/x.svg")).unwrap_err().to_string();
        assert!(e.contains("does not exist"), "{e}");
        assert_eq!(check("out", &d.join("new.txt")).unwrap(), d.join("new.txt"));
    }

    #[test]
    fn follows_symlinks_to_their_target() {
        let d = dir();
        let target = d.join("real.svg");
        std::fs::write(&target, "old").unwrap();
        let link = d.join("link.svg");
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink("real.svg", &link).unwrap();
        assert_eq!(check("plot", &link).unwrap(), target);
        let dev = d.join("dev-link");
        let _ = std::fs::remove_file(&dev);
        std::os::unix::fs::symlink("/dev/null", &dev).unwrap();
        assert!(check("trace", &dev).is_err());
    }

    #[test]
    fn the_same_file_twice_is_refused() {
        let d = dir();
        let a = d.join("x.svg");
        let b = d.join(".").join("x.svg");
        let e = distinct(&[("trace", &a), ("plot", &b)]).unwrap_err().to_string();
        assert!(e.contains("plot") && e.contains("--trace"), "{e}");
        assert!(distinct(&[("trace", &a), ("plot", &d.join("y.svg"))]).is_ok());
    }
}
