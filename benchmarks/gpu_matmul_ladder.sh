#!/usr/bin/env bash
# Tune matmul at a ladder of problems on the NVIDIA GPU, each search starting from the winners
# already in the profiles (`previous_winners` in tuner.py), and copy the profile to $OUT.
# Usage on the GPU host, from the repository root (benchmarks/gpu_env.sh sets up the rest):
#   bash benchmarks/gpu_matmul_ladder.sh SECONDS:SIZE ...      e.g. 60:2048 90:8192 45:1024,layout=col
# SIZE as for `autotune run -s`; SECONDS bounds that search (`-t`).
set -u
source "$(dirname "$0")/gpu_env.sh"
export AUTOTUNE_HOME=${AUTOTUNE_HOME:-/tmp/home}
for job in "$@"; do
    python3 -m autotune run matmul -d nvidia -s "${job#*:}" -n 2000 -t "${job%%:*}" -q
done
cp "$AUTOTUNE_HOME"/profiles/*.yaml "${OUT:-.}"/ 2>/dev/null
