#!/usr/bin/env bash
# Re-tune correlate (500² and 640²) and matmul 4096³ on the NVIDIA GPU, then bench each
# against the same run's ceilings, in one device call (about 9.5 minutes).
# Usage on the device machine: source .whl/gpu-env.sh; bash benchmarks/gpu_correlate_matmul.sh
# Times per search: CORR_T (500²), CORR640_T, MM_T seconds.
set -u
export AUTOTUNE_HOME=${AUTOTUNE_HOME:-/tmp/home}
R="python3 -m autotune"
$R run correlate -d nvidia -s W=500,H=500,OW=250,OH=250 -n 400 -t "${CORR_T:-140}" -q
$R run correlate -d nvidia -s W=640,H=640,OW=320,OH=320 -n 300 -t "${CORR640_T:-80}" -q
$R run matmul -d nvidia -s 4096 -n 600 -t "${MM_T:-230}" -q
$R bench correlate -d nvidia -s W=500,H=500,OW=250,OH=250
$R bench correlate -d nvidia -s W=640,H=640,OW=320,OH=320
$R bench matmul -d nvidia -s 4096
