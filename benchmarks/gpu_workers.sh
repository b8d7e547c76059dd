#!/usr/bin/env bash
# One study tuned by one worker, then by one worker per GPU (`run -d all`), for the same time:
# trials per minute, the best found and configurations measured twice, from each study.
# Usage on a GPU host with two or more GPUs, from the repository root:
#   bash benchmarks/gpu_workers.sh SECONDS SIZE        e.g. 120 4096
set -u
source "$(dirname "$0")/gpu_env.sh"
secs=${1:-120} size=${2:-4096}
export AUTOTUNE_HOME=${AUTOTUNE_HOME:-/tmp/home}
for devs in nvidia all; do
    db=$AUTOTUNE_HOME/$devs.db
    python3 -m autotune run matmul -d $devs -s "$size" -n 100000 -t "$secs" --storage sqlite:///$db --no-save -q \
        | grep -E "worker|together|stopped|time  |best  " 
    python3 - "$db" <<'PY'
import sys, collections, optuna
from autotune.space import config_key
storage = f"sqlite:///{sys.argv[1]}"
for s in optuna.get_all_study_summaries(storage):
    trials = [t for t in optuna.load_study(study_name=s.study_name, storage=storage).trials
              if "status" in t.user_attrs and t.user_attrs["status"] != "interrupted"]
    keys = collections.Counter(config_key(t.params) for t in trials)
    ok = [min(t.user_attrs["times_ms"]) for t in trials if t.user_attrs["status"] == "ok" and "times_ms" in t.user_attrs]
    print(f"  study: {len(trials)} measured, {sum(c - 1 for c in keys.values())} measured twice, "
          f"fastest launch {min(ok):.4f} ms")
PY
done
