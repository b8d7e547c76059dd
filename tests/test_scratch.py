"""A run's temporary folder: removed when the run ends, and by the next run where the run was killed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from autotune import scratch
from autotune.result import Measurement, Status
from autotune.tuner import TuneOptions, tune
from conftest import FAKE, QuietEvaluator

pytestmark = pytest.mark.skipif(scratch.fcntl is None, reason="no flock here: nothing is swept")

HOLD = """
import sys, time
from autotune import scratch
with scratch.run_folder() as folder:
    (folder / "workload.npz").write_bytes(bytes(1000))
    print(folder, flush=True)
    time.sleep(120)
"""


@pytest.fixture
def tmp_dir(tmp_path, monkeypatch):
    """The temporary folder is ``tmp_path``, for this process and the ones it starts."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    return tmp_path


def _holder() -> tuple[subprocess.Popen[str], Path]:
    """A process inside a run folder, and the folder."""
    p = subprocess.Popen([sys.executable, "-c", HOLD], stdout=subprocess.PIPE, text=True)
    assert p.stdout is not None
    return p, Path(p.stdout.readline().strip())


def _age(folder: Path) -> None:
    old = time.time() - 2 * scratch.MIN_AGE_S
    os.utime(folder, (old, old))


def test_the_folder_of_a_run_killed_by_sigkill_is_removed_by_the_next(tmp_dir):
    p, folder = _holder()
    p.send_signal(signal.SIGKILL)
    p.wait()
    assert (folder / "workload.npz").exists()  # its own removal never ran
    _age(folder)
    with scratch.run_folder() as mine:
        assert not folder.exists() and mine.exists()
    assert not mine.exists()


def test_a_live_runs_folder_and_a_young_one_are_left_alone(tmp_dir):
    p, live = _holder()
    try:
        _age(live)
        young = Path(tempfile.mkdtemp(prefix=scratch.PREFIX))
        (young / scratch.OWNER).touch()  # unlocked, but its run may be about to lock it
        assert scratch.sweep() == [] and (live / "workload.npz").exists() and young.exists()
    finally:
        p.kill()
        p.wait()
    assert scratch.sweep() == [live] and young.exists()


def test_folders_that_are_not_a_runs_are_left_alone(tmp_dir):
    other = tmp_dir / f"{scratch.PREFIX}notes"  # no lock file: another program's, or being made
    other.mkdir()
    target = tmp_dir / "elsewhere"
    target.mkdir()
    (target / scratch.OWNER).touch()
    link = tmp_dir / f"{scratch.PREFIX}link"
    link.symlink_to(target)
    for folder in (other, target):
        _age(folder)
    assert scratch.sweep() == [] and other.exists() and target.exists()


def test_tune_sweeps_what_a_killed_run_left_and_removes_its_own(tmp_dir, scale):
    class Fast(QuietEvaluator):
        def evaluate(self, params, limit_s, cutoff_ms=None, verify=True):
            return Measurement(Status.OK, "", (1.0, 1.0, 1.0), 0.0, 0.0, 0.01)

    p, left = _holder()
    p.kill()
    p.wait()
    _age(left)
    tune(scale, TuneOptions(trials=2, timeout_s=None, storage=":memory:", save=False), evaluator=Fast(), info=FAKE)
    assert list(tmp_dir.glob(scratch.PREFIX + "*")) == []


def test_the_empty_tempfiles_pocl_leaves_in_its_cache_are_removed_and_nothing_else(tmp_dir, monkeypatch):
    """Trial 63: PoCL 3 leaves an empty tempfile_XXXXXX in its kernel cache each time a process
    loads it (141 after an hour; 8,446 on the project's machine)."""
    cache = tmp_dir / "kcache"
    cache.mkdir()
    monkeypatch.setenv("POCL_CACHE_DIR", str(cache))
    for name, text in (("tempfile_old", ""), ("tempfile_full", "x"), ("other", ""), ("tempfile_new", "")):
        (cache / name).write_text(text)
        if name != "tempfile_new":
            _age(cache / name)
    scratch.sweep()
    assert sorted(p.name for p in cache.iterdir()) == ["other", "tempfile_full", "tempfile_new"]


def test_without_locks_a_run_goes_on_and_folders_of_live_or_other_hosts_runs_stay(tmp_dir, monkeypatch):
    """Trial 65: where flock fails (NFS without lockd, Lustre without flock) every run failed
    with a traceback; and where locks do not reach across hosts sharing the folder, the sweep
    of one host would remove another's live run."""
    import errno
    import socket

    def no_locks(fd, op):
        raise OSError(errno.ENOLCK, "No locks available")

    for owner in (f"another-host:{os.getpid()}", f"{socket.gethostname()}:{os.getppid()}"):  # unlocked, old
        folder = Path(tempfile.mkdtemp(prefix=scratch.PREFIX))
        (folder / scratch.OWNER).write_text(owner)
        _age(folder)
    monkeypatch.setattr(scratch.fcntl, "flock", no_locks)
    with scratch.run_folder() as mine:
        assert mine.exists()
    monkeypatch.undo()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_dir))
    assert scratch.sweep() == [] and len(list(tmp_dir.glob(scratch.PREFIX + "*"))) == 2
