//! The host's own background threads: kernel threads and daemons that wake while a
//! benchmark runs and make two real runs of it differ. Measured by recording
//! `sched_switch` in a private tracefs instance while this process sleeps, and
//! summarised per kind of thread as `MachineProfile::background` entries.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use schedlab_core::cost::BackgroundThreads;
use schedlab_trace::{parse_trace, Event};

use crate::tracefs::Instance;
use crate::{signals, HostError};

/// What a recording of the idle host showed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackgroundSample {
    /// One entry per kind of thread that ran, most CPU time first.
    pub threads: Vec<BackgroundThreads>,
    /// Runs of each kind and the CPU time they took, in the same order.
    pub runs: Vec<(u64, u64)>,
    /// Runs of real-time threads (prio below 100: migration/N, watchdogs),
    /// which schedlab's fair-class background does not model.
    pub rt_runs: u64,
    /// The recorded span, ns.
    pub span_ns: u64,
}

/// Records the host for `span` while this process sleeps, then summarises it.
/// Needs root (tracefs). Threads of this process are left out.
/// A signal during the recording removes the instance, then takes effect as it
/// would have without this step (the command's own handling of it, or its end).
pub fn measure(span: Duration, ncpus: usize) -> Result<BackgroundSample, HostError> {
    let own = own_tids();
    let guard = signals::install_scoped();
    let recorded = record(span);
    guard.finish();
    let (text, span_ns) = recorded?;
    summarise(&text, span_ns, ncpus, &|pid| own.contains(&pid))
}

/// The recording itself: the instance is removed on every path out of here.
fn record(span: Duration) -> Result<(String, u64), HostError> {
    let inst = Instance::open(4096)?;
    inst.set_on(true)?;
    let start = Instant::now();
    while start.elapsed() < span && !signals::interrupted() {
        std::thread::sleep(Duration::from_millis(20));
    }
    inst.set_on(false)?;
    let span_ns = start.elapsed().as_nanos() as u64;
    if signals::interrupted() {
        return Err(HostError::new("recording the host's background threads", "interrupted"));
    }
    Ok((inst.read_trace()?, span_ns))
}

/// The thread ids of this process.
fn own_tids() -> Vec<u32> {
    std::fs::read_dir("/proc/self/task")
        .map(|d| d.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok()).collect())
        .unwrap_or_default()
}

/// A thread's kind and whether it is bound to one CPU, from its comm: the
/// per-CPU kernel threads are named `name/CPU` (`ksoftirqd/1`, `kworker/0:1H`,
/// `cpuhp/0`); unbound ones `kworker/u8:2` or a plain name whose trailing
/// instance number is dropped (`kdamond.0` → `kdamond`).
pub fn kind_of(comm: &str) -> (String, bool) {
    if let Some((name, rest)) = comm.split_once('/') {
        let per_cpu = rest.starts_with(|c: char| c.is_ascii_digit());
        return (name.to_string(), per_cpu);
    }
    let name = comm.trim_end_matches(|c: char| c.is_ascii_digit()).trim_end_matches(['.', '-', '_', ':']);
    (if name.is_empty() { comm.to_string() } else { name.to_string() }, false)
}

/// Per kind of thread: runs, the CPU time of those whose switch-in was traced,
/// and the nice value its prio shows.
#[derive(Default)]
struct Kind {
    runs: u64,
    traced_runs: u64,
    traced_ns: u64,
    /// Runs switched in untraced, each from the later of its wakeup and its
    /// CPU's last traced switch: an upper bound, used only for a kind with no
    /// traced run.
    bounded_ns: u64,
    nice: i32,
}

impl Kind {
    /// Mean CPU time per run.
    fn run_ns(&self) -> u64 {
        match (self.traced_runs, self.runs - self.traced_runs) {
            (0, 0) => 0,
            (0, untraced) => self.bounded_ns / untraced,
            (traced, _) => self.traced_ns / traced,
        }
    }
}

