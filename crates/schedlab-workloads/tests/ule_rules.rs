//! ule@pre and ule@post in small scenarios: idle stealing, the switch-out steal of
//! D12130, the restart of a stale search, the periodic balancer, and the
//! interrupts-disabled sections the change set out to shorten.

mod common;

use schedlab_core::program::{FnProgram, ForkKind, Op, OpResult};
use schedlab_core::{Engine, MachineProfile, RunConfig, RunResult, Topology, MARK_END, MARK_START};
use schedlab_workloads::Workload;

fn zen1() -> MachineProfile {
    MachineProfile::from_toml(include_str!("../../../machines/zen1.toml"), "zen1").unwrap()
}

fn sysctls(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

fn run_program(topo: &str, policy: &str, sysctl: &[(&str, &str)], main: Box<dyn schedlab_core::program::Program>) -> RunResult {
    let policy = schedlab_policies::policy_by_name(policy, &sysctls(sysctl)).unwrap();
    let cfg = RunConfig { seed: 3, check: true, hz: 1000, ..RunConfig::default() };
    let r = Engine::new(Topology::parse(topo).unwrap(), zen1(), policy, cfg, "main", main).run();
    assert!(r.violations.is_empty(), "{:#?}", r.violations);
    r
}

fn run_workload(policy: &str, sysctl: &[(&str, &str)], workload: &str, seed: u64) -> RunResult {
    let w = Workload::parse(workload).unwrap();
    let p = schedlab_policies::policy_by_name(policy, &sysctls(sysctl)).unwrap();
    let cfg = RunConfig { seed, check: true, hz: 1000, ..RunConfig::default() };
    let r = Engine::new(Topology::parse("1x2x4x2").unwrap(), zen1(), p, cfg, w.main_comm(), w.main_program()).run();
    assert!(r.violations.is_empty(), "{:#?}", r.violations);
    r
}

/// `n` workers forked by main, each repeating `rounds` times: compute `run_ns`, sleep `sleep_ns`.
fn workers(
    n: u32,
    rounds: u64,
    run_ns: u64,
    sleep_ns: u64,
) -> Box<FnProgram<impl FnMut(u64, OpResult, &mut schedlab_core::rng::SimRng) -> Op>> {
    let mut forked = 0;
    let mut reaped = 0;
    Box::new(FnProgram::new(move |step, _last, _rng: &mut _| {
        if step == 0 {
            return Op::Mark { label: MARK_START };
        }
        if forked < n {
            forked += 1;
            let w = FnProgram::new(move |s, _l: OpResult, _r: &mut _| match s {
                s if s >= 2 * rounds => Op::Exit,
                s if s % 2 == 0 => Op::Compute { ns: run_ns },
                _ => Op::Sleep { ns: sleep_ns },
            });
            return Op::Fork { kind: ForkKind::Process, comm: Some("worker".into()), program: Box::new(w) };
        }
        if reaped < n {
            reaped += 1;
            return Op::WaitChild;
        }
        if reaped == n {
            reaped += 1;
            return Op::Mark { label: MARK_END };
        }
        Op::Exit
    }))
}

#[test]
fn idle_cpu_steals_from_a_cpu_with_a_queued_thread() {
    // Three threads on two CPUs: whenever one sleeps, its CPU has nothing while the
    // other CPU has one running and one queued (load 2 = steal_thresh).
    for policy in ["ule@pre", "ule@post"] {
        let r = run_program("1x1x2x1", policy, &[], workers(3, 40, 3_000_000, 100_000));
        assert!(r.total().steals > 0, "{policy}: an idle CPU steals");
        // 3 x 40 x 3 ms on 2 CPUs: at least 180 ms, and stealing keeps both busy.
        assert!(r.elapsed_ns() >= 180_000_000);
        assert!(r.busy_pct() > 80.0, "{policy}: busy {:.1}%", r.busy_pct());
    }
    let off = run_program(
        "1x1x2x1",
        "ule@post",
        &[("kern.sched.steal_idle", "0"), ("kern.sched.trysteal_limit", "0")],
        workers(3, 40, 3_000_000, 100_000),
    );
    assert_eq!(off.total().steals, 0, "no stealing with steal_idle=0 and trysteal_limit=0");
}

#[test]
fn post_steals_at_switch_out_and_pre_never_does() {
    let work = || workers(3, 40, 3_000_000, 100_000);
    let pre = run_program("1x1x2x1", "ule@pre", &[], work());
    let post = run_program("1x1x2x1", "ule@post", &[], work());
    let post_off = run_program("1x1x2x1", "ule@post", &[("kern.sched.trysteal_limit", "0")], work());
    assert_eq!(pre.total().switch_steals, 0, "tdq_trysteal() does not exist before D12130");
    assert!(post.total().switch_steals > 0, "the blocking thread's CPU steals before idling");
    assert_eq!(post_off.total().switch_steals, 0, "trysteal_limit=0 disables it");
    assert!(post_off.total().steals > 0, "the idle thread still steals");
    // A switch-out steal saves the switch to the idle thread and back.
    assert!(post.total().sched_ns < post_off.total().sched_ns);
}

#[test]
fn post_restarts_a_search_whose_victim_went_stale_and_pre_never_does() {
    // Hackbench's short sleeps on 16 CPUs with the switch-out steal off, so idle
    // threads do the stealing: a victim often runs its queued thread itself while
    // a post-D12130 search, with interrupts enabled, is still on its way to lock it.
    let pre = run_workload("ule@pre", &[], "hackbench groups=1 loops=400 ipc=pipe mode=process", 1);
    let post =
        run_workload("ule@post", &[("kern.sched.trysteal_limit", "0")], "hackbench groups=1 loops=400 ipc=pipe mode=process", 1);
    assert_eq!(pre.total().steal_restarts, 0);
    assert!(post.total().steal_restarts > 0, "stale victims restart the search");
    assert!(post.total().steals > 0 && pre.total().steals > 0);
}

#[test]
fn balancer_moves_one_thread_per_pass_from_the_busier_cpu() {
    // Three CPU hogs on two CPUs with idle stealing off: only sched_balance() moves
    // threads, one per pass, from the CPU with two to the CPU with one.
    let hogs = || workers(3, 1, 4_000_000_000, 0);
    let on = run_program("1x1x2x1", "ule@post", &[("kern.sched.steal_idle", "0"), ("kern.sched.trysteal_limit", "0")], hogs());
    let off = run_program(
        "1x1x2x1",
        "ule@post",
        &[("kern.sched.steal_idle", "0"), ("kern.sched.trysteal_limit", "0"), ("kern.sched.balance", "0")],
        hogs(),
    );
    let passes = on.cpu_stats[0].lb_count;
    let moved = on.total().lb_gained;
    // About one pass a second (0.5-1.5 s apart) over ~6 s of hogs.
    assert!((3..=14).contains(&passes), "passes {passes}");
    assert!(moved >= 1 && moved <= passes, "moved {moved} in {passes} passes");
    assert_eq!(off.total().lb_gained, 0);
}

#[test]
fn pre_masks_interrupts_for_the_whole_idle_search_post_only_for_the_move() {
    let hb = "hackbench groups=1 loops=400 ipc=pipe mode=process";
    let (pre, post) = (run_workload("ule@pre", &[], hb, 2), run_workload("ule@post", &[], hb, 2));
    let idled = |r: &RunResult| r.irq_off.by_site.get("tdq_idled").map(|h| (h.max(), h.value_at_quantile(0.99), h.len()));
    let (pre_max, pre_p99, pre_n) = idled(&pre).expect("pre searches with interrupts off");
    let (post_max, post_p99, _) = idled(&post).unwrap_or((0, 0, 0));
    eprintln!("tdq_idled irq-off: pre max {pre_max} p99 {pre_p99} n {pre_n}; post max {post_max} p99 {post_p99}");
    // A full pre search walks 2 + 8 + 16 CPUs of the tree (half of them across the
    // Infinity Fabric); post masks only a lock pair and one tdq_move(). On zen1
    // that is ~0.9 us against ~0.2 us.
    assert!(pre_max >= 3 * post_max.max(1), "pre max {pre_max} ns, post max {post_max} ns");
    assert!(pre_p99 >= 3 * post_p99.max(1), "pre p99 {pre_p99} ns, post p99 {post_p99} ns");
    // The switch-out steal is bounded to the CPU's CCX.
    let trysteal_max = post.irq_off.by_site["tdq_trysteal"].max();
    assert!(trysteal_max < pre_max, "trysteal {trysteal_max} ns");
}

#[test]
fn bad_ule_names_and_sysctls_are_refused() {
    let err =
        |name: &str, s: &[(&str, &str)]| schedlab_policies::policy_by_name(name, &sysctls(s)).err().expect("refused").to_string();
    assert!(err("ule@13.0", &[]).contains("ule@pre or ule@post"));
    assert!(err("ule@post+STEAL", &[]).contains("no +FEATURE"));
    assert!(err("ule@pre", &[("kern.sched.trysteal_limit", "2")]).contains("kern.sched.steal_thresh"));
    assert!(err("ule@post", &[("kern.sched.steal_thresh", "x")]).contains("an integer"));
}

/// The ule-steal experiment at 5% of its build: the directions of its targets.
/// Post is as fast as pre, 4BSD slower than both (it packs jobs onto SMT siblings
/// and moves them between CPUs), and post's idle steal masks interrupts for a
/// fraction of pre's time.
#[test]
fn ule_steal_reduced_scale_directions() {
    let spec = "make jobs=16 scale=0.05";
    let runs = |policy: &str| -> Vec<RunResult> {
        (1..=3)
            .map(|seed| {
                let w = Workload::parse(spec).unwrap();
                let p = schedlab_policies::policy_by_name(policy, &[]).unwrap();
                let cfg = RunConfig { seed, check: true, hz: 1000, ..RunConfig::default() };
                let r =
                    Engine::new(Topology::parse("ryzen-1700").unwrap(), zen1(), p, cfg, w.main_comm(), w.main_program()).run();
                assert!(r.violations.is_empty() && !r.timed_out, "{policy}: {:#?}", r.violations);
                r
            })
            .collect()
    };
    let mean_s = |rs: &[RunResult]| rs.iter().map(|r| r.elapsed_ns() as f64 / 1e9).sum::<f64>() / rs.len() as f64;
    let (pre, post, bsd) = (runs("ule@pre"), runs("ule@post"), runs("4bsd"));
    let (t_pre, t_post, t_bsd) = (mean_s(&pre), mean_s(&post), mean_s(&bsd));
    eprintln!("real s: pre {t_pre:.3} post {t_post:.3} 4bsd {t_bsd:.3}");
    assert!((t_post / t_pre - 1.0).abs() < 0.02, "post {t_post} vs pre {t_pre}");
    assert!(t_bsd > t_pre * 1.005 && t_bsd > t_post * 1.005, "4bsd {t_bsd} vs ULE {t_pre} / {t_post}");
    let idled_max =
        |rs: &[RunResult]| rs.iter().filter_map(|r| r.irq_off.by_site.get("tdq_idled")).map(|h| h.max()).max().unwrap_or(0);
    let (m_pre, m_post) = (idled_max(&pre), idled_max(&post));
    assert!(m_pre >= 3 * m_post.max(1), "tdq_idled max: pre {m_pre} ns, post {m_post} ns");
}

#[test]
fn an_exit_is_not_a_switch_out_steal() {
    // The parent computes while its children, CPU hogs that never sleep, run and
    // exit; nothing ever blocks. An exit goes through sched_throw(), which neither
    // counts a switch nor calls tdq_trysteal(), so post-D12130 never steals at
    // switch-out here; with idle stealing and the balancer off, nothing moves.
    let main = || {
        Box::new(FnProgram::new(move |step, _last: OpResult, _rng: &mut _| match step {
            0 => Op::Mark { label: MARK_START },
            1..=4 => {
                let ns = if step == 1 { 2_000_000 } else { 40_000_000 };
                let w = FnProgram::new(move |s, _l: OpResult, _r: &mut _| if s == 0 { Op::Compute { ns } } else { Op::Exit });
                Op::Fork { kind: ForkKind::Process, comm: Some("hog".into()), program: Box::new(w) }
            }
            5 => Op::Compute { ns: 200_000_000 },
            6 => Op::Mark { label: MARK_END },
            _ => Op::Exit,
        }))
    };
    let off = [("kern.sched.steal_idle", "0"), ("kern.sched.balance", "0")];
    let post = run_program("1x1x3x1", "ule@post", &off, main());
    assert_eq!(post.total().switch_steals, 0, "no tdq_trysteal() at an exit");
}
