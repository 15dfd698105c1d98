//! The launcher real runs start from (`schedlab real --launcher-halvings N`,
//! schedlab-host's `launcher`): a command's exit status and output come back,
//! and a run over its time limit is killed with its whole session. (That the
//! launcher's wake_wide() count reaches zero can only be read from the kernel:
//! tools/host-wake-affine/README.md.)

use std::time::Duration;

use schedlab_host::launcher::QuietLauncher;
use schedlab_host::run::Outcome;

fn launcher(halvings: u32) -> QuietLauncher {
    let argv = [env!("CARGO_BIN_EXE_schedlab"), "real", "--launcher-halvings", &halvings.to_string()];
    QuietLauncher::start(&argv.map(String::from)).expect("the launcher starts")
}

fn sh(script: &str) -> Vec<String> {
    vec!["/bin/sh".into(), "-c".into(), script.into()]
}

fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| !s.contains(") Z "))
}

#[test]
fn a_run_gives_back_its_status_and_output_in_a_session_of_its_own() {
    if !cfg!(target_os = "linux") {
        return;
    }
    let mut l = launcher(1);
    // The shell prints its own pid and session id, then leaves with 3.
    let (outcome, out) = l.run(&sh("echo $$ $(cut -d' ' -f6 /proc/$$/stat); exit 3"), Duration::from_secs(10)).unwrap();
    match outcome {
        Outcome::Exited(s) => assert_eq!(s.code(), Some(3)),
        o => panic!("{o:?}"),
    }
    let ids: Vec<&str> = out.split_whitespace().collect();
    assert_eq!(ids.len(), 2, "{out:?}");
    assert_eq!(ids[0], ids[1], "the run leads its own session: {out:?}");
    // The launcher serves the next request the same way.
    let (outcome, out) = l.run(&sh("echo again"), Duration::from_secs(10)).unwrap();
    assert!(matches!(outcome, Outcome::Exited(s) if s.success()), "{outcome:?}");
    assert_eq!(out, "again\n");
}

#[test]
fn a_run_over_its_time_limit_is_killed_with_everything_it_started() {
    if !cfg!(target_os = "linux") {
        return;
    }
    let mut l = launcher(0);
    let (outcome, out) = l.run(&sh("sleep 600 & echo $!; sleep 600"), Duration::from_millis(300)).unwrap();
    assert!(matches!(outcome, Outcome::TimedOut), "{outcome:?}");
    let background: i32 = out.trim().parse().expect("the background sleeper's pid");
    let gone = (0..200).any(|_| {
        std::thread::sleep(Duration::from_millis(10));
        !alive(background)
    });
    assert!(gone, "the background sleeper {background} outlived its session");
}
