//! Single-line cases: layouts, odd comms, optional fields and malformed input.

use schedlab_trace::{format_line, parse_line, parse_trace, Event, Line, ParseError};

fn parse_one(s: &str) -> Line {
    match parse_line(s) {
        Ok(Some(l)) => l,
        other => panic!("expected an event line from {s:?}, got {other:?}"),
    }
}

fn format(l: &Line) -> String {
    let mut out = String::new();
    format_line(l, &mut out);
    out
}

/// Writes `l` and checks that the text parses back to the same `Line`.
fn assert_round_trip(l: &Line) -> String {
    let out = format(l);
    assert!(out.ends_with('\n'));
    assert_eq!(&parse_one(&out), l, "written as {out:?}");
    out
}

fn err(s: &str) -> ParseError {
    match parse_line(s) {
        Err(e) => e,
        other => panic!("expected an error from {s:?}, got {other:?}"),
    }
}

const SWITCH_ARGS: &str =
    "prev_comm=hackbench prev_pid=4242 prev_prio=120 prev_state=S ==> next_comm=swapper/1 next_pid=0 next_prio=120";

#[test]
fn older_layout_parses_and_is_rewritten_in_new_layout() {
    let old = format!("       hackbench-4242  [001] d..2  1234.567890: sched_switch: {SWITCH_ARGS}");
    let l = parse_one(&old);
    assert_eq!(
        l,
        Line {
            comm: "hackbench".into(),
            pid: 4242,
            tgid: None,
            cpu: 1,
            flags: "d..2".into(),
            ts_ns: 1_234_567_890_000,
            event: Event::Switch {
                prev_comm: "hackbench".into(),
                prev_pid: 4242,
                prev_prio: 120,
                prev_state: "S".into(),
                next_comm: "swapper/1".into(),
                next_pid: 0,
                next_prio: 120,
            },
        }
    );
    let out = assert_round_trip(&l);
    assert_eq!(out, format!("       hackbench-4242    [001] d..2  1234.567890: sched_switch: {SWITCH_ARGS}\n"));
}

#[test]
fn tgid_column_old_and_new() {
    let old =
        parse_one("          <idle>-0     (-----) [000] d..2  1.000001: sched_wakeup: comm=a pid=7 prio=120 target_cpu=000");
    assert_eq!((old.comm.as_str(), old.pid), ("<idle>", 0));
    assert_eq!(old.tgid.as_deref(), Some("-----"));
    assert_round_trip(&old);

    let new = "            bash-7962    (   7962) [001] .....  1834.202128: sched_process_fork: comm=bash pid=7962 child_comm=bash child_pid=8009\n";
    let l = parse_one(new);
    assert_eq!(l.tgid.as_deref(), Some("7962"));
    assert_eq!(assert_round_trip(&l), new);

    let none = "            bash-7962    (-------) [001] .....  1834.202128: sched_process_fork: comm=bash pid=7962 child_comm=bash child_pid=8009\n";
    assert_eq!(assert_round_trip(&parse_one(none)), none);
}

#[test]
fn comms_with_spaces_dashes_and_digits() {
    let s = "     Web Content-12345   [002] d..2. 99999.000001: sched_switch: prev_comm=Web Content prev_pid=12345 prev_prio=120 prev_state=R+ ==> next_comm=kworker/u4:1-events next_pid=88 next_prio=120\n";
    let l = parse_one(s);
    assert_eq!((l.comm.as_str(), l.pid, l.cpu), ("Web Content", 12345, 2));
    match &l.event {
        Event::Switch { prev_comm, prev_state, next_comm, .. } => {
            assert_eq!(prev_comm, "Web Content");
            assert_eq!(prev_state, "R+");
            assert_eq!(next_comm, "kworker/u4:1-events");
        }
        e => panic!("{e:?}"),
    }
    assert_eq!(assert_round_trip(&l), s);

    // The pid is the last -digits before the cpu column.
    let l = parse_one("kworker/u4:1-events-17 [000] ..... 5.000000: sched_waking: comm=x-1 2 pid=9 prio=120 target_cpu=001");
    assert_eq!((l.comm.as_str(), l.pid), ("kworker/u4:1-events", 17));
    assert!(matches!(&l.event, Event::Waking { comm, pid: 9, .. } if comm == "x-1 2"));
    assert_round_trip(&l);

    let l = parse_one("  a-1 [3]-42  [007] ..... 5.000000: sched_wakeup: comm=a pid=9 prio=120 target_cpu=007");
    assert_eq!((l.comm.as_str(), l.pid, l.cpu), ("a-1 [3]", 42, 7));

    let l =
        parse_one("           <...>-4194304 [001] ..... 5.000000: sched_wakeup_new: comm=a pid=4194304 prio=-1 target_cpu=001");
    assert_eq!((l.comm.as_str(), l.pid), ("<...>", 4_194_304));
    assert!(matches!(l.event, Event::WakeupNew { prio: -1, .. }));
    assert_round_trip(&l);
}

