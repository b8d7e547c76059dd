#!/usr/bin/env bash
# The recorded spaces of the README's search-efficiency table, from the AutoTuningAssociation
# benchmark_hub (Kernel Tuner cache files), copied to DIR under the names the table uses: the 9
# spaces in DIR, and in DIR/others the other devices' recordings whose winners its warm-started
# column starts from.
#   bash benchmarks/fetch_recorded_spaces.sh DIR
set -euo pipefail
dir=${1:?usage: fetch_recorded_spaces.sh DIR}
commit=8eeb99e7179e6838af95d392ac6c60cebfd8c434  # the snapshot the table was measured on
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
git clone -q https://github.com/AutoTuningAssociation/benchmark_hub "$tmp/hub" || {
  echo "fetch_recorded_spaces.sh: cannot clone github.com/AutoTuningAssociation/benchmark_hub (above);" \
       "it needs internet access: run it where there is, and copy $dir here" >&2
  exit 1
}
git -C "$tmp/hub" checkout -q "$commit"
mkdir -p "$dir/others"
copy() { while read -r name path; do cp "$tmp/hub/$path" "$1/$name.json.gz"; done; }
copy "$dir" <<'LIST'
kt_gemm__RTX_2080_Ti currently_unused/cachefiles/KernelTuner data/gemm/RTX_2080_Ti.json.gz
kt_gemm__RTX_3060_laptop currently_unused/cachefiles/KernelTuner data/gemm/RTX_3060_laptop.json.gz
kt_gemm__RTX_3090 currently_unused/cachefiles/KernelTuner data/gemm/RTX_3090.json.gz
kt_gemm__RTX_Titan currently_unused/cachefiles/KernelTuner data/gemm/RTX_Titan.json.gz
convolution_milo__A100 cachefiles/convolution_milo/A100.json.gz
convolution__RTX_3090 currently_unused/cachefiles/convolution/RTX_3090.json.gz
dedispersion_milo__MI250X cachefiles/dedispersion_milo/MI250X.json.gz
dedispersion_milo__A100 cachefiles/dedispersion_milo/A100.json.gz
pnpoly__RTX_3090 currently_unused/cachefiles/pnpoly/RTX_3090.json.gz
LIST
copy "$dir/others" <<'LIST'
convolution_milo__A4000 cachefiles/convolution_milo/A4000.json.gz
convolution_milo__A6000 cachefiles/convolution_milo/A6000.json.gz
convolution_milo__MI250X cachefiles/convolution_milo/MI250X.json.gz
convolution__RTX_2080_Ti currently_unused/cachefiles/convolution/RTX_2080_Ti.json.gz
kt_convolution__RTX_3060_laptop currently_unused/cachefiles/KernelTuner data/convolution/RTX_3060_laptop.json.gz
kt_convolution__RTX_Titan currently_unused/cachefiles/KernelTuner data/convolution/RTX_Titan.json.gz
dedispersion_milo__A4000 cachefiles/dedispersion_milo/A4000.json.gz
dedispersion_milo__A6000 cachefiles/dedispersion_milo/A6000.json.gz
kt_pnpoly__RTX_2080_Ti currently_unused/cachefiles/KernelTuner data/pnpoly/RTX_2080_Ti.json.gz
kt_pnpoly__RTX_3060_laptop currently_unused/cachefiles/KernelTuner data/pnpoly/RTX_3060_laptop.json.gz
kt_pnpoly__RTX_Titan currently_unused/cachefiles/KernelTuner data/pnpoly/RTX_Titan.json.gz
LIST
ls -l "$dir" "$dir/others"
