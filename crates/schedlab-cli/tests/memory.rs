//! Memory that must not grow with the work asked for. In a test binary of its own,
//! so that the peak RSS of this process's children is this test's child alone.

mod common;

use common::{schedlab, stderr};

/// `compare --runs N` keeps a few hundred bytes per run, not each run's
/// histograms: 3000 runs per side stay far below 100 MB (they took about 3 GB).
#[test]
fn compare_memory_does_not_grow_with_runs() {
    let o = schedlab(&[
        "compare",
        "--base",
        "fifo",
        "--new",
        "fifo",
        "--workload",
        "hackbench groups=1 loops=1 fds=2",
        "--runs",
        "3000",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let max_rss_kb = common::max_child_rss_kb();
    assert!(max_rss_kb < 100 * 1024, "peak RSS {max_rss_kb} KB");
}
