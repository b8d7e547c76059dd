#!/usr/bin/env bash
# What a start from other devices' winners is worth on this GPU: `autotune run matmul` with a
# small budget, as if this device had no profile (its shipped one moved aside), once starting
# from the other shipped devices' winners and once cold (every shipped profile moved aside),
# for each seed; then `bench` of this device's shipped tuned entry and cuBLAS (torch, if
# present) at the same size. Restores the profiles on exit.
#   bash benchmarks/gpu_warm_start.sh [SIZE] [TRIALS] [SEEDS...]     (default 2048 25 0 1)
source benchmarks/gpu_env.sh  # before set -e: it probes for files that may be absent
set -euo pipefail
size=${1:-2048}; trials=${2:-25}; shift 2 || true
seeds=("${@:-0 1}"); [ $# -eq 0 ] && seeds=(0 1)
export AUTOTUNE_HOME=$(mktemp -d)
slug=$(python3 -c "from autotune import device; print(device.select('')[0].slug)")
aside=$(mktemp -d)
trap 'mv "$aside"/*.yaml profiles/ 2>/dev/null || true' EXIT
[ -f "profiles/$slug.yaml" ] && mv "profiles/$slug.yaml" "$aside/"
for seed in "${seeds[@]}"; do
  echo "== warm start, seed $seed"
  python3 -m autotune run matmul -s "$size" -n "$trials" --seed "$seed" --no-save \
      --storage "sqlite:///$AUTOTUNE_HOME/warm-$seed.db" | grep -v "^ *\["
done
mv profiles/*.yaml "$aside/"
for seed in "${seeds[@]}"; do
  echo "== cold, seed $seed"
  python3 -m autotune run matmul -s "$size" -n "$trials" --seed "$seed" --no-save \
      --storage "sqlite:///$AUTOTUNE_HOME/cold-$seed.db" | grep -v "^ *\["
done
mv "$aside"/*.yaml profiles/
echo "== this device's shipped tuned entry"
python3 -m autotune bench matmul -s "$size"