#[test]
fn comm_starting_with_hash_is_not_a_comment() {
    let s = "              #1-5       [000] .....     1.000000: x: y\n";
    let l = parse_one(s);
    assert_eq!(l.comm, "#1");
    assert_eq!(assert_round_trip(&l), s);
}

#[test]
fn non_ascii_comm_is_padded_by_bytes_like_the_kernel() {
    let l = Line {
        comm: "café".into(),
        pid: 5,
        tgid: None,
        cpu: 0,
        flags: ".....".into(),
        ts_ns: 1_000_000,
        event: Event::Other { name: "x".into(), args: String::new() },
    };
    // "café" is 5 bytes, so 11 spaces of padding reach 16 bytes.
    assert_eq!(format(&l), "           café-5       [000] .....     0.001000: x: \n");
    assert_round_trip(&l);
}

#[test]
fn every_sched_event_shape() {
    let cases = [
        (
            "sched_migrate_task: comm=bash pid=7965 prio=120 orig_cpu=1 dest_cpu=0",
            Event::MigrateTask { comm: "bash".into(), pid: 7965, prio: 120, orig_cpu: 1, dest_cpu: 0 },
        ),
        (
            "sched_process_exit: comm=a pid=3 prio=120",
            Event::ProcessExit { comm: "a".into(), pid: 3, prio: 120, group_dead: None },
        ),
        (
            "sched_process_exit: comm=a pid=3 prio=120 group_dead=false",
            Event::ProcessExit { comm: "a".into(), pid: 3, prio: 120, group_dead: Some(false) },
        ),
        (
            "sched_waking: comm=rt pid=4 prio=0 target_cpu=012",
            Event::Waking { comm: "rt".into(), pid: 4, prio: 0, target_cpu: 12 },
        ),
        (
            "sched_switch: prev_comm=a prev_pid=1 prev_prio=120 prev_state=S|D ==> next_comm= next_pid=2 next_prio=-1",
            Event::Switch {
                prev_comm: "a".into(),
                prev_pid: 1,
                prev_prio: 120,
                prev_state: "S|D".into(),
                next_comm: String::new(),
                next_pid: 2,
                next_prio: -1,
            },
        ),
    ];
    for (text, event) in cases {
        let s = format!("            bash-1       [000] d..2.   100.000000: {text}\n");
        let l = parse_one(&s);
        assert_eq!(l.event, event, "{text}");
        assert_eq!(assert_round_trip(&l), s);
    }
}

#[test]
fn old_wakeup_success_field_is_accepted() {
    let l = parse_one("  bash-1 [000] d..2 100.000000: sched_wakeup: comm=a pid=2 prio=120 success=1 target_cpu=001");
    assert!(matches!(l.event, Event::Wakeup { pid: 2, target_cpu: 1, .. }));
    assert_round_trip(&l);
}

#[test]
fn other_events_keep_raw_args() {
    let l = parse_one("  bash-1  [000] d..2. 100.000000: sched_stat_runtime: comm=bash pid=1 runtime=5 [ns]");
    assert_eq!(l.event, Event::Other { name: "sched_stat_runtime".into(), args: "comm=bash pid=1 runtime=5 [ns]".into() });
    assert_eq!(l.event.name(), "sched_stat_runtime");
    assert_round_trip(&l);

    let l = parse_one("  bash-1  [000] ..... 100.000000: tracing_mark_write: a: b  c ");
    assert_eq!(l.event, Event::Other { name: "tracing_mark_write".into(), args: "a: b  c ".into() });
    assert_round_trip(&l);
}

