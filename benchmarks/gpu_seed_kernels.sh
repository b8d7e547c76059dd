#!/usr/bin/env bash
# Tune and bench the seed kernels (all but matmul) on the NVIDIA GPU in one device call.
# Usage on the GPU host, from the repository root: bash benchmarks/gpu_seed_kernels.sh
# (benchmarks/gpu_env.sh, sourced below, installs carried wheels and registers the driver).
set -u
source "$(dirname "$0")/gpu_env.sh"
export AUTOTUNE_HOME=${AUTOTUNE_HOME:-/tmp/home}
R="python3 -m autotune"
$R probe -d nvidia
$R run reverse -d nvidia -s N=1073741824 -n 80 -t 80 -q
$R run mul1 -d nvidia -s N=268435456 -n 60 -t 70 -q
$R run correlate -d nvidia -s W=500,H=500,OW=250,OH=250 -n 150 -t 90 -q
$R run correlate -d nvidia -s W=640,H=640,OW=320,OH=320 -n 80 -t 60 -q
$R run mathpath -d nvidia -n 150 -t 60 -q
$R bench reverse -d nvidia -s N=1073741824
$R bench mul1 -d nvidia -s N=268435456
$R bench correlate -d nvidia -s W=500,H=500,OW=250,OH=250
$R bench correlate -d nvidia -s W=640,H=640,OW=320,OH=320
$R bench mathpath -d nvidia
