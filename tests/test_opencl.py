"""Real runs on the CPU OpenCL device (PoCL): tune, save, load, call; CLI paths end to end."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pyopencl as cl
import pytest

import autotune
from autotune import device, profiles, settings
from autotune.tuner import TuneOptions, tune
from conftest import needs_opencl

pytestmark = needs_opencl


def cli(*args, check=False, timeout=240):
    return subprocess.run([sys.executable, "-m", "autotune", *args], capture_output=True,
                          text=True, timeout=timeout, check=check)


@pytest.fixture(scope="module")
def queue(ocl_device):
    _, dev = device.select(ocl_device)
    ctx = cl.Context([dev])  # kept alive with its queue: Intel's runtime ends a released context
    yield cl.CommandQueue(ctx)


def _line_of(marker: str) -> int:
    """The line of this file that ends with the comment ``# marker``."""
    lines = Path(__file__).read_text().splitlines()
    return next(i for i, line in enumerate(lines, 1) if line.rstrip().endswith(f"# {marker}"))


def matmul_check(queue, layout, m, n, k, **problem):
    rng = np.random.default_rng(0)
    order = "F" if layout == "col" else "C"
    a = np.asarray(rng.uniform(-1, 1, (m, k)), np.float32, order=order)
    b = np.asarray(rng.uniform(-1, 1, (k, n)), np.float32, order=order)
    mf = cl.mem_flags
    ab = cl.Buffer(queue.context, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=a.ravel(order=order))
    bb = cl.Buffer(queue.context, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=b.ravel(order=order))
    cb = cl.Buffer(queue.context, mf.WRITE_ONLY, m * n * 4)
    mm = autotune.load_kernel("matmul", queue, M=m, N=n, K=k, layout=layout, **problem)  # LOAD_LINE
    mm(ab, bb, cb).wait()
    c = np.empty(m * n, np.float32)
    cl.enqueue_copy(queue, c, cb)
    np.testing.assert_allclose(c.reshape((m, n), order=order), a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)
    return mm


LOAD_LINE = _line_of("LOAD_LINE")


def test_tune_then_load_uses_the_tuned_kernel(queue):
    report = tune("matmul", TuneOptions(trials=6, seed=0, timeout_s=None), problem={"M": 64, "N": 64, "K": 32})
    assert report.best is not None and report.best.ok and report.best.error < 1e-5
    assert report.baseline is not None and report.baseline.ok
    doc = profiles.read(report.profile_path)
    assert profiles.entries(doc, "matmul")[0].problem == {"M": 64, "N": 64, "K": 32, "layout": "row"}
    mm = matmul_check(queue, "row", 64, 64, 32)
    assert mm.origin == "exact" and mm.params == dict(report.best.params)
    # a size never tuned gets a tuned configuration verified there (or the default where none
    # is valid), with a warning that points at the line calling load_kernel
    with pytest.warns(autotune.AutotuneWarning, match="tunes") as caught:
        assert matmul_check(queue, "row", 128, 64, 64).origin in ("measured", "default")
    assert (caught[0].filename, caught[0].lineno) == (__file__, LOAD_LINE)


def test_load_without_profile_verifies_the_spec_s_default_and_baseline_with_one_warning(queue, monkeypatch):
    monkeypatch.setattr(autotune.loader, "_warned", set())  # once per process: other tests warned
    monkeypatch.setattr(profiles, "search_folders", lambda user, spec_file=None: [user])  # no shipped profile
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        mm = matmul_check(queue, "col", 64, 128, 32)
        matmul_check(queue, "col", 64, 128, 32)
    spec = autotune.spec.load("matmul")
    # the default's 128-row tile does not fit: the configuration most like it is verified instead
    near = autotune.loader._closest_default(spec, spec.resolve_problem({"M": 64, "N": 128, "K": 32, "layout": "col"}),
                                            autotune.device.of(queue.device).facts())
    assert mm.origin == "measured" and mm.params in (spec.baseline_config, near)
    (message,) = [str(w.message) for w in caught if issubclass(w.category, autotune.AutotuneWarning)]
    assert "verified and timed the spec’s baseline and configuration nearest its default there" in message, message
    monkeypatch.setenv("AUTOTUNE_MEASURE_UNTUNED", "0")
    assert matmul_check(queue, "col", 64, 128, 48).origin == "default"  # not measured: not verified


