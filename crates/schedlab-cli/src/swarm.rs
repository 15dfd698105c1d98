//! `schedlab swarm`: random scenarios run with every invariant checked, as a
//! simulation-testing swarm does (TigerBeetle's VOPR, FoundationDB's simulation):
//! each scenario (topology, machine, policy and switches, preemption model, HZ,
//! autogroup, workload and seed) is drawn from the swarm seed and its index, so a
//! whole swarm, or one failing scenario, reruns from one number. A failure is
//! printed with the `schedlab run ... --check` command that reproduces it.

use std::time::Instant;

use schedlab_core::rng::{SimRng, Stream};
use schedlab_core::sched::PreemptModel;
use schedlab_core::RunConfig;
use schedlab_workloads::Workload;

use schedlab_spec::run::{check_preempt_for, check_result, parse_topology};
use schedlab_spec::{Failure, RunSpec};

/// Most scenarios one swarm may run.
pub const MAX_SCENARIOS: u64 = 100_000_000;

/// Policies and switch sets a scenario draws from: every modelled scheduler, and
/// the seeds' and EEVDF's switches.
const POLICIES: &[&str] = &[
    "fifo",
    "cfs@3.0",
    "cfs@4.19",
    "cfs@4.19+STEAL",
    "cfs@4.19+NO_LOAD_RESOLUTION",
    "cfs@5.10",
    "cfs@5.10+NUMA_FORK_SPREAD",
    "cfs@5.15",
    "cfs@5.15+SCALE_WAKEUP_GRAN",
    "eevdf@6.6",
    "eevdf@6.6+NO_RUN_TO_PARITY",
    "eevdf@6.12",
    "eevdf@6.12+NO_DELAY_DEQUEUE",
    "eevdf@6.12+NO_PREEMPT_SHORT",
    "eevdf@6.18",
    "eevdf@6.18+HOST_VCPU_PACK",
    "eevdf@6.18+HOST_VCPU_PACK+HOST_DEQUEUE_DELAYED_BUSY",
    "ule@pre",
    "ule@post",
    "4bsd",
];

const MACHINES: &[&str] = &["broadwell-ep", "cascadelake", "zen1", "kvm-haswell", "rpi5", "epyc-kvm"];

/// One drawn scenario. Workloads: hackbench (both IPCs and modes), pipe,
/// schbench, stress-ng's pipe stressor, tbench, make, pft, groupmix, UnixBench's
/// context1 and shell scripts, sysbench's mutex and threads tests, and the
/// wake-pull probe (Linux policies on 2 CPUs or more).
#[derive(Clone, Debug)]
pub struct Scenario {
    pub topology: String,
    pub machine: &'static str,
    pub policy: &'static str,
    pub preempt: PreemptModel,
    pub hz: u64,
    pub autogroup: bool,
    pub workload: String,
    /// One tunable of the policy's family, or none.
    pub sysctl: Option<(String, String)>,
    pub seed: u64,
}

