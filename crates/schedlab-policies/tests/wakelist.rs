//! The wake list of an idle CPU (kernel/sched/core.c `ttwu_queue_wakelist()`,
//! v6.0+): a task woken onto another, idle CPU of the LLC is enqueued there when
//! that CPU handles the IPI, so it does not wait on a runqueue through the IPI's
//! flight and the idle exit; before v6.0 the waker enqueued it on the idle CPU's
//! runqueue at once. A pipe ping-pong whose two tasks sit on two CPUs shows it in
//! their wait (runnable, not running) per switch-in.

use schedlab_core::cost::MachineProfile;
use schedlab_core::program::{ChanId, ForkKind, Op, OpResult, Program};
use schedlab_core::rng::SimRng;
use schedlab_core::{Engine, RunConfig, RunResult, Topology};

const LOOPS: u64 = 300;

/// Parent: two pipes, a child, then write p1 / read p2, LOOPS times.
struct Ping {
    pipes: Vec<ChanId>,
    forked: bool,
    done: u64,
    wrote: bool,
    reaped: bool,
}

/// Child: read p1 / write p2, LOOPS times.
struct Pong {
    p1: ChanId,
    p2: ChanId,
    done: u64,
    read: bool,
}

impl Program for Ping {
    fn next(&mut self, last: OpResult, _rng: &mut SimRng) -> Op {
        if let OpResult::Chan(c) = last {
            self.pipes.push(c);
        }
        if self.pipes.len() < 2 {
            return Op::Pipe;
        }
        if !self.forked {
            self.forked = true;
            let program = Box::new(Pong { p1: self.pipes[0], p2: self.pipes[1], done: 0, read: false });
            return Op::Fork { kind: ForkKind::Process, comm: Some("pong".into()), program };
        }
        if self.done < LOOPS {
            if !self.wrote {
                self.wrote = true;
                return Op::Write { chan: self.pipes[0], bytes: 8 };
            }
            self.wrote = false;
            self.done += 1;
            return Op::Read { chan: self.pipes[1], bytes: 8 };
        }
        if !self.reaped {
            self.reaped = true;
            return Op::WaitChild;
        }
        Op::Exit
    }
}

impl Program for Pong {
    fn next(&mut self, _last: OpResult, _rng: &mut SimRng) -> Op {
        if self.done == LOOPS {
            return Op::Exit;
        }
        if !self.read {
            self.read = true;
            return Op::Read { chan: self.p1, bytes: 8 };
        }
        self.read = false;
        self.done += 1;
        Op::Write { chan: self.p2, bytes: 8 }
    }
}

fn run(policy: &str) -> RunResult {
    let mut profile = MachineProfile::round_numbers();
    // Halting idle CPUs, so every wakeup onto one is an IPI and an idle exit.
    profile.idle_polls = false;
    let policy = schedlab_policies::policy_by_name(policy, &[]).unwrap();
    let cfg = RunConfig { seed: 1, check: true, hz: 250, ..RunConfig::default() };
    let main = Box::new(Ping { pipes: Vec::new(), forked: false, done: 0, wrote: false, reaped: false });
    let r = Engine::new(Topology::parse("1x1x2x1").unwrap(), profile, policy, cfg, "ping", main).run();
    assert!(r.violations.is_empty(), "{:#?}", r.violations);
    assert!(!r.timed_out);
    r
}

/// The pong task's wait per switch-in, ns.
fn pong_wait_per_switch(r: &RunResult) -> u64 {
    let t = r.tasks.iter().find(|t| t.comm == "pong").expect("pong ran");
    assert!(t.switches >= LOOPS, "{} switches", t.switches);
    t.wait_ns / t.switches
}

#[test]
fn a_wakeup_onto_an_idle_cpu_is_enqueued_when_that_cpu_handles_the_ipi() {
    let profile = MachineProfile::round_numbers();
    // The IPI's flight and the exit: what a task enqueued by its waker waits.
    let flight_and_exit = profile.ipi_latency_ns + profile.idle_exit_ns;
    let before = run("cfs@5.15");
    let after = run("eevdf@6.18");
    let (w_before, w_after) = (pong_wait_per_switch(&before), pong_wait_per_switch(&after));
    // The pair alternates across the two CPUs: most switch-ins follow a wakeup
    // onto the idle one.
    assert!(w_before >= flight_and_exit / 2, "v5.15: {w_before} ns of wait per switch-in");
    assert!(w_after < flight_and_exit / 4, "v6.18: {w_after} ns of wait per switch-in");
}
