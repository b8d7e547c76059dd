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
from dataclasses import replace
from pathlib import Path

from autotune import profiles


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("source")
    ap.add_argument("target")
    ap.add_argument("--tuned-only", action="store_true")
    ap.add_argument("--as-picked", action="store_true")
    args = ap.parse_args()
    doc = profiles.read(Path(args.source))
    target = profiles.read(Path(args.target))
    device = target.get("device") or doc.get("device") or {}
    for kernel in doc.get("kernels") or {}:
        for entry in profiles.entries(doc, kernel, args.source):
            if args.tuned_only and entry.picked:
                continue
            entry = replace(entry, picked=True) if args.as_picked else entry
            verdict = profiles.save(entry, kernel, device, Path(args.target))
            print(f"{kernel} {dict(entry.problem)}: {verdict}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
