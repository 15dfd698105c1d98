//! Replays the fuzz corpus (fuzz/corpus/TARGET/*, grown by fuzz/run.sh with
//! cargo-fuzz) through the same parsers on the stable toolchain: every input is
//! refused with an error or parsed, and nothing panics. Each target here calls
//! what fuzz/fuzz_targets/TARGET.rs calls.

use std::path::PathBuf;

fn corpus(target: &str) -> Vec<(PathBuf, String)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus").join(target);
    let mut inputs: Vec<(PathBuf, String)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter_map(|p| {
            let bytes = std::fs::read(&p).unwrap();
            // The targets only look at UTF-8 input.
            String::from_utf8(bytes).ok().map(|s| (p, s))
        })
        .collect();
    inputs.sort();
    assert!(!inputs.is_empty(), "{} is empty", dir.display());
    inputs
}

#[test]
fn topology_corpus() {
    for (_, text) in corpus("topology") {
        if let Ok(t) = schedlab_core::Topology::parse(&text) {
            assert_eq!(t.cpus.len(), t.ncpus());
            let _ = t.state_bytes_estimate();
        }
    }
}

#[test]
fn machine_profile_corpus() {
    for (path, text) in corpus("machine_profile") {
        if let Ok(p) = schedlab_core::cost::MachineProfile::from_toml(&text, "fuzz.toml") {
            assert!(p.check("fuzz.toml").is_ok(), "{}", path.display());
            let _ = p.copy_ns(4096);
        }
    }
}

#[test]
fn workload_spec_corpus() {
    for (_, text) in corpus("workload_spec") {
        let _ = schedlab_workloads::Workload::parse(&text);
    }
}

#[test]
fn policy_name_corpus() {
    for (_, text) in corpus("policy_name") {
        let mut lines = text.lines();
        let name = lines.next().unwrap_or("");
        let sysctls: Vec<(String, String)> =
            lines.filter_map(|l| l.split_once('=').map(|(k, v)| (k.to_string(), v.to_string()))).collect();
        let _ = schedlab_policies::policy_by_name(name, &sysctls);
    }
}

#[test]
fn ftrace_text_corpus() {
    for (_, text) in corpus("ftrace_text") {
        let _ = schedlab_trace::parse_trace(&text);
    }
}

#[test]
fn experiment_file_corpus() {
    for (_, text) in corpus("experiment_file") {
        if let Ok(e) = schedlab_spec::experiment::parse(&text, "fuzz.toml") {
            if let Ok(c) = e.comparison(Some(1), None, None) {
                let _ = c.validate();
            }
        }
    }
}

#[test]
fn suite_file_corpus() {
    for (_, text) in corpus("suite_file") {
        let _ = schedlab_spec::suite::parse(&text, "fuzz.toml");
    }
}

#[test]
fn grid_file_corpus() {
    for (_, text) in corpus("grid_file") {
        if let Ok(g) = schedlab_spec::sweep::Grid::parse_toml(&text, "fuzz.toml") {
            if g.axes.iter().map(|(_, v)| v.len()).product::<usize>() * g.runs as usize <= 10_000 {
                let _ = g.jobs();
            }
        }
    }
}
