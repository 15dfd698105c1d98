//! What a trace says a workload's tasks did, in numbers that compare across a
//! real recording and a simulated one: per task, switches out, wakeups and
//! migrations; over all kept tasks, run lengths (switch-in to switch-out),
//! wakeup latencies (sched_waking, or sched_wakeup_new for a new task, to its
//! switch-in), preemptions (switches out of a task still runnable, and how long
//! after its switch-in they came), and migrations by who moved the task (see
//! [`MigrationKind`]), and how often a wakeup preempted the task running where it
//! landed (see [`WakeupPreemptions`]). A summary is built one event at a time
//! ([`TraceSummary::add`]), in memory that grows with the tasks, not with the
//! trace: the distributions are histograms (3 significant figures).
//!
//! A kernel can leave a switch out of its trace: every line names the task
//! running on its CPU, so a line whose task is not the one the CPU's last
//! `sched_switch` put there shows a switch-in that was not recorded (this
//! project's hosts never trace the switch out of the idle task on their second
//! vCPU). Such a run's start, and so its length and the wakeup latency before
//! it, is unknown: both are left out of the distributions, and the switch-ins
//! are counted ([`TraceSummary::untraced_switch_ins`]).

use std::collections::{BTreeMap, BTreeSet};

use hdrhistogram::Histogram;

use crate::{Event, Line};

/// One task's counts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TaskTrace {
    pub comm: String,
    pub switches: u64,
    /// Switches out while still runnable (`prev_state` R or R+): preemptions.
    pub involuntary: u64,
    pub wakeups: u64,
    pub migrations: u64,
}

/// Who moved a task, read from a `sched_migrate_task` line: the task's state
/// (asleep: the move is its wakeup's placement) and the context the line fired
/// in (the irq-info column and the task running there).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum MigrationKind {
    /// Placed on another CPU as it woke (select_task_rq at wakeup).
    Wakeup,
    /// A runnable task pulled in task context: a CPU going idle balancing from
    /// schedule() (newidle), or a task moved by its own CPU's stopper.
    TaskContext,
    /// A runnable task pulled in interrupt context by a busy CPU (the periodic
    /// balance in the scheduler softirq).
    Interrupt,
    /// A runnable task pulled by an idle CPU (idle or NOHZ idle balance: the
    /// kernel runs it in the idle CPU's softirq, the simulation in the idle
    /// CPU's schedule()).
    IdleCpu,
}

/// Wakeups of kept tasks onto a CPU running a kept task, and how that task's run
/// ended: a `sched_wakeup` line fired on another CPU than its target is a remote
/// wakeup (the waker enqueued the task there, so the target was busy: an idle
/// target is woken through its wake list and the line fires there), one on its
/// target is local (the waker is the running task). The run counts as preempted
/// if it ended runnable (`prev_state` R); only the run's first such wakeup counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WakeupPreemptions {
    pub remote: u64,
    pub remote_preempted: u64,
    pub local: u64,
    pub local_preempted: u64,
}

/// Where wakeups of kept tasks put them, against the CPU the wakee last ran on
/// (`sched_waking`'s `target_cpu`, read before the wakeup picks a CPU) and the
/// CPU the waker runs on (the `sched_waking` line's own): wakeups by a waker on
/// another CPU are the ones `wake_affine()` may pull to the waker's CPU.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WakeupPlacements {
    /// The waker runs on another CPU than the wakee's last.
    pub cross: u64,
    /// Of them, woken onto the waker's CPU.
    pub cross_pulled: u64,
    /// Of them, woken onto a third CPU.
    pub cross_elsewhere: u64,
    /// The waker runs on the wakee's last CPU.
    pub same: u64,
    /// Of them, woken onto another CPU.
    pub same_moved: u64,
}

