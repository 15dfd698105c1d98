//! 4bsd through the engine: a hackbench-like run on 4 CPUs with every invariant
//! checked, determinism, the sleep-priority boost behind a CPU hog, fair sharing
//! among hogs across schedcpu()/loadav() passes, and forward_wakeup() waking idle CPUs.
//! (schedlab-workloads is not a dependency of this crate, so the workloads are
//! written here as small programs.)

use schedlab_core::cost::MachineProfile;
use schedlab_core::program::{ChanId, ForkKind, Op, OpResult, Program, Script};
use schedlab_core::rng::SimRng;
use schedlab_core::{Engine, RunConfig, RunResult, Topology, MARK_END, MARK_START};
use schedlab_policies::bsd4::Bsd4;

fn unit_profile() -> MachineProfile {
    MachineProfile::round_numbers()
}

fn sysctls(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

fn run(topo: &str, sysctl: &[(&str, &str)], seed: u64, main: Box<dyn Program>) -> RunResult {
    let policy = Box::new(Bsd4::new(&sysctls(sysctl)).unwrap());
    let cfg = RunConfig { seed, check: true, hz: 1000, ..RunConfig::default() };
    let r = Engine::new(Topology::parse(topo).unwrap(), unit_profile(), policy, cfg, "main", main).run();
    assert!(r.violations.is_empty(), "{:#?}", r.violations);
    assert!(!r.timed_out);
    r
}

/// hackbench in miniature: `groups` groups of `fds` senders and `fds` receivers on
/// socket pairs; each sender writes `loops` rounds of one `datasize`-byte message to
/// every receiver of its group; each receiver reads them all.
struct MiniHackbench {
    groups: usize,
    fds: usize,
    loops: u64,
    datasize: u64,
    chans: Vec<ChanId>,
    forked: usize,
    reaped: usize,
    marked: bool,
}

impl MiniHackbench {
    fn new(groups: usize, fds: usize, loops: u64, datasize: u64) -> MiniHackbench {
        MiniHackbench { groups, fds, loops, datasize, chans: Vec::new(), forked: 0, reaped: 0, marked: false }
    }
}

struct Receiver {
    chan: ChanId,
    left: u64,
    datasize: u64,
}

impl Program for Receiver {
    fn next(&mut self, last: OpResult, _rng: &mut SimRng) -> Op {
        if let OpResult::Bytes(n) = last {
            self.left -= n.min(self.left);
        }
        if self.left == 0 {
            return Op::Exit;
        }
        Op::Read { chan: self.chan, bytes: self.datasize.min(self.left) }
    }
}

struct Sender {
    chans: Vec<ChanId>,
    loops: u64,
    datasize: u64,
    sent: u64,
}

impl Program for Sender {
    fn next(&mut self, _last: OpResult, _rng: &mut SimRng) -> Op {
        let n = self.chans.len() as u64;
        if self.sent == self.loops * n {
            return Op::Exit;
        }
        let chan = self.chans[(self.sent % n) as usize];
        self.sent += 1;
        Op::Write { chan, bytes: self.datasize }
    }
}

impl Program for MiniHackbench {
    fn next(&mut self, last: OpResult, _rng: &mut SimRng) -> Op {
        let receivers = self.groups * self.fds;
        if let OpResult::Chan(c) = last {
            self.chans.push(c);
        }
        if self.chans.len() < receivers {
            return Op::SocketPair;
        }
        if !self.marked {
            self.marked = true;
            return Op::Mark { label: MARK_START };
        }
        if self.forked < 2 * receivers {
            let i = self.forked;
            self.forked += 1;
            let (group, k) = (i / (2 * self.fds), i % (2 * self.fds));
            let group_chans = self.chans[group * self.fds..(group + 1) * self.fds].to_vec();
            let program: Box<dyn Program> = if k < self.fds {
                let left = self.fds as u64 * self.loops * self.datasize;
                Box::new(Receiver { chan: group_chans[k], left, datasize: self.datasize })
            } else {
                Box::new(Sender { chans: group_chans, loops: self.loops, datasize: self.datasize, sent: 0 })
            };
            return Op::Fork { kind: ForkKind::Process, comm: None, program };
        }
        if self.reaped < 2 * receivers {
            self.reaped += 1;
            return Op::WaitChild;
        }
        if self.reaped == 2 * receivers {
            self.reaped += 1;
            return Op::Mark { label: MARK_END };
        }
        Op::Exit
    }
}

#[test]
fn bsd4_hackbench_like_run_on_4_cpus_is_clean() {
    let r = run("1x1x4x1", &[], 3, Box::new(MiniHackbench::new(2, 5, 40, 100)));
    // 2 groups × 10 workers + main, all reaped.
    assert_eq!(r.tasks.len(), 21);
    for (cpu, s) in r.cpu_stats.iter().enumerate() {
        assert!(s.run_ns > 0, "cpu{cpu} never ran a task");
    }
    let t = r.total();
    assert!(t.ttwu_count >= 20, "{} wakeups", t.ttwu_count);
    // Every sched_lock acquisition is an interrupts-off section of 50 ns.
    for site in ["sched_add", "sched_switch"] {
        assert!(r.irq_off.by_site.contains_key(site), "no {site} section: {:?}", r.irq_off.by_site.keys());
    }
    assert_eq!(r.irq_off.total_ns % 50, 0);
    assert!(r.irq_off.total_ns >= 50 * t.ttwu_count);
}

#[test]
fn bsd4_same_seed_same_digest() {
    let a = run("1x1x4x1", &[], 11, Box::new(MiniHackbench::new(2, 4, 30, 100)));
    let b = run("1x1x4x1", &[], 11, Box::new(MiniHackbench::new(2, 4, 30, 100)));
    assert_eq!(a.digest, b.digest);
    assert_eq!(a.events, b.events);
    assert_eq!(a.elapsed_ns(), b.elapsed_ns());
    assert_eq!(a.irq_off.total_ns, b.irq_off.total_ns);
}

/// main forks `children`, then reaps them.
fn fork_and_wait(children: Vec<Box<dyn Program>>) -> Box<dyn Program> {
    let n = children.len();
    let mut children = children.into_iter();
    let mut reaped = 0;
    let mut step = 0;
    Box::new(schedlab_core::program::FnProgram::new(move |_s, _last: OpResult, _rng: &mut SimRng| {
        step += 1;
        if step == 1 {
            return Op::Mark { label: MARK_START };
        }
        if let Some(program) = children.next() {
            return Op::Fork { kind: ForkKind::Process, comm: None, program };
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
fn bsd4_sleeper_waits_little_behind_a_cpu_hog() {
    // One CPU: a hog computes 1.5 s; a sleeper sleeps 5 ms and runs 200 µs, 200
    // times. The woken sleeper carries its sleep priority (104), better than the
    // hog's (140 or worse): maybe_resched() sets NEEDRESCHED on the hog, taken at the
    // next hz tick, so the sleeper waits under 1 ms, not a 94 ms slice.
    let hog: Box<dyn Program> = Box::new(Script::new(vec![Op::Compute { ns: 1_500_000_000 }]));
    let mut ops = Vec::new();
    for _ in 0..200 {
        ops.push(Op::Sleep { ns: 5_000_000 });
        ops.push(Op::Compute { ns: 200_000 });
    }
    let sleeper: Box<dyn Program> = Box::new(Script::new(ops));
    let r = run("1x1x1x1", &[], 5, fork_and_wait(vec![hog, sleeper]));
    let hog_t = &r.tasks[1];
    let sleeper_t = &r.tasks[2];
    assert!(sleeper_t.switches >= 200);
    let mean_wait_ns = sleeper_t.wait_ns / sleeper_t.switches;
    assert!(mean_wait_ns < 1_100_000, "sleeper waits {mean_wait_ns} ns on average");
    // The hog still gets the CPU whenever the sleeper sleeps: the run ends within
    // 50 ms of the two tasks' work.
    assert!(hog_t.run_ns >= 1_500_000_000);
    assert!(r.elapsed_ns() < 1_500_000_000 + 200 * 200_000 + 50_000_000, "elapsed {}", r.elapsed_ns());
}

#[test]
fn bsd4_hogs_share_two_cpus_fairly_across_schedcpu_passes() {
    // Three hogs of 4 s each on two CPUs: 6 s of work per CPU, so schedcpu() runs
    // about 6 times and loadav() once. The global queue keeps both CPUs busy, and
    // the estcpu-driven round robin gives each hog about the same waiting time.
    let hogs: Vec<Box<dyn Program>> =
        (0..3).map(|_| Box::new(Script::new(vec![Op::Compute { ns: 4_000_000_000 }])) as Box<dyn Program>).collect();
    let r = run("1x1x2x1", &[], 7, fork_and_wait(hogs));
    // Work conserving: 12 s of work on 2 CPUs, plus overheads and the last slices.
    assert!(r.elapsed_ns() >= 6_000_000_000);
    assert!(r.elapsed_ns() < 6_300_000_000, "elapsed {}", r.elapsed_ns());
    let waits: Vec<u64> = r.tasks[1..4].iter().map(|t| t.wait_ns).collect();
    let (lo, hi) = (*waits.iter().min().unwrap(), *waits.iter().max().unwrap());
    assert!(hi < lo + lo / 2, "waits {waits:?}");
    assert!(r.irq_off.by_site.contains_key("sched_clock"));
    assert!(r.irq_off.by_site.contains_key("schedcpu"));
}

#[test]
fn bsd4_forward_wakeup_wakes_every_idle_cpu() {
    // On 4 CPUs main (on CPU 0) forks a 10 ms child while it computes 10 ms itself.
    // forward_wakeup() wakes CPUs 1, 2 and 3: one of them (drawn) runs the child,
    // the other two find nothing and idle again. With kern.sched.ipiwakeup.enabled=0 the child waits
    // in the global queue until main blocks.
    let prog = || -> Box<dyn Program> {
        let child: Box<dyn Program> = Box::new(Script::new(vec![Op::Compute { ns: 10_000_000 }]));
        Box::new(Script::new(vec![
            Op::Mark { label: MARK_START },
            Op::Fork { kind: ForkKind::Process, comm: None, program: child },
            Op::Compute { ns: 10_000_000 },
            Op::WaitChild,
            Op::Mark { label: MARK_END },
        ]))
    };
    let on = run("1x1x4x1", &[], 1, prog());
    assert!(on.elapsed_ns() < 11_000_000, "elapsed {}", on.elapsed_ns());
    for cpu in 1..4 {
        assert!(on.cpu_stats[cpu].sched_count >= 1, "cpu{cpu} was not woken");
    }
    let ran_child = (1..4).filter(|&c| on.cpu_stats[c].run_ns > 0).count();
    let idled_again = (1..4).filter(|&c| on.cpu_stats[c].run_ns == 0 && on.cpu_stats[c].sched_goidle >= 1).count();
    assert_eq!((ran_child, idled_again), (1, 2));
    let off = run("1x1x4x1", &[("kern.sched.ipiwakeup.enabled", "0")], 1, prog());
    assert!(off.elapsed_ns() > 20_000_000, "elapsed {}", off.elapsed_ns());
    for cpu in 1..4 {
        assert_eq!(off.cpu_stats[cpu].run_ns, 0, "cpu{cpu} ran without being woken");
    }
}

#[test]
fn bsd4_slice_sysctls_change_round_robin() {
    // Two hogs on one CPU: the shorter the slice, the more switches.
    let hogs = || {
        fork_and_wait((0..2).map(|_| Box::new(Script::new(vec![Op::Compute { ns: 500_000_000 }])) as Box<dyn Program>).collect())
    };
    let default = run("1x1x1x1", &[], 2, hogs());
    let short = run("1x1x1x1", &[("kern.sched.slice", "2")], 2, hogs());
    let quantum = run("1x1x1x1", &[("kern.sched.quantum", "15748")], 2, hogs());
    let sw = |r: &RunResult| r.tasks[1].switches + r.tasks[2].switches;
    // 1 s of work in ~94.5 ms slices: about 11 switches, plus the one-tick first
    // slices of forked children; in 2-tick (15.7 ms) slices about 64.
    assert!((8..=16).contains(&sw(&default)), "{}", sw(&default));
    assert!(sw(&short) > 50, "{}", sw(&short));
    assert_eq!(sw(&short), sw(&quantum), "15748 µs rounds to 2 stat ticks");
}

#[test]
fn bsd4_invariants_hold_across_topologies_and_seeds() {
    // Mixed load: a hackbench-like group exchange beside sleepers and a hog, on one
    // CPU up to two nodes of 16 CPUs; the engine checks every invariant as it goes.
    for topo in ["1x1x1x1", "1x1x2x2", "2x2x4x2"] {
        for seed in 1..4 {
            let mut children: Vec<Box<dyn Program>> = vec![Box::new(MiniHackbench::new(2, 3, 20, 64))];
            children.push(Box::new(Script::new(vec![Op::Compute { ns: 30_000_000 }])));
            for k in 0..3u64 {
                let mut ops = Vec::new();
                for _ in 0..20 {
                    ops.push(Op::Sleep { ns: 700_000 + 300_000 * k });
                    ops.push(Op::Compute { ns: 150_000 });
                }
                children.push(Box::new(Script::new(ops)));
            }
            let r = run(topo, &[], seed, fork_and_wait(children));
            assert!(r.tasks.len() >= 17, "{topo} seed {seed}");
        }
    }
}

#[test]
fn bsd4_long_idle_gap_is_caught_up() {
    // Every CPU idles for 8 s: the schedcpu() and loadav() passes due meanwhile run at
    // the next tick, uncharged; only the passes made on time cost interrupts-off time.
    let main =
        Script::new(vec![Op::Compute { ns: 1_200_000_000 }, Op::Sleep { ns: 8_000_000_000 }, Op::Compute { ns: 1_200_000_000 }]);
    let r = run("1x1x2x1", &[], 4, Box::new(main));
    assert!(r.elapsed_ns() >= 10_400_000_000);
    // One live task: one schedcpu section per on-time pass, about 2 of the 10.
    let passes = r.irq_off.by_site.get("schedcpu").map_or(0, |h| h.len());
    assert!((1..=3).contains(&passes), "{passes} schedcpu sections");
}
