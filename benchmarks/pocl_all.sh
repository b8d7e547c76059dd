#!/usr/bin/env bash
# Tune every built-in kernel on the CPU OpenCL device (PoCL; on CPUs its LLVM 14 knows) with the
# default budget, one after another in one run, from an empty AUTOTUNE_HOME; prints each summary.
# Figures in README.md. For Intel's CPU runtime, replace `-d pocl` with `-d intel`.
set -u
export AUTOTUNE_HOME=${AUTOTUNE_HOME:-$(mktemp -d)}
R="python3 -m autotune"
$R devices | head -3
$R run matmul -d pocl -q --seed 0
$R run reverse -d pocl -q --seed 0
$R run mul1 -d pocl -q --seed 0
$R run correlate -d pocl -s W=128,H=128,OW=64,OH=64 -q --seed 0
$R run mathpath -d pocl -q --seed 0
$R probe -d pocl
