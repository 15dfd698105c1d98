//! Hand-written parser for ftrace text lines.
//!
//! No regex: traces are large and the grammar is small. Every index used for
//! slicing comes from scanning ASCII bytes, so slices always fall on UTF-8
//! boundaries, and every access is bounds-checked, so no input can panic.

use crate::{Event, Line, ParseError};

/// Parses one line of trace text.
///
/// Returns `Ok(None)` for lines that carry no event: blank lines, header and
/// comment lines (`#`), and the ring buffer's `CPU:N [LOST M EVENTS]` markers
/// (they report a gap, not an event; failing the whole trace over them would make
/// overflowed recordings unreadable). The error's `line_no` is 0 because a
/// single line has no position; [`parse_trace`] fills in the real one.
pub fn parse_line(line: &str) -> Result<Option<Line>, ParseError> {
    parse_numbered(line, 0)
}

/// Parses a whole trace (header included), stopping at the first bad line.
///
/// The error names the 1-based line number within `text`.
pub fn parse_trace(text: &str) -> Result<Vec<Line>, ParseError> {
    // Event lines are ~130 bytes; reserving avoids most regrowth on big traces.
    let mut lines = Vec::with_capacity(text.len() / 128);
    for (i, raw) in text.lines().enumerate() {
        if let Some(line) = parse_numbered(raw, i + 1)? {
            lines.push(line);
        }
    }
    Ok(lines)
}

/// The events of a trace read line by line from `reader`, in bounded memory
/// whatever the trace's size: one line's text at a time. Lines without an event
/// are skipped; a bad line (or a read error) ends the stream with an error naming
/// its 1-based line number.
pub fn read_trace<R: std::io::BufRead>(reader: R) -> TraceReader<R> {
    TraceReader { reader, buf: String::new(), line_no: 0, done: false }
}

/// See [`read_trace`].
pub struct TraceReader<R> {
    reader: R,
    buf: String,
    line_no: usize,
    done: bool,
}

impl<R: std::io::BufRead> Iterator for TraceReader<R> {
    type Item = Result<Line, ParseError>;

    fn next(&mut self) -> Option<Self::Item> {
        while !self.done {
            self.buf.clear();
            self.line_no += 1;
            match self.reader.read_line(&mut self.buf) {
                Ok(0) => self.done = true,
                Ok(_) => match parse_numbered(&self.buf, self.line_no) {
                    Ok(Some(line)) => return Some(Ok(line)),
                    Ok(None) => {}
                    Err(e) => {
                        self.done = true;
                        return Some(Err(e));
                    }
                },
                Err(e) => {
                    self.done = true;
                    let reason = format!("unreadable: {e}");
                    return Some(Err(ParseError { line_no: self.line_no, line: String::new(), reason }));
                }
            }
        }
        None
    }
}

fn parse_numbered(line: &str, line_no: usize) -> Result<Option<Line>, ParseError> {
    parse_inner(line).map_err(|reason| ParseError { line_no, line: line.trim_end_matches(['\n', '\r']).to_string(), reason })
}

fn parse_inner(line: &str) -> Result<Option<Line>, String> {
    let line = line.strip_suffix('\n').unwrap_or(line);
    let line = line.strip_suffix('\r').unwrap_or(line);
    // Header and LOST lines start in column 0; event lines never do, because the
    // comm (at most 15 bytes) is right-aligned in 16. Checking column 0 keeps a
    // comm such as "#1" from being mistaken for a comment.
    if line.trim_start().is_empty() || line.starts_with('#') || is_lost_events(line) {
        return Ok(None);
    }

    let prefix = split_prefix(line).ok_or_else(|| "missing cpu column".to_string())?;
    let pid = parse_u32(prefix.pid).ok_or_else(|| "bad pid".to_string())?;
    let cpu = parse_u32(prefix.cpu).ok_or_else(|| "bad cpu".to_string())?;
    let tgid = match prefix.tgid {
        None => None,
        Some(t) if is_tgid(t) => Some(t.to_string()),
        Some(_) => return Err("bad tgid".to_string()),
    };

    // After "[cpu] ": the irq-info flags (absent when the irq-info option is
    // off), then " secs.usecs: ". The timestamp is the first token with a ':'.
    let rest = prefix.rest.trim_start_matches(' ');
    let (first, after_first) = split_word(rest);
    let (flags, rest) = if first.contains(':') { ("", rest) } else { (first, after_first.trim_start_matches(' ')) };
    if rest.is_empty() {
        return Err("missing timestamp".to_string());
    }
    let colon = rest.find(':').ok_or_else(|| "bad timestamp".to_string())?;
    let ts_ns = parse_timestamp(&rest[..colon]).ok_or_else(|| "bad timestamp".to_string())?;

    // ": name: args"
    let rest = rest[colon + 1..].trim_start_matches(' ');
    let colon = rest.find(':').ok_or_else(|| "missing event name".to_string())?;
    let name = &rest[..colon];
    if name.is_empty() || name.contains(char::is_whitespace) {
        return Err("bad event name".to_string());
    }
    let args = &rest[colon + 1..];
    let args = args.strip_prefix(' ').unwrap_or(args);
    let event = parse_event(name, args)?;

    Ok(Some(Line { comm: prefix.comm.to_string(), pid, tgid, cpu, flags: flags.to_string(), ts_ns, event }))
}

