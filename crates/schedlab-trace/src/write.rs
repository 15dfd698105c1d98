//! Writer for ftrace text in the 5.12+ layout.
//!
//! Output goes through `std::fmt::Write` into the caller's `String`, so writing a
//! large trace reuses one buffer instead of allocating per line.

use std::fmt::Write;

use crate::{Event, Line};

/// Appends `line` and a `'\n'` to `out`, as the kernel prints it:
/// `%16s-%-7d ` [`(%7s) `] `[%03d] ` flags ` %5lu.%06lu: ` name `: ` args.
///
/// The comm is printed exactly as given (callers pass `<idle>` for pid 0), and
/// the timestamp is truncated to microseconds, as the kernel does. Like the
/// kernel, comms are not truncated; a comm of 16+ bytes starting with `#` would
/// land in column 0 and read back as a comment (kernel comms are at most 15).
pub fn format_line(line: &Line, out: &mut String) {
    // Writing into a String cannot fail, so the fmt::Results below are ignored.
    pad_left(out, &line.comm, 16);
    let _ = write!(out, "-{:<7} ", line.pid);
    if let Some(tgid) = &line.tgid {
        out.push('(');
        pad_left(out, tgid, 7);
        out.push_str(") ");
    }
    let secs = line.ts_ns / 1_000_000_000;
    let usecs = line.ts_ns % 1_000_000_000 / 1_000;
    let _ = write!(out, "[{:03}] {} {:>5}.{:06}: {}: ", line.cpu, line.flags, secs, usecs, line.event.name());
    let _ = match &line.event {
        Event::Switch { prev_comm, prev_pid, prev_prio, prev_state, next_comm, next_pid, next_prio } => write!(
            out,
            "prev_comm={prev_comm} prev_pid={prev_pid} prev_prio={prev_prio} \
             prev_state={prev_state} ==> next_comm={next_comm} next_pid={next_pid} \
             next_prio={next_prio}"
        ),
        Event::Waking { comm, pid, prio, target_cpu }
        | Event::Wakeup { comm, pid, prio, target_cpu }
        | Event::WakeupNew { comm, pid, prio, target_cpu } => {
            write!(out, "comm={comm} pid={pid} prio={prio} target_cpu={target_cpu:03}")
        }
        Event::MigrateTask { comm, pid, prio, orig_cpu, dest_cpu } => {
            write!(out, "comm={comm} pid={pid} prio={prio} orig_cpu={orig_cpu} dest_cpu={dest_cpu}")
        }
        Event::ProcessFork { comm, pid, child_comm, child_pid } => {
            write!(out, "comm={comm} pid={pid} child_comm={child_comm} child_pid={child_pid}")
        }
        Event::ProcessExit { comm, pid, prio, group_dead } => {
            let r = write!(out, "comm={comm} pid={pid} prio={prio}");
            match group_dead {
                Some(dead) => write!(out, " group_dead={dead}"),
                None => r,
            }
        }
        Event::Other { args, .. } => {
            out.push_str(args);
            Ok(())
        }
    };
    out.push('\n');
}

/// Right-aligns `s` in `width` bytes like C's `%*s`. Rust's `{:>16}` counts
/// chars, which would differ from the kernel for non-ASCII comms.
fn pad_left(out: &mut String, s: &str, width: usize) {
    for _ in s.len()..width {
        out.push(' ');
    }
    out.push_str(s);
}

/// The 12-line header the kernel prints for the `nop` tracer with irq-info on
/// (5.12+ layout, with the migrate-disable column), each line ending in `'\n'`.
///
/// `entries` is used for both halves of `entries-in-buffer/entries-written`,
/// which is what a trace with no overwritten events shows.
pub fn header(entries: u64, ncpus: u32) -> String {
    format!(
        "# tracer: nop\n\
         #\n\
         # entries-in-buffer/entries-written: {entries}/{entries}   #P:{ncpus}\n\
         #\n\
         #                                _-----=> irqs-off/BH-disabled\n\
         #                               / _----=> need-resched\n\
         #                              | / _---=> hardirq/softirq\n\
         #                              || / _--=> preempt-depth\n\
         #                              ||| / _-=> migrate-disable\n\
         #                              |||| /     delay\n\
         #           TASK-PID     CPU#  |||||  TIMESTAMP  FUNCTION\n\
         #              | |         |   |||||     |         |\n"
    )
}