/// The tasks a trace shows, by pid, restricted to those `keep` selects by comm.
#[derive(Debug, Clone)]
pub struct TraceSummary {
    pub tasks: BTreeMap<u32, TaskTrace>,
    /// First and last timestamp of a kept task's event.
    pub span_ns: (u64, u64),
    /// Run lengths of the kept tasks, ns.
    pub run_ns: Histogram<u64>,
    /// Wakeup latencies of the kept tasks, ns.
    pub wakeup_latency_ns: Histogram<u64>,
    /// Switch-in to a switch out while still runnable (`prev_state` R), ns.
    pub preempted_after_ns: Histogram<u64>,
    /// The kept tasks' migrations by kind.
    pub migration_kinds: BTreeMap<MigrationKind, u64>,
    pub wakeup_preemptions: WakeupPreemptions,
    pub wakeup_placements: WakeupPlacements,
    /// Kept tasks being woken: (the waker's CPU, the wakee's last CPU), from
    /// their `sched_waking` to their `sched_wakeup`.
    waking_from: BTreeMap<u32, (u32, u32)>,
    /// Per CPU: the running kept task a wakeup landed on in its current run, and
    /// whether that wakeup was remote.
    woken_onto: BTreeMap<u32, (u32, bool)>,
    /// With `sched_stat_runtime` in the trace (`schedlab record --runtime`): the
    /// runtime the kernel charged a kept task over one run (switch-in to
    /// switch-out), ns, over all runs and by how the run ended.
    pub charged_ns: Histogram<u64>,
    pub charged_preempted_ns: Histogram<u64>,
    pub charged_blocked_ns: Histogram<u64>,
    /// Runtime charged to each running kept task since its switch-in.
    charged_since_in: BTreeMap<u32, u64>,
    /// Whether any `sched_stat_runtime` line was read.
    saw_runtime: bool,
    /// Switch-ins of kept tasks the trace shows only by the task running
    /// (a line of its own on a CPU whose last traced switch put another there).
    pub untraced_switch_ins: u64,
    /// The task each CPU's last traced `sched_switch` (or untraced one, once
    /// seen) put on it.
    on_cpu: BTreeMap<u32, u32>,
    running_since: BTreeMap<u32, u64>,
    woken_at: BTreeMap<u32, u64>,
    /// Kept tasks last seen going to sleep, not woken since.
    asleep: BTreeSet<u32>,
}

impl Default for TraceSummary {
    fn default() -> Self {
        let histogram = || Histogram::new(3).expect("3 significant figures are valid");
        TraceSummary {
            tasks: BTreeMap::new(),
            span_ns: (u64::MAX, 0),
            run_ns: histogram(),
            wakeup_latency_ns: histogram(),
            preempted_after_ns: histogram(),
            migration_kinds: BTreeMap::new(),
            wakeup_preemptions: WakeupPreemptions::default(),
            wakeup_placements: WakeupPlacements::default(),
            waking_from: BTreeMap::new(),
            woken_onto: BTreeMap::new(),
            charged_ns: histogram(),
            charged_preempted_ns: histogram(),
            charged_blocked_ns: histogram(),
            charged_since_in: BTreeMap::new(),
            saw_runtime: false,
            untraced_switch_ins: 0,
            on_cpu: BTreeMap::new(),
            running_since: BTreeMap::new(),
            woken_at: BTreeMap::new(),
            asleep: BTreeSet::new(),
        }
    }
}

impl TraceSummary {
    /// Reads `lines` in order. A task is kept if `keep(comm)` holds for the comm
    /// any of its events carries (pid 0, the idle task, never is).
    pub fn of(lines: &[Line], keep: &dyn Fn(&str) -> bool) -> TraceSummary {
        let mut s = TraceSummary::default();
        for l in lines {
            s.add(l, keep);
        }
        s
    }