/// The longest mean run a background kind may have (`MachineProfile::check`'s
/// bound on `background[].run_ns`).
const MAX_BACKGROUND_RUN_NS: u64 = 10_000_000;

/// Summarises a recording of `span_ns` on `ncpus` CPUs: every run of a thread
/// other than the idle task and `own` threads, from its switch-in to its
/// switch-out (a run already under way when the recording started is left out).
/// A per-CPU kind's rate is per thread, i.e. per CPU.
///
/// A kernel may not trace every switch: this project's hosts trace neither the
/// switch out of the idle task on their second vCPU nor the wakeups that vCPU
/// handles as it leaves idle, so a thread run there is seen only switching out,
/// from a CPU whose last traced switch went to the idle task. Such a run counts
/// towards its kind's rate (if the thread was seen before, so that it did not
/// start before the recording), and takes its kind's mean traced run length; a
/// kind never traced whole takes each run from the later of the thread's last
/// traced wakeup and the CPU's last traced switch (an upper bound).
pub fn summarise(text: &str, span_ns: u64, ncpus: usize, own: &dyn Fn(u32) -> bool) -> Result<BackgroundSample, HostError> {
    let lines = parse_trace(text).map_err(|e| HostError::new("reading the background recording", e))?;
    // Per CPU: the thread its last traced switch put there, and when.
    let mut on_cpu: BTreeMap<u32, (u32, u64)> = BTreeMap::new();
    // Per thread: when it was last seen woken (sched_waking or sched_wakeup);
    // a thread in this map was seen in the recording before.
    let mut woken: BTreeMap<u32, Option<u64>> = BTreeMap::new();
    let mut kinds: BTreeMap<(String, bool), Kind> = BTreeMap::new();
    let mut rt_runs = 0;
    for l in &lines {
        let (prev_comm, prev_pid, prev_prio, next_pid) = match &l.event {
            Event::Waking { pid, .. } | Event::Wakeup { pid, .. } | Event::WakeupNew { pid, .. } => {
                woken.insert(*pid, Some(l.ts_ns));
                continue;
            }
            Event::Switch { prev_comm, prev_pid, prev_prio, next_pid, .. } => (prev_comm, prev_pid, prev_prio, next_pid),
            _ => continue,
        };
        let cpu_last = on_cpu.insert(l.cpu, (*next_pid, l.ts_ns));
        woken.entry(*next_pid).or_insert(None);
        let prev_seen = woken.insert(*prev_pid, None);
        if *prev_pid == 0 || own(*prev_pid) {
            continue;
        }
        // (traced run length, or the bound on an untraced one)
        let run = match cpu_last {
            Some((pid, since)) if pid == *prev_pid => Some((true, l.ts_ns.saturating_sub(since))),
            Some((_, since)) => prev_seen.map(|w| (false, l.ts_ns.saturating_sub(w.map_or(since, |w| w.max(since))))),
            None => None,
        };
        let Some((traced, ns)) = run else { continue };
        if *prev_prio < 100 {
            rt_runs += 1;
            continue;
        }
        let k = kinds.entry(kind_of(prev_comm)).or_default();
        k.runs += 1;
        if traced {
            k.traced_runs += 1;
            k.traced_ns += ns.max(1);
        } else {
            k.bounded_ns += ns.max(1);
        }
        k.nice = (prev_prio - 120).clamp(-20, 19);
    }
    let mut ranked: Vec<((String, bool), Kind)> = kinds.into_iter().collect();
    ranked.sort_by(|a, b| (b.1.runs * b.1.run_ns()).cmp(&(a.1.runs * a.1.run_ns())).then_with(|| a.0.cmp(&b.0)));
    let mut threads = Vec::new();
    let mut runs = Vec::new();
    for ((comm, per_cpu), k) in ranked {
        // A kind whose runs last longer than a profile's background thread may
        // (MachineProfile::check: 10 ms) is a CPU-bound task that ran during the
        // recording (another program's work, a parallel build or test), not the
        // machine's background: left out, so the profile stays readable.
        if k.run_ns() > MAX_BACKGROUND_RUN_NS {
            continue;
        }
        let threads_of_kind = if per_cpu { ncpus.max(1) as u64 } else { 1 };
        let mean_interval_ns = (span_ns * threads_of_kind / k.runs).clamp(10_000, 3_600_000_000_000);
        let run_ns = k.run_ns().clamp(1, mean_interval_ns - 1);
        let comm: String = comm.chars().filter(|c| !c.is_whitespace()).take(15).collect();
        let comm = if comm.is_empty() { "background".to_string() } else { comm };
        threads.push(BackgroundThreads { comm, per_cpu, mean_interval_ns, run_ns, nice: k.nice });
        runs.push((k.runs, k.runs * k.run_ns()));
    }
    Ok(BackgroundSample { threads, runs, rt_runs, span_ns })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_drop_cpu_and_instance_numbers() {
        assert_eq!(kind_of("kworker/0:1H"), ("kworker".into(), true));
        assert_eq!(kind_of("kworker/u8:2"), ("kworker".into(), false));
        assert_eq!(kind_of("ksoftirqd/1"), ("ksoftirqd".into(), true));
        assert_eq!(kind_of("kdamond.0"), ("kdamond".into(), false));
        assert_eq!(kind_of("memfd:sealed-91"), ("memfd:sealed".into(), false));
        assert_eq!(kind_of("rcu_preempt"), ("rcu_preempt".into(), false));
        assert_eq!(kind_of("1234"), ("1234".into(), false));
    }

    /// Two CPUs recorded for 1 s: a per-CPU kworker runs 3 times (10, 20 and 30 us),
    /// an unbound daemon twice (1 ms each), a real-time thread once, and our own
    /// thread once. The run already under way at the start is not counted.
    #[test]
    fn runs_are_counted_per_kind_with_rates_per_thread() {
        let sw = |cpu: u32, t_us: u64, prev: &str, ppid: u32, pprio: i32, next: &str, npid: u32| {
            format!(
                "          <idle>-0       [{cpu:03}] d..2.  {}.{:06}: sched_switch: prev_comm={prev} prev_pid={ppid} prev_prio={pprio} prev_state=S ==> next_comm={next} next_pid={npid} next_prio=120\n",
                t_us / 1_000_000,
                t_us % 1_000_000
            )
        };
        let mut text = String::from("# tracer: nop\n");
        text += &sw(0, 5, "kworker/0:1", 30, 120, "swapper/0", 0); // started before: not counted
        text += &sw(0, 100, "swapper/0", 0, 120, "kworker/0:1", 30);
        text += &sw(0, 110, "kworker/0:1", 30, 120, "swapper/0", 0);
        text += &sw(1, 200, "swapper/1", 0, 120, "kworker/1:0", 31);
        text += &sw(1, 220, "kworker/1:0", 31, 120, "kdamond.0", 76);
        text += &sw(1, 1220, "kdamond.0", 76, 120, "swapper/1", 0);
        text += &sw(0, 300, "swapper/0", 0, 120, "kworker/0:1", 30);
        text += &sw(0, 330, "kworker/0:1", 30, 120, "migration/0", 18);
        text += &sw(0, 340, "migration/0", 18, 0, "schedlab", 999);
        text += &sw(0, 400, "schedlab", 999, 120, "kdamond.0", 76);
        text += &sw(0, 1400, "kdamond.0", 76, 120, "swapper/0", 0);
        let s = summarise(&text, 1_000_000_000, 2, &|pid| pid == 999).unwrap();
        assert_eq!(s.rt_runs, 1);
        assert_eq!(s.runs, vec![(2, 2_000_000), (3, 60_000)]);
        let kd = &s.threads[0];
        assert_eq!((kd.comm.as_str(), kd.per_cpu, kd.mean_interval_ns, kd.run_ns), ("kdamond", false, 500_000_000, 1_000_000));
        let kw = &s.threads[1];
        // 3 runs over 2 threads in 1 s: one per 667 ms per thread.
        assert_eq!((kw.comm.as_str(), kw.per_cpu, kw.mean_interval_ns, kw.run_ns), ("kworker", true, 666_666_666, 20_000));
    }

    /// A kind running 15 ms at a time (a CPU-bound program that ran during the
    /// recording) is not background: left out, and the profile written from the
    /// rest stays within what a profile accepts.
    #[test]
    fn a_cpu_bound_kind_is_not_background() {
        let sw = |cpu: u32, t_us: u64, prev: &str, ppid: u32, next: &str, npid: u32| {
            format!(
                "          <idle>-0       [{cpu:03}] d..2.  {}.{:06}: sched_switch: prev_comm={prev} prev_pid={ppid} prev_prio=120 prev_state=S ==> next_comm={next} next_pid={npid} next_prio=120\n",
                t_us / 1_000_000,
                t_us % 1_000_000
            )
        };
        let mut text = String::from("# tracer: nop\n");
        text += &sw(0, 100, "swapper/0", 0, "cargo", 500);
        text += &sw(0, 15_100, "cargo", 500, "kdamond.0", 76);
        text += &sw(0, 16_100, "kdamond.0", 76, "swapper/0", 0);
        let s = summarise(&text, 1_000_000_000, 2, &|_| false).unwrap();
        let kinds: Vec<&str> = s.threads.iter().map(|t| t.comm.as_str()).collect();
        assert_eq!(kinds, vec!["kdamond"]);
        assert_eq!(s.runs, vec![(1, 1_000_000)]);
    }

    /// CPU 1's switches out of the idle task are not traced (this project's
    /// hosts): a run there is seen only as the thread's switch-out. It counts
    /// for its kind's rate and takes the kind's mean traced run; a kind never
    /// traced whole is bounded by the thread's last wakeup. A thread not seen
    /// before its first switch-out may have started before the recording and is
    /// left out.
    #[test]
    fn runs_switched_in_untraced_count_with_their_kinds_traced_length() {
        let line = |cpu: u32, t_us: u64, what: &str| {
            format!("          <idle>-0       [{cpu:03}] d..2.  {}.{:06}: {what}\n", t_us / 1_000_000, t_us % 1_000_000)
        };
        let switch = |prev: &str, ppid: u32, next: &str, npid: u32| {
            format!("sched_switch: prev_comm={prev} prev_pid={ppid} prev_prio=120 prev_state=S ==> next_comm={next} next_pid={npid} next_prio=120")
        };
        let waking = |comm: &str, pid: u32, cpu: u32| format!("sched_waking: comm={comm} pid={pid} prio=120 target_cpu={cpu:03}");
        let mut text = String::from("# tracer: nop\n");
        text += &line(0, 100, &switch("swapper/0", 0, "kworker/0:1", 30));
        text += &line(0, 110, &switch("kworker/0:1", 30, "swapper/0", 0)); // traced: 10 us
        text += &line(1, 100, &switch("kdamond.0", 76, "swapper/1", 0)); // under way at the start
        text += &line(0, 2000, &waking("kworker/1:0", 31, 1));
        text += &line(1, 2030, &switch("kworker/1:0", 31, "swapper/1", 0)); // untraced: the kind's 10 us
        text += &line(0, 2500, &waking("rcu_preempt", 15, 1));
        text += &line(1, 2600, &switch("rcu_preempt", 15, "swapper/1", 0)); // untraced, no traced kind: 100 us
        text += &line(1, 3000, &switch("kcompactd0", 40, "swapper/1", 0)); // never seen before: left out
        let s = summarise(&text, 1_000_000_000, 2, &|_| false).unwrap();
        let runs: Vec<(&str, (u64, u64))> = s.threads.iter().map(|t| t.comm.as_str()).zip(s.runs.iter().copied()).collect();
        assert_eq!(runs, vec![("rcu_preempt", (1, 100_000)), ("kworker", (2, 20_000))]);
    }
}