/// `CPU:1 [LOST 123 EVENTS]` or `CPU:1 [LOST EVENTS]`, printed by the kernel
/// when the ring buffer overwrote events.
fn is_lost_events(s: &str) -> bool {
    s.strip_prefix("CPU:")
        .map(|r| r.trim_start_matches(|c: char| c.is_ascii_digit()))
        .is_some_and(|r| r.starts_with(" [LOST ") && r.ends_with("EVENTS]"))
}

/// The context columns before the irq-info flags, as unparsed text.
struct Prefix<'a> {
    comm: &'a str,
    pid: &'a str,
    tgid: Option<&'a str>,
    cpu: &'a str,
    /// Everything after `]`.
    rest: &'a str,
}

/// Finds the `[cpu]` column and splits the task columns before it.
///
/// Comms may contain spaces, dashes and digits ("sched-messaging",
/// "memfd:sealed-91"), so the comm/pid split cannot be found from the left.
/// Instead, take the first `[digits] ` that is preceded by `-digits` (and an
/// optional `(tgid)` column); the pid is the `-digits` right before it, i.e. the
/// last one in the task column.
fn split_prefix(line: &str) -> Option<Prefix<'_>> {
    let bytes = line.as_bytes();
    let mut from = 0;
    while let Some(off) = bytes.get(from..)?.iter().position(|&c| c == b'[') {
        let open = from + off;
        if let Some(prefix) = prefix_at(line, open) {
            return Some(prefix);
        }
        from = open + 1;
    }
    None
}

/// Checks whether the `[` at byte `open` starts the cpu column.
fn prefix_at(line: &str, open: usize) -> Option<Prefix<'_>> {
    let b = line.as_bytes();

    // Forwards: "[digits] ".
    let cpu_start = open + 1;
    let cpu_end = cpu_start + count_digits(b.get(cpu_start..)?);
    if cpu_end == cpu_start || b.get(cpu_end) != Some(&b']') || b.get(cpu_end + 1) != Some(&b' ') {
        return None;
    }

    // Backwards: at least one space, optional "(tgid)" plus spaces, then "-digits".
    let mut k = skip_spaces_back(b, open)?;
    let mut tgid = None;
    if k > 0 && b[k - 1] == b')' {
        let close = k - 1;
        let mut s = close;
        while s > 0 && matches!(b[s - 1], b'0'..=b'9' | b'-' | b' ') {
            s -= 1;
        }
        if s == 0 || b[s - 1] != b'(' {
            return None;
        }
        tgid = Some(line[s..close].trim_matches(' '));
        k = skip_spaces_back(b, s - 1)?;
    }
    let pid_end = k;
    while k > 0 && b[k - 1].is_ascii_digit() {
        k -= 1;
    }
    if k == pid_end || k == 0 || b[k - 1] != b'-' {
        return None;
    }

    Some(Prefix {
        // %16s right-aligns the comm, so leading spaces are padding.
        comm: line[..k - 1].trim_start_matches(' '),
        pid: &line[k..pid_end],
        tgid,
        cpu: &line[cpu_start..cpu_end],
        rest: &line[cpu_end + 1..],
    })
}

/// Moves back over spaces ending at `end`; None unless there was at least one.
fn skip_spaces_back(b: &[u8], end: usize) -> Option<usize> {
    let mut k = end;
    while k > 0 && b[k - 1] == b' ' {
        k -= 1;
    }
    (k < end).then_some(k)
}

