# Sourced by the GPU scripts: makes `python3 -m autotune` work on a GPU host, or says why not.
# 1. Dependencies: if ./.whl holds wheels (a host without a package index: fill it elsewhere with
#    `pip download --only-binary=:all: --python-version X.Y -d .whl pyopencl optuna ...`), install
#    them into /tmp/site; otherwise they must already be importable (`pip install -e .`).
# 2. NVIDIA's OpenCL driver: registered with the ICD loader when the host has the library but no
#    vendors entry for it (some container images ship libnvidia-opencl.so.1 unregistered).
if compgen -G ".whl/*.whl" >/dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .whl/*.whl >/dev/null 2>&1 || echo "gpu_env: installing .whl/ failed" >&2
    export PYTHONPATH=/tmp/site:$PWD${PYTHONPATH:+:$PYTHONPATH}
fi
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
nv=$(ls /usr/lib/libnvidia-opencl.so.1 /usr/lib/x86_64-linux-gnu/libnvidia-opencl.so.1 2>/dev/null | head -1)
if [ -n "$nv" ] && ! grep -qs nvidia-opencl "${OCL_ICD_VENDORS:-/etc/OpenCL/vendors}"/*.icd; then
    mkdir -p /tmp/icd
    cp /etc/OpenCL/vendors/*.icd /tmp/icd/ 2>/dev/null || true
    echo "$nv" > /tmp/icd/nvidia.icd
    export OCL_ICD_VENDORS=/tmp/icd
fi
python3 -c "import pyopencl, optuna, yaml, platformdirs, filelock" 2>/dev/null || {
    echo "gpu_env: autotune's dependencies are not importable: pip install -e . (or put wheels in .whl/)" >&2
    exit 1
}
