//! Shared helpers for scenario tests: a round-number machine profile and a runner.

use schedlab_core::cost::MachineProfile;
use schedlab_core::{Engine, RunConfig, RunResult, Topology};
use schedlab_workloads::Workload;

/// Round numbers so hand-computed expectations stay simple. Not a real machine.
pub fn unit_profile() -> MachineProfile {
    MachineProfile::round_numbers()
}

#[allow(dead_code)]
pub fn run(topo: &str, policy: &str, workload: &str, seed: u64) -> RunResult {
    let topo = Topology::parse(topo).unwrap();
    let w = Workload::parse(workload).unwrap();
    let policy = schedlab_policies::policy_by_name(policy, &[]).unwrap();
    let cfg = RunConfig { seed, check: true, ..RunConfig::default() };
    Engine::new(topo, unit_profile(), policy, cfg, w.main_comm(), w.main_program()).run()
}