    /// Takes one more event, in trace order. Timestamps that go backwards (two
    /// traces joined) start the intervals that cross them afresh.
    pub fn add(&mut self, l: &Line, keep: &dyn Fn(&str) -> bool) {
        let ts = l.ts_ns;
        self.note_running(l, keep);
        match &l.event {
            Event::Switch { prev_comm, prev_pid, prev_state, next_comm, next_pid, .. } => {
                // The run a wakeup landed on ends here, whoever runs next.
                let landed_on = self.woken_onto.remove(&l.cpu);
                if self.touch(*prev_pid, prev_comm, ts, keep) {
                    let task = self.tasks.get_mut(prev_pid).expect("touched");
                    task.switches += 1;
                    let preempted = prev_state.starts_with('R');
                    if preempted {
                        task.involuntary += 1;
                        self.asleep.remove(prev_pid);
                    } else {
                        self.asleep.insert(*prev_pid);
                    }
                    if let Some((pid, remote)) = landed_on {
                        if pid == *prev_pid && preempted {
                            let w = &mut self.wakeup_preemptions;
                            *(if remote { &mut w.remote_preempted } else { &mut w.local_preempted }) += 1;
                        }
                    }
                    if let Some(since) = self.running_since.remove(prev_pid) {
                        record(&mut self.run_ns, ts.checked_sub(since));
                        if preempted {
                            record(&mut self.preempted_after_ns, ts.checked_sub(since));
                        }
                        if self.saw_runtime {
                            let charged = self.charged_since_in.remove(prev_pid).unwrap_or(0);
                            record(&mut self.charged_ns, Some(charged));
                            let by_end = if preempted { &mut self.charged_preempted_ns } else { &mut self.charged_blocked_ns };
                            record(by_end, Some(charged));
                        }
                    }
                }
                self.on_cpu.insert(l.cpu, *next_pid);
                if self.touch(*next_pid, next_comm, ts, keep) {
                    self.asleep.remove(next_pid);
                    self.running_since.insert(*next_pid, ts);
                    self.charged_since_in.insert(*next_pid, 0);
                    if let Some(w) = self.woken_at.remove(next_pid) {
                        record(&mut self.wakeup_latency_ns, ts.checked_sub(w));
                    }
                }
            }
            Event::Waking { comm, pid, target_cpu, .. } if self.touch(*pid, comm, ts, keep) => {
                self.woken_at.entry(*pid).or_insert(ts);
                self.waking_from.insert(*pid, (l.cpu, *target_cpu));
                // Asleep until its sched_wakeup (a task first seen here was too).
                self.asleep.insert(*pid);
            }
            Event::WakeupNew { comm, pid, .. } if self.touch(*pid, comm, ts, keep) => {
                self.woken_at.insert(*pid, ts);
            }
            Event::Wakeup { comm, pid, target_cpu, .. } if self.touch(*pid, comm, ts, keep) => {
                self.tasks.get_mut(pid).expect("touched").wakeups += 1;
                self.asleep.remove(pid);
                if let Some((waker_cpu, last_cpu)) = self.waking_from.remove(pid) {
                    let p = &mut self.wakeup_placements;
                    if waker_cpu != last_cpu {
                        p.cross += 1;
                        p.cross_pulled += u64::from(*target_cpu == waker_cpu);
                        p.cross_elsewhere += u64::from(*target_cpu != waker_cpu && *target_cpu != last_cpu);
                    } else {
                        p.same += 1;
                        p.same_moved += u64::from(*target_cpu != last_cpu);
                    }
                }
                let running = self.on_cpu.get(target_cpu).copied().filter(|r| *r != 0 && self.tasks.contains_key(r));
                if let Some(r) = running {
                    if r != *pid && !self.woken_onto.contains_key(target_cpu) {
                        let remote = l.cpu != *target_cpu;
                        let w = &mut self.wakeup_preemptions;
                        *(if remote { &mut w.remote } else { &mut w.local }) += 1;
                        self.woken_onto.insert(*target_cpu, (r, remote));
                    }
                }
            }
            Event::MigrateTask { comm, pid, .. } if self.touch(*pid, comm, ts, keep) => {
                self.tasks.get_mut(pid).expect("touched").migrations += 1;
                // The irq-info column's third character: h/s/H (hard or soft
                // interrupt) or '.'; absent without irq-info (task context).
                let in_interrupt = l.flags.chars().nth(2).is_some_and(|c| matches!(c, 'h' | 's' | 'H'));
                let kind = if self.asleep.contains(pid) {
                    MigrationKind::Wakeup
                } else if l.pid == 0 {
                    MigrationKind::IdleCpu
                } else if !in_interrupt {
                    MigrationKind::TaskContext
                } else {
                    MigrationKind::Interrupt
                };
                *self.migration_kinds.entry(kind).or_default() += 1;
            }
            Event::Other { name, args } if name == "sched_stat_runtime" => {
                self.saw_runtime = true;
                if let Some((comm, pid, runtime)) = stat_runtime_args(args) {
                    if self.touch(pid, comm, ts, keep) {
                        if let Some(c) = self.charged_since_in.get_mut(&pid) {
                            *c += runtime;
                        }
                    }
                }
            }
            _ => {}
        }
    }

    /// The task `l` names is running on `l.cpu`: if the CPU's last switch put
    /// another task there, the switch to this one was not traced. The task that
    /// was there stopped and this one started at unknown times, so neither run
    /// is measured, nor the wakeup latency that ended in this one.
    fn note_running(&mut self, l: &Line, keep: &dyn Fn(&str) -> bool) {
        let Some(&there) = self.on_cpu.get(&l.cpu) else {
            return;
        };
        if there == l.pid {
            return;
        }
        self.on_cpu.insert(l.cpu, l.pid);
        if there != 0 {
            self.running_since.remove(&there);
            self.charged_since_in.remove(&there);
        }
        if l.pid != 0 && keep(&l.comm) {
            self.untraced_switch_ins += 1;
            self.running_since.remove(&l.pid);
            self.charged_since_in.remove(&l.pid);
            self.woken_at.remove(&l.pid);
            self.asleep.remove(&l.pid);
        }
    }

