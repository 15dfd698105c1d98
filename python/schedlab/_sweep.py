"""Sweeps: every combination of a grid's parameters, one tidy row per run.

The grid is a TOML file (as for ``schedlab sweep``) or a dict of the same keys
(``topology``, ``machine``, ``policy``, ``workload``, ``hz``, ``preempt``,
``autogroup``, ``workload.KEY``, ``sysctl.NAME``), each one value or a list.
Rows are cached by content (the request, its machine profile and the
simulator's source), so a rerun, or a sweep resumed after being killed,
computes only what is missing.

Executors: this machine's cores (the default, schedlab's parallel runner), or
Dask: ``client=`` an existing ``distributed.Client``, or ``dask="tcp://host:port"``
/ ``"tls://host:port"`` (with ``security=distributed.Security(...)``), or
``dask="local"`` for a cluster started here that listens on 127.0.0.1 only.
"""

from __future__ import annotations

import json
import os
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import pandas as pd

from . import _native

GridSpec = Union[str, "os.PathLike[str]", Mapping[str, Any]]


def _grid_args(grid: GridSpec, runs: Optional[int], seed: Optional[int]):
    """(toml text or None, axes or None, runs, seed) for the native calls."""
    if isinstance(grid, (str, os.PathLike)):
        path = os.fspath(grid)
        if not path.endswith(".toml"):
            raise ValueError(f"invalid grid '{path}': expected a .toml file or a dict of parameters")
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except OSError as e:
            raise ValueError(f"invalid grid file '{path}': expected a readable TOML grid file ({e})") from None
        if runs is not None or seed is not None:
            raise ValueError("invalid runs/seed with a grid file: expected them in the file (runs = N, seed = N)")
        return text, None, 1, 1
    if not isinstance(grid, Mapping):
        raise ValueError(f"invalid grid '{grid!r}': expected a .toml path or a dict of parameters")
    params = grid
    if "grid" in grid:
        params = grid["grid"]
        runs = grid.get("runs", runs)
        seed = grid.get("seed", seed)
        extra = set(grid) - {"grid", "runs", "seed"}
        if extra:
            raise ValueError(f"invalid grid key '{sorted(extra)[0]}': expected runs, seed or grid")
    from . import _text, _whole

    axes: List[Tuple[str, List[str]]] = []
    for key, values in params.items():
        if isinstance(values, (list, tuple)):
            axes.append((str(key), [_text(v) for v in values]))
        else:
            axes.append((str(key), [_text(values)]))
    return None, axes, _whole("runs", 1 if runs is None else runs), _whole("seed", 1 if seed is None else seed)


def _cache_dir(cache: Union[bool, str, "os.PathLike[str]", None]) -> Optional[str]:
    if cache is True:
        return _native.default_cache_dir()
    if cache is False or cache is None:
        return None
    return os.fspath(cache)


def _frame(rows: List[List[Tuple[str, Any]]]) -> pd.DataFrame:
    """Rows of (column, value) pairs → a DataFrame in first-seen column order."""
    columns: List[str] = []
    records = []
    for row in rows:
        record = {}
        for k, v in row:
            if k not in columns:
                columns.append(k)
            record[k] = v
        records.append(record)
    return pd.DataFrame.from_records(records, columns=columns)


def _run_job(index: int, params: List[List[str]], seed: int, cache: Optional[str]):
    """One job on a Dask worker: (index, row pairs, how it was obtained)."""
    from schedlab import _native as native

    row, how = native.sweep_one(index, [tuple(p) for p in params], seed, cache)
    return index, json.loads(row), how


def sweep(
    grid: GridSpec,
    *,
    runs: Optional[int] = None,
    seed: Optional[int] = None,
    cache: Union[bool, str, "os.PathLike[str]", None] = True,
    shard: Optional[str] = None,
    jobs: Optional[int] = None,
    client: Any = None,
    dask: Optional[str] = None,
    security: Any = None,
) -> pd.DataFrame:
    """Run a grid; one row per run, every parameter a column, then the results
    (elapsed_s, busy_pct, switches, migrations, rate, latency, digest, ...).

    ``df.attrs`` holds ``computed``, ``cached`` and ``repaired`` (damaged cache
    entries recomputed) counts and the simulator's ``revision``. ``shard="I/N"``
    runs only the jobs whose index is I modulo N (a Slurm array task each).
    """
    toml, axes, runs_, seed_ = _grid_args(grid, runs, seed)
    cache_dir = _cache_dir(cache)
    if jobs is not None:
        from . import _whole

        _whole("jobs", jobs)
    if client is None and dask is None:
        rows_json, computed, cached, repaired = _native.sweep_local(toml, axes, runs_, seed_, cache_dir, shard, jobs)
        df = _frame(json.loads(rows_json))
    else:
        df, computed, cached, repaired = _on_dask(toml, axes, runs_, seed_, cache_dir, shard, client, dask, security)
    df.attrs.update(computed=computed, cached=cached, repaired=repaired, revision=_native.SOURCE_REVISION)
    return df


def _on_dask(toml, axes, runs, seed, cache_dir, shard, client, address, security):
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise RuntimeError("a Dask sweep needs dask.distributed: pip install 'dask[distributed]'") from None
    jobs = json.loads(_native.sweep_jobs(toml, axes, runs, seed, shard))
    cluster = None
    own_client = None
    try:
        if client is None:
            if address == "local":
                # Started here: scheduler, workers and (no) dashboard on loopback only.
                cluster = LocalCluster(
                    host="127.0.0.1", n_workers=os.cpu_count() or 1, threads_per_worker=1,
                    dashboard_address=None, processes=True,
                )
                own_client = client = Client(cluster)
            else:
                own_client = client = Client(address, security=security)
        futures = client.map(
            _run_job,
            [j["index"] for j in jobs],
            [j["params"] for j in jobs],
            [j["seed"] for j in jobs],
            cache=cache_dir,
            pure=False,
        )
        results = client.gather(futures)
    finally:
        if own_client is not None:
            own_client.close()
        if cluster is not None:
            cluster.close()
    results.sort(key=lambda r: r[0])
    hows = [h for _, _, h in results]
    df = _frame([row for _, row, _ in results])
    return df, hows.count("computed"), hows.count("cached"), hows.count("repaired")
