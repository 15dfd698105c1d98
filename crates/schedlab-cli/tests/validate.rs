//! `schedlab real` and `schedlab validate` end to end on the machine the tests run
//! on: the table's columns (not its errors, which depend on the machine), bad
//! input, and no process left behind.

mod common;

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use common::{effective_uid_is_root, schedlab, stderr, stdout, tmp};

/// Real runs measure the machine: one test at a time.
static REAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    REAL.lock().unwrap_or_else(|p| p.into_inner())
}

const TINY_SUITE: &str = r#"
name = "tiny"
runs = 2
timeout_s = 60

[[rows]]
name = "messaging pipe process g=1"
workload = "hackbench groups=1 loops=50 ipc=pipe mode=process"

[[rows]]
name = "pipe thread"
workload = "pipe loops=2000 mode=thread"

[[rows]]
name = "schbench"
workload = "schbench threads=1 workers=2 runtime_ms=200 warmup_ms=50"
"#;

fn tiny_suite() -> PathBuf {
    let p = tmp("tiny.toml");
    std::fs::write(&p, TINY_SUITE).unwrap();
    p
}

/// Processes whose command line contains `marker` (other than us).
fn processes_with(marker: &str) -> Vec<String> {
    let me = std::process::id().to_string();
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().chars().all(|c| c.is_ascii_digit()))
        .filter(|e| e.file_name().to_string_lossy() != me)
        .filter_map(|e| {
            let cmd = std::fs::read(e.path().join("cmdline")).ok()?;
            let stat = std::fs::read_to_string(e.path().join("stat")).ok()?;
            let zombie_reaped_soon = stat.contains(") Z ");
            let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
            (cmd.contains(marker) && !zombie_reaped_soon).then(|| format!("{}: {cmd}", e.file_name().to_string_lossy()))
        })
        .collect()
}

