"""The profile scripts the README names (benchmarks/merge_profile.py, rekey_profile.py): their
failures are one line and a non-zero exit, and they do what they say."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from autotune import profiles
from autotune import spec as specs
from conftest import FAKE

ROOT = Path(__file__).resolve().parent.parent


def _script(name: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(ROOT / "benchmarks" / name), *args], capture_output=True, text=True,
                          timeout=120)


def _profile(path: Path, kernel: str, params: dict, spec_hash: str) -> None:
    entry = profiles.Entry(problem={"N": 65536}, params=params, build_flags=(), time_ms=1.0, throughput={},
                           trials=9, tuned_at="2026-11-21T00:00:00Z", spec_hash=spec_hash)
    profiles.save(entry, kernel, FAKE.profile_header(), path)


def test_merge_into_a_folder_that_does_not_exist_is_refused(tmp_path):
    """Trial 95: a mistyped folder was made, and the merge went there, exit 0."""
    source = tmp_path / "from.yaml"
    _profile(source, "scale", {"WG": 16}, "h")
    done = _script("merge_profile.py", str(source), str(tmp_path / "typo" / "dir" / "to.yaml"))
    assert done.returncode == 1 and not (tmp_path / "typo").exists()
    assert done.stderr == f"merge_profile: error: the folder {tmp_path / 'typo' / 'dir'} does not exist; give a " \
                          "profile in an existing folder\n"
    assert "--as-picked" in _script("merge_profile.py", "--help").stdout.split("options:")[1].split("--tuned-only")[1]


@pytest.mark.skipif(shutil.which("cpp") is None, reason="needs the C preprocessor")
def test_rekey_reads_an_old_template_kept_anywhere_and_says_when_no_entry_has_the_hash(tmp_path):
    """Trial 95: an old template outside kernel_templates/ could not find autotune.h (a
    traceback), and a hash no entry had re-keyed nothing with exit 0."""
    spec = specs.load("reverse")
    old = tmp_path / "reverse_old.cl"
    old.write_text(spec.template.read_text() + "\n// a comment: the compiled source is the same\n")
    path = tmp_path / "dev.yaml"
    _profile(path, "reverse", spec.without_flags(spec.default_config), "0123456789abcdef")
    done = _script("rekey_profile.py", "reverse", str(old), str(path), "0123456789abcdef")
    assert done.returncode == 0, done.stderr
    assert f"re-keyed 1 entries 0123456789abcdef -> {spec.spec_hash}" in done.stdout
    (entry,) = profiles.entries(profiles.read(path), "reverse")
    assert entry.spec_hash == spec.spec_hash
    done = _script("rekey_profile.py", "reverse", str(old), str(path), "deadbeef")
    assert done.returncode == 1 and "no entry of reverse" in done.stdout and "has spec hash deadbeef" in done.stdout
    done = _script("rekey_profile.py", "reverse", str(tmp_path / "absent.cl"), str(path), "deadbeef")
    assert done.returncode == 1 and done.stderr.startswith("rekey_profile.py: error: ")
    assert "Traceback" not in done.stderr