#[test]
fn irq_info_off_and_timestamp_precision() {
    let l = parse_one("  bash-1  [000]  12.000001: sched_wakeup: comm=a pid=2 prio=120 target_cpu=000");
    assert_eq!(l.flags, "");
    assert_eq!(l.ts_ns, 12_000_001_000);
    assert_round_trip(&l);

    // Nanosecond text is accepted; the writer truncates to microseconds.
    let mut l = parse_one("  bash-1  [000] ..... 12.123456789: x: y");
    assert_eq!(l.ts_ns, 12_123_456_789);
    assert!(format(&l).contains("   12.123456: x: y\n"));
    l.ts_ns = 7;
    assert!(format(&l).contains("     0.000000: "));
}

#[test]
fn non_event_lines_are_skipped() {
    for s in [
        "",
        "   ",
        "# tracer: nop",
        "#           TASK-PID     CPU#  |||||  TIMESTAMP  FUNCTION",
        "##### CPU 1 buffer started ####",
        "CPU:1 [LOST 1234 EVENTS]",
        "CPU:0 [LOST EVENTS]",
    ] {
        assert_eq!(parse_line(s), Ok(None), "{s:?}");
    }
}

#[test]
fn malformed_lines_report_the_reason() {
    let cases = [
        ("garbage", "missing cpu column"),
        ("  bash-1 d..2. 1.000000: x: y", "missing cpu column"),
        ("  bash [000] d..2. 1.000000: x: y", "missing cpu column"),
        ("  bash-1 [000] d..2.", "missing timestamp"),
        ("  bash-1 [000] d..2. 1.0000x0: x: y", "bad timestamp"),
        ("  bash-1 [000] d..2. 1234: x: y", "bad timestamp"),
        ("  bash-1 [000] d..2. 99999999999999999999.000000: x: y", "bad timestamp"),
        ("  bash-1 [000] d..2. 1.000000", "bad timestamp"),
        ("  bash-1 [000] d..2. 1.000000: no colon", "missing event name"),
        ("  bash-99999999999 [000] d..2. 1.000000: x: y", "bad pid"),
        ("  bash-1 (12x) [000] d..2. 1.000000: x: y", "missing cpu column"),
        ("  bash-1 (1-2) [000] d..2. 1.000000: x: y", "bad tgid"),
        (
            "  bash-1 [000] d..2. 1.000000: sched_switch: prev_comm=a prev_pid=abc prev_prio=120 prev_state=S ==> next_comm=b next_pid=2 next_prio=120",
            "bad field `prev_pid` in sched_switch args",
        ),
        (
            "  bash-1 [000] d..2. 1.000000: sched_switch: prev_comm=a prev_pid=1 prev_prio=120 prev_state= ==> next_comm=b next_pid=2 next_prio=120",
            "bad field `prev_state` in sched_switch args",
        ),
        (
            "  bash-1 [000] d..2. 1.000000: sched_switch: prev_comm=a prev_pid=1 prev_prio=120 prev_state=S next_comm=b next_pid=2 next_prio=120",
            "bad field `next_comm` in sched_switch args",
        ),
        (
            "  bash-1 [000] d..2. 1.000000: sched_waking: comm=a pid=1 prio=120",
            "bad field `target_cpu` in sched_waking args",
        ),
        (
            "  bash-1 [000] d..2. 1.000000: sched_wakeup: comm=a pid=1 prio=+1 target_cpu=000",
            "bad field `prio` in sched_wakeup args",
        ),
        (
            "  bash-1 [000] d..2. 1.000000: sched_process_exit: comm=a pid=1 prio=120 group_dead=maybe",
            "bad field `group_dead` in sched_process_exit args",
        ),
        (
            "  bash-1 [000] d..2. 1.000000: sched_migrate_task: comm=a pid=1 prio=120 orig_cpu=1 dest_cpu=0 extra=1",
            "unexpected trailing text ' extra=1' in sched_migrate_task args",
        ),
        (
            "  bash-1 [000] d..2. 1.000000: sched_process_fork: comm=a pid=1 child_comm=b",
            "bad field `child_comm` in sched_process_fork args",
        ),
    ];
    for (line, reason) in cases {
        let e = err(line);
        assert_eq!(e.reason, reason, "{line}");
        assert_eq!(e.line, line);
        assert_eq!(e.line_no, 0);
    }
}