    /// A sentence on the switch-ins the trace did not record, if any.
    pub fn untraced_note(&self, trace: &str) -> Option<String> {
        (self.untraced_switch_ins > 0).then(|| {
            format!(
                "{trace}: {} switch-ins of these tasks were not traced (a task ran on a CPU whose last sched_switch put \
                 another task there); those runs and the wakeup latencies before them are not in the figures",
                self.untraced_switch_ins
            )
        })
    }

    /// Notes a kept task's event; false if the task is not kept.
    fn touch(&mut self, pid: u32, comm: &str, ts: u64, keep: &dyn Fn(&str) -> bool) -> bool {
        if pid == 0 || !keep(comm) {
            return false;
        }
        self.span_ns = (self.span_ns.0.min(ts), self.span_ns.1.max(ts));
        self.tasks.entry(pid).or_insert_with(|| TaskTrace { comm: comm.to_string(), ..Default::default() });
        true
    }

    /// First and last timestamp of a kept task's event ((0, 0) if none).
    pub fn span(&self) -> (u64, u64) {
        if self.span_ns.0 == u64::MAX {
            (0, 0)
        } else {
            self.span_ns
        }
    }

    fn sum(&self, f: impl Fn(&TaskTrace) -> u64) -> u64 {
        self.tasks.values().map(f).sum()
    }

    fn kind(&self, k: MigrationKind) -> f64 {
        self.migration_kinds.get(&k).copied().unwrap_or(0) as f64
    }

    /// The numbers [`compare`] puts side by side, by name: totals, then
    /// percentiles of run length and wakeup latency (µs), then the spread of
    /// switches across tasks.
    pub fn figures(&self) -> Vec<(&'static str, f64)> {
        let mut per_task: Vec<u64> = self.tasks.values().map(|t| t.switches).collect();
        per_task.sort_unstable();
        let us = |h: &Histogram<u64>, q: f64| if h.is_empty() { 0.0 } else { h.value_at_quantile(q) as f64 / 1000.0 };
        let pct = |n: u64, of: u64| if of == 0 { 0.0 } else { 100.0 * n as f64 / of as f64 };
        let w = self.wakeup_preemptions;
        let p = self.wakeup_placements;
        vec![
            ("tasks", self.tasks.len() as f64),
            ("switches", self.sum(|t| t.switches) as f64),
            ("wakeups", self.sum(|t| t.wakeups) as f64),
            ("migrations", self.sum(|t| t.migrations) as f64),
            ("migrations at wakeup", self.kind(MigrationKind::Wakeup)),
            ("migrations pulled in task context", self.kind(MigrationKind::TaskContext)),
            ("migrations pulled in interrupts", self.kind(MigrationKind::Interrupt)),
            ("migrations pulled by an idle CPU", self.kind(MigrationKind::IdleCpu)),
            ("wakeups by a waker on another CPU", p.cross as f64),
            ("of them, onto the waker's CPU %", pct(p.cross_pulled, p.cross)),
            ("of them, onto a third CPU %", pct(p.cross_elsewhere, p.cross)),
            ("wakeups by a waker on the wakee's CPU", p.same as f64),
            ("of them, onto another CPU %", pct(p.same_moved, p.same)),
            ("involuntary switches", self.sum(|t| t.involuntary) as f64),
            ("remote wakeups onto a running task", w.remote as f64),
            ("of them, its run ended preempted %", pct(w.remote_preempted, w.remote)),
            ("local wakeups (the waker running)", w.local as f64),
            ("of them, the waker preempted %", pct(w.local_preempted, w.local)),
            ("preempted after p50 us", us(&self.preempted_after_ns, 0.5)),
            ("preempted after p90 us", us(&self.preempted_after_ns, 0.9)),
            ("run length p50 us", us(&self.run_ns, 0.5)),
            ("run length p90 us", us(&self.run_ns, 0.9)),
            ("run length p99 us", us(&self.run_ns, 0.99)),
            ("wakeup latency p50 us", us(&self.wakeup_latency_ns, 0.5)),
            ("wakeup latency p90 us", us(&self.wakeup_latency_ns, 0.9)),
            ("wakeup latency p99 us", us(&self.wakeup_latency_ns, 0.99)),
            ("switches per task p10", nearest_rank(&per_task, 0.1) as f64),
            ("switches per task p50", nearest_rank(&per_task, 0.5) as f64),
            ("switches per task p90", nearest_rank(&per_task, 0.9) as f64),
        ]
    }
}

