#!/usr/bin/env bash
# The Python package's tests: a virtual environment under target/ with the
# package's test dependencies, the package built into it (maturin develop,
# release profile), the `schedlab` binary beside it, then pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
venv="target/python-venv"
python="${PYTHON:-python3}"
if [ ! -x "$venv/bin/python" ]; then
    "$python" -m venv "$venv"
fi
"$venv/bin/pip" install --quiet --disable-pip-version-check \
    'maturin>=1.5,<2' 'pytest>=7' 'pandas>=1.5' 'dask[distributed]>=2023.1' 'pyarrow>=12' 'matplotlib>=3.5'
cargo build --release -p schedlab-cli
(cd python && VIRTUAL_ENV="$PWD/../$venv" PATH="$PWD/../$venv/bin:$PATH" "../$venv/bin/maturin" develop --release --quiet)
SCHEDLAB_BIN="$PWD/target/release/schedlab" "$venv/bin/python" -m pytest -q python/tests "$@"