def test_cli_run_prints_summary_and_writes_profile():
    out = cli("run", "matmul", "--size", "64x64x32,layout=col", "--trials", "4", "--seed", "1")
    assert out.returncode == 0, out.stderr
    assert "speed-up" in out.stdout and "GFLOP/s" in out.stdout and "profile" in out.stdout
    assert "[  4/4]" in out.stdout
    shown = cli("show", "matmul")
    assert "M=64,N=64,K=32,layout=col" in shown.stdout


def test_show_takes_an_own_spec_by_its_path_as_run_does(tmp_path):
    from conftest import SCALE_YAML, write_spec
    path = write_spec(tmp_path, SCALE_YAML)
    assert cli("run", str(path), "-n", "2", "-q").returncode == 0
    by_path, by_name = cli("show", str(path)), cli("show", "scale")
    assert by_path.returncode == 0 and "\nscale  [" in by_path.stdout
    # by name, the spec file the entries record is read (trial 50: it asked for the path they name)
    assert by_name.stdout == by_path.stdout
    # run (bench, report) by name is refused, with that path (trial 52: "unknown kernel" alone)
    again = cli("run", "scale", "-n", "1")
    assert again.returncode == 1 and f"the tuned entries of scale here were tuned with {path}: give that path" \
        in again.stderr, again.stderr
    # where that file no longer loads, show says why (trial 53)
    text = path.read_text()
    path.write_text(text + "\nbogus: 1\n")
    assert "(its entries' spec file does not load: " in cli("show", "scale").stdout
    path.write_text(text)
    # where that file is gone, the spec is not known: stale entries cannot be marked, and it says so (trial 10)
    path.rename(path.with_suffix(".old"))
    note = "  (not a built-in kernel: give its spec's path to mark stale entries)"
    assert cli("show", "scale").stdout == by_path.stdout.replace("]\n", f"]{note}\n", 1)


def test_cli_list_and_devices():
    listed = cli("list")
    assert listed.returncode == 0 and "matmul" in listed.stdout
    devs = cli("devices")
    assert devs.returncode == 0 and "0:0" in devs.stdout


@pytest.mark.parametrize("value, status, error", [
    ("junk", 1, "no OpenCL device matches 'junk' (from $AUTOTUNE_DEVICE"),
    ("all", 0, ""), ("0:0,0:0", 0, ""),  # as run takes it
])
def test_devices_lists_the_devices_whatever_autotune_device_holds(monkeypatch, value, status, error):
    """Trial 14: a value run takes (all, a list) or a wrong one stopped `devices`, the command
    the message sends the user to, before it listed anything."""
    monkeypatch.setenv("AUTOTUNE_DEVICE", value)
    devs = cli("devices")
    assert devs.returncode == status and error in devs.stderr and "Traceback" not in devs.stderr
    assert "0:0 " in devs.stdout and ("(default)" in devs.stdout) == (status == 0), devs.stdout


def test_a_launch_over_the_cut_off_ends_the_timing():
    from autotune import spec as specs
    from autotune.measure import TimingOptions, make_workload
    from autotune.worker import Setup, make_bench

    spec = specs.load("reverse")
    problem = spec.resolve_problem({"N": 1 << 16})
    timing = TimingOptions(warmup=1, min_repeats=5, max_repeats=5, min_time_s=0.0)
    bench = make_bench(Setup(spec, "", problem, "", timing), make_workload(spec, problem))
    params = spec.default_config
    full = bench.measure(params)
    assert full.ok and not full.pruned and len(full.times_ms) == 5
    once = bench.measure(params, cutoff_ms=full.median_ms / 1e6)  # every launch is over it
    assert once.ok and once.pruned and len(once.times_ms) == 2
    assert once.error is not None, "a pruned candidate was still verified"
    roomy = bench.measure(params, cutoff_ms=1e6)
    assert roomy.ok and not roomy.pruned and len(roomy.times_ms) == 5


