//! One run: what a front end asks for (`RunRequest`, strings as a user writes
//! them), checked whole into a `RunSpec` before anything runs or is written.

use schedlab_core::error::SpecError;
use schedlab_core::sched::{Launcher, PreemptModel, SchedClass};
use schedlab_core::{Engine, RunConfig, RunResult, Topology};
use schedlab_workloads::Workload;

use crate::Failure;

/// Default main job: the steal seed's machine and benchmark, at a tenth of its loops.
pub const DEFAULT_TOPOLOGY: &str = "x6-2-20";
pub const DEFAULT_POLICY: &str = "cfs@4.19";
pub const DEFAULT_WORKLOAD: &str = "hackbench groups=1 loops=10000 ipc=socket mode=process";

/// A run as a user writes it: every field in the command line's words
/// (`schedlab run --help`), unchecked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunRequest {
    /// NxLxCxT, a preset name or `host`.
    pub topology: String,
    /// A shipped machine profile or a `.toml` path; `None`: the topology's own.
    pub machine: Option<String>,
    pub policy: String,
    pub workload: String,
    pub seed: u64,
    /// `NAME=VALUE` each.
    pub sysctls: Vec<String>,
    pub hz: u64,
    /// none, voluntary, full or lazy; `None`: none, or the host's for `host`.
    pub preempt: Option<String>,
    /// on or off; `None`: off, or the host's for `host`.
    pub autogroup: Option<String>,
    /// The launcher's `wakee_flips`, inherited by the workload's first task.
    pub launcher_wakee_flips: u64,
    /// Check invariants while running.
    pub check: bool,
}

impl Default for RunRequest {
    /// The quick start's run.
    fn default() -> Self {
        RunRequest {
            topology: DEFAULT_TOPOLOGY.to_string(),
            machine: None,
            policy: DEFAULT_POLICY.to_string(),
            workload: DEFAULT_WORKLOAD.to_string(),
            seed: 1,
            sysctls: Vec::new(),
            hz: 250,
            preempt: None,
            autogroup: None,
            launcher_wakee_flips: 0,
            check: false,
        }
    }
}

/// A fully validated run.
pub struct RunSpec {
    pub topo: Topology,
    pub machine: schedlab_core::MachineProfile,
    pub policy: String,
    pub sysctls: Vec<(String, String)>,
    pub workload: Workload,
    pub cfg: RunConfig,
}

impl RunSpec {
    /// Validates every input before anything runs or is written.
    pub fn from_request(a: &RunRequest) -> Result<RunSpec, SpecError> {
        let topo = parse_topology(&a.topology)?;
        let machine = crate::machines::load_for(a.machine.as_deref(), &a.topology)?;
        let sysctls = parse_sysctls(&a.sysctls)?;
        let policy_name = if a.policy == "host" { host_policy()? } else { a.policy.clone() };
        // Build once to validate the name and sysctls.
        let policy = schedlab_policies::policy_by_name(&policy_name, &sysctls)?;
        let workload = Workload::parse(&a.workload)?;
        check_workload_for(&workload, &a.workload, &topo, policy.as_ref())?;
        if !(10..=10_000).contains(&a.hz) {
            return Err(SpecError::new("hz", a.hz.to_string(), "an integer from 10 to 10000 (CONFIG_HZ, e.g. 100, 250, 1000)"));
        }
        let preempt = parse_preempt(a.preempt.as_deref(), &a.topology)?;
        check_preempt_for(preempt, &policy_name, policy.as_ref())?;
        let autogroup = parse_autogroup(a.autogroup.as_deref(), &a.topology)?;
        let preempt_dynamic = host_preempt_dynamic(a.preempt.as_deref(), &a.topology);
        if a.launcher_wakee_flips > u64::from(u32::MAX) {
            return Err(SpecError::new(
                "launcher-wakee-flips",
                a.launcher_wakee_flips.to_string(),
                "an integer from 0 to 4294967295 (the kernel's unsigned int wakee_flips)",
            ));
        }
        let launcher = Launcher { wakee_flips: a.launcher_wakee_flips };
        let cfg = RunConfig {
            seed: a.seed,
            hz: a.hz,
            check: a.check,
            preempt,
            preempt_dynamic,
            autogroup,
            launcher,
            ..RunConfig::default()
        };
        Ok(RunSpec { topo, machine, policy: policy_name, sysctls, workload, cfg })
    }
    pub fn engine(&self) -> Engine {
        let policy = schedlab_policies::policy_by_name(&self.policy, &self.sysctls).expect("validated in from_args");
        Engine::new(
            self.topo.clone(),
            self.machine.clone(),
            policy,
            self.cfg.clone(),
            self.workload.main_comm(),
            self.workload.main_program(),
        )
    }
}

