#!/usr/bin/env bash
# Re-tune matmul (4096³, 1024³ row- and column-major) and/or correlate (500², 640²) on the
# NVIDIA GPU, bench each against the same run's ceilings and its baseline, and print what the
# compiler made of the winners (PTX counts, ptxas registers), in one device call.
# Searches start from the winners already in the profiles (`previous_winners` in tuner.py).
# Usage on the GPU host, from the repository root (benchmarks/gpu_env.sh sets up the rest):
#   bash benchmarks/gpu_correlate_matmul.sh [matmul] [correlate]
# (both when none is named). Seconds per search: MM_T (4096³), MM1K_T (each 1024³),
# CORR_T (500²), CORR640_T (640²). About 9 minutes for matmul with the defaults, 8 for correlate.
set -u
source "$(dirname "$0")/gpu_env.sh"
export AUTOTUNE_HOME=${AUTOTUNE_HOME:-/tmp/home}
R="python3 -m autotune"
OUTDIR=${OUT:-.}
C500="W=500,H=500,OW=250,OH=250"
C640="W=640,H=640,OW=320,OH=320"

matmul() {
    $R run matmul -d nvidia -s 4096 -n 600 -t "${MM_T:-170}" -q
    $R run matmul -d nvidia -s 1024 -n 300 -t "${MM1K_T:-45}" -q
    $R run matmul -d nvidia -s 1024,layout=col -n 300 -t "${MM1K_T:-45}" -q
    $R bench matmul -d nvidia -s 4096
    $R bench matmul -d nvidia -s 1024
    $R bench matmul -d nvidia -s 1024,layout=col
    python3 benchmarks/inspect_build.py matmul --size 4096 --device nvidia --out "$OUTDIR"
}

correlate() {
    $R run correlate -d nvidia -s "$C640" -n 1000 -t "${CORR640_T:-270}"
    $R run correlate -d nvidia -s "$C500" -n 1000 -t "${CORR_T:-150}"
    $R bench correlate -d nvidia -s "$C500"
    $R bench correlate -d nvidia -s "$C640"
    python3 benchmarks/inspect_build.py correlate --size "$C640" --device nvidia --out "$OUTDIR"
}

for job in "${@:-matmul correlate}"; do
    for j in $job; do "$j"; done
done