impl TraceSummary {
    /// The runtime charged per run (µs), when the trace has `sched_stat_runtime`
    /// lines; empty otherwise (a simulated trace has none: there a run's length is
    /// what it is charged).
    pub fn charged_figures(&self) -> Vec<(&'static str, f64)> {
        if !self.saw_runtime {
            return Vec::new();
        }
        let us = |h: &Histogram<u64>, q: f64| if h.is_empty() { 0.0 } else { h.value_at_quantile(q) as f64 / 1000.0 };
        vec![
            ("runtime charged per run p50 us", us(&self.charged_ns, 0.5)),
            ("runtime charged per run p90 us", us(&self.charged_ns, 0.9)),
            ("charged, runs ending preempted p50", us(&self.charged_preempted_ns, 0.5)),
            ("charged, runs ending blocked p50", us(&self.charged_blocked_ns, 0.5)),
        ]
    }
}

/// `comm=%s pid=%d runtime=%Lu [ns]`, the arguments `sched_stat_runtime` prints
/// (v6.8+; earlier kernels add `vruntime=`, which is skipped).
fn stat_runtime_args(args: &str) -> Option<(&str, u32, u64)> {
    // A comm may hold spaces: it runs up to " pid=".
    let (comm, rest) = args.strip_prefix("comm=")?.split_once(" pid=")?;
    let mut fields = rest.split_whitespace();
    let pid = fields.next()?.parse().ok()?;
    let runtime = fields.next()?.strip_prefix("runtime=")?.parse().ok()?;
    Some((comm, pid, runtime))
}

/// Records an interval; one whose end precedes its start (joined traces) is not.
fn record(h: &mut Histogram<u64>, ns: Option<u64>) {
    if let Some(ns) = ns {
        h.record(ns).expect("an auto-resizing histogram takes any u64");
    }
}

/// The nearest-rank `q` quantile of sorted `v` (0 when empty).
pub fn nearest_rank(v: &[u64], q: f64) -> u64 {
    if v.is_empty() {
        return 0;
    }
    let rank = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len());
    v[rank - 1]
}

/// One figure of both traces.
#[derive(Debug, Clone, PartialEq)]
pub struct Difference {
    pub figure: &'static str,
    pub real: f64,
    pub sim: f64,
}

impl Difference {
    /// How far apart, as |ln(sim/real)| (both zero: 0; one zero: infinite).
    pub fn distance(&self) -> f64 {
        match (self.real == 0.0, self.sim == 0.0) {
            (true, true) => 0.0,
            (false, false) => (self.sim / self.real).ln().abs(),
            _ => f64::INFINITY,
        }
    }
}