@pytest.mark.parametrize("args, message, status", [
    (["run", "nosuchkernel"], "unknown kernel 'nosuchkernel'", 1),
    (["run", "/tmp/does/not/exist.yaml"], "does not exist", 1),
    (["run", "matmul", "--size", "abc"], "--size 'abc'", 1),
    (["run", "matmul", "--size", "M=0"], "matmul's M must be a positive integer", 1),
    (["run", "matmul", "--size", "layout=diag"], "layout='diag': choose one of row, col", 1),
    (["run", "matmul", "--device", "no-such-gpu"], "no OpenCL device matches 'no-such-gpu'", 1),
    (["run", "matmul", "--device", ""], "is empty; give an index such as 0:0", 2),
    (["bench", "matmul", "-d", " "], "is empty; give an index such as 0:0", 2),
    (["run", "matmul", "--trials", "0"], "must be at least 1", 2),
    (["run", "matmul", "--trials", "many"], "is not an integer", 2),
    (["run", "matmul", "--prune", "0.5"], "--prune must be 0 (off) or a finite number of at least 1", 2),
    (["run", "matmul", "--prune", "-1"], "--prune must be 0 (off) or a finite number of at least 1", 2),
    (["run", "matmul", "--prune", "inf"], "--prune must be 0 (off) or a finite number of at least 1 (got inf)", 2),
    (["show", "nosuchkernel"], "unknown kernel 'nosuchkernel'", 1),
    (["bench", "nosuchkernel"], "unknown kernel 'nosuchkernel'", 1),
    (["probe", "-d", "0:0,"], "'0:0,' has an empty selector", 2),  # trial 91: a usage error, as -d "" is
    (["probe", "-n", "0"], "--repeats must be 1 to 100,000 (got 0)", 2),
    (["probe", "-n", "100000000"], "--repeats must be 1 to 100,000 (got 100,000,000)", 2),  # took all memory
])
def test_cli_bad_input_is_one_clear_line(args, message, status):
    """One line saying what is wrong; exit status 2 for a usage error (an option's value out of
    its range, as for one argparse refuses), 1 for the rest."""
    out = cli(*args)
    assert out.returncode == status
    assert message in out.stderr
    assert "Traceback" not in out.stderr and len(out.stderr.strip().splitlines()) <= 3


def test_cli_malformed_spec_and_missing_template(tmp_path):
    broken = tmp_path / "bad.yaml"
    broken.write_text("kernel: x\ntemplate: [unclosed\n")
    out = cli("run", str(broken))
    assert out.returncode == 1 and "invalid YAML" in out.stderr and "Traceback" not in out.stderr
    missing = tmp_path / "missing.yaml"
    missing.write_text((settings.__file__ and open(autotune.spec.resolve("matmul")).read())
                       .replace("template: matmul.cl", "template: gone.cl"))
    out = cli("run", str(missing))
    assert out.returncode == 1 and "template file 'gone.cl' not found" in out.stderr


def test_a_queue_whose_context_was_released_is_a_clear_error():
    class Orphan:  # what Intel's runtime gives for a queue made from a context nobody kept
        @property
        def context(self):
            raise cl.LogicError("clRetainContext failed: INVALID_CONTEXT")

        device = device.select(None)[1]

    with pytest.raises(autotune.AutotuneError, match="keep a reference to the cl.Context"):
        autotune.load_kernel("matmul", Orphan(), M=64, N=64, K=64)