impl Scenario {
    /// Scenario `index` of the swarm `swarm_seed`.
    pub fn draw(swarm_seed: u64, index: u64) -> Scenario {
        let mut r = SimRng::derive(swarm_seed, Stream::Swarm, index);
        let mut pick = |n: usize| r.range(0, n as u64 - 1) as usize;
        let dims = [pick(4) + 1, pick(3) + 1, pick(8) + 1, pick(2) + 1];
        let topology = format!("{}x{}x{}x{}", dims[0], dims[1], dims[2], dims[3]);
        let machine = MACHINES[pick(MACHINES.len())];
        let policy = POLICIES[pick(POLICIES.len())];
        let preempt = [PreemptModel::None, PreemptModel::Voluntary, PreemptModel::Full, PreemptModel::Lazy][pick(4)];
        let hz = [100, 250, 1000][pick(3)];
        let autogroup = pick(2) == 1;
        // The pull probe changes affinity: Linux policies on 2 CPUs or more.
        let pull_ok = (policy.starts_with("cfs") || policy.starts_with("eevdf")) && dims.iter().product::<usize>() >= 2;
        let workload = match pick(13) {
            0 | 1 => format!(
                "hackbench groups={} fds={} loops={} ipc={} mode={}",
                pick(3) + 1,
                pick(6) + 1,
                pick(60) + 1,
                ["socket", "pipe"][pick(2)],
                ["process", "thread"][pick(2)]
            ),
            2 => format!("pipe loops={} mode={}", pick(300) + 1, ["process", "thread"][pick(2)]),
            12 if pull_ok => format!(
                "pull rounds={} fresh={} spin_us={} sleep_us={} sleep_odd_us={}",
                pick(100) + 1,
                pick(2),
                pick(3) * 50,
                pick(4) * 100,
                pick(4) * 5
            ),
            12 => format!("pipe loops={}", pick(300) + 1),
            3 => format!(
                "schbench threads={} workers={} runtime_ms={} warmup_ms=2 sleep_us={} work_us={}",
                pick(2) + 1,
                pick(4) + 1,
                pick(20) + 5,
                pick(200) + 10,
                pick(200) + 10
            ),
            4 => format!("stress-ng pipe={} timeout_ms={}", pick(4) + 1, pick(10) + 2),
            5 => format!("tbench clients={} runtime_ms={} warmup_ms=2", pick(4) + 1, pick(10) + 3),
            6 => format!("make jobs={} scale=0.0{}", pick(8) + 1, pick(3) + 1),
            7 => format!("pft threads={} mb={}", pick(4) + 1, pick(8) + 1),
            8 => format!("context1 copies={} duration_ms={}", pick(4) + 1, pick(10) + 2),
            9 => format!("shell copies={} concurrent={} duration_ms={}", pick(4) + 1, pick(3) + 1, pick(30) + 10),
            10 => match pick(2) {
                0 => {
                    format!("sysbench test=mutex threads={} mutex_num={} mutex_locks={}", pick(4) + 1, pick(8) + 1, pick(200) + 1)
                }
                _ => format!(
                    "sysbench test=threads threads={} time_ms={} thread_yields={} thread_locks={}",
                    pick(6) + 1,
                    pick(10) + 2,
                    pick(50) + 1,
                    pick(4) + 1
                ),
            },
            _ => format!(
                "groupmix tasks={} shares={} busy_ms=1 sleep_ms=1 warmup_ms=2 window_ms={}",
                pick(8) + 1,
                pick(1024) + 2,
                pick(10) + 5
            ),
        };
        let sysctl = (pick(2) == 1).then(|| draw_sysctl(policy, &mut pick)).flatten();
        let seed = r.range(0, 1_000_000);
        // A model the policy does not have (preempt=lazy before 6.13) becomes none,
        // as a user would be told to.
        let fits =
            schedlab_policies::policy_by_name(policy, &[]).is_ok_and(|p| check_preempt_for(preempt, policy, p.as_ref()).is_ok());
        let preempt = if fits { preempt } else { PreemptModel::None };
        Scenario { topology, machine, policy, preempt, hz, autogroup, workload, sysctl, seed }
    }

    /// The command that runs this scenario alone.
    pub fn command_line(&self) -> String {
        format!(
            "schedlab run --topology {} --machine {} --policy {} --preempt {} --hz {} --autogroup {} --workload '{}'{} --seed {} --check",
            self.topology,
            self.machine,
            self.policy,
            self.preempt.name(),
            self.hz,
            if self.autogroup { "on" } else { "off" },
            self.workload,
            self.sysctl.as_ref().map_or(String::new(), |(k, v)| format!(" --sysctl {k}={v}")),
            self.seed
        )
    }

    /// Runs it with every invariant checked.
    fn run(&self) -> Result<(), String> {
        let err = |e: Failure| match e {
            Failure::Input(e) => format!("refused: {e}"),
            Failure::Host(m) | Failure::Run(m) => m,
        };
        let preempt = self.preempt;
        let spec = RunSpec {
            topo: parse_topology(&self.topology).map_err(|e| err(e.into()))?,
            machine: schedlab_spec::machines::load(self.machine).map_err(|e| err(e.into()))?,
            policy: self.policy.to_string(),
            sysctls: self.sysctl.iter().cloned().collect(),
            workload: Workload::parse(&self.workload).map_err(|e| err(e.into()))?,
            cfg: RunConfig {
                seed: self.seed,
                hz: self.hz,
                check: true,
                preempt,
                autogroup: self.autogroup,
                ..RunConfig::default()
            },
        };
        let r = spec.engine().run();
        check_result(&r, true).map_err(err)
    }
}

