"""Hung, crashing and wrong kernels; interrupted runs; concurrent runs (PoCL, isolated worker)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import warnings

import pyopencl as cl
import pytest
from test_loader_args import TWO_STEPS_CL, TWO_STEPS_REF, TWO_STEPS_YAML

from autotune import cli, profiles, settings
from autotune import spec as specs
from autotune.tuner import TuneOptions, tune
from conftest import REF_PY, SCALE_YAML, every_runtime, needs_opencl, write_spec

pytestmark = needs_opencl


def bad_spec(tmp_path, mode, wpt="[1, 4]"):
    text = SCALE_YAML.replace("MODE: [0]", f"MODE: [0, {mode}]").replace(
        "WG: [16, 32, 64, 128, 512]", "WG: [16, 64]").replace("WPT: [1, 2, 4, 8, 16]", f"WPT: {wpt}")
    text = text.replace("build_flags:\n  mad: -cl-mad-enable\n", "")
    return specs.load(write_spec(tmp_path, text))


# MODE 2 writes through a null pointer: the worker dies on a CPU device; NVIDIA's driver
# reports an illegal address instead (launch_error, the context is replaced). Either way the
# run goes on.
@pytest.mark.parametrize("mode, statuses", [(1, {"timeout"}),  # the worker's limit: the same on any runtime
                                            pytest.param(2, {"crashed", "launch_error"}, marks=every_runtime),
                                            pytest.param(3, {"wrong_result"}, marks=every_runtime)])
def test_grid_survives_bad_variants_and_picks_a_good_one(tmp_path, mode, statuses):
    sp = bad_spec(tmp_path, mode, "[1]" if mode == 1 else "[1, 4]")  # a hang costs its limit: two of them
    # a hung candidate costs the whole limit: 3 s still covers building one of these on any runtime
    report = tune(sp, TuneOptions(sampler="grid", trials=100, timeout_s=None, max_time_per_config=3))
    assert report.stopped_by == "exhausted"
    n_bad = report.valid_space // 2  # every configuration with the bad MODE value
    (status, count), = report.failures.items()
    assert status in statuses and count == n_bad, report.failure_examples
    assert report.measured == report.valid_space
    assert report.best is not None and report.best.params["MODE"] == 0
    (entry,) = profiles.entries(profiles.read(report.profile_path), "scale")
    assert entry.params["MODE"] == 0


@every_runtime  # what the runtime does with the fault
def test_a_configuration_that_writes_past_an_arrays_end_is_a_wrong_result_never_saved(tmp_path):
    """One more work-group than the problem has, and no bounds check in the kernel: the outputs
    are right, so it passed and was saved, and load_kernel then wrote past the caller's array."""
    text = SCALE_YAML.replace("MODE: [0]", "MODE: [0, 4]").replace(
        'global: ["N // WPT"]', 'global: ["N // WPT + MODE // 4 * WG"]')  # MODE 4: over by a work-group
    sp = specs.load(write_spec(tmp_path, text))
    report = tune(sp, TuneOptions(sampler="grid", trials=100, timeout_s=None))
    assert report.stopped_by == "exhausted"
    assert report.failures == {"wrong_result": report.valid_space // 2}
    assert "y: written past its end, up to byte" in report.failure_examples["wrong_result"]
    assert report.best is not None and report.best.params["MODE"] == 0
    (entry,) = profiles.entries(profiles.read(report.profile_path), "scale")
    assert entry.params["MODE"] == 0


STENCIL_CL = """
__kernel void scale(__global const float* x, __global float* y) {
    const int i = get_global_id(0);
#if MODE == 1 || MODE == 3
    const float right = i <= N - 1 ? x[i + 1] : 0.0f;  /* off by one: the last item reads x[N] */
#else
    const float right = i < N - 1 ? x[i + 1] : 0.0f;
#endif
#if MODE == 2
    const float left = i == 0 ? x[i - 1] : 0.0f;  /* a bound check the wrong way: the first item reads x[-1] */
#elif MODE == 3
    const float left = i == 5 ? 1.0f : 0.0f;  /* and a wrong element of its own */
#else
    const float left = 0.0f;
#endif
    y[i] = x[i] + right + left;
#if MODE == 4
    if (i == 0) y[i - 1] = 0.0f;  /* writes before y's start */
#endif
}
"""
STENCIL_REF = """
import numpy as np

def inputs(problem, rng):
    n = problem["N"]
    return {"x": rng.uniform(-1, 1, n).astype(np.float32), "y": np.zeros(n, np.float32)}

def reference(problem, arrays):
    x = arrays["x"]
    return {"y": x + np.append(x[1:], np.float32(0))}
"""


@every_runtime  # what the runtime does with the fault
def test_a_configuration_that_reads_past_an_arrays_end_is_a_wrong_result_that_says_so(tmp_path):
    """A stencil's off-by-one bound: the last item reads x[N]. The bytes there were a float near
    0, so it passed, was saved, and in an application added whatever array followed x."""
    text = SCALE_YAML.replace("MODE: [0]", "MODE: [0, 1]").replace("WPT: [1, 2, 4, 8, 16]", "WPT: [1]")
    sp = specs.load(write_spec(tmp_path, text, template=STENCIL_CL, ref=STENCIL_REF))
    report = tune(sp, TuneOptions(sampler="grid", trials=100, timeout_s=None))
    assert report.stopped_by == "exhausted"
    assert report.failures == {"wrong_result": report.valid_space // 2}, report.failure_examples
    why = report.failure_examples["wrong_result"]
    assert why.startswith("x: read past its end (1024 bytes)") and "x[i + 1] at the last item" in why, why
    assert report.best is not None and report.best.params["MODE"] == 0
    (entry,) = profiles.entries(profiles.read(report.profile_path), "scale")
    assert entry.params["MODE"] == 0


@every_runtime  # what the runtime does with the fault
@pytest.mark.parametrize("mode, reason", [
    (2, "x: read before its start, so the result depends on the bytes there (here every bit set: NaN, or -1 or "
        "the largest integer; in an application another array's); work-items must not read outside an array "
        "(check the kernel's bounds, such as x[i - 1] at the first item); with NaN there: y: 1 of 256 elements "
        "are not finite"),
    (3, "x: read past its end (1024 bytes), so the result depends on the bytes there (here every bit set: NaN, or "
        "-1 or the largest integer; in an application another array's); work-items must not read outside an "
        "array (check the kernel's bounds, such as x[i + 1] at the last item); with NaN there: y: 1 of 256 "
        "elements are not finite (unwritten or overflow); with 0 there, still: y: 1 of 256 elements off (first at 5:"),
    (4, "y: written before its start, from byte 4 before its first byte (1024 bytes); work-items must not write "
        "outside it"),
])
def test_a_read_or_write_before_an_arrays_start_or_past_its_end_is_named_beside_other_faults(tmp_path, mode, reason):
    """x[-1] was whatever lay before the buffer, not a guard zone, and y[-1] was written unseen;
    a read past the end was named only when it was the only fault (trial 10: a row's end read
    the next row's first value as well)."""
    text = SCALE_YAML.replace("MODE: [0]", f"MODE: [0, {mode}]").replace("WPT: [1, 2, 4, 8, 16]", "WPT: [1]")
    sp = specs.load(write_spec(tmp_path, text, template=STENCIL_CL, ref=STENCIL_REF))
    report = tune(sp, TuneOptions(sampler="grid", trials=100, timeout_s=None, save=False))
    assert report.failures == {"wrong_result": report.valid_space // 2}, report.failure_examples
    assert report.failure_examples["wrong_result"].startswith(reason), report.failure_examples
    assert report.best is not None and report.best.params["MODE"] == 0


def test_the_summary_gives_a_failures_reason_whole_and_a_progress_line_marks_where_it_cut(tmp_path, capsys):
    """The reason ends with the fix: cut at 150 characters mid-sentence, the fix was lost."""
    text = SCALE_YAML.replace("MODE: [0]", "MODE: [0, 1]").replace("WPT: [1, 2, 4, 8, 16]", "WPT: [1]")
    path = write_spec(tmp_path, text, template=STENCIL_CL, ref=STENCIL_REF)
    assert cli.main(["run", str(path), "--sampler", "grid", "--storage", ":memory:", "--no-save"]) == 0
    out = capsys.readouterr().out
    (summary,) = [line for line in out.splitlines() if "wrong_result" in line and " e.g. " in line]
    assert summary.endswith("(check the kernel's bounds, such as x[i + 1] at the last item); with NaN there: "
                            "y: 1 of 256 elements are not finite (unwritten or overflow)"), summary
    progress = [line for line in out.splitlines() if "wrong_result" in line and " e.g. " not in line]
    assert progress and all(line.endswith("…)") for line in progress), progress


@every_runtime  # what the runtime does with the fault
def test_a_configuration_that_writes_past_a_scratch_buffer_is_a_wrong_result_never_saved(tmp_path):
    """A scratch size too small for a configuration (here 16 floats short): its outputs were
    right, so it passed and was saved, and its kernels wrote past the buffer load_kernel makes."""
    text = TWO_STEPS_YAML.replace("parameters: {WG: [64]}", "parameters: {WG: [64], SHORT: [0, 16]}").replace(
        'scratch: {t: "4 * N"}', 'scratch: {t: "4 * (N - SHORT)"}')
    sp = specs.load(write_spec(tmp_path, text, template=TWO_STEPS_CL, ref=TWO_STEPS_REF, name="twosteps.yaml"))
    report = tune(sp, TuneOptions(sampler="grid", trials=10, timeout_s=None))
    assert report.failures == {"wrong_result": 1}, report.failure_examples
    why = report.failure_examples["wrong_result"]
    assert "scratch.t: written past its end, up to byte 64 after its last byte" in why
    assert "the spec's scratch.t size" in why
    (entry,) = profiles.entries(profiles.read(report.profile_path), "twosteps")
    assert entry.params["SHORT"] == 0


@every_runtime  # what the runtime does with the fault
def test_a_configuration_that_reads_past_a_scratch_buffer_is_not_saved(tmp_path):
    """Trial 38: a second step that read t[N] (one past the scratch buffer) passed, 0xA5 there
    reading as a float near 0, and was saved; load_kernel's buffer is exactly 4 * N bytes."""
    text = TWO_STEPS_YAML.replace("parameters: {WG: [64]}", "parameters: {WG: [64], PAST: [1, 0]}")
    template = TWO_STEPS_CL.replace("y[i] = t[i] + 1.0f;", "y[i] = t[i] + 1.0f + (PAST && i == N - 1 ? t[N] : 0.0f);")
    sp = specs.load(write_spec(tmp_path, text, template=template, ref=TWO_STEPS_REF, name="twosteps.yaml"))
    report = tune(sp, TuneOptions(sampler="grid", trials=10, timeout_s=None))
    assert [m.params["PAST"] for m in report.unsteady] == [1]
    assert report.unsteady[0].message.startswith("scratch.t: read past its end (1048576 bytes)"), report.unsteady
    (entry,) = profiles.entries(profiles.read(report.profile_path), "twosteps")
    assert entry.params["PAST"] == 0


@every_runtime  # what the runtime does with the fault
def test_a_crash_names_the_scratch_sizes_of_its_configuration(tmp_path):
    """Trial 13: a scratch size that rounds to 0 for some configurations killed the worker
    (SIGSEGV on a CPU device; an illegal address on a GPU), and the trial said only that."""
    text = TWO_STEPS_YAML.replace("parameters: {WG: [64]}", "parameters: {WG: [64], EMPTY: [0, 1]}").replace(
        'scratch: {t: "4 * N"}', 'scratch: {t: "4 * N * (1 - EMPTY)"}')
    sp = specs.load(write_spec(tmp_path, text, template=TWO_STEPS_CL, ref=TWO_STEPS_REF, name="twosteps.yaml"))
    report = tune(sp, TuneOptions(sampler="grid", trials=10, timeout_s=None, save=False, storage=":memory:"))
    if not report.failures:  # a GPU's allocation may extend past the guard zone: nothing faults
        pytest.skip("this device does not fault on a write 1 MiB past a 4 KiB buffer")
    ((status, why),) = report.failure_examples.items()
    assert status in ("crashed", "launch_error"), why
    hint = ("; its scratch buffers here: scratch.t 0 bytes ('4 * N * (1 - EMPTY)'); a kernel that writes past one "
            "writes outside any buffer (sizes are in bytes, not elements, and each must hold what every variant writes "
            "there)")
    # before the worker's last output, which may be long (trial 50: the summary cut the hint off)
    said = why.find("; its last output: ")
    assert hint in why and (said < 0 or why.index(hint) < said), why
    assert report.best is not None and report.best.params["EMPTY"] == 0


@every_runtime  # what the runtime does with the fault
def test_a_configuration_that_reads_a_scratch_buffer_before_writing_it_fails_verification(tmp_path):
    """Trial 13: `t[i] += ...` on a fresh scratch buffer passed where the memory held zeros, was
    saved, and in the application doubled its result on the second call."""
    text = TWO_STEPS_YAML.replace("parameters: {WG: [64]}", "parameters: {WG: [64], MODE: [0, 1]}")
    template = TWO_STEPS_CL.replace("t[i] = 2.0f * x[i];", "\n#if MODE == 1\n t[i] += 2.0f * x[i];\n#else\n"
                                                           " t[i] = 2.0f * x[i];\n#endif\n")
    sp = specs.load(write_spec(tmp_path, text, template=template, ref=TWO_STEPS_REF, name="twosteps.yaml"))
    report = tune(sp, TuneOptions(sampler="grid", trials=10, timeout_s=None, save=False, storage=":memory:"))
    assert report.failures == {"wrong_result": 1}, report.failure_examples
    why = report.failure_examples["wrong_result"]
    assert why.startswith("scratch.t: read before written (a scratch buffer starts undefined, and in load_kernel "
                          "holds the previous call's values: write each element before reading it, e.g. = not +=); "
                          "with NaN there: y: "), why
    assert why.endswith("(with 0 there it verifies)"), why
    assert report.best is not None and report.best.params["MODE"] == 0


def _timed_in_full(proc, count):
    """Read ``proc``'s progress until ``count`` configurations were timed in full (not pruned,
    not failed): a run stopped with the baseline its only one saves nothing."""
    timed = 0
    while timed < count:
        line = proc.stdout.readline()
        assert line, proc.stderr.read()
        timed += bool(re.match(r"\[\s*\d+/\d+\]\s+(study\s+\d+/\d+\s+)?[\d.]+ ms", line)) and "(pruned)" not in line


def _cli(spec_path, *extra):
    return [sys.executable, "-m", "autotune", "run", str(spec_path), "--sampler", "grid",
            "--trials", "1000", *extra]


def test_interrupted_run_saves_partial_and_resumes(tmp_path):
    path = write_spec(tmp_path, SCALE_YAML)
    proc = subprocess.Popen(_cli(path), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _timed_in_full(proc, 3)
    t0 = time.monotonic()
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert time.monotonic() - t0 < 10, "stops within a few seconds"
    assert proc.returncode == 130, f"stdout: {out[-1500:]}\nstderr: {err[-1500:]}"
    assert "interrupted after" in err and "partial" in err and "Traceback" not in err
    (prof,) = list(settings.profiles_dir().glob("*.yaml"))
    (entry,) = profiles.entries(profiles.read(prof), "scale")
    assert entry.partial and entry.trials >= 3 and entry.study is not None
    stopped = entry.study

    done = subprocess.run(_cli(path), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "every valid configuration measured" in done.stdout
    valid = int(done.stdout.split("valid space ")[1].split()[0])
    total = int(done.stdout.split("study total ")[1].split(";")[0])
    assert total == valid, "the resumed run measured only what was missing"
    (entry,) = profiles.entries(profiles.read(prof), "scale")
    assert not entry.partial and entry.study == stopped, "the resumed run is known as the same study"


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_sigterm_or_sighup_stops_a_run_as_ctrl_c_does(tmp_path, sig):
    """`kill PID` (a batch system's stop): the best so far is saved, and the exit status is
    the shell's for the signal, 128 + 15, not Ctrl-C's 130. SIGHUP (a closed terminal, a
    dropped ssh session, sent to the whole process group) killed the run with nothing saved."""
    path = write_spec(tmp_path, SCALE_YAML)
    proc = subprocess.Popen(_cli(path), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    _timed_in_full(proc, 2)  # the baseline and one more: the baseline alone is not saved
    os.killpg(proc.pid, sig) if sig == signal.SIGHUP else proc.send_signal(sig)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 128 + sig, f"stdout: {out[-1500:]}\nstderr: {err[-1500:]}"
    assert "partial" in err and "run the same command again to resume" in err and "Traceback" not in err
    assert "crashed" not in out  # the measuring worker, hung up too, was not taken for a crash


@pytest.mark.parametrize("sig", [signal.SIGHUP, signal.SIGINT])
def test_a_stop_signal_ignored_as_under_nohup_leaves_the_run_going(tmp_path, sig):
    """SIGHUP ignored by nohup; SIGINT by a shell for a script's background job (trial 111: the
    run set a handler over it, and a Ctrl-C meant for the script stopped it)."""
    path = write_spec(tmp_path, SCALE_YAML)
    proc = subprocess.Popen(_cli(path, "--trials", "6"), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, preexec_fn=lambda: signal.signal(sig, signal.SIG_IGN))
    while not (line := proc.stdout.readline()).startswith("["):
        assert line, proc.stderr.read()
    os.killpg(proc.pid, sig)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0 and "trial budget reached" in out, err


def test_two_concurrent_runs_share_one_profile(tmp_path):
    path = write_spec(tmp_path, SCALE_YAML)
    runs = [subprocess.Popen(_cli(path, "--size", size, "--trials", "3"), stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True) for size in ("N=256", "N=512")]
    for p in runs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
    (prof,) = list(settings.profiles_dir().glob("*.yaml"))
    problems = sorted(e.problem["N"] for e in profiles.entries(profiles.read(prof), "scale"))
    assert problems == [256, 512]


def test_corrupt_profile_stops_the_save_with_file_and_line(tmp_path):
    path = write_spec(tmp_path, SCALE_YAML)
    settings.profiles_dir().mkdir(parents=True)
    from autotune import device
    prof = settings.profiles_dir() / f"{device.select(None)[0].slug}.yaml"
    prof.write_text("kernels:\n  scale: [\n")
    out = subprocess.run(_cli(path, "--trials", "2"), capture_output=True, text=True, timeout=300)
    assert out.returncode == 1
    assert f"{prof}:" in out.stderr and "corrupt profile" in out.stderr
    assert prof.read_text() == "kernels:\n  scale: [\n"


def test_compile_ahead_builds_the_next_candidates_and_changes_no_result(tmp_path):
    sp = specs.load(write_spec(tmp_path, SCALE_YAML))
    report = tune(sp, TuneOptions(sampler="grid", trials=100, timeout_s=None, compile_ahead=2))
    assert report.stopped_by == "exhausted" and not report.failures
    assert report.measured == report.valid_space


def test_program_cache_prefetch_is_shared_with_get():
    import pyopencl as cl

    from autotune import device
    from autotune.launch import CandidateError, ProgramCache

    ctx = cl.Context([device.select(None)[1]])
    with warnings.catch_warnings():  # the owner of build threads holds the filter (build_quietly)
        warnings.simplefilter("ignore", cl.CompilerWarning)
        cache = ProgramCache(threads=2)
        cache.prefetch(ctx, "__kernel void f(__global int* x) { x[0] = V; }", ["-DV=3"])
        cache.prefetch(ctx, "__kernel void f(__global int* x) { x[0] = V; }", ["-DV=oops"])
        program = cache.get(ctx, "__kernel void f(__global int* x) { x[0] = V; }", ["-DV=3"])
        assert program is cache.get(ctx, "__kernel void f(__global int* x) { x[0] = V; }", ["-DV=3"])
        with pytest.raises(CandidateError):
            cache.get(ctx, "__kernel void f(__global int* x) { x[0] = V; }", ["-DV=oops"])
        cache.close()


class _WarningProgram:
    """Stands in for pyopencl.Program: a build takes a moment and leaves a build log, as
    Intel's compiler does for matmul's variants (pyopencl warns of it)."""

    built: list[str] = []

    def __init__(self, ctx, source):
        self.source = source

    def build(self, options=(), cache_dir=None):
        import time

        time.sleep(0.01)
        cl.compiler_output("Non-empty compiler output encountered.")  # as pyopencl's builds say a log
        _WarningProgram.built.append(self.source)
        return self


@every_runtime  # what the runtime does with the fault
def test_builds_ahead_leave_no_compiler_warning_and_the_callers_filters_as_they_were(monkeypatch):
    """Trials 21 and 22: pyopencl's CompilerWarning reached the terminal during --no-isolation
    runs with --compile-ahead (once after the run's last line) and an application's first
    load_kernel: each build thread saved and restored the process's warning filters."""
    from autotune import launch

    monkeypatch.setattr(launch.cl, "Program", _WarningProgram)
    before = list(warnings.filters)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(5):
            with warnings.catch_warnings():  # what the owner of build threads does
                warnings.simplefilter("ignore", cl.CompilerWarning)
                cache = launch.ProgramCache(threads=4)
                for i in range(16):
                    cache.prefetch(None, f"source {i}", [])
                cache.get(None, "source 0", [])
                cache.close()
                assert all(f.done() for f in cache._programs.values()), "no build outlives close()"
        warnings.warn("the application's own", cl.CompilerWarning, stacklevel=1)
    assert [str(w.message) for w in caught] == ["the application's own"]
    assert warnings.filters == before
    _WarningProgram.built.clear()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", cl.CompilerWarning)
        cache = launch.ProgramCache(threads=1)
        for i in range(8):
            cache.prefetch(None, f"source {i}", [])
        cache.close()
    assert len(_WarningProgram.built) < 8, "builds not started are dropped"


@every_runtime  # what the runtime does with the fault
def test_application_threads_building_at_once_leave_no_compiler_warning(monkeypatch):
    """Trial 23: six threads loading one kernel at once let one CompilerWarning through: each
    build saved and restored the process's warning filters, undoing another's."""
    import threading

    from autotune import launch

    monkeypatch.setattr(launch.cl, "Program", _WarningProgram)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")

        def builds():
            for i in range(20):
                launch.build_quietly(None, f"source {i}")

        threads = [threading.Thread(target=builds) for _ in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert [str(w.message) for w in caught] == []


INPLACE_CL = """
__kernel void scale(__global const float* x, __global float* y) {
    const int i = get_global_id(0);
    const float past = MODE == 1 && i == N - 1 ? y[N] : 0.0f;  /* off by one in the output it also reads */
    y[i] = y[i] + x[i] + past;
}
"""
INPLACE_REF = """
import numpy as np

def inputs(problem, rng):
    n = problem["N"]
    return {"x": rng.uniform(-1, 1, n).astype(np.float32), "y": rng.uniform(-1, 1, n).astype(np.float32)}

def reference(problem, arrays):
    return {"y": arrays["y"] + arrays["x"]}
"""


@every_runtime  # what the runtime does with the fault
def test_a_read_past_an_in_place_outputs_end_is_not_saved(tmp_path):
    """Trial 38: y[N] read in an in-place output's guard zone, whose 0xA5 bytes are a float near
    0: it passed and was saved. The search looks for writes there; the leaders' check again puts
    NaN there, so the leaders that read it are left out and a right one saved."""
    text = (SCALE_YAML.replace("MODE: [0]", "MODE: [1, 0]").replace("WPT: [1, 2, 4, 8, 16]", "WPT: [1]")
            .replace("outputs: [y]", "outputs: [y]\ninplace: [y]"))
    sp = specs.load(write_spec(tmp_path, text, template=INPLACE_CL, ref=INPLACE_REF))
    report = tune(sp, TuneOptions(sampler="grid", trials=100, timeout_s=None))
    assert report.failures == {}, report.failure_examples  # 0xA5's float is near 0: the search sees nothing
    assert report.unsteady and {m.params["MODE"] for m in report.unsteady} == {1}
    why = report.unsteady[0].message
    assert why.startswith("y: read past its end (1024 bytes)") and "x[i + 1] at the last item" in why, why
    assert report.best is not None and report.best.params["MODE"] == 0
    (entry,) = profiles.entries(profiles.read(report.profile_path), "scale")
    assert entry.params["MODE"] == 0


SUM_CL = """
__kernel void scale(__global const float* x, __global float* y) {
    float s = 0.0f;
    for (int i = 0; i <= N - 1 + MODE; ++i) s += x[i];  /* MODE 1: one past the end */
    y[0] = s;
}
"""
SUM_REF = """
import numpy as np

def inputs(problem, rng):
    return {"x": rng.uniform(-1, 1, problem["N"]).astype(np.float32), "y": np.zeros(1, np.float32)}

def reference(problem, arrays):
    return {"y": np.array([arrays["x"].astype(np.float64).sum()], np.float32)}
"""


CLOBBER_CL = """
__kernel void scale(__global float* x, __global float* y) {
    const int i = get_global_id(0);
    y[i] = 2.0f * x[i];
#if MODE == 1
    barrier(CLK_GLOBAL_MEM_FENCE);
    x[i] = 12345.0f;  /* after use: its own output is right */
#endif
}
"""


@every_runtime  # what the runtime does with the fault
def test_a_kernel_that_writes_its_input_is_refused_and_the_others_still_verify(tmp_path):
    """Trials 42 and 45: a kernel that overwrote its input after reading it verified and won (an
    application's x would be lost), and every configuration measured after it read its writes
    and failed, blamed for it."""
    text = (SCALE_YAML.replace("MODE: [0]", "MODE: [1, 0]").replace("WPT: [1, 2, 4, 8, 16]", "WPT: [1]")
            .replace("baseline: {WPT: 1, WG: 16}", "baseline: {WPT: 1, WG: 16, MODE: 0}"))
    sp = specs.load(write_spec(tmp_path, text, template=CLOBBER_CL))
    report = tune(sp, TuneOptions(sampler="grid", trials=100, timeout_s=None, save=False, storage=":memory:"))
    assert report.failures == {"wrong_result": 8}, report.failure_examples  # each MODE=1 (with mad or not), none else
    assert report.failure_examples["wrong_result"].startswith(
        "it changed its input x, which the spec does not list among its outputs: a second call would read what it "
        "wrote"), report.failure_examples
    assert report.best is not None and report.best.params["MODE"] == 0 and report.measured == 16


FMAX_CL = """
__kernel void scale(__global const float* x, __global float* y) {
    const int i = get_global_id(0);
#if MODE == 1
    y[i] = fmax(x[i], x[i + 1]);  /* x[N] at the last item: fmax drops a NaN */
#else
    y[i] = i + 1 < N ? fmax(x[i], x[i + 1]) : x[i];
#endif
}
"""
FMAX_REF = STENCIL_REF.replace("x + np.append(x[1:], np.float32(0))", "np.append(np.maximum(x[:-1], x[1:]), x[-1])")
SKIP_CL = """
__kernel void scale(__global const int* x, __global int* y) {
    const int i = get_global_id(0);
    if (MODE == 0 || x[i] != -1) y[i] = x[i];  /* MODE 1: the elements that are -1 left as they are */
}
"""
SKIP_REF = """
import numpy as np

def inputs(problem, rng):
    x = rng.integers(0, 100, problem["N"]).astype(np.int32)
    x[::7] = -1
    return {"x": x, "y": np.zeros(problem["N"], np.int32)}

def reference(problem, arrays):
    return {"y": arrays["x"].copy()}
"""


@every_runtime  # what the runtime does with the fault
@pytest.mark.parametrize("template, ref", [(FMAX_CL, FMAX_REF), (SKIP_CL, SKIP_REF)], ids=["fmax", "minus-one"])
def test_what_nan_or_minus_one_hides_is_not_saved(tmp_path, template, ref):
    """Trial 45: fmax(x[i], x[i + 1]) read past x's end, and fmax drops the NaN there; a kernel
    that left the elements whose value is -1 unwritten matched the poison, -1 in an int. Both
    verified and were saved. The leaders' check again verifies with other bytes as well."""
    text = (SCALE_YAML.replace("MODE: [0]", "MODE: [1, 0]").replace("WPT: [1, 2, 4, 8, 16]", "WPT: [1]")
            .replace("WG: [16, 32, 64, 128, 512]", "WG: [16]").replace("build_flags:\n  mad: -cl-mad-enable\n", "")
            .replace("baseline: {WPT: 1, WG: 16}", "baseline: {WPT: 1, WG: 16, MODE: 0}"))
    sp = specs.load(write_spec(tmp_path, text, template=template, ref=ref))  # two: both are leaders
    # prune=0: one timed once (a slow launch on a busy machine) would be no leader
    report = tune(sp, TuneOptions(sampler="grid", trials=100, timeout_s=None, save=False, storage=":memory:", prune=0))
    assert report.failures == {}, report.failure_examples  # the search's bytes see nothing
    assert report.unsteady and {m.params["MODE"] for m in report.unsteady} == {1}, report.unsteady
    why = report.unsteady[0].message
    assert "where the search had NaN (-1 in integers), around each array and in each element before it is " \
        "written: " in why, why
    assert ("x: read past its end" in why) == (template == FMAX_CL), why
    assert report.best is not None and report.best.params["MODE"] == 0


WIDE_CL = """
__kernel void scale(__global const float* x, __global float* y, ulong n, uchar k) {
    const long i = get_global_id(0);
    if (i < n) y[i] = k * x[i];
}
"""
WIDE_REF = REF_PY.replace('"y": np.zeros(n, np.float32)}', '"y": np.zeros(n, np.float32), "k": 2}')


@every_runtime  # what the runtime does with the fault
def test_a_problem_key_and_a_number_go_to_the_kernel_as_the_types_it_declares(tmp_path):
    """Trial 42: `ulong n` given the problem key N failed with pyopencl's INVALID_ARG_SIZE and a
    traceback (it was bound as an int); trial 45: a Python int for `uchar k` was refused."""
    text = SCALE_YAML.replace("args: [x, y]", "args: [x, y, N, k]").replace("WPT: [1, 2, 4, 8, 16]", "WPT: [1]")
    sp = specs.load(write_spec(tmp_path, text, template=WIDE_CL, ref=WIDE_REF))
    report = tune(sp, TuneOptions(sampler="grid", trials=4, timeout_s=None, save=False, storage=":memory:"))
    assert report.failures == {}, report.failure_examples
    assert report.best is not None
    # trial 46: definitions under #if that disagree: the key went as the last one's (long) to all
    either = ("#if MODE == 0\n" + WIDE_CL.replace("ulong n", "int n") + "#else\n" + WIDE_CL + "#endif\n")
    text = text.replace("MODE: [0]", "MODE: [0, 1]")
    sp = specs.load(write_spec(tmp_path / "either", text, template=either, ref=WIDE_REF))
    report = tune(sp, TuneOptions(sampler="grid", trials=100, timeout_s=None, save=False, storage=":memory:"))
    assert report.failures == {} and report.stopped_by == "exhausted", report.failure_examples


@every_runtime  # what the runtime does with the fault
def test_a_read_outside_whose_nan_fills_the_output_gives_no_advice_about_args(tmp_path):
    """Trial 38: NaN read past the input's end filled the one-element output with the poison's
    bits, and after the right "x: read past its end" the reason said no element was written and
    to check 'args'."""
    from autotune.verify import without_unwritten_advice

    text = (SCALE_YAML.replace("MODE: [0]", "MODE: [0, 1]").replace("WPT: [1, 2, 4, 8, 16]", "WPT: [1]")
            .replace("WG: [16, 32, 64, 128, 512]", "WG: [1]").replace('global: ["N // WPT"]', "global: [1]")
            .replace("baseline: {WPT: 1, WG: 16}", "baseline: {WPT: 1, WG: 1}"))
    sp = specs.load(write_spec(tmp_path, text, template=SUM_CL, ref=SUM_REF))
    report = tune(sp, TuneOptions(sampler="grid", trials=10, timeout_s=None, save=False, storage=":memory:"))
    why = report.failure_examples["wrong_result"]
    assert why.startswith("x: read past its end") and "no element was written" not in why, why
    advice = ("; no element was written (each still holds the poison y starts with): check that 'args' lists the "
              "kernel's arguments in the order of its signature, and that the launch covers y")
    assert without_unwritten_advice(f"y: 1 of 1 elements are not finite{advice}; more") == \
        "y: 1 of 1 elements are not finite; more"


@every_runtime  # what the runtime does with the fault
def test_load_kernels_first_use_does_not_pick_a_configuration_that_reads_past_an_output(tmp_path):
    """Trial 40: first use verified as the search does (0xA5 past an in-place output, a float
    near 0), so it picked and saved a tuned configuration that reads y[N]."""
    import warnings

    import pyopencl as cl
    import yaml

    import autotune
    from autotune import device

    text = (SCALE_YAML.replace("MODE: [0]", "MODE: [0, 1]").replace("WPT: [1, 2, 4, 8, 16]", "WPT: [1]")
            .replace("outputs: [y]", "outputs: [y]\ninplace: [y]"))
    path = write_spec(tmp_path, text, template=INPLACE_CL, ref=INPLACE_REF)
    report = tune(specs.load(path), TuneOptions(sampler="grid", trials=100, timeout_s=None), problem={"N": 128})
    doc = yaml.safe_load(report.profile_path.read_text())
    doc["kernels"]["scale"][0]["params"]["MODE"] = 1  # as if tuned so: it reads past y's end
    report.profile_path.write_text(yaml.safe_dump(doc))
    _, dev = device.select(None)
    ctx = cl.Context([dev])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", autotune.AutotuneWarning)
        k = autotune.load_kernel(str(path), cl.CommandQueue(ctx), N=256)
    assert k.origin == "measured" and k.params["MODE"] == 0, (k.origin, k.params)


def test_a_wait_for_the_worker_does_not_count_the_time_the_process_was_stopped(monkeypatch):
    """Trial 64: a worker stopped 25 s (Ctrl-Z) under --max-time-per-config 5 recorded the
    configuration it was measuring, a 0.35 ms one, as a timeout, never measured again at that
    limit. A step of the wait that overran by seconds was a stop: it counts as the step."""
    import types

    from autotune import worker

    clock = [0.0]
    monkeypatch.setattr(worker, "time", types.SimpleNamespace(monotonic=lambda: clock[0]))

    class Conn:
        def __init__(self, stopped_s: float, ready_at: int) -> None:
            self.calls, self.stopped_s, self.ready_at = 0, stopped_s, ready_at

        def poll(self, step: float) -> bool:
            self.calls += 1
            clock[0] += step + (self.stopped_s if self.calls == 1 else 0.0)
            return self.calls >= self.ready_at

    assert worker.poll_awake(Conn(stopped_s=25.0, ready_at=3), 3.0)  # 25 s stopped: 3 s of waiting left
    assert not worker.poll_awake(Conn(stopped_s=0.0, ready_at=4), 3.0)  # not stopped: the limit holds
    assert not worker.poll_awake(Conn(stopped_s=1.0, ready_at=3), 3.0)  # a second late is no stop


def test_a_temporary_folder_deleted_mid_run_stops_it_saving_the_best_and_no_false_timeout(tmp_path):
    """Trial 68: a batch job's clean-up deleted TMPDIR while the run went on: the measurement
    in flight hung to its limit and was stored as a timeout, then a traceback, exit 1, and the
    verified trials' best was not saved."""
    import shutil

    path = write_spec(tmp_path, SCALE_YAML.replace("MODE: [0]", "MODE: [0, 1]"))  # MODE 1 hangs
    tmp = tmp_path / "job-tmp"
    tmp.mkdir()
    proc = subprocess.Popen(_cli(path, "--max-time-per-config", "3"), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, "TMPDIR": str(tmp)})
    _timed_in_full(proc, 2)
    # gone at once (rmtree races the run's builds into it); a run needs it again where its
    # worker must start anew (after a hang, say)
    tmp.rename(tmp_path / "deleted")
    shutil.rmtree(tmp_path / "deleted", ignore_errors=True)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 1 and "Traceback" not in err, err
    assert "was deleted while it ran" in err and "the best so far was saved to" in err and "(partial)" in err, err
    assert "timeout" not in out, "the hang that found the folder gone is not stored: " + out[-1500:]


def test_the_first_use_of_the_api_from_several_threads_at_once_gets_it_in_every_thread():
    """Trial 72: 6 or 7 of 8 threads' first ``autotune.load_kernel`` failed with "partially
    initialized module 'autotune.loader'" while another thread was still importing it."""
    import subprocess
    import sys

    code = """
import threading, autotune
failed = []
def use():
    try:
        autotune.load_kernel, autotune.tune, autotune.TuneOptions, autotune.format_report
    except Exception as exc:
        failed.append(repr(exc))
threads = [threading.Thread(target=use) for _ in range(8)]
for t in threads: t.start()
for t in threads: t.join()
print(failed)
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert (done.returncode, done.stdout.strip()) == (0, "[]"), done.stderr
    # trial 73: one thread's own `import autotune.tuner` still running while another reads autotune.tune
    direct = """
import importlib, threading, time, autotune
failed = []
def read():
    time.sleep(0.05)
    try:
        autotune.tune
    except Exception as exc:
        failed.append(repr(exc))
threads = [threading.Thread(target=importlib.import_module, args=("autotune.tuner",)), threading.Thread(target=read)]
for t in threads: t.start()
for t in threads: t.join()
print(failed)
"""
    done = subprocess.run([sys.executable, "-c", direct], capture_output=True, text=True, timeout=120)
    assert (done.returncode, done.stdout.strip()) == (0, "[]"), done.stdout + done.stderr


def test_a_worker_that_cannot_write_the_run_folder_is_one_line_not_a_traceback(tmp_path, scale, capfd):
    """Trial 74: a run folder made immutable mid-run gave the new worker's traceback, then "the
    measuring worker died while starting (exit status unknown)"."""
    from autotune import worker
    from autotune.errors import WorkerError
    from autotune.measure import TimingOptions

    workload = tmp_path / "workload.npz"
    workload.write_bytes(b"")
    setup = worker.Setup(scale, "0:0", {"N": 256}, str(workload), TimingOptions(),
                         stderr_file=str(tmp_path / "unwritable" / "worker-stderr.log"))
    evaluator = worker.IsolatedEvaluator(setup, startup_timeout_s=120)
    with pytest.raises(WorkerError, match=r"temporary folder .*unwritable cannot be written \(No such file or "
                                          r"directory\): give the run a TMPDIR it can write"):
        evaluator._start()
    assert "Traceback" not in capfd.readouterr().err


def test_a_scratch_buffer_the_runtime_cannot_allocate_is_that_configurations_launch_error(monkeypatch):
    """Trial 82: a 10 GiB scratch buffer (within the device's largest allocation, past the host's
    memory) was a traceback from the worker that ended the run."""
    from autotune import launch

    def refuse(ctx, flags, nbytes):
        raise cl.RuntimeError("create_buffer failed: OUT_OF_HOST_MEMORY")

    monkeypatch.setattr(launch.cl, "Buffer", refuse)
    with pytest.raises(launch.CandidateError) as raised:
        launch._scratch_buffer(None, "P", 10 << 30)
    assert raised.value.status == "launch_error"
    assert str(raised.value) == "scratch.P: 10240 MiB could not be allocated (create_buffer failed: OUT_OF_HOST_MEMORY)"


def test_a_run_under_pythonwarnings_error_prints_its_warnings_and_its_worker_measures(tmp_path):
    """Trial 84: the measuring worker inherited PYTHONWARNINGS=error, so one of autotune's own
    warnings there was a traceback and the run failed; the command's filter was its own."""
    path = write_spec(tmp_path, SCALE_YAML)
    env = dict(os.environ, PYTHONWARNINGS="error", AUTOTUNE_SYSTEM_OPENCL="maybe")
    done = subprocess.run(_cli(path, "--trials", "3", "--storage", ":memory:", "--no-save"), capture_output=True,
                          text=True, timeout=300, env=env)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert "$AUTOTUNE_SYSTEM_OPENCL='maybe' is neither on" in done.stderr
    assert "3 measured this run" in done.stdout
