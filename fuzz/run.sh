#!/usr/bin/env bash
# Fuzzes schedlab's parsers with cargo-fuzz (libFuzzer) on the nightly toolchain,
# installing cargo-fuzz if it is missing, then minimises each corpus so that what
# is committed stays small. The ordinary tests replay fuzz/corpus/ on stable.
#
#   fuzz/run.sh [SECONDS_PER_TARGET] [TARGET...]     (default: 600 s, every target)
#
# A crash stops the run; libFuzzer leaves the input in fuzz/artifacts/TARGET/.
# The memory limit is above the 4 GiB a topology may estimate for its state.
set -euo pipefail
cd "$(dirname "$0")"
seconds="${1:-600}"
shift || true
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
    targets=(topology machine_profile workload_spec policy_name ftrace_text experiment_file suite_file grid_file)
fi
if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
    cargo install cargo-fuzz --locked
fi
for t in "${targets[@]}"; do
    mkdir -p "corpus/$t"
    echo "== $t: ${seconds} s"
    cargo +nightly fuzz run "$t" "corpus/$t" -- -max_total_time="$seconds" -max_len=65536 -rss_limit_mb=8192 -print_final_stats=1
    cargo +nightly fuzz cmin "$t" "corpus/$t"
done
