"""The Python package against the command line it mirrors.

Run by python/test.sh (part of ./run-tests), which builds the package into a
virtual environment and the `schedlab` binary beside it (SCHEDLAB_BIN).
"""

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pandas as pd
import pytest

import schedlab

ROOT = Path(__file__).resolve().parents[2]
BIN = os.environ.get("SCHEDLAB_BIN", str(ROOT / "target" / "release" / "schedlab"))
SMALL = "hackbench groups=1 loops=100"


def cli(*args, check=True):
    return subprocess.run([BIN, *args], capture_output=True, text=True, check=check)


@pytest.mark.parametrize(
    "kwargs,flags",
    [
        ({}, []),
        (dict(workload=SMALL, seed=7), ["--workload", SMALL, "--seed", "7"]),
        (
            dict(policy="cfs@4.19+STEAL", topology="2x1x4x2", workload="hackbench groups=2 loops=50 ipc=pipe",
                 sysctl={"sched_migration_cost_ns": 250000}),
            ["--policy", "cfs@4.19+STEAL", "--topology", "2x1x4x2", "--workload", "hackbench groups=2 loops=50 ipc=pipe",
             "--sysctl", "sched_migration_cost_ns=250000"],
        ),
        (
            dict(policy="eevdf@6.18", topology="kvm-2", workload="pipe loops=2000", preempt="lazy", autogroup=True),
            ["--policy", "eevdf@6.18", "--topology", "kvm-2", "--workload", "pipe loops=2000", "--preempt", "lazy",
             "--autogroup", "on"],
        ),
    ],
)
def test_run_equals_the_cli(kwargs, flags):
    r = schedlab.run(**kwargs)
    out = cli("run", *flags, "--format", "json").stdout
    assert r.summary == json.loads(out)
    assert r.digest == json.loads(out)["digest"]
    # The text report is the CLI's but for its wall-time line.
    text_cli = [l for l in cli("run", *flags).stdout.splitlines() if " s wall: " not in l]
    text_py = [l for l in r.text.splitlines() if " s wall: " not in l]
    assert text_py == text_cli


def test_run_frames_have_the_kernel_names_and_dtypes():
    r = schedlab.run(workload=SMALL, topology="1x1x4x1", events=True)
    tasks = r.tasks
    assert list(tasks.columns) == schedlab.TASK_COLUMNS
    assert len(tasks) == r.summary["tasks"].__len__() > 0
    for c in schedlab.TASK_COLUMNS:
        if c == "comm":
            assert pd.api.types.is_string_dtype(tasks[c])
        else:
            assert tasks[c].dtype == "int64", c
    cpus = r.cpus
    assert list(cpus["cpu"]) == [0, 1, 2, 3]
    assert list(cpus.columns[:9]) == schedlab.CPU_COLUMNS
    assert all(cpus[c].dtype == "int64" for c in cpus.columns)
    assert cpus["sched_count"].sum() == r.summary["total"]["sched_count"]

    ev = r.events
    assert set(ev) == {
        "sched_switch", "sched_waking", "sched_wakeup", "sched_wakeup_new",
        "sched_migrate_task", "sched_process_fork", "sched_process_exit",
    }
    sw = ev["sched_switch"]
    assert sw.index.name == "Time" and sw.index.dtype == "float64"
    assert sw.index.is_monotonic_increasing
    assert list(sw.columns) == [
        "__cpu", "__pid", "__comm", "prev_comm", "prev_state", "next_comm",
        "prev_pid", "prev_prio", "next_pid", "next_prio",
    ]
    for c in ["__cpu", "__pid", "prev_pid", "prev_prio", "next_pid", "next_prio"]:
        assert sw[c].dtype == "int64", c
    assert set(sw["prev_state"]) <= {"R", "R+", "S", "Z", "X"}
    # Every switch is on a CPU of the machine, and the per-task switch counts
    # agree with the summary (switches out of each task).
    assert set(sw["__cpu"]) <= {0, 1, 2, 3}
    wk = ev["sched_wakeup"]
    assert list(wk.columns) == ["__cpu", "__pid", "__comm", "comm", "pid", "prio", "target_cpu"]
    mig = ev["sched_migrate_task"]
    assert {"orig_cpu", "dest_cpu"} <= set(mig.columns)
    # Events are a view of the same run: the digest does not change with them.
    assert r.digest == schedlab.run(workload=SMALL, topology="1x1x4x1").digest


