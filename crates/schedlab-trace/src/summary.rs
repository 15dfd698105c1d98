//! What a trace says a workload's tasks did, in numbers that compare across a
//! real recording and a simulated one: per task, switches out, wakeups and
//! migrations; over all kept tasks, run lengths (switch-in to switch-out) and
//! wakeup latencies (sched_waking, or sched_wakeup_new for a new task, to its
//! switch-in). A summary is built one event at a time ([`TraceSummary::add`]), in
//! memory that grows with the tasks, not with the trace: the distributions are
//! histograms (3 significant figures).

use std::collections::BTreeMap;

use hdrhistogram::Histogram;

use crate::{Event, Line};

/// One task's counts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TaskTrace {
    pub comm: String,
    pub switches: u64,
    pub wakeups: u64,
    pub migrations: u64,
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
    running_since: BTreeMap<u32, u64>,
    woken_at: BTreeMap<u32, u64>,
}

impl Default for TraceSummary {
    fn default() -> Self {
        let histogram = || Histogram::new(3).expect("3 significant figures are valid");
        TraceSummary {
            tasks: BTreeMap::new(),
            span_ns: (u64::MAX, 0),
            run_ns: histogram(),
            wakeup_latency_ns: histogram(),
            running_since: BTreeMap::new(),
            woken_at: BTreeMap::new(),
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
        match &l.event {
            Event::Switch { prev_comm, prev_pid, next_comm, next_pid, .. } => {
                if self.touch(*prev_pid, prev_comm, ts, keep) {
                    self.tasks.get_mut(prev_pid).expect("touched").switches += 1;
                    if let Some(since) = self.running_since.remove(prev_pid) {
                        record(&mut self.run_ns, ts.checked_sub(since));
                    }
                }
                if self.touch(*next_pid, next_comm, ts, keep) {
                    self.running_since.insert(*next_pid, ts);
                    if let Some(w) = self.woken_at.remove(next_pid) {
                        record(&mut self.wakeup_latency_ns, ts.checked_sub(w));
                    }
                }
            }
            Event::Waking { comm, pid, .. } if self.touch(*pid, comm, ts, keep) => {
                self.woken_at.entry(*pid).or_insert(ts);
            }
            Event::WakeupNew { comm, pid, .. } if self.touch(*pid, comm, ts, keep) => {
                self.woken_at.insert(*pid, ts);
            }
            Event::Wakeup { comm, pid, .. } if self.touch(*pid, comm, ts, keep) => {
                self.tasks.get_mut(pid).expect("touched").wakeups += 1;
            }
            Event::MigrateTask { comm, pid, .. } if self.touch(*pid, comm, ts, keep) => {
                self.tasks.get_mut(pid).expect("touched").migrations += 1;
            }
            _ => {}
        }
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

    /// The numbers [`compare`] puts side by side, by name: totals, then
    /// percentiles of run length and wakeup latency (µs), then the spread of
    /// switches across tasks.
    pub fn figures(&self) -> Vec<(&'static str, f64)> {
        let mut per_task: Vec<u64> = self.tasks.values().map(|t| t.switches).collect();
        per_task.sort_unstable();
        let us = |h: &Histogram<u64>, q: f64| if h.is_empty() { 0.0 } else { h.value_at_quantile(q) as f64 / 1000.0 };
        vec![
            ("tasks", self.tasks.len() as f64),
            ("switches", self.sum(|t| t.switches) as f64),
            ("wakeups", self.sum(|t| t.wakeups) as f64),
            ("migrations", self.sum(|t| t.migrations) as f64),
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
