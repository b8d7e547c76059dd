#!/usr/bin/env bash
# Re-measures figures the README states for the GPU host (results-nvidia-h200-2026-11-28.md):
# the multiply-add forms on every device that builds, the largest temporary folder of a matmul
# run at 8192^3, one naive launch of correlate at 500^2 on PoCL, and trials per 45 s at
# matmul 1024^3 with --compile-ahead 0, 2 and 4 (random sampler, one seed: the same candidate
# sequence each time). Run from the repository root.
set -u
source benchmarks/gpu_env.sh
lscpu | grep -E "Model name|^CPU\(s\)"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
OUT=${OUT:-$(mktemp -d)}
echo "== multiply-add forms"; AUTOTUNE_HOME=$(mktemp -d) python3 benchmarks/mad_vs_contract.py 2>&1 | tail -5
echo "== run folder at 8192^3"
export AUTOTUNE_HOME=$(mktemp -d) TMPDIR=$(mktemp -d)
python3 -m autotune run matmul -s 8192 -d nvidia -n 2 -t 120 -q > $OUT/run8192.log 2>&1 &
p=$!; max=0
while kill -0 $p 2>/dev/null; do
    s=$(du -sb $TMPDIR 2>/dev/null | cut -f1); [ "${s:-0}" -gt $max ] && max=$s; sleep 0.3
done
wait $p; echo "rc=$? largest temporary folder: $max bytes"; tail -4 $OUT/run8192.log
export TMPDIR=/tmp
echo "== one naive launch of correlate at 500^2 on PoCL"
for d in pocl; do
    AUTOTUNE_HOME=$(mktemp -d) timeout 300 python3 benchmarks/baseline_rounds.py correlate \
        -s W=500,H=500,OW=250,OH=250 -d $d --launches 1 --rounds 1 2>&1 | tail -2
done
echo "== compile ahead"
# NVIDIA's own JIT cache off: the same candidate sequence would be built from it on the later runs
# (autotune's program cache is each run's own); 0 again last, to see any order effect
for c in 0 2 4 0; do
    CUDA_CACHE_DISABLE=1 AUTOTUNE_HOME=$(mktemp -d) python3 -m autotune run matmul -s 1024 -d nvidia --sampler random \
        --seed 3 -t 45 -n 100000 --compile-ahead $c > $OUT/ca$c.log 2>&1
    echo "compile-ahead $c rc=$?"; grep -E "^  (best|time|trials|stopped)" $OUT/ca$c.log
done
