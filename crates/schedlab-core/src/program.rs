//! What tasks do: small programs of operations, generated lazily. A program is a
//! state machine asked for its next operation each time the previous one completes,
//! so hackbench at 100000 loops holds a loop counter, not 40 million operations.

use crate::cpuset::CpuSet;
use crate::rng::SimRng;
use crate::task::TaskId;

/// A channel: one direction of a pipe or of an AF_UNIX stream socket pair.
pub type ChanId = usize;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ForkKind {
    /// fork(): a new process.
    Process,
    /// clone(CLONE_THREAD): a thread of the caller's process.
    Thread,
}

/// One operation. Everything but `Compute`, `Cycles`, `Mark` and `Store` is a system call and
/// runs in the kernel (not preemptible until it returns, as on PREEMPT_NONE/VOLUNTARY).
pub enum Op {
    /// Run in user space for `ns`.
    Compute { ns: u64 },
    /// Run in user space for `n` core cycles: its time is the machine's
    /// (`MachineProfile::cpu_mhz`). For user work whose instruction count is
    /// known and whose speed follows the clock (a byte loop, one iteration a
    /// cycle).
    Cycles { n: u64 },
    /// Work that takes `ns` alone on an idle machine while moving `bytes` through
    /// memory: it slows down when the node's memory bandwidth is oversubscribed
    /// (see `memory.rs`), and runs `distance / local distance` slower when the
    /// memory is on another node.
    Stream { ns: u64, bytes: u64, at: MemAt },
    /// A system call whose body runs `ns` in the kernel without blocking: exec(),
    /// open() and read() from the page cache, the page faults of a new image. It
    /// counts as system time.
    Kernel { ns: u64 },
    /// execve(): `ns` of kernel work (opening and loading the new image). Linux
    /// first calls `sched_exec()`, which may move the task to the idlest CPU of
    /// its domains that balance at exec (`SD_BALANCE_EXEC`) through the stopper;
    /// the work then runs there. FreeBSD does not balance at exec.
    Exec { ns: u64 },
    /// pipe(): result `Chan(id)`, a channel read and written by anyone who holds it.
    Pipe,
    /// pipe2(O_DIRECT): a pipe in packet mode (each write its own slot, each read
    /// one packet). Result `Chan(id)`.
    PipePacket,
    /// close() of a pipe's last descriptor (`chan` from `Pipe` or `PipePacket`):
    /// the pipe is freed, and a later pipe() may get its id. Nobody may be
    /// waiting on it, or use it again.
    Close { chan: ChanId },
    /// socketpair(AF_UNIX, SOCK_STREAM): result `Chan(id)`; `id` carries end 0 → end 1
    /// and `id + 1` carries end 1 → end 0.
    SocketPair,
    /// A TCP connection over loopback (connect() + accept(), TCP_NODELAY), result
    /// `Chan(id)`: `id` carries client → server and `id + 1` server → client.
    TcpConnect,
    /// Blocking write of `bytes`; completes when all are written. Result `Bytes(n)`.
    Write { chan: ChanId, bytes: u64 },
    /// Blocking read of up to `bytes`; completes when at least one byte was read.
    /// Result `Bytes(n)`.
    Read { chan: ChanId, bytes: u64 },
    /// poll() for POLLIN with no timeout.
    Poll { chan: ChanId },
    /// nanosleep().
    Sleep { ns: u64 },
    /// fork()/clone(): the child runs `program`. Result `Task(child)`.
    Fork { kind: ForkKind, comm: Option<String>, program: Box<dyn Program> },
    /// exit(): the task ends.
    Exit,
    /// wait(): reap any exited child. Result `Task(child)` or `NoChild`.
    WaitChild,
    /// pthread_join(): wait until `task` has exited.
    Join { task: TaskId },
    /// futex(FUTEX_WAIT): sleep while the word `key` equals `expected`.
    FutexWait { key: u64, expected: u64 },
    /// futex(FUTEX_WAKE): wake up to `nr` waiters of `key`. Result `Count(n)`.
    FutexWake { key: u64, nr: u32 },
    /// A plain store to the futex word `key` (no system call).
    Store { key: u64, value: u64 },
    /// sched_yield().
    Yield,
    /// Create the cgroup `path` (e.g. `/batch`, parents included, as `mkdir -p`)
    /// if needed, set its `cpu.shares`, and move this task into it (writing its
    /// pid to `cgroup.procs`). Children forked later inherit the group.
    JoinGroup { path: String, shares: u64 },
    /// setpriority()/nice(): change this task's nice value.
    SetNice { nice: i32 },
    /// sched_setattr() of a SCHED_NORMAL task with `sched_runtime` = `ns`: its
    /// own slice (v6.12+; 0 returns to the default; older kernels ignore it).
    SetSlice { ns: u64 },
    /// Record the current time under `label` (gettimeofday(), no cost modelled).
    Mark { label: u32 },
    /// Read the clock (clock_gettime() through the vDSO, no cost modelled).
    /// Result `Time(ns)`.
    Clock,
    /// Add `value` to the workload's own distribution `metric` (a benchmark's
    /// latency histogram), counted only inside the measured window.
    Record { metric: u32, value: u64 },
    /// sched_getcpu() (rseq or the vDSO, no cost modelled): the CPU the task runs
    /// on. Result `Count(cpu)`.
    GetCpu,
    /// sched_setaffinity(0, ...): from now the task may run only on `cpus`. If its
    /// CPU is not among them, the call moves it before returning, as Linux's
    /// `affine_move_task()` does through the stopper (`migration_cpu_stop`), to
    /// the CPU `cpumask_any_and_distribute()` picks (kernel/sched/core.c, v5.15 to
    /// v6.18). Only policies that model that move accept it
    /// (`SchedClass::pushes_running_tasks`). It costs a system call's entry and
    /// exit, the stopper's switch when it moves the task; the mask checks
    /// themselves are not costed.
    SetAffinity { cpus: CpuSet },
    /// kill(pid, SIGKILL) of `task`, which exits when it next asks its program for
    /// an operation: a CPU-bound task at the end of its current segment. A task
    /// blocked in a system call is not woken for it (not modelled); a task that
    /// has exited is left alone.
    Kill { task: TaskId },
}

