//! Parses the real recordings in the repository's tests/fixtures (recorded on this
//! project's machines with `schedlab record`; see tests/fixtures/README.md) and
//! writes them back.

use std::collections::BTreeMap;

use schedlab_trace::{format_line, header, parse_line, parse_trace, Event, Line, SCHED_EVENTS};

const PIPE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/fixtures/ftrace-hackbench-pipe-g1-l100-2cpu.txt");
const SOCKET: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/fixtures/ftrace-hackbench-socket-g1-l100-2cpu.txt");

fn read(path: &str) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {path}: {e}"))
}

fn counts(lines: &[Line]) -> BTreeMap<String, usize> {
    let mut m = BTreeMap::new();
    for l in lines {
        *m.entry(l.event.name().to_string()).or_insert(0) += 1;
    }
    m
}

fn expect_counts(lines: &[Line], expected: [usize; 7]) {
    let got = counts(lines);
    let want: BTreeMap<String, usize> = SCHED_EVENTS.iter().zip(expected).map(|(n, c)| (n.to_string(), c)).collect();
    assert_eq!(got, want);
}

#[test]
fn socket_fixture_parses_with_expected_counts() {
    let lines = parse_trace(&read(SOCKET)).expect("socket fixture parses");
    expect_counts(&lines, [2609, 2065, 2065, 41, 46, 41, 41]);
    assert_eq!(lines.len(), 6908, "matches entries-in-buffer in the header");
}

#[test]
fn pipe_fixture_parses_with_expected_counts() {
    // Counts pinned from `grep -c ': <event>: '` on the fixture.
    let lines = parse_trace(&read(PIPE)).expect("pipe fixture parses");
    expect_counts(&lines, [2948, 2381, 2380, 41, 122, 41, 41]);
    assert_eq!(lines.len(), 7954, "matches entries-in-buffer in the header");
}

#[test]
fn first_socket_line_fields() {
    let lines = parse_trace(&read(SOCKET)).unwrap();
    assert_eq!(
        lines[0],
        Line {
            comm: "schedlab".into(),
            pid: 5454,
            tgid: None,
            cpu: 1,
            flags: ".....".into(),
            ts_ns: 1_229_340_919_000,
            event: Event::ProcessFork { comm: "schedlab".into(), pid: 5454, child_comm: "schedlab".into(), child_pid: 5456 },
        }
    );
}

#[test]
fn fixtures_have_the_interesting_cases() {
    // Guards that the byte-identity test below really covers these shapes.
    let text = read(PIPE) + &read(SOCKET);
    let lines = parse_trace(&text).unwrap();
    let states: std::collections::BTreeSet<&str> = lines
        .iter()
        .filter_map(|l| match &l.event {
            Event::Switch { prev_state, .. } => Some(prev_state.as_str()),
            _ => None,
        })
        .collect();
    for s in ["R", "R+", "S", "D", "I", "Z"] {
        assert!(states.contains(s), "prev_state {s} missing");
    }
    assert!(lines.iter().any(|l| l.comm == "<idle>" && l.pid == 0));
    // A comm ending in "-<digits>": the pid must be the last -digits.
    assert!(lines.iter().any(|l| l.comm == "memfd:sealed-91" && l.pid != 91));
    assert!(lines.iter().all(|l| match &l.event {
        Event::ProcessExit { group_dead, .. } => group_dead.is_some(),
        _ => true,
    }));
}

/// Every sched event line of both fixtures (5.12+ layout, recorded on 6.18) is
/// written back byte for byte, and parses back to an equal `Line`. No exceptions
/// were needed: the fixtures' flags are always the full 5 irq-info characters
/// and all timestamps have microsecond precision.
#[test]
fn fixture_lines_round_trip_byte_identical() {
    for path in [PIPE, SOCKET] {
        let text = read(path);
        let mut checked = 0;
        let mut out = String::new();
        for (i, raw) in text.lines().enumerate() {
            let Some(line) = parse_line(raw).unwrap() else {
                continue;
            };
            if !SCHED_EVENTS.contains(&line.event.name()) {
                continue;
            }
            out.clear();
            format_line(&line, &mut out);
            assert_eq!(out, format!("{raw}\n"), "{path}:{}", i + 1);
            assert_eq!(parse_line(&out).unwrap(), Some(line), "{path}:{}", i + 1);
            checked += 1;
        }
        assert!(checked > 4000, "{path}: only {checked} lines checked");
    }
}

/// Header plus every line written back reproduces each fixture file exactly.
#[test]
fn whole_fixture_rewrites_identically() {
    for (path, ncpus) in [(PIPE, 2), (SOCKET, 2)] {
        let text = read(path);
        let lines = parse_trace(&text).unwrap();
        let mut out = header(lines.len() as u64, ncpus);
        for l in &lines {
            format_line(l, &mut out);
        }
        assert!(out == text, "{path} differs when rewritten");
    }
}

#[test]
fn header_matches_fixture() {
    let text = read(PIPE);
    let first12: String = text.lines().take(12).map(|l| format!("{l}\n")).collect();
    assert_eq!(header(7954, 2), first12);
}