def test_events_match_the_cli_trace(tmp_path):
    r = schedlab.run(workload="hackbench groups=1 loops=20", topology="1x1x2x1", events=True)
    trace = tmp_path / "t.trace"
    cli("run", "--workload", "hackbench groups=1 loops=20", "--topology", "1x1x2x1", "--trace", str(trace))
    lines = [l for l in trace.read_text().splitlines() if not l.startswith("#")]
    counts = {}
    for l in lines:
        name = l.split(": ")[1]  # "<comm>-<pid> [cpu] flags ts: NAME: fields"
        counts[name] = counts.get(name, 0) + 1
    assert {k: len(v) for k, v in r.events.items() if len(v)} == counts


@pytest.mark.parametrize(
    "kwargs,flags",
    [
        (dict(topology="nope"), ["--topology", "nope"]),
        (dict(policy="cfs@4.19+NO_SUCH"), ["--policy", "cfs@4.19+NO_SUCH"]),
        (dict(workload="hackbench groups=0"), ["--workload", "hackbench groups=0"]),
        (dict(sysctl={"sched_latency_ns": "x"}, policy="cfs@5.10"), ["--sysctl", "sched_latency_ns=x", "--policy", "cfs@5.10"]),
        (dict(hz=5), ["--hz", "5"]),
        (dict(preempt="sometimes"), ["--preempt", "sometimes"]),
        (dict(machine="no-such-machine"), ["--machine", "no-such-machine"]),
        (dict(topology="64x64x64x4"), ["--topology", "64x64x64x4"]),
    ],
)
def test_bad_input_raises_value_error_with_the_cli_message(kwargs, flags):
    with pytest.raises(ValueError) as e:
        schedlab.run(**kwargs)
    p = cli("run", *flags, check=False)
    assert p.returncode == 2
    assert p.stderr.strip() == f"schedlab: error: {e.value}"


def test_compare_equals_the_cli():
    c = schedlab.compare("cfs@4.19", "cfs@4.19+STEAL", workload="hackbench loops=100", vary={"groups": [1, 2]}, runs=2,
                         topology="1x2x4x1")
    out = cli("compare", "--base", "cfs@4.19", "--new", "cfs@4.19+STEAL", "--workload", "hackbench loops=100",
              "--vary", "groups=1,2",
              "--runs", "2", "--topology", "1x2x4x1", "--format", "json").stdout
    assert c.summary == json.loads(out)
    runs = c.runs
    assert list(runs.columns[:5]) == ["vary_key", "vary", "side", "policy", "seed"]
    assert len(runs) == 2 * 2 * 2
    base1 = runs[(runs.side == "base") & (runs.vary == "1")]
    assert list(base1.digest) == c.summary["rows"][0]["base"]["runs_digest"]
    assert list(base1.seed) == [1, 2]
    with pytest.raises(ValueError, match="invalid vary"):
        schedlab.compare("cfs@4.19", "cfs@4.19", vary="groups")


def test_reproduce_prints_what_the_cli_prints():
    r = schedlab.reproduce("numa-fork", runs=1, scale=200, rows=[4])
    out = cli("reproduce", "numa-fork", "--runs", "1", "--scale", "200", "--rows", "4").stdout
    assert r.text == out
    assert list(r.table.columns) == ["experiment", "row", "metric", "published", "simulated", "within_target"]
    assert len(r.table) >= 1 and set(r.table["row"]) == {"threads=4"}
    assert len(r.runs) == 2
    with pytest.raises(ValueError, match="rows"):
        schedlab.reproduce("numa-fork", rows=[99])