def test_a_size_without_an_entry_is_measured_once_without_touching_the_callers_buffers(queue, monkeypatch):
    # only this test's two entries: a device with a shipped profile (the H200) would add its own
    monkeypatch.setattr(profiles, "search_folders", lambda user, spec_file=None: [user])
    spec = autotune.spec.load("matmul")
    user = settings.profiles_dir()
    info = device.info(queue.device)
    small = spec.complete({"ALGO": "blocked", "MDIMC": 8, "NDIMC": 8, "MWG": 8, "NWG": 8, "VW": 1})
    for n, params in [(64, small), (256, spec.complete({"ALGO": "naive", "MDIMC": 8, "NDIMC": 8, "MWG": 8,
                                                         "NWG": 8}))]:
        m = autotune.result.Measurement(autotune.result.Status.OK, "", (1.0,), params=params)
        profiles.save(autotune.record.entry(spec, spec.resolve_problem({"M": n, "N": n, "K": n}), m, 5),
                      "matmul", info.profile_header(), profiles.path_for(info.slug, user))
    mf = cl.mem_flags
    sentinel = np.full(101 * 67, 7.0, np.float32)
    c_buf = cl.Buffer(queue.context, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=sentinel)
    with pytest.warns(autotune.AutotuneWarning, match=r"timed 2 tuned configurations .* -s M=101,N=67,K=45") as caught:
        mm = autotune.load_kernel("matmul", queue, M=101, N=67, K=45)
    assert caught[0].filename == __file__
    assert mm.origin == "measured"
    after = np.empty_like(sentinel)
    cl.enqueue_copy(queue, after, c_buf)
    assert (after == sentinel).all()  # measuring used scratch buffers of its own
    picked = profiles.entries(profiles.read(profiles.path_for(info.slug, user)), "matmul")
    assert [e.picked for e in picked if e.problem["M"] == 101] == [True]
    assert matmul_check(queue, "row", 101, 67, 45).origin == "measured"  # the pick, not measured again


def test_a_call_times_all_of_its_steps(ocl_device, tmp_path):
    from conftest import SCALE_YAML, write_spec

    two_steps = SCALE_YAML.replace(
        "launch:\n  entry: scale\n  global: [\"N // WPT\"]\n  local: [WG]",
        "launch:\n  - {entry: scale, global: [\"N // WPT\"], local: [WG]}\n"
        "  - {entry: scale, global: [\"N // WPT\"], local: [WG]}")
    assert two_steps != SCALE_YAML
    path = write_spec(tmp_path, two_steps)
    _, dev = device.select(ocl_device)
    ctx = cl.Context([dev])
    plain, timed = cl.CommandQueue(ctx), cl.CommandQueue(ctx, properties=cl.command_queue_properties.PROFILING_ENABLE)
    n = 1 << 20
    x = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, 4 * n)
    y = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, 4 * n)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", autotune.AutotuneWarning)
        run = autotune.load_kernel(str(path), timed, N=n)(x, y)
        untimed = autotune.load_kernel(str(path), plain, N=n)(x, y, wait_for=run)
    assert len(run.events) == 2
    total = run.seconds  # waits for the call
    steps = [(e.profile.end - e.profile.start) * 1e-9 for e in run.events]
    assert total >= sum(steps) > 0 and run.event is run.events[-1]
    with pytest.raises(autotune.AutotuneError, match="PROFILING_ENABLE"):
        _ = untimed.seconds


def test_first_use_at_an_untuned_size_verifies_the_configurations_there(ocl_device, tmp_path):
    """The scale spec's constraint, (N // WPT) % WG == 0, misses N % WPT == 0: configurations
    tuned at N = 256 and 1024 are right there and leave the last element unwritten at N = 257.
    First use at 257 verifies them there and refuses rather than hand one back; at 640 the pick
    verifies and computes y = 2x."""
    from autotune import spec as specs
    from conftest import SCALE_YAML, save_winner, write_spec

    path = str(write_spec(tmp_path / "spec", SCALE_YAML))
    spec = specs.load(path)
    info, dev = device.select(ocl_device)
    for n, wpt in ((256, 2), (1024, 4)):
        save_winner(info, {"N": n}, {"WPT": wpt, "WG": 16, "MODE": 0}, spec_hash=spec.spec_hash)
    ctx = cl.Context([dev])
    queue = cl.CommandQueue(ctx)
    with pytest.raises(autotune.ProblemError, match=r"each configuration it could use gives wrong results "
                       r"there \(2 failed verification; WPT=\d+ WG=16 MODE=0 mad=False: y:"):
        autotune.load_kernel(path, queue, N=257)
    x = np.random.default_rng(0).uniform(-1, 1, 640).astype(np.float32)
    x_buf = cl.Buffer(ctx, cl.mem_flags.READ_ONLY | cl.mem_flags.COPY_HOST_PTR, hostbuf=x)
    y_buf = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, x.nbytes)
    with pytest.warns(autotune.AutotuneWarning,
                      match="verified and timed 2 tuned configurations and the spec’s baseline there"):
        k = autotune.load_kernel(path, queue, N=640)
    k(x_buf, y_buf).wait()
    y = np.empty_like(x)
    cl.enqueue_copy(queue, y, y_buf)
    assert k.origin == "measured" and np.array_equal(y, 2 * x)
    (picked,) = [e for e in profiles.entries(profiles.read(profiles.path_for(info.slug, settings.profiles_dir())),
                                             "scale") if e.problem == {"N": 640}]
    assert picked.error == 0.0  # verified there