/// Which node's memory a stream uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemAt {
    /// Pages first touched now, so allocated on the node of the CPU running the
    /// task (Linux's default local allocation): page faults, fresh buffers.
    Local,
    /// The task's home node: where it first ran, i.e. where its memory was first
    /// touched after fork.
    Home,
}

/// The outcome of the previous operation, handed to `Program::next`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpResult {
    None,
    Bytes(u64),
    Chan(ChanId),
    Task(TaskId),
    Count(u32),
    NoChild,
    Time(u64),
}

/// The working set the machine profiles' migration costs are derived for
/// (machines/*.toml), and what a task's program touches unless it says otherwise.
pub const DEFAULT_WORKING_SET_BYTES: u64 = 256 * 1024;

/// A task's behaviour.
pub trait Program {
    /// The next operation, given the result of the last one. `rng` is this task's own
    /// workload stream.
    fn next(&mut self, last: OpResult, rng: &mut SimRng) -> Op;

    /// Bytes of cache the task touches in one run (its working set): what a
    /// migration, or a return to a core that others have used since, refills.
    /// Migration costs scale from the profiles' `DEFAULT_WORKING_SET_BYTES` to it.
    fn working_set_bytes(&self) -> u64 {
        DEFAULT_WORKING_SET_BYTES
    }
}

/// A program from a fixed list (tests and small scenarios); exits after the last op.
pub struct Script {
    ops: std::collections::VecDeque<Op>,
}

impl Script {
    pub fn new(ops: Vec<Op>) -> Self {
        Script { ops: ops.into() }
    }
}

impl Program for Script {
    fn next(&mut self, _last: OpResult, _rng: &mut SimRng) -> Op {
        self.ops.pop_front().unwrap_or(Op::Exit)
    }
}

/// A program driven by a closure of (step, last result).
pub struct FnProgram<F: FnMut(u64, OpResult, &mut SimRng) -> Op> {
    step: u64,
    f: F,
}

impl<F: FnMut(u64, OpResult, &mut SimRng) -> Op> FnProgram<F> {
    pub fn new(f: F) -> Self {
        FnProgram { step: 0, f }
    }
}

impl<F: FnMut(u64, OpResult, &mut SimRng) -> Op> Program for FnProgram<F> {
    fn next(&mut self, last: OpResult, rng: &mut SimRng) -> Op {
        let op = (self.f)(self.step, last, rng);
        self.step += 1;
        op
    }
}
