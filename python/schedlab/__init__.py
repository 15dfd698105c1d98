"""schedlab in Python: simulate kernel schedulers on any topology, reproducibly.

Every function takes what the ``schedlab`` command line takes, under the same
names and with the same defaults, and validates it the same way: a bad spec
raises ``ValueError`` carrying the command line's message. Simulations run
with the GIL released.

>>> import schedlab
>>> r = schedlab.run(policy="cfs@4.19", workload="hackbench groups=1 loops=100")
>>> r.digest                      # the same as `schedlab run ... --format json`
>>> r.tasks.head()                # per-task DataFrame
>>> schedlab.run(events=True).events["sched_switch"]   # LISA-style tables
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

import pandas as pd

from . import _native

__all__ = [
    "run",
    "compare",
    "reproduce",
    "sweep",
    "RunResult",
    "Comparison",
    "Reproduction",
    "DEFAULT_TOPOLOGY",
    "DEFAULT_POLICY",
    "DEFAULT_WORKLOAD",
    "SOURCE_REVISION",
]

#: The quick start's run (``schedlab run`` with no flags).
DEFAULT_TOPOLOGY = "x6-2-20"
DEFAULT_POLICY = "cfs@4.19"
DEFAULT_WORKLOAD = "hackbench groups=1 loops=10000 ipc=socket mode=process"

#: The simulator's source revision (git commit, ``-dirty`` for a changed tree).
SOURCE_REVISION: str = _native.SOURCE_REVISION

Scalar = Union[str, int, float, bool]

#: Column order of ``RunResult.tasks``.
TASK_COLUMNS = [
    "pid", "comm", "count", "run_ns", "user_ns", "sys_ns", "wait_ns", "sleep_ns", "switches", "involuntary", "migrations",
]
#: Leading columns of ``RunResult.cpus`` (the rest follow by name).
CPU_COLUMNS = [
    "cpu", "yld_count", "sched_count", "sched_goidle", "ttwu_count", "ttwu_local", "run_ns", "wait_ns", "timeslices",
]
#: Columns of ``Reproduction.table``: published beside simulated per row and metric.
SUMMARY_COLUMNS = ["experiment", "row", "metric", "published", "simulated", "within_target"]
#: Leading columns of a comparison's ``runs``.
RUN_COLUMNS = ["vary_key", "vary", "side", "policy", "seed", "time_s", "throughput", "switches", "migrations", "digest"]


def _ordered(df: pd.DataFrame, first: Sequence[str]) -> pd.DataFrame:
    """``first`` (those present) then the remaining columns in their order."""
    lead = [c for c in first if c in df.columns]
    return df[lead + [c for c in df.columns if c not in lead]]


def _text(value: Scalar) -> str:
    """A parameter as the command line writes it (what a TOML grid gives)."""
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() else repr(value)
    return str(value)


def _whole(name: str, value: Any) -> int:
    """A whole-number argument, refused in the command line's words."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0 or value >= 2**64:
        raise ValueError(f"invalid {name} '{value}': expected a whole number (0, 1, 2, ...)")
    return value


def _jobs(jobs: Optional[int]) -> Optional[int]:
    return None if jobs is None else _whole("jobs", jobs)


def _sysctls(sysctl: Optional[Mapping[str, Scalar]]) -> List[str]:
    return [f"{k}={_text(v)}" for k, v in (sysctl or {}).items()]


def _onoff(value: Union[None, bool, str]) -> Optional[str]:
    if value is None or isinstance(value, str):
        return value
    return "on" if value else "off"


@dataclass
class RunResult:
    """One run: ``summary`` is what ``schedlab run --format json`` prints."""

    summary: Dict[str, Any]
    text: str
    events: Optional[Dict[str, pd.DataFrame]] = None

    @property
    def digest(self) -> str:
        """The digest of the run's event stream: equal inputs, equal digests."""
        return self.summary["digest"]

    @property
    def tasks(self) -> pd.DataFrame:
        """One row per task: pid, comm, count (1; a process reaped during the run
        gives its slot to a later one and joins one row per comm, count the
        processes it adds up, pid the first), run/user/sys/wait/sleep ns,
        switches (of them involuntary: switched out while still runnable,
        ru_nivcsw), migrations."""
        return _ordered(pd.DataFrame(self.summary["tasks"], columns=TASK_COLUMNS), TASK_COLUMNS)

    @property
    def cpus(self) -> pd.DataFrame:
        """One row per CPU: schedstat's counters under their names (yld_count,
        sched_count, sched_goidle, ttwu_count, ttwu_local, run_ns, wait_ns,
        timeslices), then schedlab's (busy_ns, idle_entries, steals, ...)."""
        df = pd.DataFrame(self.summary["cpus"])
        df.insert(0, "cpu", range(len(df)))
        return _ordered(df, CPU_COLUMNS)

    def __repr__(self) -> str:
        s = self.summary
        return (
            f"RunResult(policy={s['policy']!r}, topology={s['topology']!r}, "
            f"workload={s['workload']['spec']!r}, seed={s['seed']}, "
            f"elapsed_s={s['elapsed_s']:.6f}, digest={s['digest']!r})"
        )