SPLIT_K = {"ALGO": "tiled", "MDIMC": 16, "NDIMC": 16, "MWG": 64, "NWG": 64, "KWG": 16, "VW": 4, "SN": 2, "DB": 1,
           "UNROLL": 8, "KSPLIT": 8}  # two steps: partial products in a scratch buffer, then their sum


def _split_k(ocl_device: str, properties: int = 0) -> tuple[Any, cl.CommandQueue, cl.Context]:
    """A split-K matmul at 64 x 64 x 4096, loaded exact from a saved entry, its queue and
    context (kept: Intel's runtime ends a context its creator released)."""
    from autotune import spec as specs
    from conftest import save_winner

    mm = specs.load("matmul")
    info, dev = device.select(ocl_device)
    params = {k: v for k, v in mm.complete(SPLIT_K).items() if k != "fast_math"}
    save_winner(info, mm.resolve_problem({"M": 64, "N": 64, "K": 4096}), params, kernel="matmul",
                spec_hash=mm.spec_hash)
    ctx = cl.Context([dev])
    queue = cl.CommandQueue(ctx, properties=properties)
    k = autotune.load_kernel("matmul", queue, M=64, N=64, K=4096)
    assert k.origin == "exact" and k.params["KSPLIT"] == 8 and len(k._launch.geometry.steps) == 2
    return k, queue, ctx


def _products(queue: cl.CommandQueue, count: int) -> tuple[list[Any], Any, list[Any], list[np.ndarray]]:
    import pyopencl.array as cla

    rng = np.random.default_rng(1)
    a = [rng.uniform(-1, 1, (64, 4096)).astype(np.float32) for _ in range(count)]
    b = rng.uniform(-1, 1, (4096, 64)).astype(np.float32)
    want = [x.astype(np.float64) @ b for x in a]
    return [cla.to_device(queue, x) for x in a], cla.to_device(queue, b), \
        [cla.zeros(queue, (64, 64), np.float32) for _ in range(count)], want


def test_calls_of_a_kernel_with_scratch_on_an_out_of_order_queue_do_not_share_it_at_once(ocl_device):
    """Split-K's steps share one scratch buffer between calls: independent calls on an
    out-of-order queue each get their own product (a fresh-user trial saw 7 of 8 wrong)."""
    k, queue, _ctx = _split_k(ocl_device, cl.command_queue_properties.OUT_OF_ORDER_EXEC_MODE_ENABLE)
    a, b, c, want = _products(queue, 8)
    queue.finish()
    for run in [k(a[i], b, c[i]) for i in range(8)]:
        run.wait()
    assert [float(np.abs(c[i].get() - want[i]).max()) < 1e-3 for i in range(8)] == [True] * 8


