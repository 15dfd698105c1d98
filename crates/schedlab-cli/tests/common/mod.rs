//! What the end-to-end tests of the `schedlab` binary share.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Command, Output};

pub fn schedlab(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_schedlab")).args(args).output().expect("schedlab runs")
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A path in this test process's own temporary directory.
pub fn tmp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("schedlab-cli-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

pub fn effective_uid_is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("Uid:")).map(|l| l.split_whitespace().nth(2) == Some("0")))
        .unwrap_or(false)
}

/// The largest peak RSS, in KB, of any child this test process has reaped.
pub fn max_child_rss_kb() -> i64 {
    // SAFETY: getrusage on our own (reaped) children fills the struct.
    unsafe {
        let mut u: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_CHILDREN, &mut u);
        u.ru_maxrss
    }
}