#[test]
fn parse_trace_error_names_the_line() {
    let text = "# tracer: nop\n\n  bash-1 [000] ..... 1.000000: x: y\n  bash-1 [000] ..... 1.0x: x: y\n";
    let e = parse_trace(text).unwrap_err();
    assert_eq!(e.line_no, 4);
    assert_eq!(e.to_string(), "trace line 4: bad timestamp: '  bash-1 [000] ..... 1.0x: x: y'");
    // CRLF line endings are accepted.
    assert_eq!(parse_trace("  bash-1 [000] ..... 1.000000: x: y\r\n").unwrap().len(), 1);
}

/// Tiny deterministic generator so the no-panic test needs no dependencies.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> usize {
        self.0 = self.0.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) as usize
    }
}

/// Parsing must never panic: every truncation and many random mutations of real
/// lines, and random strings over the grammar's own characters.
#[test]
fn garbage_never_panics() {
    let samples = [
        " sched-messaging-7965    [001] d..2.  1833.967025: sched_switch: prev_comm=bash prev_pid=7965 prev_prio=120 prev_state=R+ ==> next_comm=migration/1 next_pid=21 next_prio=0",
        "          <idle>-0     (-----) [000] d..2  1.000001: sched_wakeup: comm=a pid=7 prio=120 target_cpu=000",
        "     migration/1-21      [001] d..3.  1833.967032: sched_migrate_task: comm=bash pid=7965 prio=120 orig_cpu=1 dest_cpu=0",
        " sched-messaging-8004    [001] .....  1834.043191: sched_process_exit: comm=sched-messaging pid=8004 prio=120 group_dead=true",
        "            bash-7962    (   7962) [001] .....  1834.202128: sched_process_fork: comm=bash pid=7962 child_comm=bash child_pid=8009",
        "           café-5       [000] .....     0.001000: x: é",
    ];
    let alphabet: Vec<char> = " -[]()::.=0123456789abdSR+<>|#\té\u{1F600}_\r\n".chars().collect();
    let mut rng = Lcg(42);
    let mut tried = 0;
    for s in samples {
        for (i, _) in s.char_indices() {
            let _ = parse_line(&s[..i]);
            let _ = parse_line(&s[i..]);
            tried += 2;
        }
        for _ in 0..2000 {
            let mut chars: Vec<char> = s.chars().collect();
            for _ in 0..1 + rng.next() % 3 {
                let at = rng.next() % chars.len();
                match rng.next() % 3 {
                    0 => chars[at] = alphabet[rng.next() % alphabet.len()],
                    1 => {
                        chars.remove(at);
                    }
                    _ => chars.insert(at, alphabet[rng.next() % alphabet.len()]),
                }
            }
            let m: String = chars.into_iter().collect();
            // A 16+ byte comm starting with '#' would be written in column 0 and
            // read back as a comment; real comms are at most 15 bytes.
            let parsed = parse_line(&m).map(|r| r.filter(|l| !l.comm.starts_with('#')));
            if let Ok(Some(l)) = parsed {
                // Whatever parses must be written as text that reads back the
                // same (after one normalisation, e.g. sub-microsecond digits).
                let once = format(&l);
                let again = parse_line(&once).map(|r| r.map(|l2| format(&l2)));
                assert_eq!(again, Ok(Some(once.clone())), "from {m:?}");
            }
            tried += 1;
        }
    }
    for _ in 0..5000 {
        let len = rng.next() % 60;
        let g: String = (0..len).map(|_| alphabet[rng.next() % alphabet.len()]).collect();
        let _ = parse_line(&g);
        let _ = parse_trace(&g);
        tried += 1;
    }
    assert!(tried > 15_000);
}
