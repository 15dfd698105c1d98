"""STEAL's speedup over hackbench groups on three topologies, as a heat map.

The steal seed (Linux idle stealing, cfs@4.19 against cfs@4.19+STEAL) measured
its gain on one machine; this sweep asks where the sign holds. Each cell is the
%speedup of mean elapsed time, base over new, as the seed computes it:
(base / new - 1) x 100. Rows run through schedlab's cache, so a rerun is instant.

    pip install './python[dask]' matplotlib
    python examples/steal_heatmap.py --out steal.png [--runs 3] [--loops 2000] [--dask local]
"""

import argparse

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

import schedlab  # noqa: E402

TOPOLOGIES = ["x6-2-20", "2x1x8x2", "cascadelake-2s"]
GROUPS = [1, 2, 4, 8, 16]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default="steal-heatmap.png")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--loops", type=int, default=2000)
    p.add_argument("--dask", help="a Dask scheduler address, or 'local'")
    a = p.parse_args()

    df = schedlab.sweep(
        {
            "topology": TOPOLOGIES,
            "policy": ["cfs@4.19", "cfs@4.19+STEAL"],
            "workload": f"hackbench loops={a.loops} ipc=socket mode=process",
            "workload.groups": GROUPS,
        },
        runs=a.runs,
        dask=a.dask,
    )
    print(f"{len(df)} runs: {df.attrs['computed']} computed, {df.attrs['cached']} from the cache")
    mean = df.groupby(["topology", "workload.groups", "policy"])["elapsed_s"].mean().unstack("policy")
    speedup = (100.0 * (mean["cfs@4.19"] / mean["cfs@4.19+STEAL"] - 1.0)).unstack("workload.groups")
    speedup = speedup.reindex(index=TOPOLOGIES, columns=[str(g) for g in GROUPS])
    print(speedup.round(1).to_string())

    fig, ax = plt.subplots(figsize=(7, 3.2))
    limit = max(1.0, float(speedup.abs().max().max()))
    im = ax.imshow(speedup.values, cmap="RdBu", vmin=-limit, vmax=limit, aspect="auto")
    ax.set_xticks(range(len(GROUPS)), labels=[str(g) for g in GROUPS])
    ax.set_yticks(range(len(TOPOLOGIES)), labels=TOPOLOGIES)
    ax.set_xlabel("hackbench groups")
    for i in range(len(TOPOLOGIES)):
        for j in range(len(GROUPS)):
            ax.text(j, i, f"{speedup.values[i, j]:+.1f}", ha="center", va="center", fontsize=8)
    fig.colorbar(im, ax=ax, label="%speedup of STEAL (base/new - 1)")
    ax.set_title(f"cfs@4.19+STEAL vs cfs@4.19, hackbench loops={a.loops}, {a.runs} runs each")
    fig.tight_layout()
    fig.savefig(a.out, dpi=120)
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