#[test]
fn validate_prints_every_column_for_every_row() {
    let _one_at_a_time = serial();
    if !cfg!(target_os = "linux") {
        return;
    }
    let suite = tiny_suite();
    let o = schedlab(&["validate", "--suite", suite.to_str().unwrap(), "--quick-calibrate"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    let head = out.lines().find(|l| l.starts_with("row ")).expect("a column header");
    for col in ["metric", "real median", "[real min-max]", "simulated", "[sim min-max]", "error", "range", "agree"] {
        assert!(head.contains(col), "column {col} missing: {head}");
    }
    for row in ["messaging pipe process g=1", "pipe thread", "schbench"] {
        assert!(out.lines().any(|l| l.starts_with(row)), "row {row} missing:\n{out}");
    }
    for metric in ["elapsed_s", "context_switches", "cpu_migrations", "wakeup_p99_us"] {
        assert!(out.contains(metric), "{metric} missing:\n{out}");
    }
    assert!(out.contains("simulated: eevdf@") || out.contains("simulated: cfs@"), "{out}");
    assert!(out.contains("summary"), "{out}");
    // schbench is judged on latencies, never on its fixed window.
    let sch: Vec<&str> = out.lines().skip_while(|l| !l.starts_with("schbench")).take(5).collect();
    assert!(!sch.iter().any(|l| l.contains("elapsed_s")), "{sch:?}");
}

#[test]
fn validate_json_and_csv_carry_every_run() {
    let _one_at_a_time = serial();
    if !cfg!(target_os = "linux") {
        return;
    }
    let suite = tiny_suite();
    let o = schedlab(&[
        "validate",
        "--suite",
        suite.to_str().unwrap(),
        "--machine",
        "kvm-haswell",
        "--rows",
        "pipe-thread",
        "--also-policy",
        "cfs@5.15",
        "--format",
        "json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).expect("JSON");
    // --also-policy: the same real runs, simulated under a further policy.
    let also = v["also_simulated"].as_array().unwrap();
    assert_eq!(also.len(), 1);
    assert_eq!(also[0]["policy"], "cfs@5.15");
    let also_elapsed = &also[0]["rows"][0]["metrics"][0];
    assert_eq!(also_elapsed["metric"], "elapsed_s");
    assert_eq!(also_elapsed["real"], v["rows"][0]["metrics"][0]["real"], "the same real runs");
    assert_eq!(also_elapsed["sim"].as_array().unwrap().len(), 2);
    assert!(also[0]["summary"].as_array().unwrap().iter().any(|s| s["metric"] == "elapsed_s"));
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 1);
    let m = &rows[0]["metrics"][0];
    assert_eq!(m["metric"], "elapsed_s");
    assert_eq!(m["real"].as_array().unwrap().len(), 2);
    assert_eq!(m["sim"].as_array().unwrap().len(), 2);
    assert!(m["real_median"].as_f64().unwrap() > 0.0);
    assert!(v["summary"].as_array().unwrap().iter().any(|s| s["metric"] == "context_switches"));
    let profiles = v["simulated"]["machine_profiles"].as_array().unwrap();
    assert!(profiles.len() == 1 && profiles[0].as_str().unwrap().contains("cache_line_ns"), "{profiles:?}");
    // The host's state is read around every real run; a shipped profile of another
    // machine is not one of its states, so every run is kept.
    if let Some(hs) = v["host_state"].as_object() {
        assert_eq!(hs["matched"], false, "{hs:?}");
        let runs = hs["real_runs"].as_array().unwrap();
        assert_eq!(runs.len(), 2);
        assert!(runs.iter().all(|r| r["before"]["cache_line_ns"].as_f64().unwrap() > 0.0
            && r["after"]["cache_line_ns"].as_f64().unwrap() > 0.0
            && r["elapsed_s"].as_f64().unwrap() > 0.0));
    }

    let o = schedlab(&[
        "validate",
        "--suite",
        suite.to_str().unwrap(),
        "--machine",
        "kvm-haswell",
        "--rows",
        "pipe-thread",
        "--runs",
        "1",
        "--sim-seeds",
        "2",
        "--format",
        "csv",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "row,workload,metric,side,run,value");
    assert_eq!(
        lines.len(),
        1 + 4 * (1 + 2),
        "four metrics (elapsed, switches, involuntary switches, migrations), one real run and two simulated:\n{out}"
    );
    assert!(out.contains(",involuntary_switches,real,1,"), "{out}");
    assert!(out.contains(",involuntary_switches,sim,2,") && !out.contains(",sim,3,"), "{out}");
}

#[test]
fn real_reads_the_host_state_around_each_run_when_asked() {
    let _one_at_a_time = serial();
    if !cfg!(target_os = "linux") {
        return;
    }
    let o = schedlab(&["real", "--workload", "pipe loops=200", "--runs", "2", "--host-state", "--format", "json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let runs: Vec<serde_json::Value> = serde_json::from_str(&stdout(&o)).expect("JSON");
    assert_eq!(runs.len(), 2);
    let two_cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) >= 2;
    for r in &runs {
        assert!(r["context_switches"].as_u64().unwrap() > 0, "{r}");
        for key in ["host_state_before", "host_state_after"] {
            // Read between two CPUs; with one allowed there is nothing to read.
            if two_cpus {
                assert!(r[key]["cache_line_ns"].as_f64().unwrap() > 0.0, "{key}: {r}");
            } else {
                assert!(r[key].is_null(), "{key}: {r}");
            }
        }
    }
    // Without the flag the runs carry no state.
    let o = schedlab(&["real", "--workload", "pipe loops=200", "--format", "json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(!stdout(&o).contains("host_state"));
}

#[test]
fn bad_input_is_one_line_and_exit_2_before_anything_runs() {
    let suite = tiny_suite();
    let bad_suite = tmp("bad.toml");
    std::fs::write(&bad_suite, "name = \"x\"\nrunz = 1\n[[rows]]\nname = \"a\"\nworkload = \"pipe\"\n").unwrap();
    let s = suite.to_str().unwrap();
    let cases: Vec<Vec<&str>> = vec![
        vec!["validate", "--suite", "no-such-suite"],
        vec!["validate", "--suite", bad_suite.to_str().unwrap()],
        vec!["validate", "--suite", s, "--runs", "0"],
        vec!["validate", "--suite", s, "--sim-seeds", "0"],
        vec!["validate", "--suite", s, "--rows", "nope"],
        vec!["validate", "--suite", s, "--cpus", "9999"],
        vec!["validate", "--suite", s, "--policy", "eevdf@7.0"],
        vec!["validate", "--suite", s, "--also-policy", "eevdf@6.18+NO_SUCH_FEATURE"],
        vec!["validate", "--suite", s, "--preempt", "sometimes"],
        vec!["validate", "--suite", s, "--machine", "nope"],
        vec!["validate", "--suite", s, "--trace", "/nonexistent/dir"],
        vec!["real", "--workload", "tbench clients=1"],
        vec!["real", "--workload", "pipe loops=x"],
        vec!["real", "--cpus", "a-b"],
        vec!["real", "--runs", "0"],
    ];
    for args in cases {
        let started = Instant::now();
        let o = schedlab(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert_eq!(stderr(&o).lines().count(), 1, "{args:?}: {}", stderr(&o));
        assert!(stdout(&o).is_empty(), "{args:?}");
        assert!(started.elapsed() < Duration::from_secs(5), "{args:?} ran something before refusing");
    }
}

#[test]
fn a_real_run_over_its_time_limit_leaves_no_process() {
    let _one_at_a_time = serial();
    if !cfg!(target_os = "linux") {
        return;
    }
    let marker = "loops=987654321";
    let o = schedlab(&["real", "--workload", &format!("pipe {marker} mode=process"), "--timeout-s", "1"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("exceeded 1 s"), "{}", stderr(&o));
    let left = (0..100)
        .map(|_| {
            std::thread::sleep(Duration::from_millis(10));
            processes_with(marker)
        })
        .find(|v| v.is_empty());
    assert!(left.is_some(), "left behind: {:?}", processes_with(marker));
}

#[test]
fn an_interrupted_real_run_leaves_no_process() {
    let _one_at_a_time = serial();
    if !cfg!(target_os = "linux") {
        return;
    }
    let marker = "loops=987654323";
    let mut child = Command::new(env!("CARGO_BIN_EXE_schedlab"))
        .args(["real", "--workload", &format!("hackbench groups=1 {marker} ipc=pipe"), "--timeout-s", "60"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Wait until the workers exist, then Ctrl-C the parent.
    let start = Instant::now();
    // (The launcher first spends about 7 s bringing its wake history down.)
    while processes_with(marker).len() < 10 && start.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(10));
    }
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(1));
    let gone = (0..200).any(|_| {
        std::thread::sleep(Duration::from_millis(10));
        processes_with(marker).is_empty()
    });
    assert!(gone, "left behind: {:?}", processes_with(marker));
}

/// The built-in hackbench against `perf bench sched messaging` (when perf is
/// installed): each tool's median elapsed time lies within the union of both
/// tools' min-max over five runs each.
#[test]
fn builtin_hackbench_agrees_with_perf_bench_messaging() {
    let _one_at_a_time = serial();
    let perf_ok = Command::new("perf").args(["bench", "sched", "messaging", "-p", "-g", "1", "-l", "1"]).output();
    if !matches!(&perf_ok, Ok(o) if o.status.success()) {
        eprintln!("perf bench not available: skipped");
        return;
    }
    let runs = 5;
    let mut ours = Vec::new();
    let mut perfs = Vec::new();
    for _ in 0..runs {
        let o = schedlab(&["real", "--workload", "hackbench groups=1 loops=500 ipc=pipe mode=process", "--format", "json"]);
        assert!(o.status.success(), "{}", stderr(&o));
        let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
        ours.push(v[0]["elapsed_ns"].as_f64().unwrap() / 1e9);
        let mut cmd = Command::new("perf");
        cmd.args(["bench", "sched", "messaging", "-p", "-g", "1", "-l", "500"]);
        use std::os::unix::process::CommandExt;
        // SAFETY: setsid between fork and exec, as schedlab's real runs start.
        unsafe {
            cmd.pre_exec(|| {
                libc::setsid();
                Ok(())
            })
        };
        let o = cmd.output().unwrap();
        let out = stdout(&o);
        let t = out
            .lines()
            .find_map(|l| l.trim().strip_prefix("Total time:"))
            .and_then(|s| s.split_whitespace().next()?.parse::<f64>().ok())
            .unwrap_or_else(|| panic!("no Total time in {out}"));
        perfs.push(t);
    }
    let med = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let lo = ours.iter().chain(&perfs).copied().fold(f64::INFINITY, f64::min);
    let hi = ours.iter().chain(&perfs).copied().fold(0.0, f64::max);
    let (mo, mp) = (med(&mut ours), med(&mut perfs));
    assert!(mo >= lo && mo <= hi && mp >= lo && mp <= hi, "ours {ours:?} perf {perfs:?}");
    // Both must be in the same range in the first place: within a factor of 2.
    assert!(mo / mp < 2.0 && mp / mo < 2.0, "medians {mo} vs {mp}: ours {ours:?} perf {perfs:?}");
}

/// A user the kernel does not let count (perf_event_paranoid >= 2, not root):
/// validate refuses at once with one line and exit 2, while `real` falls back to
/// getrusage. Needs root and setpriv to become that user; skipped otherwise.
#[test]
fn without_counter_permission_validate_refuses_and_real_falls_back() {
    let paranoid: i32 =
        std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid").ok().and_then(|s| s.trim().parse().ok()).unwrap_or(-1);
    let root = effective_uid_is_root();
    let setpriv = Command::new("setpriv").arg("--help").output().is_ok_and(|o| o.status.success());
    if !(root && setpriv && paranoid >= 2) {
        eprintln!("needs root, setpriv and perf_event_paranoid >= 2: skipped");
        return;
    }
    // The binary must be reachable by the unprivileged user: copy it to a temp dir.
    let dir = std::env::temp_dir().join(format!("schedlab-nobody-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let exe = dir.join("schedlab");
    std::fs::copy(env!("CARGO_BIN_EXE_schedlab"), &exe).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let as_nobody = |args: &[&str]| {
        Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(&exe)
            .args(args)
            .current_dir(&dir)
            .output()
            .unwrap()
    };
    let o = as_nobody(&["validate", "--suite", "host-quick", "--machine", "kvm-haswell"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert_eq!(stderr(&o).lines().count(), 1, "{}", stderr(&o));
    assert!(stderr(&o).contains("perf_event_open"), "{}", stderr(&o));
    let o = as_nobody(&["real", "--workload", "pipe loops=500"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("getrusage"), "{}", stdout(&o));
    let _ = std::fs::remove_dir_all(&dir);
}