/// What a workload needs of the machine and the policy: its fewest CPUs, and a
/// policy that moves a running task when its affinity shuts it out
/// (`sched_setaffinity()`), for workloads that change affinity.
pub fn check_workload_for(workload: &Workload, spec: &str, topo: &Topology, policy: &dyn SchedClass) -> Result<(), SpecError> {
    if topo.ncpus() < workload.min_cpus() {
        return Err(SpecError::new(
            "workload",
            spec,
            format!("a workload this topology can run: {} needs {} CPUs or more", workload.name(), workload.min_cpus()),
        ));
    }
    if workload.changes_affinity() && !policy.pushes_running_tasks() {
        return Err(SpecError::new(
            "workload",
            spec,
            format!(
                "a workload this policy can run: {} changes affinity while running, which only the Linux policies (cfs@..., eevdf@...) model",
                workload.name()
            ),
        ));
    }
    Ok(())
}

/// The policy that models this machine's own kernel (`--policy host`, and
/// `schedlab validate`'s simulated side): the modelled release of its kernel's
/// version, that release's stable switches for its sublevel, and on a 6.18 host
/// booted with the vendor option `sched_vcpu_pack=15`, that option's placement
/// as its kernel text has it (+HOST_VCPU_PACK, all four of its bits) and the
/// delayed-task wakeup an experiment on the hosts shows
/// (+HOST_DEQUEUE_DELAYED_BUSY), docs/validate.md. Another value of the option
/// is not modelled: its placement is left out.
pub fn host_policy() -> Result<String, SpecError> {
    let release = schedlab_host::kernel::release();
    let model = schedlab_host::kernel::policy_for_release(&release).ok_or_else(|| {
        SpecError::new("policy", format!("host (kernel {release})"), "a policy name: the host's release is not modelled")
    })?;
    let stable = schedlab_host::kernel::stable_switches(&release, model);
    Ok(match schedlab_host::kernel::vcpu_pack_option() {
        Some(bits) if model == "eevdf@6.18" && bits == "15" => {
            format!("{model}{stable}+HOST_VCPU_PACK+HOST_DEQUEUE_DELAYED_BUSY")
        }
        Some(_) if model == "eevdf@6.18" => format!("{model}{stable}+HOST_DEQUEUE_DELAYED_BUSY"),
        _ => format!("{model}{stable}"),
    })
}

/// `NxLxCxT`, a preset, or `host` (read from this machine's sysfs).
pub fn parse_topology(spec: &str) -> Result<Topology, SpecError> {
    let topo = if spec == "host" {
        let read = |p: &str| std::fs::read_to_string(format!("/sys/devices/system/{p}")).ok();
        Topology::from_sysfs(&read)?
    } else {
        Topology::parse(spec)?
    };
    // The host is read, not parsed: its estimate is checked here.
    schedlab_core::topology::check_state_bytes(spec, topo.state_bytes_estimate())?;
    Ok(topo)
}

/// `--preempt`: a model by name; unset, the host kernel's own model for
/// `--topology host` (from what the host lets us read) and `none` otherwise.
pub fn parse_preempt(flag: Option<&str>, topology: &str) -> Result<PreemptModel, SpecError> {
    match flag {
        Some(name) => PreemptModel::parse(name).ok_or_else(|| SpecError::new("preempt", name, PreemptModel::NAMES)),
        None if topology == "host" => match schedlab_host::kernel::preempt_mode() {
            Some(h) => Ok(PreemptModel::parse(&h.mode).expect("host modes are the four names")),
            None => {
                eprintln!("schedlab: warning: the host's preemption model could not be read; using none (set --preempt)");
                Ok(PreemptModel::None)
            }
        },
        None => Ok(PreemptModel::None),
    }
}

/// Whether the simulated kernel is a PREEMPT_DYNAMIC build (so built with
/// CONFIG_PREEMPTION whatever model it booted with): with `--topology host` and
/// no `--preempt`, the host kernel's build, as its model is the host's; a
/// `--preempt` of the user's is a statically built model.
pub fn host_preempt_dynamic(flag: Option<&str>, topology: &str) -> bool {
    flag.is_none() && topology == "host" && schedlab_host::kernel::preempt_dynamic().is_some_and(|(dynamic, _)| dynamic)
}

/// `--autogroup on|off`; unset, the host's setting for `--topology host`, else off.
pub fn parse_autogroup(flag: Option<&str>, topology: &str) -> Result<bool, SpecError> {
    match flag {
        Some("on") => Ok(true),
        Some("off") => Ok(false),
        Some(other) => Err(SpecError::new("autogroup", other, "on or off")),
        None if topology == "host" => Ok(schedlab_host::kernel::autogroup_enabled().unwrap_or(false)),
        None => Ok(false),
    }
}