/// A tunable of `policy`'s family within the range its kernel accepts, or None
/// for policies without tunables here (fifo, 4bsd).
fn draw_sysctl(policy: &str, pick: &mut impl FnMut(usize) -> usize) -> Option<(String, String)> {
    let (name, value) = if policy.starts_with("cfs@") {
        match pick(5) {
            0 => ("sched_wakeup_granularity_ns", pick(20_000) * 1000),
            1 => ("sched_min_granularity_ns", 100_000 + pick(10_000) * 1000),
            2 => ("sched_latency_ns", 1_000_000 + pick(48_000) * 1000),
            3 => ("sched_migration_cost_ns", pick(5_000) * 1000),
            _ => ("sched_nr_migrate", pick(64) + 1),
        }
    } else if policy.starts_with("eevdf@") {
        match pick(3) {
            0 => ("base_slice_ns", 100_000 + pick(10_000) * 1000),
            1 => ("sched_migration_cost_ns", pick(5_000) * 1000),
            _ => ("sched_nr_migrate", pick(64) + 1),
        }
    } else if policy.starts_with("ule@") {
        match pick(3) {
            0 => ("kern.sched.preempt_thresh", pick(256)),
            1 => ("kern.sched.affinity", pick(10)),
            _ => ("kern.sched.steal_thresh", pick(4) + 1),
        }
    } else {
        return None;
    };
    Some((name.to_string(), value.to_string()))
}

/// `schedlab swarm`: `scenarios` scenarios of swarm `seed` on `threads` threads;
/// exit status 1 if any failed.
pub fn run(seed: u64, scenarios: u64, threads: usize) -> Result<(), Failure> {
    if !(1..=MAX_SCENARIOS).contains(&scenarios) {
        return Err(schedlab_core::SpecError::new("scenarios", scenarios.to_string(), format!("1 to {MAX_SCENARIOS}")).into());
    }
    let started = Instant::now();
    let indices: Vec<u64> = (0..scenarios).collect();
    let results = schedlab_spec::parallel::map(&indices, threads, "swarm", |&i| {
        let s = Scenario::draw(seed, i);
        s.run().err().map(|e| (i, s, e))
    });
    let failed: Vec<(u64, Scenario, String)> = results.into_iter().flatten().collect();
    println!(
        "swarm seed {seed}: {scenarios} scenarios with every invariant checked, {} failed ({:.1} s)",
        failed.len(),
        started.elapsed().as_secs_f64()
    );
    for (i, s, e) in &failed {
        println!("\nscenario {i}: {}\n  {}", s.command_line(), e.replace('\n', "\n  "));
    }
    if failed.is_empty() {
        Ok(())
    } else {
        Err(Failure::Run(format!("{} of {scenarios} swarm scenarios failed", failed.len())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scenario_is_a_function_of_the_swarm_seed_and_its_index() {
        let a = Scenario::draw(7, 3).command_line();
        assert_eq!(a, Scenario::draw(7, 3).command_line());
        assert_ne!(a, Scenario::draw(7, 4).command_line());
        assert_ne!(a, Scenario::draw(8, 3).command_line());
    }

    /// Every drawn scenario is valid input: the swarm tests the simulator, not its
    /// own generator.
    #[test]
    fn drawn_scenarios_parse() {
        for i in 0..500 {
            let s = Scenario::draw(1, i);
            parse_topology(&s.topology).unwrap();
            Workload::parse(&s.workload).unwrap_or_else(|e| panic!("{}: {e}", s.workload));
            let sysctls: Vec<(String, String)> = s.sysctl.iter().cloned().collect();
            schedlab_policies::policy_by_name(s.policy, &sysctls).unwrap_or_else(|e| panic!("{}: {e}", s.command_line()));
        }
    }

    /// The pull probe is drawn, and only where it can run: a Linux policy on 2
    /// CPUs or more (anywhere else its spec would be refused).
    #[test]
    fn the_pull_probe_is_drawn_where_it_can_run() {
        let pulls: Vec<Scenario> = (0..2000).map(|i| Scenario::draw(1, i)).filter(|s| s.workload.starts_with("pull")).collect();
        assert!(pulls.len() > 20, "{} pull scenarios in 2000", pulls.len());
        for s in &pulls {
            let topo = parse_topology(&s.topology).unwrap();
            let policy = schedlab_policies::policy_by_name(s.policy, &[]).unwrap();
            let w = Workload::parse(&s.workload).unwrap();
            schedlab_spec::run::check_workload_for(&w, &s.workload, &topo, policy.as_ref())
                .unwrap_or_else(|e| panic!("{}: {e}", s.command_line()));
        }
    }
}
