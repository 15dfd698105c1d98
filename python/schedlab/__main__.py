"""``python -m schedlab sweep GRID.toml ...``: what ``schedlab sweep --dask`` runs.

The flags are the command line's; bad input is one line on stderr and exit
status 2, as there.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2, as the CLI
        print(f"schedlab: error: {message} (see --help)", file=sys.stderr)
        sys.exit(2)


def main(argv=None) -> int:
    p = _Parser(prog="python -m schedlab")
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("sweep", help="run a grid (see schedlab sweep --help)")
    s.add_argument("grid")
    s.add_argument("--out")
    s.add_argument("--format", choices=["csv", "json", "parquet"], default="csv")
    s.add_argument("--cache")
    s.add_argument("--no-cache", action="store_true")
    s.add_argument("--shard")
    s.add_argument("--jobs", type=int)
    s.add_argument("--dask")
    s.add_argument("--tls-ca-file")
    s.add_argument("--tls-cert")
    s.add_argument("--tls-key")
    a = p.parse_args(argv)

    import schedlab

    security = None
    if a.tls_ca_file or a.tls_cert or a.tls_key:
        from distributed import Security

        security = Security(
            tls_ca_file=a.tls_ca_file, tls_client_cert=a.tls_cert, tls_client_key=a.tls_key, require_encryption=True
        )
    if a.format == "parquet" and not a.out:
        print("schedlab: error: invalid format 'parquet': expected --out FILE.parquet with it", file=sys.stderr)
        return 2
    cache = False if a.no_cache else (a.cache or True)
    try:
        df = schedlab.sweep(a.grid, cache=cache, shard=a.shard, jobs=a.jobs, dask=a.dask, security=security)
    except ValueError as e:
        print(f"schedlab: error: {e}", file=sys.stderr)
        return 2
    except (RuntimeError, OSError) as e:
        print(f"schedlab: error: {e}", file=sys.stderr)
        return 1
    if a.out:
        # Written whole: a temporary file beside the target, then a rename.
        d = os.path.dirname(os.path.abspath(a.out))
        fd, tmp = tempfile.mkstemp(dir=d, prefix=".schedlab-", suffix=".tmp")
        os.close(fd)
        try:
            if a.format == "parquet":
                df.to_parquet(tmp, index=False)
            elif a.format == "json":
                df.to_json(tmp, orient="records")
            else:
                df.to_csv(tmp, index=False)
            os.replace(tmp, a.out)
        except BaseException:
            os.unlink(tmp)
            raise
    elif a.format == "json":
        sys.stdout.write(df.to_json(orient="records") + "\n")
    else:
        df.to_csv(sys.stdout, index=False)
    at = df.attrs
    where = f" on Dask ({a.dask})" if a.dask else ""
    print(
        f"schedlab sweep: {len(df)} runs ({at['computed']} computed, {at['cached']} cached, "
        f"{at['repaired']} damaged entries recomputed){where}",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