/// Every figure of the two summaries, the most different first.
pub fn compare(real: &TraceSummary, sim: &TraceSummary) -> Vec<Difference> {
    let mut d: Vec<Difference> = real
        .figures()
        .into_iter()
        .zip(sim.figures())
        .map(|((figure, r), (_, s))| Difference { figure, real: r, sim: s })
        .collect();
    d.sort_by(|a, b| b.distance().total_cmp(&a.distance()));
    d
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse_trace;

    const TRACE: &str = "\
           <idle>-0       [000] d..2.   100.000000: sched_switch: prev_comm=swapper/0 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=hb next_pid=10 next_prio=120
              hb-10      [000] d..2.   100.000010: sched_waking: comm=hb pid=11 prio=120 target_cpu=001
              hb-10      [000] d..2.   100.000011: sched_migrate_task: comm=hb pid=11 prio=120 orig_cpu=1 dest_cpu=0
              hb-10      [000] d..2.   100.000012: sched_wakeup: comm=hb pid=11 prio=120 target_cpu=000
              hb-10      [000] d..2.   100.000030: sched_switch: prev_comm=hb prev_pid=10 prev_prio=120 prev_state=S ==> next_comm=hb next_pid=11 next_prio=120
              hb-11      [000] d..2.   100.000050: sched_switch: prev_comm=hb prev_pid=11 prev_prio=120 prev_state=S ==> next_comm=kworker/0:1 next_pid=7 next_prio=120
";

    #[test]
    fn counts_and_distributions_of_the_kept_tasks() {
        let lines = parse_trace(TRACE).unwrap();
        let s = TraceSummary::of(&lines, &|c| c == "hb");
        assert_eq!(s.tasks.len(), 2, "the kworker is not kept");
        assert_eq!(s.tasks[&10].switches, 1);
        let t11 = &s.tasks[&11];
        assert_eq!((t11.switches, t11.wakeups, t11.migrations), (1, 1, 1));
        // Task 10 ran 30 us, task 11 20 us; task 11 waited 20 us from its waking
        // (10 us) to its switch-in (30 us).
        assert_eq!(s.run_ns.len(), 2);
        assert!(s.run_ns.equivalent(s.run_ns.min(), 20_000) && s.run_ns.equivalent(s.run_ns.max(), 30_000));
        assert_eq!(s.wakeup_latency_ns.len(), 1);
        assert!(s.wakeup_latency_ns.equivalent(s.wakeup_latency_ns.max(), 20_000));
        assert_eq!(s.span(), (100_000_000_000, 100_000_050_000));
    }

    /// Preemptions and who moved whom: a wakeup's placement, a pull in task
    /// context (newidle), in a busy CPU's softirq, by an idle CPU.
    #[test]
    fn preemptions_and_migration_kinds() {
        let trace = format!(
            "{TRACE}\
          <idle>-0       [001] d..2.   100.000055: sched_wakeup: comm=hb pid=10 prio=120 target_cpu=001
          <idle>-0       [001] d..2.   100.000056: sched_switch: prev_comm=swapper/1 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=hb next_pid=10 next_prio=120
              hb-10      [001] d..2.   100.000060: sched_switch: prev_comm=hb prev_pid=10 prev_prio=120 prev_state=R+ ==> next_comm=hb next_pid=12 next_prio=120
              hb-12      [001] d.s2.   100.000070: sched_migrate_task: comm=hb pid=10 prio=120 orig_cpu=1 dest_cpu=1
              hb-12      [001] d..2.   100.000080: sched_migrate_task: comm=hb pid=10 prio=120 orig_cpu=1 dest_cpu=0
          <idle>-0       [000] d.s2.   100.000090: sched_migrate_task: comm=hb pid=10 prio=120 orig_cpu=0 dest_cpu=1
"
        );
        let s = TraceSummary::of(&parse_trace(&trace).unwrap(), &|c| c == "hb");
        // Task 10, woken and switched in at 100.000056, is preempted 4 us later.
        assert_eq!(s.tasks[&10].involuntary, 1);
        assert_eq!(s.preempted_after_ns.len(), 1);
        assert!(s.preempted_after_ns.equivalent(s.preempted_after_ns.max(), 4_000));
        // Task 11 moved as it woke (in TRACE); task 10, runnable, three times.
        let kinds: Vec<(MigrationKind, u64)> = s.migration_kinds.iter().map(|(&k, &n)| (k, n)).collect();
        assert_eq!(
            kinds,
            vec![
                (MigrationKind::Wakeup, 1),
                (MigrationKind::TaskContext, 1),
                (MigrationKind::Interrupt, 1),
                (MigrationKind::IdleCpu, 1),
            ]
        );
    }

    /// With sched_stat_runtime lines, each run's charged runtime is the sum of
    /// its task's lines between its switch-in and its switch-out; without any,
    /// there are no charged figures.
    #[test]
    fn wakeups_that_preempt_the_task_they_land_on() {
        // CPU 1 runs 20; 10 on CPU 0 wakes 21 onto CPU 1 (remote) and 20 is
        // preempted by it; 10 then wakes 22 onto its own CPU (local), wakes 23 onto
        // CPU 1 while 21 runs there (remote), and blocks; 21 blocks too. A wakeup
        // of an idle CPU (CPU 2, in its own hardirq) counts as neither.
        let trace = "\
          <idle>-0     [001] d..2. 1.000000: sched_switch: prev_comm=swapper/1 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=hb next_pid=20 next_prio=120
          <idle>-0     [000] d..2. 1.000001: sched_switch: prev_comm=swapper/0 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=hb next_pid=10 next_prio=120
              hb-10    [000] d..2. 1.000010: sched_waking: comm=hb pid=21 prio=120 target_cpu=001
              hb-10    [000] d..2. 1.000011: sched_wakeup: comm=hb pid=21 prio=120 target_cpu=001
              hb-20    [001] d..2. 1.000015: sched_switch: prev_comm=hb prev_pid=20 prev_prio=120 prev_state=R ==> next_comm=hb next_pid=21 next_prio=120
              hb-10    [000] d..2. 1.000020: sched_waking: comm=hb pid=22 prio=120 target_cpu=000
              hb-10    [000] d..2. 1.000021: sched_wakeup: comm=hb pid=22 prio=120 target_cpu=000
              hb-10    [000] d..2. 1.000022: sched_waking: comm=hb pid=23 prio=120 target_cpu=001
              hb-10    [000] d..2. 1.000023: sched_wakeup: comm=hb pid=23 prio=120 target_cpu=001
              hb-10    [000] d..2. 1.000025: sched_switch: prev_comm=hb prev_pid=10 prev_prio=120 prev_state=S ==> next_comm=hb next_pid=22 next_prio=120
              hb-21    [001] d..2. 1.000030: sched_switch: prev_comm=hb prev_pid=21 prev_prio=120 prev_state=S ==> next_comm=hb next_pid=23 next_prio=120
          <idle>-0     [002] dNh2. 1.000040: sched_wakeup: comm=hb pid=24 prio=120 target_cpu=002
";
        let s = TraceSummary::of(&parse_trace(trace).unwrap(), &|c| c == "hb");
        let w = s.wakeup_preemptions;
        assert_eq!((w.remote, w.remote_preempted, w.local, w.local_preempted), (2, 1, 1, 0));
        let f: BTreeMap<&str, f64> = s.figures().into_iter().collect();
        assert_eq!(f["of them, its run ended preempted %"], 50.0);
        assert_eq!(f["of them, the waker preempted %"], 0.0);
    }

    /// Wakeup placement against the waker's CPU and the wakee's last: in TRACE,
    /// 10 on CPU 0 wakes 11 (last on CPU 1) onto CPU 0: a pull. Then 11 on CPU 0
    /// wakes 10 (last on CPU 0) there, and a waker on CPU 2 wakes 11 (last on
    /// CPU 0) onto CPU 1, a third CPU.
    #[test]
    fn wakeups_placed_against_the_wakers_cpu() {
        let trace = format!(
            "{TRACE}              hb-11      [000] d..2.   100.000060: sched_waking: comm=hb pid=10 prio=120 target_cpu=000
              hb-11      [000] d..2.   100.000061: sched_wakeup: comm=hb pid=10 prio=120 target_cpu=000
              hb-12      [002] d..2.   100.000070: sched_waking: comm=hb pid=11 prio=120 target_cpu=000
              hb-12      [002] d..2.   100.000071: sched_wakeup: comm=hb pid=11 prio=120 target_cpu=001
"
        );
        let s = TraceSummary::of(&parse_trace(&trace).unwrap(), &|c| c == "hb");
        let p = s.wakeup_placements;
        assert_eq!((p.cross, p.cross_pulled, p.cross_elsewhere, p.same, p.same_moved), (2, 1, 1, 1, 0));
        let f: BTreeMap<&str, f64> = s.figures().into_iter().collect();
        assert_eq!(f["of them, onto the waker's CPU %"], 50.0);
        assert_eq!(f["of them, onto another CPU %"], 0.0);
    }

    #[test]
    fn runtime_charged_per_run_from_sched_stat_runtime() {
        assert!(TraceSummary::of(&parse_trace(TRACE).unwrap(), &|c| c == "hb").charged_figures().is_empty());
        let trace = "\
           <idle>-0       [000] d..2.   100.000000: sched_switch: prev_comm=swapper/0 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=hb next_pid=10 next_prio=120
              hb-10      [000] d..2.   100.000010: sched_stat_runtime: comm=hb pid=10 runtime=1500 [ns]
              hb-10      [000] d..2.   100.000020: sched_stat_runtime: comm=hb pid=10 runtime=2500 [ns]
              hb-10      [000] d..2.   100.000030: sched_switch: prev_comm=hb prev_pid=10 prev_prio=120 prev_state=R ==> next_comm=hb next_pid=11 next_prio=120
              hb-11      [000] d..2.   100.000040: sched_stat_runtime: comm=hb pid=11 runtime=7000 [ns]
              hb-11      [000] d..2.   100.000050: sched_switch: prev_comm=hb prev_pid=11 prev_prio=120 prev_state=S ==> next_comm=hb next_pid=10 next_prio=120
";
        let s = TraceSummary::of(&parse_trace(trace).unwrap(), &|c| c == "hb");
        assert_eq!(s.charged_ns.len(), 2);
        assert!(s.charged_preempted_ns.equivalent(s.charged_preempted_ns.max(), 4_000), "task 10: 1.5 + 2.5 us, preempted");
        assert!(s.charged_blocked_ns.equivalent(s.charged_blocked_ns.max(), 7_000), "task 11: 7 us, blocked");
        let f = s.charged_figures();
        assert_eq!(f.len(), 4);
        assert!((f[2].1 - 4.0).abs() < 0.01 && (f[3].1 - 7.0).abs() < 0.01, "{f:?}");
        assert_eq!(stat_runtime_args("comm=kworker/0:1 H pid=7 runtime=5 [ns]"), Some(("kworker/0:1 H", 7, 5)));
        assert_eq!(stat_runtime_args("comm=a pid=3 runtime=9 [ns] vruntime=100 [ns]"), Some(("a", 3, 9)));
        assert_eq!(stat_runtime_args("pid=3 runtime=9"), None);
    }

    /// A switch out of the idle task the kernel did not trace: task 10, woken
    /// onto idle CPU 1, is next seen running there (its own sched_waking line).
    /// Its run and the latency before it are unknown and left out; before this
    /// rule its wakeup latency ran on to its next traced switch-in (60 us).
    #[test]
    fn an_untraced_switch_in_measures_neither_the_run_nor_the_latency() {
        let trace = "\
           <idle>-0       [000] d..2.   100.000000: sched_switch: prev_comm=swapper/0 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=hb next_pid=11 next_prio=120
              hb-10      [001] d..2.   100.000001: sched_switch: prev_comm=hb prev_pid=10 prev_prio=120 prev_state=S ==> next_comm=swapper/1 next_pid=0 next_prio=120
              hb-11      [000] d..3.   100.000010: sched_waking: comm=hb pid=10 prio=120 target_cpu=001
          <idle>-0       [001] dNh2.   100.000015: sched_wakeup: comm=hb pid=10 prio=120 target_cpu=001
              hb-10      [001] d..3.   100.000020: sched_waking: comm=hb pid=11 prio=120 target_cpu=000
              hb-10      [001] d..2.   100.000025: sched_switch: prev_comm=hb prev_pid=10 prev_prio=120 prev_state=S ==> next_comm=swapper/1 next_pid=0 next_prio=120
              hb-11      [000] d..2.   100.000030: sched_switch: prev_comm=hb prev_pid=11 prev_prio=120 prev_state=S ==> next_comm=hb next_pid=12 next_prio=120
              hb-12      [000] d..2.   100.000040: sched_switch: prev_comm=hb prev_pid=12 prev_prio=120 prev_state=R ==> next_comm=hb next_pid=10 next_prio=120
";
        let s = TraceSummary::of(&parse_trace(trace).unwrap(), &|c| c == "hb");
        assert_eq!(s.untraced_switch_ins, 1);
        // Runs measured: task 11 (0-30 us) and task 12 (30-40 us); not task 10's.
        assert_eq!(s.run_ns.len(), 2);
        assert!(s.run_ns.equivalent(s.run_ns.max(), 30_000));
        // No wakeup latency for task 10's untraced switch-in; its later switch-in
        // at 40 us follows no waking.
        assert_eq!(s.wakeup_latency_ns.len(), 0);
        assert_eq!(s.tasks[&10].switches, 2);
        // A trace whose every switch is recorded has none.
        assert_eq!(TraceSummary::of(&parse_trace(TRACE).unwrap(), &|c| c == "hb").untraced_switch_ins, 0);
    }

    /// Read as a stream, the trace gives the same summary as parsed whole.
    #[test]
    fn a_streamed_trace_summarises_as_a_parsed_one() {
        let mut streamed = TraceSummary::default();
        for l in crate::read_trace(TRACE.as_bytes()) {
            streamed.add(&l.unwrap(), &|c| c == "hb");
        }
        let whole = TraceSummary::of(&parse_trace(TRACE).unwrap(), &|c| c == "hb");
        assert_eq!(streamed.figures(), whole.figures());
        let bad = format!("{TRACE}not a trace line\n");
        let e = crate::read_trace(bad.as_bytes()).find_map(|l| l.err()).unwrap();
        assert_eq!((e.line_no, e.line.as_str()), (7, "not a trace line"));
    }

    #[test]
    fn the_most_different_figure_comes_first() {
        let lines = parse_trace(TRACE).unwrap();
        let real = TraceSummary::of(&lines, &|c| c == "hb");
        let mut sim = real.clone();
        sim.tasks.get_mut(&11).unwrap().migrations = 10;
        let d = compare(&real, &sim);
        assert_eq!(d[0].figure, "migrations");
        assert_eq!((d[0].real, d[0].sim), (1.0, 10.0));
        assert_eq!(d.last().unwrap().distance(), 0.0);
    }
}
