"""Merge the entries of one profile into another with the usual rules (a better or newer-spec
entry replaces, a tuned one replaces a pick): how profiles tuned on a GPU host come home.

    python3 benchmarks/merge_profile.py FROM.yaml profiles/nvidia-corporation-h200.yaml
    python3 benchmarks/merge_profile.py --tuned-only FROM.yaml TO.yaml   # leave picks out
    python3 benchmarks/merge_profile.py --as-picked FROM.yaml TO.yaml    # seeds, not results

``--as-picked`` marks every entry picked: a tuning run on another device then starts from
those winners (``previous_winners``), and any of its own results replaces them.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

from autotune import profiles
from autotune.errors import ProfileError


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("source", help="the profile whose entries to merge")
    ap.add_argument("target", help="the profile to merge them into (made if absent; its folder must exist)")
    ap.add_argument("--tuned-only", action="store_true",
                    help="leave out the source's picked entries (load_kernel's choices, not tuning runs')")
    ap.add_argument("--as-picked", action="store_true",
                    help="mark every entry picked: seeds for a tuning run here (which any of its results replaces), "
                         "not results; needed where the source was measured on another device")
    args = ap.parse_args()
    source, target = Path(args.source), Path(args.target)
    if not source.is_file():  # trial 73: read as an empty profile, a typo merged nothing and exited 0
        print(f"merge_profile: error: {source} is no file", file=sys.stderr)
        return 1
    if not target.parent.is_dir():  # trial 95: a mistyped folder was made, and the merge went there
        print(f"merge_profile: error: the folder {target.parent} does not exist; give a profile in an existing "
              "folder", file=sys.stderr)
        return 1
    try:
        doc = profiles.read(source, check_entries=False)  # a malformed entry is left out, said
        device = profiles.read(target, check_entries=False).get("device") or doc.get("device") or {}
        other = profiles.written_for_another(doc.get("device"), device)
        if other is not None and not args.as_picked:  # trial 73: another GPU's times under this one's header
            print(f"merge_profile: error: {source} was measured on {other}, not on {profiles.described(device)}: "
                  "its times say nothing of this device; give --as-picked to take its winners as starting "
                  "points for a run here", file=sys.stderr)
            return 1
        for kernel in doc.get("kernels") or {}:
            for entry in profiles.entries(doc, kernel, args.source, on_error=_skipped):
                if args.tuned_only and entry.picked:
                    continue
                entry = replace(entry, picked=True) if args.as_picked else entry
                same = entry in profiles.entries(profiles.read(target, check_entries=False), kernel,
                                                 on_error=lambda exc: None)
                verdict = "the same entry is there" if same else profiles.save(entry, kernel, device, target)
                print(f"{kernel} {dict(entry.problem)}: {verdict}")
    except ProfileError as exc:
        print(f"merge_profile: error: {exc}", file=sys.stderr)
        return 1
    return 0


def _skipped(exc: ProfileError) -> None:
    print(f"skipped: {exc}", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