/// `preempt=lazy` exists from Linux 6.13: refused for a policy modelling an older
/// (or a non-Linux) kernel rather than silently run as `full`.
pub fn check_preempt_for(preempt: PreemptModel, name: &str, policy: &dyn SchedClass) -> Result<(), SpecError> {
    if preempt == PreemptModel::Lazy && policy.linux_release().is_none_or(|v| v < (6, 13)) {
        return Err(SpecError::new(
            "preempt",
            format!("lazy (with {name})"),
            "none, voluntary or full: preempt=lazy exists from Linux 6.13 (eevdf@6.18)",
        ));
    }
    Ok(())
}

pub fn parse_sysctls(raw: &[String]) -> Result<Vec<(String, String)>, SpecError> {
    raw.iter()
        .map(|s| match s.split_once('=') {
            Some((k, v)) if !k.is_empty() && !v.is_empty() => Ok((k.to_string(), v.to_string())),
            _ => Err(SpecError::new("sysctl", s, "NAME=VALUE, e.g. sched_wakeup_granularity_ns=15000000")),
        })
        .collect()
}

/// A run that broke an invariant or never finished is an error, not a result.
pub fn check_result(r: &RunResult, checked: bool) -> Result<(), Failure> {
    if r.timed_out {
        return Err(Failure::Run(format!(
            "the run did not finish: its limit of simulated time stopped it after its last event, at {:.3} s (still alive: {})",
            r.end_ns as f64 / 1e9,
            r.alive_at_timeout.join(", ")
        )));
    }
    if !r.violations.is_empty() {
        let what = if checked { "invariant violations" } else { "engine errors" };
        return Err(Failure::Run(format!("{what}:\n  {}", r.violations.join("\n  "))));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_that_did_not_finish_says_who_was_left() {
        use schedlab_core::program::{ForkKind, Op, Script};
        // A reader blocked for good on a pipe nobody writes; its parent sleeps
        // on (keeping the clock going, as a profile's background threads do),
        // then waits for it.
        let reader = Script::new(vec![Op::Read { chan: 0, bytes: 1 }]);
        let mut ops =
            vec![Op::Pipe, Op::Fork { kind: ForkKind::Process, comm: Some("reader".into()), program: Box::new(reader) }];
        ops.extend((0..8).map(|_| Op::Sleep { ns: 500_000_000 }));
        ops.push(Op::WaitChild);
        let policy = schedlab_policies::policy_by_name("fifo", &[]).unwrap();
        let cfg = RunConfig { seed: 7, max_sim_ns: 1_000_000_000, ..RunConfig::default() };
        let topo = Topology::parse("1x1x1x1").unwrap();
        let machine = schedlab_core::MachineProfile::round_numbers();
        let r = schedlab_core::Engine::new(topo, machine, policy, cfg, "main", Box::new(Script::new(ops))).run();
        let Err(Failure::Run(m)) = check_result(&r, false) else { panic!("a run failure: {:?}", r.violations) };
        assert_eq!(
            m,
            "the run did not finish: its limit of simulated time stopped it after its last event, at 0.508 s (still alive: main Sleeping on cpu0, reader Sleeping on cpu0)"
        );
    }

    #[test]
    fn only_the_host_model_is_of_a_dynamic_build() {
        // A model given by the user, or any machine but the host, is a static build.
        assert!(!host_preempt_dynamic(Some("none"), "host"));
        assert!(!host_preempt_dynamic(None, "x6-2-20"));
        assert!(!host_preempt_dynamic(Some("full"), "2x1x4x2"));
        // The host's own model comes with the host's build.
        let host = schedlab_host::kernel::preempt_dynamic().is_some_and(|(dynamic, _)| dynamic);
        assert_eq!(host_preempt_dynamic(None, "host"), host);
    }
}

#[cfg(test)]
mod host_policy_tests {
    use super::*;

    /// `--policy host` is this machine's kernel model, the name validate takes:
    /// a policy the registry builds, and the run reports it by that name; a
    /// kernel whose release is not modelled is refused naming the field.
    #[test]
    fn the_host_policy_is_a_modelled_policy_or_a_clear_error() {
        let request = RunRequest { policy: "host".into(), workload: "pipe loops=10".into(), ..RunRequest::default() };
        match host_policy() {
            Ok(name) => {
                assert!(schedlab_policies::policy_by_name(&name, &[]).is_ok(), "{name}");
                let spec = RunSpec::from_request(&request).expect("a modelled host policy runs");
                assert_eq!(spec.policy, name);
            }
            Err(e) => {
                assert_eq!(e.field, "policy", "{e}");
                assert!(RunSpec::from_request(&request).is_err());
            }
        }
    }
}
