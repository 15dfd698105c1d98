//! The simulator's source identity, for the sweep cache's content addresses:
//! SCHEDLAB_SOURCE_DIGEST, the SHA-256 of every file a run's result depends on
//! (the core, the policies, the workloads, this crate, the shipped machine
//! profiles, the locked dependency versions), so that any change, committed or
//! not, gives new keys; and SCHEDLAB_SOURCE_REVISION, the git commit with
//! `-dirty` when those files differ from it (`unknown` outside a checkout).

use std::path::{Path, PathBuf};
use std::process::Command;

use sha2::{Digest, Sha256};

fn files_under(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            files_under(&p, out);
        } else {
            out.push(p);
        }
    }
}

fn main() {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets it"));
    let root = manifest.join("../..");
    let inputs = [
        "crates/schedlab-core/src",
        "crates/schedlab-policies/src",
        "crates/schedlab-workloads/src",
        "crates/schedlab-spec/src",
        "machines",
        "Cargo.lock",
    ];
    let mut files = Vec::new();
    for i in inputs {
        let p = root.join(i);
        println!("cargo:rerun-if-changed={}", p.display());
        if p.is_dir() {
            files_under(&p, &mut files);
        } else {
            files.push(p);
        }
    }
    files.sort();
    let mut h = Sha256::new();
    for f in &files {
        let rel = f.strip_prefix(&root).unwrap_or(f);
        h.update(rel.to_string_lossy().as_bytes());
        h.update([0]);
        h.update(std::fs::read(f).unwrap_or_default());
        h.update([0]);
    }
    let digest: String = h.finalize().iter().map(|b| format!("{b:02x}")).collect();
    println!("cargo:rustc-env=SCHEDLAB_SOURCE_DIGEST={digest}");

    let git = |args: &[&str]| {
        Command::new("git")
            .args(args)
            .current_dir(&root)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    let revision = match git(&["rev-parse", "--short=12", "HEAD"]) {
        Some(commit) => {
            let mut args = vec!["status", "--porcelain", "--untracked-files=no", "--"];
            args.extend(inputs);
            let dirty = git(&args).is_some_and(|s| !s.is_empty());
            if dirty {
                format!("{commit}-dirty")
            } else {
                commit
            }
        }
        None => "unknown".to_string(),
    };
    for g in [".git/HEAD", ".git/index"] {
        if root.join(g).exists() {
            println!("cargo:rerun-if-changed={}", root.join(g).display());
        }
    }
    println!("cargo:rustc-env=SCHEDLAB_SOURCE_REVISION={revision}");
}
