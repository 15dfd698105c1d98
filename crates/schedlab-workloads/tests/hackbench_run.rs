mod common;

#[test]
fn hackbench_socket_process_completes() {
    let r = common::run("x6-2-20", "fifo", "hackbench groups=1 loops=10", 1);
    assert!(r.violations.is_empty(), "{:#?}", r.violations);
    assert!(!r.timed_out);
    assert!(r.elapsed_ns() > 0);
    eprintln!("elapsed {} ns events {} busy {:.1}% digest {:x}", r.elapsed_ns(), r.events, r.busy_pct(), r.digest);
}