GRID = {
    "topology": ["1x1x2x1", "1x2x2x1"],
    "policy": ["cfs@4.19", "cfs@4.19+STEAL", "eevdf@6.18"],
    "workload": "hackbench loops=30",
    "workload.groups": [1, 2],
    "sysctl.sched_migration_cost_ns": [500000, 5000000],
}


def test_sweep_is_tidy_and_equals_the_cli(tmp_path):
    df = schedlab.sweep(GRID, runs=2, cache=tmp_path / "cache")
    assert len(df) == 2 * 3 * 2 * 2 * 2
    assert list(df.columns[:6]) == ["topology", "policy", "workload", "workload.groups",
                                    "sysctl.sched_migration_cost_ns", "seed"]
    assert df.attrs["computed"] == len(df) and df.attrs["cached"] == 0
    assert df["elapsed_s"].dtype == "float64" and df["switches"].dtype == "int64"
    grid = tmp_path / "g.toml"
    grid.write_text(
        "runs = 2\n[grid]\n"
        "topology = ['1x1x2x1', '1x2x2x1']\npolicy = ['cfs@4.19', 'cfs@4.19+STEAL', 'eevdf@6.18']\n"
        "workload = 'hackbench loops=30'\n'workload.groups' = [1, 2]\n"
        "'sysctl.sched_migration_cost_ns' = [500000, 5000000]\n"
    )
    out = tmp_path / "t.csv"
    cli("sweep", str(grid), "--no-cache", "--out", str(out))
    from_cli = pd.read_csv(out, dtype={"workload.groups": str, "sysctl.sched_migration_cost_ns": str})
    assert list(from_cli["digest"]) == list(df["digest"])
    assert list(from_cli.columns) == list(df.columns)
    again = schedlab.sweep(GRID, runs=2, cache=tmp_path / "cache")
    assert again.attrs["computed"] == 0 and again.attrs["cached"] == len(df)
    pd.testing.assert_frame_equal(again, df)
    # Shards partition the jobs.
    parts = [schedlab.sweep(GRID, runs=2, cache=False, shard=f"{i}/3") for i in range(3)]
    assert sorted(d for p in parts for d in p["digest"]) == sorted(df["digest"])
    pq = tmp_path / "t.parquet"
    df.to_parquet(pq)
    assert list(pd.read_parquet(pq)["digest"]) == list(df["digest"])
    # The command line writes Parquet itself: typed columns, the same rows.
    cli_pq = tmp_path / "cli.parquet"
    cli("sweep", str(grid), "--no-cache", "--format", "parquet", "--out", str(cli_pq))
    from_pq = pd.read_parquet(cli_pq)
    assert list(from_pq.columns) == list(df.columns)
    assert list(from_pq["digest"]) == list(df["digest"])
    assert from_pq["switches"].dtype == "int64" and from_pq["elapsed_s"].dtype == "float64"
    assert list(from_pq["elapsed_s"]) == list(df["elapsed_s"])


def test_negative_numbers_are_value_errors():
    for kwargs in [dict(seed=-1), dict(hz=-5), dict(seed=2**64), dict(seed=1.5)]:
        with pytest.raises(ValueError, match="whole number"):
            schedlab.run(**kwargs)
    with pytest.raises(ValueError, match="invalid runs '-3'"):
        schedlab.compare("fifo", "fifo", runs=-3)
    with pytest.raises(ValueError, match="invalid seed"):
        schedlab.sweep({"policy": "fifo"}, seed=-1, cache=False)


def test_bad_grids_raise_value_error():
    with pytest.raises(ValueError, match="invalid grid key 'colour'"):
        schedlab.sweep({"colour": ["red"]}, cache=False)
    with pytest.raises(ValueError, match="cfs version"):
        schedlab.sweep({"policy": "cfs@9.9"}, cache=False)
    with pytest.raises(ValueError, match="invalid shard"):
        schedlab.sweep({"policy": "fifo"}, cache=False, shard="2/2")


