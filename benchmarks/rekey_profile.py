"""Carry profile entries over a template edit that does not change their compiled source.

For each entry of KERNEL in PROFILE whose spec hash is OLD_HASH, preprocess the old template
(a copy given as OLD_TEMPLATE) and the current one with the entry's -D options (`cpp -P`);
if the two outputs are identical for every entry, the device compiles the same program, so
the entries are re-keyed to the current spec hash. Otherwise nothing is written.

    python3 benchmarks/rekey_profile.py matmul /tmp/matmul_old.cl profiles/nvidia-corporation-h200.yaml OLD_HASH
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path
from typing import Any

from autotune import profiles, spec
from autotune.errors import AutotuneError


def preprocess(path: Path, options: list[str]) -> list[str]:
    """The template's tokens after the C preprocessor (its includes inlined as a build does:
    beside it, else autotune's own headers), as whitespace-separated words: layout and comments
    do not change what the device compiles."""
    try:
        done = subprocess.run(["cpp", "-P", "-undef", "-x", "c", *options, "-"], input=spec.expand_includes(path),
                              capture_output=True, text=True)
    except FileNotFoundError:
        raise AutotuneError("needs the C preprocessor `cpp` (Debian: apt-get install cpp)") from None
    except OSError as exc:
        raise AutotuneError(f"cannot read {path} ({exc.strerror})") from None
    if done.returncode != 0:
        raise AutotuneError(f"cpp cannot preprocess {path}: {(done.stderr.strip().splitlines() or ['?'])[0]}")
    return done.stdout.split()


def main(kernel: str, old_template: str, profile: str, old_hash: str) -> int:
    sp = spec.load(kernel)
    path = Path(profile)
    if not Path(old_template).is_file():
        raise AutotuneError(f"{old_template} is no file; give a copy of the template as it was "
                            f"(git show OLD_COMMIT:kernel_templates/{sp.template.name} > /tmp/old.cl)")
    if not path.is_file():
        raise AutotuneError(f"{profile} is no file; give the profile whose entries to re-key")
    doc = profiles.read(path, check_entries=False)  # an entry another kernel's or malformed: not ours to judge
    every = profiles.entries(doc, kernel, str(path), lambda exc: print(f"skipped: {exc}"))
    entries = [e for e in every if e.spec_hash == old_hash]
    if not entries:
        held = sorted({e.spec_hash for e in every}) or ["none"]
        print(f"no entry of {kernel} in {profile} has spec hash {old_hash} (its entries' hashes: {', '.join(held)}; "
              f"the current spec's is {sp.spec_hash}); nothing re-keyed")
        return 1
    for e in entries:
        params = sp.from_stored(e.params, e.build_flags)
        if params is None:
            print(f"{dict(e.problem)}: its parameters are not in the current space; nothing re-keyed")
            return 1
        options = [o for o in sp.build_options(params, dict(e.problem)) if o.startswith("-D")]
        if preprocess(Path(old_template), options) != preprocess(sp.template, options):
            print(f"{dict(e.problem)}: the compiled source differs; nothing re-keyed")
            return 1
        print(f"{dict(e.problem)}: identical after preprocessing")

    def rekey(doc: dict[str, Any]) -> tuple[dict[str, Any], str]:
        """Every re-keyed entry names all its parameters: the first values the old template
        compiled to are what was measured, and load_kernel uses only entries that name them."""
        for raw in (doc.get("kernels") or {}).get(kernel, []):
            if isinstance(raw, dict) and raw.get("spec_hash") == old_hash and _well_formed(raw):
                full = sp.from_stored(raw["params"], raw.get("build_flags") or ())
                assert full is not None  # checked above
                raw["params"] = sp.without_flags(full)
                raw["spec_hash"] = sp.spec_hash
        return doc, "re-keyed"

    profiles.update(path, rekey)
    print(f"re-keyed {len(entries)} entries {old_hash} -> {sp.spec_hash}")
    return 0


def _well_formed(raw: dict[str, Any]) -> bool:
    """Whether ``raw`` is an entry load_kernel reads (a malformed one was skipped above)."""
    try:
        profiles.Entry.from_yaml(raw, "")
    except AutotuneError:
        return False
    return True


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])  # trial 78: --help was a TypeError
    for name in ("kernel", "old_template", "profile", "old_hash"):
        ap.add_argument(name)
    a = ap.parse_args()
    try:
        sys.exit(main(a.kernel, a.old_template, a.profile, a.old_hash))
    except AutotuneError as exc:  # trial 86: a profile error was a traceback
        sys.exit(f"rekey_profile.py: error: {exc}")
