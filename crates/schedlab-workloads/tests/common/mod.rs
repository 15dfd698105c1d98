//! Shared helpers for scenario tests: a round-number machine profile and a runner.

use schedlab_core::cost::{MachineProfile, MigrationCost, SchedOpCost};
use schedlab_core::{Engine, RunConfig, RunResult, Topology};
use schedlab_workloads::Workload;

/// Round numbers so hand-computed expectations stay simple. Not a real machine.
pub fn unit_profile() -> MachineProfile {
    MachineProfile {
        name: "unit".into(),
        description: "round numbers for tests".into(),
        sources: vec![],
        context_switch_ns: 1000,
        syscall_ns: 100,
        copy_ps_per_byte: 1000,
        pipe_op_ns: 200,
        unix_send_ns: 500,
        unix_recv_ns: 300,
        tcp_send_ns: 2000,
        tcp_recv_ns: 300,
        wakeup_ns: 200,
        ipi_send_ns: 100,
        ipi_latency_ns: 1000,
        idle_exit_ns: 2000,
        fork_ns: 50_000,
        clone_ns: 20_000,
        exit_ns: 10_000,
        migration: MigrationCost { smt_ns: 100, llc_ns: 1000, cross_llc_ns: 5000, cross_node_ns: 10_000 },
        sched_ops: SchedOpCost {
            per_cpu_scanned_ns: 10,
            per_rq_lock_ns: 50,
            per_task_examined_ns: 20,
            per_cpu_scanned_cross_llc_ns: None,
            per_rq_lock_cross_llc_ns: None,
        },
        node_mem_bw_mbps: 50_000,
        smt_throughput_pct: None,
    }
}

#[allow(dead_code)]
pub fn run(topo: &str, policy: &str, workload: &str, seed: u64) -> RunResult {
    let topo = Topology::parse(topo).unwrap();
    let w = Workload::parse(workload).unwrap();
    let policy = schedlab_policies::policy_by_name(policy, &[]).unwrap();
    let cfg = RunConfig { seed, check: true, ..RunConfig::default() };
    Engine::new(topo, unit_profile(), policy, cfg, w.main_comm(), w.main_program()).run()
}
