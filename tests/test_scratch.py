"""A run's temporary folder: removed when the run ends, and by the next run where the run was killed."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

from autotune import scratch
from autotune.processes import WORKER_PREFIX
from autotune.result import Measurement, Status
from autotune.tuner import TuneOptions, tune
from conftest import FAKE, SCALE_YAML, QuietEvaluator, needs_opencl, write_spec

pytestmark = pytest.mark.skipif(scratch.fcntl is None, reason="no flock here: nothing is swept")

HOLD = """
import sys, time
from autotune import scratch
with scratch.run_folder(sys.argv[1] if len(sys.argv) > 1 else None) as folder:
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


def _holder(device: str | None = None) -> tuple[subprocess.Popen[str], Path]:
    """A process inside a run folder (measuring on ``device``), and the folder."""
    p = subprocess.Popen([sys.executable, "-c", HOLD, *([device] if device else [])], stdout=subprocess.PIPE,
                         text=True)
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


def test_a_run_on_a_device_another_command_measures_on_is_named_until_that_one_ends(tmp_dir):
    """Trial 64: two shells tuning on one device each slowed the other's timings, unwarned."""
    p, _ = _holder("0:0 NVIDIA CUDA NVIDIA H200")
    try:
        with scratch.run_folder("0:0 NVIDIA CUDA NVIDIA H200"):  # this command's own is not counted
            assert scratch.sharing("0:0 NVIDIA CUDA NVIDIA H200") == [f"{socket.gethostname()}:{p.pid}"]
            assert scratch.sharing("0:1 NVIDIA CUDA NVIDIA H200") == []
    finally:
        p.kill()
        p.wait()
    assert scratch.sharing("0:0 NVIDIA CUDA NVIDIA H200") == []  # its folder stays, unlocked


def _worker_holds(device: str, ready: Any, release: Any) -> None:
    with scratch.run_folder(device):
        ready.set()
        release.wait(60)


def test_the_workers_of_one_command_on_one_device_are_not_warned_of_each_other(tmp_dir):
    """`run -d 0:0,0:0` puts two workers on a device on purpose; they share one study."""
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    ready, release = ctx.Event(), ctx.Event()
    worker = ctx.Process(target=_worker_holds, args=("0:0 X Y", ready, release), name=f"{WORKER_PREFIX}0:0#1")
    worker.start()
    try:
        assert ready.wait(60)
        assert list(tmp_dir.glob(f"{scratch.PREFIX}*/{scratch.DEVICE}"))
        assert scratch.sharing("0:0 X Y") == []  # the worker's command is this process
    finally:
        release.set()
        worker.join(60)


@needs_opencl
def test_tune_and_bench_warn_of_another_command_measuring_on_their_device(tmp_dir, tmp_path, ocl_device):
    from autotune import device
    from autotune.errors import AutotuneWarning

    info, _ = device.select(ocl_device)
    p, _ = _holder(info.key)
    try:
        path = write_spec(tmp_path, SCALE_YAML)
        said = rf"another autotune command \(process {p.pid}\) is measuring on "
        with pytest.warns(AutotuneWarning, match=said):
            tune(str(path), TuneOptions(trials=2, timeout_s=None, storage=":memory:", save=False, device=ocl_device))
        from autotune import benchmark
        with pytest.warns(AutotuneWarning, match=said):  # bench times on the device too
            benchmark.run(str(path), {"N": 256}, ocl_device, copy_bytes=1 << 20)
    finally:
        p.kill()
        p.wait()


def test_a_device_file_that_is_no_small_text_file_of_ours_is_passed_over(tmp_dir):
    """Trial 73: a FIFO named .device in an autotune-run-* folder hung every run, a link to
    /dev/zero ran it out of memory, a byte that is not UTF-8 was a traceback."""
    for name, make in (("fifo", lambda p: os.mkfifo(p)), ("zero", lambda p: p.symlink_to("/dev/zero")),
                       ("bytes", lambda p: p.write_bytes(b"\xff\xfe\n0:0 X Y\n"))):
        folder = tmp_dir / f"{scratch.PREFIX}{name}"
        folder.mkdir()
        make(folder / scratch.DEVICE)
    assert scratch.sharing("0:0 X Y") == []


def test_a_full_temporary_folder_is_one_error_that_names_it_and_the_fix(tmp_dir, monkeypatch):
    """Trial 83: a full TMPDIR ended `run` in three chained tracebacks ending in "No space left
    on device", naming no folder and no fix."""
    import errno

    import numpy as np

    from autotune import worker
    from autotune.errors import ScratchError
    from autotune.measure import Workload

    def full(path, **arrays):
        Path(path).write_bytes(b"part")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(worker.np, "savez", full)
    workload = Workload({"x": np.zeros(2**18, np.float32)}, {"y": np.zeros(2**18, np.float32)})
    with scratch.run_folder() as folder, pytest.raises(ScratchError) as raised:
        worker.save_workload(workload, folder)
    assert str(raised.value) == (f"cannot write {folder / 'workload.npz'} in the temporary folder: No space left on "
                                 "device (this run's files take 2 MiB); free space there, or point TMPDIR at a "
                                 "folder with room")
    assert list(tmp_dir.iterdir()) == [], "the part-written file and the run's folder are gone"

    def no_folder(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(tempfile, "mkdtemp", no_folder)
    with pytest.raises(ScratchError, match=rf"cannot write {tmp_dir} in the temporary folder: No space left"):
        with scratch.run_folder():
            pass


def test_runs_on_two_cpu_runtimes_are_warned_of_each_other(tmp_dir):
    """Trial 125: a run on Intel's runtime and one on PoCL, in two shells, slowed each other's
    timings without a word (each device had its own key; -d all warned, two commands did not)."""
    from dataclasses import replace

    from autotune.errors import AutotuneWarning
    from conftest import FAKE

    intel = replace(FAKE, selector="0:0", platform="Intel(R) OpenCL", device_type="CPU")
    pocl = replace(FAKE, selector="1:0", platform="Portable Computing Language", device_type="CPU")
    assert intel.key == pocl.key != FAKE.key != replace(FAKE, selector="1:0").key  # GPUs: one each
    p, _ = _holder(intel.key)
    try:
        with pytest.warns(AutotuneWarning, match=rf"another autotune command \(process {p.pid}\) is measuring "
                                                 r"on pocl \(on this machine's CPU cores, which every CPU runtime "
                                                 r"shares\)"):
            scratch.warn_sharing(pocl.key, "pocl")
    finally:
        p.kill()
        p.wait()
