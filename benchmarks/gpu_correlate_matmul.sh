#!/usr/bin/env bash
# Re-tune matmul (4096³, 1024³ row- and column-major) and correlate (500², 640²) on the NVIDIA
# GPU, bench each against the same run's ceilings and its baseline, and dump the PTX of the
# 4096³ winner, in one device call (about 9 minutes). Searches start from the winners already
# in the profiles (see `previous_winners` in autotune/tuner.py).
# Usage on the device machine: source .whl/gpu-env.sh; bash benchmarks/gpu_correlate_matmul.sh
# Seconds per search: MM_T (4096³), MM1K_T (each 1024³), CORR_T (500²), CORR640_T (640²).
set -u
export AUTOTUNE_HOME=${AUTOTUNE_HOME:-/tmp/home}
R="python3 -m autotune"
$R run matmul -d nvidia -s 4096 -n 600 -t "${MM_T:-170}" -q
$R run matmul -d nvidia -s 1024 -n 300 -t "${MM1K_T:-45}" -q
$R run matmul -d nvidia -s 1024,layout=col -n 300 -t "${MM1K_T:-45}" -q
$R run correlate -d nvidia -s W=500,H=500,OW=250,OH=250 -n 400 -t "${CORR_T:-60}" -q
$R run correlate -d nvidia -s W=640,H=640,OW=320,OH=320 -n 400 -t "${CORR640_T:-90}" -q
$R bench matmul -d nvidia -s 4096
$R bench matmul -d nvidia -s 1024
$R bench matmul -d nvidia -s 1024,layout=col
$R bench correlate -d nvidia -s W=500,H=500,OW=250,OH=250
$R bench correlate -d nvidia -s W=640,H=640,OW=320,OH=320
python3 benchmarks/inspect_build.py matmul --size 4096 --device nvidia --out "${OUT:-.}"