def _event_frames(tables: Dict[str, Dict[str, list]]) -> Dict[str, pd.DataFrame]:
    """Columns per tracepoint → DataFrames indexed by ``Time`` in seconds, as LISA shows them."""
    frames = {}
    for name, cols in tables.items():
        cols = dict(cols)
        time_s = [t / 1e9 for t in cols.pop("time_ns")]
        df = pd.DataFrame(cols, index=pd.Index(time_s, name="Time", dtype="float64"))
        for c in df.columns:
            if not c.endswith("comm") and c != "prev_state":
                df[c] = df[c].astype("int64")
        frames[name] = df
    return frames


def run(
    policy: str = DEFAULT_POLICY,
    topology: str = DEFAULT_TOPOLOGY,
    machine: Optional[str] = None,
    workload: str = DEFAULT_WORKLOAD,
    sysctl: Optional[Mapping[str, Scalar]] = None,
    seed: int = 1,
    hz: int = 250,
    preempt: Optional[str] = None,
    autogroup: Union[None, bool, str] = None,
    check: bool = False,
    events: bool = False,
) -> RunResult:
    """One simulated run, as ``schedlab run`` does it.

    ``machine=None`` uses the topology preset's own profile (else broadwell-ep);
    ``sysctl`` maps kernel tunable names to values; ``events=True`` also keeps
    the sched tracepoints as DataFrames (``RunResult.events``).
    """
    out = _native.run(
        topology, machine, policy, workload, _whole("seed", seed), _sysctls(sysctl), _whole("hz", hz),
        preempt, _onoff(autogroup), bool(check), bool(events),
    )
    frames = _event_frames(out["events"]) if events else None
    return RunResult(summary=json.loads(out["json"]), text=out["text"], events=frames)


@dataclass
class Comparison:
    """A comparison: ``summary`` is ``schedlab compare --format json``; ``runs`` one row per run."""

    summary: Dict[str, Any]
    text: str
    runs: pd.DataFrame

    def __repr__(self) -> str:
        return f"Comparison(base={self.summary['base']!r}, new={self.summary['new']!r}, runs={len(self.runs)})"


def _vary(vary: Union[None, str, Tuple[str, Sequence[Scalar]], Mapping[str, Sequence[Scalar]]]) -> Optional[str]:
    if vary is None or isinstance(vary, str):
        return vary
    if isinstance(vary, Mapping):
        if len(vary) != 1:
            raise ValueError(f"invalid vary '{dict(vary)}': expected one key with its values")
        ((key, values),) = vary.items()
    else:
        key, values = vary
    return f"{key}=" + ",".join(_text(v) for v in values)


def compare(
    base: str,
    new: str,
    *,
    others: Sequence[str] = (),
    topology: str = DEFAULT_TOPOLOGY,
    machine: Optional[str] = None,
    workload: str = "hackbench loops=10000",
    vary: Union[None, str, Tuple[str, Sequence[Scalar]], Mapping[str, Sequence[Scalar]]] = None,
    runs: int = 5,
    sysctl: Optional[Mapping[str, Scalar]] = None,
    hz: int = 250,
    preempt: Optional[str] = None,
    autogroup: Union[None, bool, str] = None,
    seed: int = 1,
    jobs: Optional[int] = None,
) -> Comparison:
    """Base against new (and ``others``) over ``runs`` seeds per side and row, as
    ``schedlab compare`` does; ``vary={"groups": [1, 2, 4]}`` makes one row per value."""
    out = _native.compare(
        base, new, list(others), topology, machine, workload, _vary(vary), _whole("runs", runs),
        _sysctls(sysctl), _whole("hz", hz), preempt, _onoff(autogroup), _whole("seed", seed), _jobs(jobs),
    )
    runs_df = _ordered(pd.DataFrame(json.loads(out["runs"])), RUN_COLUMNS)
    return Comparison(summary=json.loads(out["json"]), text=out["text"], runs=runs_df)


@dataclass
class Reproduction:
    """A seed's experiment: ``table`` has published and simulated side by side."""

    text: str
    summary: Dict[str, Any]
    table: pd.DataFrame
    runs: pd.DataFrame


def reproduce(
    name: str,
    runs: Optional[int] = None,
    scale: Union[None, int, float, str] = None,
    rows: Optional[Iterable[Scalar]] = None,
    jobs: Optional[int] = None,
) -> Reproduction:
    """``schedlab reproduce NAME``: a shipped experiment (or an experiment .toml)."""
    out = _native.reproduce(
        name,
        None if runs is None else _whole("runs", runs),
        None if scale is None else _text(scale),
        None if rows is None else [_text(r) for r in rows],
        _jobs(jobs),
    )
    return Reproduction(
        text=out["text"],
        summary=json.loads(out["json"]),
        table=pd.DataFrame(json.loads(out["summary"]), columns=SUMMARY_COLUMNS),
        runs=_ordered(pd.DataFrame(json.loads(out["runs"])), RUN_COLUMNS),
    )


from ._sweep import sweep  # noqa: E402  (uses the helpers above)