def test_sweep_on_a_dask_local_cluster_equals_the_serial_sweep(tmp_path):
    distributed = pytest.importorskip("distributed")
    serial = schedlab.sweep(GRID, runs=3, cache=False, jobs=1)
    assert len(serial) >= 50
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, host="127.0.0.1", dashboard_address=None,
                                  processes=True) as cluster, distributed.Client(cluster) as client:
        on_dask = schedlab.sweep(GRID, runs=3, cache=tmp_path / "cache", client=client)
    assert on_dask.attrs["computed"] == len(serial)
    pd.testing.assert_frame_equal(on_dask, serial)


def test_a_killed_sweep_resumes_without_recomputing(tmp_path):
    cache = tmp_path / "cache"
    grid = tmp_path / "g.toml"
    grid.write_text("runs = 40\n[grid]\ntopology = '1x1x4x1'\nworkload = 'hackbench groups=2 loops=400'\n"
                    "policy = ['cfs@4.19', 'eevdf@6.18']\n")
    p = subprocess.Popen([BIN, "sweep", str(grid), "--cache", str(cache), "--jobs", "1"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    entries = lambda: sorted(cache.glob("*/*.json"))
    deadline = time.time() + 60
    while len(entries()) < 5 and time.time() < deadline:
        time.sleep(0.02)
    p.send_signal(signal.SIGKILL)
    p.wait()
    done = len(entries())
    assert 5 <= done < 80, done
    resumed = schedlab.sweep(grid, cache=cache, jobs=1)
    assert len(resumed) == 80
    assert resumed.attrs["cached"] == done
    assert resumed.attrs["computed"] == 80 - done
    assert resumed.attrs["repaired"] == 0
    assert not list(cache.glob("*/.*.tmp")), "a killed writer's temporary file is cleaned up"
    fresh = schedlab.sweep(grid, cache=False)
    pd.testing.assert_frame_equal(resumed, fresh)


def test_runs_release_the_gil():
    inside = threading.Event()
    finished = threading.Event()

    def work():
        inside.set()
        schedlab.run(workload="hackbench groups=4 loops=2000", topology="1x1x8x1")
        finished.set()

    t = threading.Thread(target=work)
    t.start()
    inside.wait()
    ticks = 0
    while not finished.is_set():
        ticks += 1
        time.sleep(0.001)
    t.join()
    # With the GIL held for the whole run this thread would not get a tick in
    # until the run returned.
    assert ticks > 20, ticks


def test_the_cli_runs_a_grid_on_dask_through_the_package(tmp_path):
    pytest.importorskip("distributed")
    grid = tmp_path / "g.toml"
    grid.write_text("runs = 2\n[grid]\ntopology = '1x1x2x1'\nworkload = 'hackbench loops=20'\n"
                    "policy = ['cfs@4.19', 'fifo']\n")
    env = dict(os.environ, SCHEDLAB_PYTHON=sys.executable)
    out = tmp_path / "d.csv"
    p = subprocess.run([BIN, "sweep", str(grid), "--dask", "local", "--no-cache", "--out", str(out)],
                       capture_output=True, text=True, env=env)
    assert p.returncode == 0, p.stderr
    serial = schedlab.sweep(grid, cache=False)
    assert list(pd.read_csv(out)["digest"]) == list(serial["digest"])
    bad = subprocess.run([BIN, "sweep", str(grid), "--dask", "local", "--shard", "5/2"], capture_output=True,
                         text=True, env=env)
    assert bad.returncode == 2 and bad.stderr.startswith("schedlab: error: invalid shard")


def test_the_steal_heat_map_example_runs(tmp_path):
    pytest.importorskip("matplotlib")
    out = tmp_path / "steal.png"
    p = subprocess.run([sys.executable, str(ROOT / "examples" / "steal_heatmap.py"), "--out", str(out), "--runs", "1",
                        "--loops", "20"], capture_output=True, text=True, env=dict(os.environ, XDG_CACHE_HOME=str(tmp_path)))
    assert p.returncode == 0, p.stderr
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "30 runs: 30 computed" in p.stdout