def test_one_kernel_called_from_several_threads_binds_each_call_s_own_arguments(ocl_device):
    """Arguments are bound to shared kernel objects, then enqueued: a thread switch between the
    two ran one call with another's buffers (switches forced often here to make it likely)."""
    from concurrent.futures import ThreadPoolExecutor

    previous = sys.getswitchinterval()
    k, queue, _ctx = _split_k(ocl_device)
    a, b, c, want = _products(queue, 4)
    queue.finish()

    zeros = np.zeros((64, 64), np.float32)

    def calls(i: int) -> list[bool]:
        out = []
        for _ in range(100):
            cl.enqueue_copy(queue, c[i].data, zeros)  # not Array.fill: pyopencl's own kernel objects are shared too
            k(a[i], b, c[i]).wait()
            out.append(float(np.abs(c[i].get() - want[i]).max()) < 1e-3)
        return out

    sys.setswitchinterval(1e-6)
    try:
        with ThreadPoolExecutor(4) as pool:
            results = list(pool.map(calls, range(4)))
    finally:
        sys.setswitchinterval(previous)
    assert [all(r) for r in results] == [True] * 4


def test_a_devices_profile_slug_selects_it_as_report_d_takes_it(ocl_device):
    """Trial 20: the run's closing `autotune report ... -d SLUG` line gave a slug that `show -d`
    and `bench -d` refused."""
    info, _ = device.select(ocl_device)
    assert device.select(info.slug)[0].selector == device.select(info.slug.upper())[0].selector
    assert device.select(info.slug)[0].slug == info.slug



#: In a fresh process (the runtime installs its handlers as it is loaded): the process's
#: handlers of SIGINT, SIGTERM, SIGQUIT and an application's SIGUSR1 before and after listing the
#: devices and making a context,
#: through autotune or pyopencl directly, as JSON.
_HANDLERS = """
import ctypes, json, signal, sys
signal.signal(signal.SIGUSR1, lambda s, f: None)  # the application's own handler (trial 75)
import autotune, pyopencl as cl
from autotune import device
from autotune.clcontext import context

class Action(ctypes.Structure):
    _fields_ = [("handler", ctypes.c_void_p), ("mask", ctypes.c_ulong * 16), ("flags", ctypes.c_int),
                ("restorer", ctypes.c_void_p)]

def handlers():
    out = []
    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGQUIT, signal.SIGUSR1):
        action = Action()
        ctypes.CDLL(None).sigaction(s, None, ctypes.byref(action))
        out.append(action.handler or 0)
    return out

before = handlers()
if sys.argv[2] == "autotune":
    dev = device.select(sys.argv[1], require_build=False)[1]
    ctx = context(dev)
else:
    p, d = map(int, sys.argv[1].split(":"))
    dev = cl.get_platforms()[p].get_devices()[d]
    ctx = cl.Context([dev])
print(json.dumps([before, handlers(), dev.platform.name]))
"""


@needs_opencl
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads the handlers with Linux's sigaction")
def test_a_context_autotune_makes_leaves_pythons_stop_handlers_in_place(ocl_device):
    """Trial 35: Intel's runtime installs SIGINT and SIGTERM handlers of its own when it is loaded
    and with a context, and a Ctrl-C under `run --no-isolation` then ended the run with nothing
    said or saved; its SIGQUIT handler swallowed Ctrl-backslash (trial 71). The selector here is an
    index (``P:D``), as the suite's devices are."""
    import json

    def handlers(how: str) -> list:
        done = subprocess.run([sys.executable, "-c", _HANDLERS, ocl_device, how], capture_output=True, text=True,
                              timeout=120)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout.strip().splitlines()[-1])

    before, after, platform = handlers("autotune")
    assert after == before
    if "Intel" in platform:  # the test shows something: without it, the handlers change
        before, after, _ = handlers("raw")
        assert after != before


