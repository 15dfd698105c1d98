//! schbench as the simulated workload describes it (schedlab-workloads'
//! schbench.rs, the masoncl/schbench design of 2023+ with `-L`): message threads,
//! each with its workers; a worker marks itself blocked, stamps the time, posts
//! itself on its message thread's list, wakes the message thread and futex-waits;
//! woken, it records its wakeup latency, sleeps `sleep_us` (usleep) and computes
//! `work_us` (a spin on the clock), and records the request latency. A message
//! thread takes the whole list, reads the clock once for all of it and futex-wakes
//! each. Samples count only inside the measured window (after `warmup_ms`, for
//! `runtime_ms`).

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use schedlab_workloads::schbench::Schbench;

use super::sys::THREAD_STACK_BYTES;
use crate::sys::{futex_wait, futex_wake, now_ns, spin_for};
use crate::HostError;

const BLOCKED: u32 = 1;
const RUNNING: u32 = 0;

struct Shared {
    msg_word: Vec<AtomicU32>,
    posted: Vec<Mutex<Vec<usize>>>,
    worker_word: Vec<AtomicU32>,
    wake_time: Vec<AtomicU64>,
    measuring: AtomicBool,
    /// Workers leave at their next look; message threads keep serving until
    /// every worker is gone (a worker may post once more), then get `stop_msgs`.
    stop: AtomicBool,
    stop_msgs: AtomicBool,
}

/// What a run measured: every in-window sample, ns, and the window.
pub struct SchbenchSamples {
    pub wakeup_ns: Vec<u64>,
    pub request_ns: Vec<u64>,
    pub window_ns: u64,
}

fn worker(s: &Shared, id: usize, msg: usize, sleep_us: u64, work_ns: u64) -> (Vec<u64>, Vec<u64>) {
    let (mut wake, mut req) = (Vec::new(), Vec::new());
    loop {
        if s.stop.load(Ordering::SeqCst) {
            return (wake, req);
        }
        s.worker_word[id].store(BLOCKED, Ordering::SeqCst);
        s.wake_time[id].store(now_ns(), Ordering::SeqCst);
        s.posted[msg].lock().expect("posted list").push(id);
        s.msg_word[msg].store(RUNNING, Ordering::SeqCst);
        let _ = futex_wake(&s.msg_word[msg], 1);
        while s.worker_word[id].load(Ordering::SeqCst) == BLOCKED {
            futex_wait(&s.worker_word[id], BLOCKED, None);
        }
        let woke = now_ns();
        if s.stop.load(Ordering::SeqCst) {
            return (wake, req);
        }
        let measuring = s.measuring.load(Ordering::Relaxed);
        if measuring {
            wake.push(woke.saturating_sub(s.wake_time[id].load(Ordering::SeqCst)));
        }
        let start = now_ns();
        // SAFETY: usleep has no preconditions.
        unsafe { libc::usleep(sleep_us.max(1) as libc::c_uint) };
        spin_for(work_ns);
        if measuring && s.measuring.load(Ordering::Relaxed) {
            req.push(now_ns() - start);
        }
    }
}

fn message_thread(s: &Shared, id: usize) {
    loop {
        if s.stop_msgs.load(Ordering::SeqCst) {
            return;
        }
        let batch = std::mem::take(&mut *s.posted[id].lock().expect("posted list"));
        if batch.is_empty() {
            // Blocked first, then look again, so that a post in between is not lost.
            s.msg_word[id].store(BLOCKED, Ordering::SeqCst);
            if s.posted[id].lock().expect("posted list").is_empty() && !s.stop_msgs.load(Ordering::SeqCst) {
                futex_wait(&s.msg_word[id], BLOCKED, None);
            }
            continue;
        }
        let now = now_ns();
        for w in batch {
            s.wake_time[w].store(now, Ordering::SeqCst);
            s.worker_word[w].store(RUNNING, Ordering::SeqCst);
            let _ = futex_wake(&s.worker_word[w], 1);
        }
    }
}

pub fn run(b: &Schbench) -> Result<SchbenchSamples, HostError> {
    let (m, t) = (b.threads as usize, b.workers as usize);
    let s = Arc::new(Shared {
        msg_word: (0..m).map(|_| AtomicU32::new(RUNNING)).collect(),
        posted: (0..m).map(|_| Mutex::new(Vec::new())).collect(),
        worker_word: (0..m * t).map(|_| AtomicU32::new(RUNNING)).collect(),
        wake_time: (0..m * t).map(|_| AtomicU64::new(0)).collect(),
        measuring: AtomicBool::new(false),
        stop: AtomicBool::new(false),
        stop_msgs: AtomicBool::new(false),
    });
    let spawn_err = |e| HostError::new("pthread_create()", e);
    let mut msgs = Vec::new();
    for id in 0..m {
        let s = s.clone();
        let h = std::thread::Builder::new()
            .name("schbench-msg".into())
            .stack_size(THREAD_STACK_BYTES)
            .spawn(move || message_thread(&s, id))
            .map_err(spawn_err)?;
        msgs.push(h);
    }
    let mut workers = Vec::new();
    for id in 0..m * t {
        let s = s.clone();
        let (sleep_us, work_ns) = (b.sleep_us, b.work_us * 1000);
        let h = std::thread::Builder::new()
            .name("schbench-worker".into())
            .stack_size(THREAD_STACK_BYTES)
            .spawn(move || worker(&s, id, id / t, sleep_us, work_ns))
            .map_err(spawn_err)?;
        workers.push(h);
    }
    std::thread::sleep(std::time::Duration::from_millis(b.warmup_ms));
    let t0 = now_ns();
    s.measuring.store(true, Ordering::SeqCst);
    std::thread::sleep(std::time::Duration::from_millis(b.runtime_ms));
    s.measuring.store(false, Ordering::SeqCst);
    let window_ns = now_ns() - t0;
    s.stop.store(true, Ordering::SeqCst);
    for w in &s.worker_word {
        w.store(RUNNING, Ordering::SeqCst);
        let _ = futex_wake(w, 1);
    }
    let (mut wakeup_ns, mut request_ns) = (Vec::new(), Vec::new());
    for h in workers {
        let (w, r) = h.join().map_err(|_| HostError::new("a schbench worker", "panicked"))?;
        wakeup_ns.extend(w);
        request_ns.extend(r);
    }
    s.stop_msgs.store(true, Ordering::SeqCst);
    for w in &s.msg_word {
        w.store(RUNNING, Ordering::SeqCst);
        let _ = futex_wake(w, 1);
    }
    for h in msgs {
        h.join().map_err(|_| HostError::new("a schbench message thread", "panicked"))?;
    }
    Ok(SchbenchSamples { wakeup_ns, request_ns, window_ns })
}
