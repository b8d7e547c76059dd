#!/usr/bin/env bash
# Tune matmul at a ladder of problems on the NVIDIA GPU, each search starting from the winners
# already in the profiles (`previous_winners` in tuner.py), and copy the profile to $OUT.
# Usage on the GPU host, from the repository root (benchmarks/gpu_env.sh sets up the rest):
#   bash benchmarks/gpu_matmul_ladder.sh SECONDS:SIZE ...      e.g. 60:2048 90:8192 45:1024,layout=col
# SIZE as for `autotune run -s`; SECONDS bounds that search (`-t`). SEED_FROM=PROFILE.yaml (another
# device's profile) makes its matmul winners the first candidates here (as picked entries, which
# the results replace; bring home only the tuned ones: merge_profile.py --tuned-only).
set -u
source "$(dirname "$0")/gpu_env.sh"
export AUTOTUNE_HOME=${AUTOTUNE_HOME:-/tmp/home}
if [ -n "${SEED_FROM:-}" ]; then
    slug=$(python3 -c 'from autotune import device; print(device.select("nvidia")[0].slug)')
    python3 "$(dirname "$0")/merge_profile.py" --as-picked "$SEED_FROM" "$AUTOTUNE_HOME/profiles/$slug.yaml" >/dev/null
fi
for job in "$@"; do
    python3 -m autotune run matmul -d nvidia -s "${job#*:}" -n 2000 -t "${job%%:*}" -q
done
cp "$AUTOTUNE_HOME"/profiles/*.yaml "${OUT:-.}"/ 2>/dev/null