def test_show_checks_each_entry_against_the_spec_file_it_records(tmp_path):
    """Trial 51: two spec files of one kernel name, tuned at two sizes: `show NAME` judged both
    entries against the first file, and called the other's entry stale."""
    from conftest import SCALE_YAML, write_spec
    first = write_spec(tmp_path / "a", SCALE_YAML)
    second = write_spec(tmp_path / "b", SCALE_YAML.replace("MODE: [0]", "MODE: [0, 2]"))
    assert cli("run", str(first), "-n", "2", "-q").returncode == 0
    assert cli("run", str(second), "-s", "N=512", "-n", "2", "-q").returncode == 0
    shown = cli("show", "scale")
    assert shown.returncode == 0 and "N=512" in shown.stdout and "N=256" in shown.stdout
    assert "stale" not in shown.stdout and "give its spec's path" not in shown.stdout, shown.stdout
    # trial 56: shown with one of the files, the other's entry was "stale ... the next run of its
    # problem replaces it", though that run is refused while the other file is there; trial 58:
    # load_kernel with that file does skip it, so show says so, and whose it is
    for path, other, size in ((first, second, "N=512"), (second, first, "N=256")):
        shown = cli("show", str(path))
        line = next(x for x in shown.stdout.splitlines() if x.strip().startswith(size))
        assert shown.returncode == 0 and "replaces it" not in shown.stdout, shown.stdout
        assert (f"(load_kernel skips it: tuned with {other.resolve()}, another spec of this kernel's name; "
                f"`autotune show {other.resolve()}` checks it against that spec)") in line, line


def test_a_run_without_a_verified_configuration_says_why_on_stderr(tmp_path):
    """Trial 57: it exited 1 with nothing on stderr, where a script looks for why."""
    from conftest import SCALE_YAML, write_spec
    path = write_spec(tmp_path, SCALE_YAML.replace("MODE: [0]", "MODE: [3]"))  # every result wrong
    out = cli("run", str(path), "-n", "6", "-q", "--storage", ":memory:")
    assert out.returncode == 1, out.stderr
    assert out.stderr.strip().splitlines()[-1] == ("autotune: error: no verified configuration of scale at N=256: "
                                                   "no configuration passed verification; the summary above says "
                                                   "why"), out.stderr
    assert "Traceback" not in out.stderr


def test_load_kernel_of_a_namesake_spec_says_to_rename_it_not_to_run_it(tmp_path, queue):
    """Trial 61: load_kernel offered `autotune run` of a spec whose kernel name another spec's
    entry at that size holds, a run that is refused while that file is there."""
    from conftest import SCALE_YAML, write_spec
    first = write_spec(tmp_path / "a", SCALE_YAML)
    second = write_spec(tmp_path / "b", SCALE_YAML.replace("MODE: [0]", "MODE: [0, 2]"))
    assert cli("run", str(first), "-n", "2", "-q").returncode == 0
    with pytest.warns(autotune.AutotuneWarning, match=rf"was tuned with {re.escape(str(first.resolve()))}, another "
                                                      r"spec of the kernel name scale: give this spec another "
                                                      r"`kernel:` name before tuning it"):
        autotune.load_kernel(str(second), queue)


#: A process as the command starts one (numpy loaded by its first code), whose OpenCL runtime
#: swallows a SIGINT sent while it loads: "reached" where Python's handler took it.
_SWALLOWING_RUNTIME = """
import os, signal, time
from autotune import _entry
_entry.threads_without_stops({signal.SIGINT})
import numpy as np
np.ones((300, 300)) @ np.ones((300, 300))  # its BLAS threads at work
from autotune import clcontext

def loading_runtime():
    signal.signal(signal.SIGINT, lambda s, f: None)  # the runtime's, which swallows it
    os.kill(os.getpid(), signal.SIGINT)  # the Ctrl-C, now
    time.sleep(0.05)
    return []

clcontext.cl.get_platforms = loading_runtime
try:
    clcontext.platforms()
    time.sleep(0.5)
    print("lost")
except KeyboardInterrupt:
    print("reached")
"""


@pytest.mark.skipif(not hasattr(signal, "pthread_sigmask"), reason="signals are held back with pthread_sigmask")
def test_a_ctrl_c_while_the_runtime_has_its_handler_reaches_python_s():
    """Trial 103: Intel's runtime keeps a SIGINT handler of its own for some 26 ms as it loads;
    a Ctrl-C then was swallowed, and the run went on to exit 0."""
    for _ in range(5):  # which thread takes it is the kernel's choice: each time
        done = subprocess.run([sys.executable, "-c", _SWALLOWING_RUNTIME], capture_output=True, text=True, timeout=60)
        assert done.stdout.strip() == "reached", done.stdout + done.stderr
