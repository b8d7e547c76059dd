#!/usr/bin/env bash
# Tune matmul on the default CPU device at 512³ and 1024³ from an empty AUTOTUNE_HOME (default
# budget, seed 0), then `autotune bench` each size: the tuned kernel beside numpy.matmul on
# float32, measured in the same run; then matmul at sizes without an entry as `load_kernel`
# gives them (benchmarks/sizes.py), beside the 1024³ entry, in one run.
# Usage: bash benchmarks/cpu_matmul_numpy.sh [--device SEL]
set -euo pipefail
export AUTOTUNE_HOME=$(mktemp -d)
trap 'rm -rf "$AUTOTUNE_HOME"' EXIT
lscpu | grep -E "^Model name|^CPU\(s\)" || true
autotune devices
for size in 512 1024; do
  autotune run matmul -s "$size" --seed 0 -q "$@"
  autotune bench matmul -s "$size" "$@"
done
python3 "$(dirname "$0")/sizes.py" "$@" 1024 1001 1000 777x1001x3
