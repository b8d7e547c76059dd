"""Verify every entry of this device's shipped profile again, as the leaders' check again does.

Run after a change to verification (a new check, such as the guard zones after each array,
can refuse a configuration that was saved before it existed) or to a template: each entry is
chosen the way ``load_kernel`` chooses it and measured with :class:`autotune.measure.Bench`.
Prints one line per entry and exits 1 if any entry fails, or is one load_kernel does not use.

    python3 benchmarks/verify_profile.py [--device SELECTOR] [--kernel NAME ...] [--profiles FOLDER]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pyopencl as cl

from autotune import device as devices
from autotune import profiles
from autotune import spec as specs
from autotune.errors import AutotuneError
from autotune.loader import choose
from autotune.measure import Bench, TimingOptions, make_workload

SHIPPED = Path(__file__).resolve().parent.parent / "profiles"
QUICK = TimingOptions(warmup=1, min_repeats=3, max_repeats=3, min_time_s=0.0)


def verify(spec: specs.KernelSpec, info: devices.DeviceInfo, ctx: cl.Context, entry: profiles.Entry,
           folder: Path) -> tuple[bool, str]:
    """Whether load_kernel uses ``entry`` and it passes verification now, and a line saying so."""
    label = f"{spec.name} {dict(entry.problem)}"
    why = spec.unusable(entry)
    if why:
        return False, f"SKIP  {label}: load_kernel does not use it: {why}"
    problem = spec.resolve_problem(entry.problem)
    choice = choose(spec, info, problem, folders=[folder])
    bench = Bench(spec, problem, ctx, make_workload(spec, problem), info.facts(), QUICK)
    m = bench.measure(choice.params, strict=True)  # every byte of measure.STRICT_BYTES, inputs unchanged
    if not m.ok:
        return False, f"FAIL  {label} ({choice.origin}): {m.status.value}: {m.message}"
    error = "exact (a check function's verdict)" if m.error is None else f"{m.error:.3g}"  # mul1's is exact
    return True, (f"ok    {label} ({choice.origin}): {m.median_ms:.4g} ms "
                  f"(profile {entry.time_ms:.4g} ms), error {error}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default=None, help="the device whose profile to check (a selector or a part of its "
                    "name, as `autotune devices` lists them; default: autotune's default device)")
    ap.add_argument("--kernel", action="append", default=None,
                    help="check only this kernel's entries (repeatable; default: every kernel in the profile)")
    ap.add_argument("--profiles", type=Path, default=SHIPPED, help="the profiles' folder (default: the shipped ones)")
    args = ap.parse_args()
    info, dev = devices.select(args.device)
    doc = profiles.read(profiles.path_for(info.slug, args.profiles))
    if not doc:
        print(f"verify_profile: error: no profile for {info.slug} in {args.profiles}; give --profiles the folder "
              "of the profile to check (your own: $AUTOTUNE_HOME/profiles)", file=sys.stderr)
        return 1
    failed, checked, ctx = 0, 0, cl.Context([dev])
    for kernel in args.kernel or list(doc.get("kernels") or {}):
        spec = specs.load(kernel)
        for entry in profiles.entries(doc, kernel):
            passed, line = verify(spec, info, ctx, entry, args.profiles)
            failed, checked = failed + (not passed), checked + 1
            print(line, flush=True)
    if not checked:  # trial 97: "every entry passed" of none
        print(f"verify_profile: error: no entry of {', '.join(args.kernel or ['any kernel'])} in the profile of "
              f"{info.slug} in {args.profiles}", file=sys.stderr)
        return 1
    print(f"{failed} of the entries failed or are not used" if failed else f"every entry passed ({checked})")
    return 1 if failed else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except AutotuneError as exc:  # trial 97: an unknown kernel was a traceback
        sys.exit(f"verify_profile: error: {exc}")