fn count_digits(b: &[u8]) -> usize {
    b.iter().take_while(|c| c.is_ascii_digit()).count()
}

/// The tgid column holds digits, or dashes when the kernel had no tgid.
fn is_tgid(t: &str) -> bool {
    !t.is_empty() && (t.bytes().all(|c| c.is_ascii_digit()) || t.bytes().all(|c| c == b'-'))
}

/// Splits at the first space: (word, rest starting with the space or empty).
fn split_word(s: &str) -> (&str, &str) {
    s.split_at(s.find(' ').unwrap_or(s.len()))
}

fn parse_u32(s: &str) -> Option<u32> {
    // `str::parse` would also accept a leading '+', which the kernel never prints.
    if s.is_empty() || !s.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

fn parse_i32(s: &str) -> Option<i32> {
    let digits = s.strip_prefix('-').unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// `secs.frac` with 1 to 9 fractional digits (the kernel prints 6) to
/// nanoseconds. Counter clocks print a bare integer with no unit; those are
/// rejected rather than guessed at.
fn parse_timestamp(s: &str) -> Option<u64> {
    let (secs, frac) = s.split_once('.')?;
    if frac.is_empty() || frac.len() > 9 || !frac.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let secs = parse_u64(secs)?;
    let frac_ns = parse_u64(frac)? * 10u64.pow(9 - frac.len() as u32);
    secs.checked_mul(1_000_000_000)?.checked_add(frac_ns)
}

fn parse_u64(s: &str) -> Option<u64> {
    if s.is_empty() || !s.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// Cursor over an event's argument text, for the fixed `key=value` layouts of
/// the sched tracepoints.
struct Args<'a> {
    rest: &'a str,
    event: &'static str,
}

impl<'a> Args<'a> {
    fn bad(&self, field: &str) -> String {
        format!("bad field `{field}` in {} args", self.event)
    }

    /// Consumes the literal `lit` (e.g. `" prev_pid="`) that introduces `field`.
    fn key(&mut self, lit: &str, field: &str) -> Result<(), String> {
        match self.rest.strip_prefix(lit) {
            Some(r) => {
                self.rest = r;
                Ok(())
            }
            None => Err(self.bad(field)),
        }
    }

    /// A value that runs to the next space (or the end).
    fn word(&mut self) -> &'a str {
        let (w, r) = split_word(self.rest);
        self.rest = r;
        w
    }

    /// `lit` then a comm. Comms may contain spaces, so the value runs up to the
    /// literal of the following field, `next_lit`.
    fn comm(&mut self, lit: &str, field: &str, next_lit: &str) -> Result<String, String> {
        self.key(lit, field)?;
        let end = self.rest.find(next_lit).ok_or_else(|| self.bad(field))?;
        let (v, r) = self.rest.split_at(end);
        self.rest = r;
        Ok(v.to_string())
    }

    fn u32(&mut self, lit: &str, field: &str) -> Result<u32, String> {
        self.key(lit, field)?;
        let w = self.word();
        parse_u32(w).ok_or_else(|| self.bad(field))
    }

    fn i32(&mut self, lit: &str, field: &str) -> Result<i32, String> {
        self.key(lit, field)?;
        let w = self.word();
        parse_i32(w).ok_or_else(|| self.bad(field))
    }

    fn end(&self) -> Result<(), String> {
        if self.rest.is_empty() {
            Ok(())
        } else {
            Err(format!("unexpected trailing text '{}' in {} args", self.rest, self.event))
        }
    }
}

fn parse_event(name: &str, args: &str) -> Result<Event, String> {
    match name {
        "sched_switch" => parse_switch(args),
        "sched_waking" => {
            let (comm, pid, prio, target_cpu) = parse_wakeup_args(args, "sched_waking")?;
            Ok(Event::Waking { comm, pid, prio, target_cpu })
        }
        "sched_wakeup" => {
            let (comm, pid, prio, target_cpu) = parse_wakeup_args(args, "sched_wakeup")?;
            Ok(Event::Wakeup { comm, pid, prio, target_cpu })
        }
        "sched_wakeup_new" => {
            let (comm, pid, prio, target_cpu) = parse_wakeup_args(args, "sched_wakeup_new")?;
            Ok(Event::WakeupNew { comm, pid, prio, target_cpu })
        }
        "sched_migrate_task" => parse_migrate(args),
        "sched_process_fork" => parse_fork(args),
        "sched_process_exit" => parse_exit(args),
        _ => Ok(Event::Other { name: name.to_string(), args: args.to_string() }),
    }
}

/// `prev_comm=%s prev_pid=%d prev_prio=%d prev_state=%s%s ==> next_comm=%s next_pid=%d next_prio=%d`
fn parse_switch(args: &str) -> Result<Event, String> {
    let mut a = Args { rest: args, event: "sched_switch" };
    let prev_comm = a.comm("prev_comm=", "prev_comm", " prev_pid=")?;
    let prev_pid = a.u32(" prev_pid=", "prev_pid")?;
    let prev_prio = a.i32(" prev_prio=", "prev_prio")?;
    a.key(" prev_state=", "prev_state")?;
    // Kept as printed: "R+", "S", or "S|D"-style combinations on old kernels.
    let prev_state = a.word().to_string();
    if prev_state.is_empty() {
        return Err(a.bad("prev_state"));
    }
    let next_comm = a.comm(" ==> next_comm=", "next_comm", " next_pid=")?;
    let next_pid = a.u32(" next_pid=", "next_pid")?;
    let next_prio = a.i32(" next_prio=", "next_prio")?;
    a.end()?;
    Ok(Event::Switch { prev_comm, prev_pid, prev_prio, prev_state, next_comm, next_pid, next_prio })
}

/// `comm=%s pid=%d prio=%d target_cpu=%03d`; 3.x kernels printed ` success=%d`
/// before target_cpu. It was always 1, so it is accepted and dropped.
fn parse_wakeup_args(args: &str, event: &'static str) -> Result<(String, u32, i32, u32), String> {
    let mut a = Args { rest: args, event };
    let comm = a.comm("comm=", "comm", " pid=")?;
    let pid = a.u32(" pid=", "pid")?;
    let prio = a.i32(" prio=", "prio")?;
    if a.rest.starts_with(" success=") {
        a.u32(" success=", "success")?;
    }
    let target_cpu = a.u32(" target_cpu=", "target_cpu")?;
    a.end()?;
    Ok((comm, pid, prio, target_cpu))
}

/// `comm=%s pid=%d prio=%d orig_cpu=%d dest_cpu=%d`
fn parse_migrate(args: &str) -> Result<Event, String> {
    let mut a = Args { rest: args, event: "sched_migrate_task" };
    let comm = a.comm("comm=", "comm", " pid=")?;
    let pid = a.u32(" pid=", "pid")?;
    let prio = a.i32(" prio=", "prio")?;
    let orig_cpu = a.u32(" orig_cpu=", "orig_cpu")?;
    let dest_cpu = a.u32(" dest_cpu=", "dest_cpu")?;
    a.end()?;
    Ok(Event::MigrateTask { comm, pid, prio, orig_cpu, dest_cpu })
}

/// `comm=%s pid=%d child_comm=%s child_pid=%d` (parent first).
fn parse_fork(args: &str) -> Result<Event, String> {
    let mut a = Args { rest: args, event: "sched_process_fork" };
    let comm = a.comm("comm=", "comm", " pid=")?;
    let pid = a.u32(" pid=", "pid")?;
    let child_comm = a.comm(" child_comm=", "child_comm", " child_pid=")?;
    let child_pid = a.u32(" child_pid=", "child_pid")?;
    a.end()?;
    Ok(Event::ProcessFork { comm, pid, child_comm, child_pid })
}

/// `comm=%s pid=%d prio=%d`, plus ` group_dead=true|false` since ~6.15.
fn parse_exit(args: &str) -> Result<Event, String> {
    let mut a = Args { rest: args, event: "sched_process_exit" };
    let comm = a.comm("comm=", "comm", " pid=")?;
    let pid = a.u32(" pid=", "pid")?;
    let prio = a.i32(" prio=", "prio")?;
    let group_dead = if a.rest.is_empty() {
        None
    } else {
        a.key(" group_dead=", "group_dead")?;
        match a.word() {
            "true" => Some(true),
            "false" => Some(false),
            _ => return Err(a.bad("group_dead")),
        }
    };
    a.end()?;
    Ok(Event::ProcessExit { comm, pid, prio, group_dead })
}
