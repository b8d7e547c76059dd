"""``TunedKernel.__call__`` checks its arguments before anything reaches the device.

Unchecked, a buffer too small was written past its end (a sub-buffer: the rest of its parent
overwritten; a plain 64-byte buffer: the process aborted) and None crashed the caller. The tests
of bad calls replace ``Launch.enqueue`` with a recorder, so that where the check is missing
they fail on "nothing raised" instead of taking the test process down.
"""

from __future__ import annotations

import re
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyopencl as cl
import pyopencl.array as cl_array
import pytest

import autotune
from autotune import arguments, device, loader, profiles
from autotune import spec as specs
from autotune.errors import ProblemError, SpecError
from autotune.kernels import mul1
from autotune.launch import Launch
from conftest import SCALE_YAML, every_runtime, needs_opencl, write_spec

#: What this module checks is the OpenCL runtime's own: its tests run on every device that builds.
pytestmark = every_runtime

M = N = K = 64
C_BYTES = 4 * M * N  # what matmul's C needs at M=N=K=64


@pytest.fixture(scope="module")
def queue(ocl_device: str) -> Iterator[cl.CommandQueue]:
    _, dev = device.select(ocl_device)
    ctx = cl.Context([dev])  # kept alive with its queue: Intel's runtime ends a released context
    yield cl.CommandQueue(ctx)


def load(name: str, queue: cl.CommandQueue, **problem: Any) -> loader.TunedKernel:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", autotune.AutotuneWarning)  # no profile for this size: fine
        return autotune.load_kernel(name, queue, **problem)


@pytest.fixture
def mm(queue: cl.CommandQueue) -> loader.TunedKernel:
    return load("matmul", queue, M=M, N=N, K=K)


@pytest.fixture
def enqueued(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Launches that reached ``Launch.enqueue`` (recorded, never run); load_kernel does not
    measure at first use (it would launch through this too)."""
    monkeypatch.setenv("AUTOTUNE_MEASURE_UNTUNED", "0")
    calls: list[Any] = []
    monkeypatch.setattr(Launch, "enqueue", lambda self, queue, named, wait_for=None: calls.append(named) or [None])
    return calls


def buffer(queue: cl.CommandQueue, nbytes: int) -> cl.Buffer:
    return cl.Buffer(queue.context, cl.mem_flags.READ_WRITE, nbytes)


def operands(queue: cl.CommandQueue) -> tuple[np.ndarray, np.ndarray, cl_array.Array, cl_array.Array]:
    rng = np.random.default_rng(0)
    a = rng.uniform(-1, 1, (M, K)).astype(np.float32)
    b = rng.uniform(-1, 1, (K, N)).astype(np.float32)
    return a, b, cl_array.to_device(queue, a.ravel()), cl_array.to_device(queue, b.ravel())


def small_buffers(queue: cl.CommandQueue) -> dict[str, Any]:
    """Too small for C, each a way a caller can get one."""
    parent = buffer(queue, 1 << 20)
    big = cl_array.zeros(queue, 1 << 16, np.float32)
    return {
        "plain 64 bytes": buffer(queue, 64),
        "sub-buffer": parent.get_sub_region(0, 64),  # its parent is large: its own size counts
        "array": cl_array.zeros(queue, 16, np.float32),
        "view of a large array": big[: M * N - 1],  # one float short; its buffer is large
    }


@needs_opencl
@pytest.mark.parametrize("kind", ["plain 64 bytes", "sub-buffer", "array", "view of a large array"])
def test_a_buffer_too_small_is_a_value_error_and_nothing_is_enqueued(mm, queue, enqueued, kind):
    small = small_buffers(queue)[kind]
    given = small.size if isinstance(small, cl.Buffer) else small.nbytes
    with pytest.raises(ValueError, match=rf"argument C needs {C_BYTES} bytes .*M=64.*got a buffer of {given} bytes"):
        mm(buffer(queue, 4 * M * K), buffer(queue, 4 * K * N), small)
    with pytest.raises(ValueError, match="argument A needs"):  # by name too, and for an input
        mm(A=small, B=buffer(queue, 4 * K * N), C=buffer(queue, C_BYTES))
    with pytest.raises(ValueError, match=rf"argument C needs {C_BYTES} bytes .*; got an empty array"):  # trial 72
        mm(buffer(queue, 4 * M * K), buffer(queue, 4 * K * N), cl_array.empty(queue, 0, np.float32))
    assert enqueued == []


@needs_opencl
def test_an_array_larger_than_the_problem_is_warned_of_once(mm, queue):
    """Trial 55: 512x512 arrays passed to a kernel loaded for 64x64 gave wrong numbers (the rest
    of C untouched) without a word; a plain Buffer may be larger (it carries no shape)."""
    a, b, a_dev, b_dev = operands(queue)
    big = cl_array.zeros(queue, (2 * M, 2 * N), np.float32)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        for _ in range(3):
            mm(a_dev, b_dev, big).wait()
        mm(a_dev, b_dev, buffer(queue, 4 * C_BYTES)).wait()
        mm(a_dev, b_dev, cl_array.zeros(queue, M * N, np.float32)).wait()
    said = [str(w.message) for w in seen if "is an array of shape" in str(w.message)]
    assert len(said) == 1, said
    assert re.search(rf"argument C is an array of shape \(128, 128\) \(16384 elements\), and the kernel, loaded "
                     rf"for M=64,N=64,K=64.*uses its first {M * N}: the rest is neither read nor written", said[0])
    wide = cl_array.zeros(queue, (M, 3 * N), np.float32)
    with warnings.catch_warnings():  # trial 100: an error at the first call only; later ones ran unsaid
        warnings.simplefilter("error", autotune.AutotuneWarning)
        for _ in range(2):
            with pytest.raises(autotune.AutotuneWarning, match=r"argument C is an array of shape \(64, 192\)"):
                mm(a_dev, b_dev, wide)


@needs_opencl
@pytest.mark.parametrize("value, shown", [
    (None, "got None"),
    (C_BYTES, "got int"),
    (np.int32(0), "got numpy.int32"),
    (np.zeros(M * N, np.float32), "got a numpy array"),
    ("C", "got str"),
], ids=["None", "int", "numpy scalar", "numpy array", "str"])
def test_an_argument_of_the_wrong_kind_is_a_type_error(mm, queue, enqueued, value, shown):
    a, b = buffer(queue, 4 * M * K), buffer(queue, 4 * K * N)
    with pytest.raises(TypeError, match=rf"argument C must be a pyopencl Buffer .*{shown}"):
        mm(a, b, value)
    with pytest.raises(TypeError, match=rf"argument B must be a pyopencl Buffer .*{shown}"):
        mm(a, value, C=buffer(queue, C_BYTES))
    assert enqueued == []


@needs_opencl
@pytest.mark.parametrize("dtype", [np.float64, np.int32, np.float16, ">f4"])
def test_an_array_of_another_element_type_is_a_type_error(mm, queue, enqueued, dtype):
    """Its bytes would be read as float32: wrong numbers and no error (a Buffer cannot be told)."""
    a = cl_array.zeros(queue, M * K, dtype)
    b, c = buffer(queue, 4 * K * N), buffer(queue, C_BYTES)
    with pytest.raises(TypeError, match=rf"argument A holds {np.dtype(dtype)}; the kernel takes float32") as caught:
        mm(a, b, c)
    assert enqueued == []
    # trial 16: for the same bytes under another type, .astype would change every value; .view keeps them
    view = "; or, to keep its bytes as they are, a view: .view(numpy.float32))"
    # trial 90: the view of big-endian numbers kept their bytes swapped: wrong numbers
    assert str(caught.value).endswith(view) == (np.dtype(dtype).itemsize == 4 and np.dtype(dtype).isnative), \
        str(caught.value)


@needs_opencl
def test_an_array_of_a_vector_type_is_named_as_one_and_offered_its_components(mm, queue, enqueued):
    """Trial 18: a cltypes.float4 array was named by numpy's field list, and told to .astype."""
    import pyopencl.cltypes as cltypes

    a = cl_array.zeros(queue, M * K // 4, cltypes.float4)
    with pytest.raises(TypeError, match=r"argument A holds cltypes.float4; the kernel takes float32 \(pass its "
                       r"components as a view: .view\(numpy.float32\)\)$"):
        mm(a, buffer(queue, 4 * K * N), buffer(queue, C_BYTES))
    assert enqueued == []


@needs_opencl
def test_unknown_and_repeated_keywords_are_type_errors(mm, queue, enqueued):
    a, b, c = buffer(queue, 4 * M * K), buffer(queue, 4 * K * N), buffer(queue, C_BYTES)
    with pytest.raises(TypeError, match=r"unknown argument\(s\) c, alpha; it takes A, B, C"):
        mm(a, b, c=c, alpha=1.0)
    with pytest.raises(TypeError, match=r"unknown argument\(s\) alpha"):
        mm(a, b, c, alpha=1.0)
    with pytest.raises(TypeError, match=r"unknown argument\(s\) M; it takes A, B, C \(M: a problem key, fixed "
                       r"when the kernel was loaded: load_kernel\(..., M=...\) for another size\)"):
        mm(a, b, c, M=M)  # trial 89
    with pytest.raises(TypeError, match=r"matmul takes 3 arguments \(A, B, C\), got 6 \(the problem's M, N, K, layout "
                       r"were fixed when the kernel was loaded, and not passed\)$"):
        mm(a, b, c, M, N, K)  # trial 113
    with pytest.raises(TypeError, match=r"argument\(s\) A given by position and by name"):
        mm(a, b, c, A=a)
    with pytest.raises(TypeError, match=r"missing argument\(s\) C"):
        mm(a, b)
    assert enqueued == []
    mm(a, B=b, C=c)  # the check passes a correct call on
    assert len(enqueued) == 1 and enqueued[0] == {"A": a, "B": b, "C": c}


@needs_opencl
def test_a_bad_wait_for_or_queue_is_a_type_error_that_says_what_it_takes(mm, queue, enqueued):
    a, b, c = buffer(queue, 4 * M * K), buffer(queue, 4 * K * N), buffer(queue, C_BYTES)
    for bad in (3, [3], "event"):
        with pytest.raises(TypeError, match="wait_for takes pyopencl Events and Runs"):
            mm(a, b, c, wait_for=bad)
    assert enqueued == []
    for bad in (None, queue.context):
        with pytest.raises(TypeError, match=r"queue must be a pyopencl.CommandQueue, not "):
            autotune.load_kernel("matmul", bad)
    with pytest.raises(TypeError, match=r"the arguments are the other way round: load_kernel\('matmul', queue"):
        autotune.load_kernel(queue, "matmul")  # trial 70
    with pytest.raises(TypeError, match=r"load_kernel\('matmul', queue, 64, 32\): give the problem by name: "
                       r"load_kernel\('matmul', queue, M=64, N=32\)"):
        autotune.load_kernel("matmul", queue, 64, 32)  # trial 89: Python's "takes 2 positional arguments"
    with pytest.raises(TypeError, match=r"load_kernel\(None, queue\): the kernel is a built-in kernel's name or a "
                       r"spec's path, not NoneType"):
        autotune.load_kernel(None, queue)  # trial 90


@needs_opencl
def test_waiting_for_an_event_of_another_context_is_refused_before_enqueueing(mm, queue, enqueued):
    context = cl.Context([queue.device])  # kept alive: Intel's runtime ends a released context
    other = cl.CommandQueue(context)
    foreign = cl.enqueue_marker(other)
    a, b, c = buffer(queue, 4 * M * K), buffer(queue, 4 * K * N), buffer(queue, C_BYTES)
    with pytest.raises(ValueError, match="wait_for holds an event of another context"):
        mm(a, b, c, wait_for=[cl.enqueue_marker(queue), foreign])
    assert enqueued == []
    mm(a, b, c, wait_for=cl.enqueue_marker(queue))  # one of its own context passes
    assert len(enqueued) == 1
    other.finish()


@needs_opencl
def test_a_buffer_of_another_context_is_refused(mm, queue, enqueued):
    other = cl.Context(queue.context.devices)
    with pytest.raises(ValueError, match="argument C: the buffer belongs to another OpenCL context"):
        mm(buffer(queue, 4 * M * K), buffer(queue, 4 * K * N), cl.Buffer(other, cl.mem_flags.READ_WRITE, C_BYTES))
    assert enqueued == []


@needs_opencl
def test_arrays_of_the_right_size_work(mm, queue):
    a, b, a_dev, b_dev = operands(queue)
    c_dev = cl_array.empty(queue, M * N, np.float32)
    mm(a_dev, b_dev, c_dev).wait()
    want = a.astype(np.float64) @ b
    np.testing.assert_allclose(c_dev.get().reshape(M, N), want, rtol=1e-4, atol=1e-4)


@needs_opencl
def test_a_call_waits_for_the_work_pending_on_its_arrays_and_is_noted_on_them(mm, queue):
    """Trial 36: an input made on another queue, or an output zero-filled on an out-of-order
    queue, raced the call (8-9 of 10 calls wrong), and out.get() did not wait for the call.
    An input whose pending work is a user event not yet set: the call must not start before it."""
    a, b, a_dev, b_dev = operands(queue)
    gate = cl.UserEvent(queue.context)
    a_dev.add_event(gate)
    c_dev = cl_array.empty(queue, M * N, np.float32)
    run = mm(a_dev, b_dev, c_dev)
    try:
        queue.flush()
        time.sleep(0.2)
        assert run.events[0].command_execution_status != cl.command_execution_status.COMPLETE
        assert run.event in c_dev.events and run.event in a_dev.events
    finally:
        gate.set_status(cl.command_execution_status.COMPLETE)
    np.testing.assert_allclose(c_dev.get().reshape(M, N), a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)


@needs_opencl
def test_an_array_view_with_an_offset_is_written_and_nothing_beside_it(mm, queue):
    a, b, a_dev, b_dev = operands(queue)
    skip = queue.device.mem_base_addr_align // 8 // 4  # floats: a sub-buffer may start there
    big = cl_array.to_device(queue, np.full(skip + M * N + 64, -7.0, np.float32))
    mm(a_dev, b_dev, big[skip: skip + M * N]).wait()
    got = big.get()
    np.testing.assert_allclose(got[skip: skip + M * N].reshape(M, N), a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)
    assert (got[:skip] == -7).all() and (got[skip + M * N:] == -7).all()
    with pytest.raises(ValueError, match="not contiguous"):
        mm(a_dev, b_dev, cl_array.zeros(queue, 2 * M * N, np.float32)[::2])
    with pytest.raises(ValueError, match="not contiguous"):  # trial 47: "needs N bytes; got a buffer of N/2"
        mm(a_dev, b_dev, cl_array.zeros(queue, M * N, np.float32)[::2])
    if skip > 1:  # a start the device cannot make a sub-buffer at
        with pytest.raises(ValueError, match="bytes into its buffer"):
            mm(a_dev, b_dev, big[1: 1 + M * N])


@needs_opencl
def test_a_column_major_array_is_refused_unless_passed_as_its_flat_view(queue, enqueued):
    mm = load("matmul", queue, M=M, N=N, K=K // 2)  # A is (M, K/2), B (K/2, N)
    a = cl_array.zeros(queue, (M, K // 2), np.float32)
    b, c = cl_array.zeros(queue, (K // 2, N), np.float32), cl_array.zeros(queue, (M, N), np.float32)
    with pytest.raises(ValueError, match=r"argument C: the array is in column-major order .*pass a C-ordered"):
        mm(a, b, cl_array.zeros(queue, (M, N), np.float32, order="F"))
    with pytest.raises(ValueError, match="argument B: the array is in column-major order"):
        mm(a, cl_array.zeros(queue, (N, K // 2), np.float32).T, c)  # a transpose: the right shape, wrong order
    assert enqueued == []
    mm(a, b, c)
    mm(a.reshape(M * K // 2), b, c)  # flat: read in memory order, as the kernel does
    mm(a, b, cl_array.zeros(queue, (M, N), np.float32, order="F").reshape(-1, order="F"))  # said so
    assert len(enqueued) == 3


@needs_opencl
def test_a_scalar_argument_must_be_a_number_that_fits(queue, enqueued):
    m1 = load("mul1", queue, N=1024)
    x, z = buffer(queue, 4 * 1024), buffer(queue, 4 * 1026)
    for bad in (None, 1.5, x, np.zeros(1, np.int32), True):
        with pytest.raises(TypeError, match="argument k must be an integer"):
            m1(x, z, bad)
    # trial 20: an array for a number was told to be copied to the device, as a buffer would be
    with pytest.raises(TypeError, match=r"argument k must be an integer \(int32\), got a numpy array of shape "
                       r"\(2,\) \(pass one element, e.g. a\[0\], or a number\)$"):
        m1(x, z, np.zeros(2, np.int32))
    with pytest.raises(ValueError, match="argument k: 1099511627776 does not fit its type int32"):
        m1(x, z, 2 ** 40)
    assert enqueued == []
    m1(x, z, -5)
    assert enqueued[0]["k"] == -5 and isinstance(enqueued[0]["k"], np.int32)
    m1(x, z, np.array(7))  # trial 90: a 0-d array was refused and told to pass a[0], which it has not
    assert enqueued[1]["k"] == 7 and isinstance(enqueued[1]["k"], np.int32)


@needs_opencl
def test_a_python_int_for_a_scalar_argument_runs(queue):
    n, log_base = 1024, 30
    m1 = load("mul1", queue, N=n)
    x = mul1.extreme_digits(n, log_base, np.random.default_rng(1))
    k = -(2 ** log_base - 3)
    z = cl_array.zeros(queue, n + 2, np.int32)
    m1(cl_array.to_device(queue, x), z, k).wait()
    np.testing.assert_array_equal(z.get(), mul1.digits(x, k, log_base))


@pytest.mark.parametrize("name", specs.builtin_names())
def test_sizes_are_those_of_inputs_without_drawing_them(name, monkeypatch):
    spec = specs.load(name)
    problem = spec.resolve_problem()
    real = spec.host_module().inputs(problem, np.random.default_rng(0))
    given: list[str] = []  # what inputs() was given to draw with: the stand-in, never a real generator
    real_inputs = arguments.host_inputs
    monkeypatch.setattr(arguments, "host_inputs", lambda s, p, rng: given.append(type(rng).__name__) or
                        real_inputs(s, p, rng))
    monkeypatch.setattr(arguments, "_needs_cache", {})
    monkeypatch.setattr(arguments, "REAL_BELOW", 0)  # below it, drawn for real (milliseconds)
    needs = arguments._arg_needs(spec, problem, tuple(real))
    assert given and set(given) == {"_ShapeRng"}, given  # once, and once per size key for a number argument
    for arg, value in real.items():
        value = np.asarray(value)
        assert (needs[arg].dtype, needs[arg].nbytes) == (value.dtype, value.nbytes if value.ndim else None), arg
    calls = len(given)
    assert arguments._arg_needs(spec, problem, tuple(real)) == needs and len(given) == calls  # cached


@pytest.mark.parametrize("kernel, problem, arg", [
    ("mul1", "{'N': 2**28}", "x"),
    # trial 106: matmul's np.asarray cast of its draws took 2.9 GB and 7 s at 16384^3
    ("matmul", "{'M': 16384, 'N': 16384, 'K': 16384, 'layout': 'row'}", "A"),
    ("matmul", "{'M': 16384, 'N': 16384, 'K': 16384, 'layout': 'col'}", "A"),
])
def test_learning_the_sizes_of_a_large_problem_maps_no_memory(kernel, problem, arg):
    """Trial 100: mul1's sizes at N=2**28, at the shipped profile's size, took 3 GiB and 8 s in
    every process that loaded it (its draw cast to int32, and inputs() run again at 2N)."""
    import subprocess
    import sys

    code = (f"import resource; from autotune import arguments, spec; s = spec.load('{kernel}'); "
            f"p = s.resolve_problem({problem}); before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss; "
            f"needs = arguments.input_needs(s, p); assert needs['{arg}'].nbytes == 4 * 2**28, needs; "
            "print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) // 1024)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert int(done.stdout) < 100, f"{done.stdout.strip()} MiB mapped to learn the sizes of a 1 GiB array"


_SIZED_REF = """
import numpy as np

def inputs(problem, rng):
    n = problem["N"]
    y = None
    BODY
    return {"x": x, "y": np.zeros(m, np.float32) if y is None else y, "n": np.int32(m)}

def reference(problem, arrays):
    return {"y": 2.0 * arrays["x"]}
"""


@pytest.mark.parametrize("body, problem, requires, n, nbytes", [
    # trial 101: a size clamped at its least follows it up only (halved, it did not change)
    ("m = max(n, 64); x = rng.random(m).astype(np.float32)", {"N": 64}, "", 64, 256),
    # trial 101: a constraint that refuses each size alone (M == N) left the argument unchecked
    ("m = n * n; x = rng.random(m).astype(np.float32)", {"N": 64, "M": 64}, 'requires: ["M == N"]', 4096, 16384),
    # trial 101: a size summed from drawn values was 0 on the stand-in's zeros: any buffer passed
    ("m = int(rng.integers(1, 4, size=n).sum()); x = rng.random(m).astype(np.float32)", {"N": 64}, "", None, None),
    # trial 102: clamped where both moves give the clamp, a size the spec cannot move, and a size
    # from drawn values that was not empty on the stand-in's zeros: each unchecked, or too small
    ("m = max(n, 64); x = rng.random(m).astype(np.float32)", {"N": 32}, "", 64, 256),
    ("m = n; x = rng.random(m).astype(np.float32)", {"N": 5}, 'requires: ["N % 2 == 1"]', 5, 20),
    ("m = int((rng.random(n) > 0.5).sum()) + 1; x = rng.random(m).astype(np.float32)", {"N": 64}, "", None, None),
    # trial 104: a clamp that sizes one array alone, which stayed as the other grew; a size from
    # drawn values that is the rows of 2-D arrays
    ("m = max(n, 64); x = rng.random(n).astype(np.float32)", {"N": 32}, "", 64, 128),
    ("m = int(rng.integers(1, 4, size=n).sum()); x = rng.random((m, 2)).astype(np.float32); "
     "y = np.zeros((m, 2), np.float32)", {"N": 64}, "", None, None),
    # trial 105: a count of pairs in an array of 2 * k, constant, then drawn: unchecked, the kernel
    # wrote past it
    ("m = 64; x = rng.random(n).astype(np.float32); y = np.zeros(2 * m, np.float32)", {"N": 128}, "", 64, 512),
    ("m = int(rng.integers(1, 4, size=n).sum()); x = rng.random(n).astype(np.float32); "
     "y = np.zeros(2 * m, np.float32)", {"N": 64}, "", None, None),
    # trial 107: a constant that sizes a dimension of every array, which all grow with N
    ("m = 4; x = rng.random((n, m)).astype(np.float32); y = np.zeros((n, m), np.float32)", {"N": 64}, "", 4, 1024),
    # trial 101: drawn again until no value is 0, it ran until the draws added up to the host's memory
    ("m = n; x = rng.random(m).astype(np.float32)\n    while (x == 0).any(): x = rng.random(m).astype(np.float32)",
     {"N": 64}, "", 64, 256),
])
def test_a_size_argument_is_learned_however_inputs_makes_it(tmp_path: Path, monkeypatch, body, problem, requires,
                                                            n, nbytes):
    text = SCALE_YAML.replace("problem: {N: 256}", f"problem: {problem}\n{requires}").replace("args: [x, y]",
                                                                                                "args: [x, y, n]")
    spec = specs.load(write_spec(tmp_path, text, ref=_SIZED_REF.replace("BODY", body)))
    monkeypatch.setattr(arguments, "_needs_cache", {})
    needs = arguments._arg_needs(spec, spec.resolve_problem(problem), ("x", "y", "n"))
    real = spec.host_module().inputs(spec.resolve_problem(problem), np.random.default_rng(0))
    assert needs["x"].nbytes == real["x"].nbytes == (nbytes or real["x"].nbytes) and needs["x"].nbytes > 0
    assert needs["n"].must_be == int(real["n"]) == (n or int(real["n"]))


@pytest.mark.parametrize("body", [
    "m = int((rng.random(n) < 0.5).sum()); x = rng.random(m).astype(np.float32)",  # zeros: too large
    "m = int((rng.random(n) > 0.5).sum()) + 1; x = rng.random(m).astype(np.float32)",  # zeros: too small
])
def test_sizes_that_follow_the_draws_of_a_large_problem_are_those_of_real_draws(tmp_path: Path, monkeypatch, body):
    """Trial 104: above REAL_BELOW, sizes came out as the stand-in's zeros make them: inputs()'
    own arrays were refused, or a buffer too small was taken."""
    text = SCALE_YAML.replace("args: [x, y]", "args: [x, y, n]")
    spec = specs.load(write_spec(tmp_path, text, ref=_SIZED_REF.replace("BODY", body)))
    monkeypatch.setattr(arguments, "_needs_cache", {})
    monkeypatch.setattr(arguments, "_follow_draws", {})
    monkeypatch.setattr(arguments, "REAL_BELOW", 1024)  # N=4096 draws 32 KiB: the stand-in's, but for this
    needs = arguments._arg_needs(spec, {"N": 4096}, ("x", "y", "n"))
    real = spec.host_module().inputs({"N": 4096}, np.random.default_rng(0))
    assert (needs["x"].nbytes, needs["n"].must_be) == (real["x"].nbytes, int(real["n"]))
    # per choice of the problem's other keys (trial 105: a dense mode's verdict served a sparse one)
    moded = specs.load(write_spec(tmp_path / "moded", text.replace("problem: {N: 256}", "problem: {N: 256, mode: "
                                                                    "{default: dense, choices: [dense, sparse]}}"),
                                  ref=_SIZED_REF.replace("BODY", "m = n if problem['mode'] == 'dense' else "
                                                         + body.split(";")[0].split("= ", 1)[1] + "; x = rng.random(m)"
                                                         ".astype(np.float32)")))
    for mode in ("dense", "sparse"):
        problem = moded.resolve_problem({"N": 4096, "mode": mode})
        needs = arguments._arg_needs(moded, problem, ("x", "y", "n"))
        real = moded.host_module().inputs(problem, np.random.default_rng(0))
        assert (needs["x"].nbytes, needs["n"].must_be) == (real["x"].nbytes, int(real["n"])), mode
    # a spec whose sizes follow no draw keeps the stand-in's zeros
    plain = specs.load(write_spec(tmp_path / "plain", text, ref=_SIZED_REF.replace(
        "BODY", "m = n; x = rng.random(m).astype(np.float32)")))
    assert type(arguments.shaped_inputs(plain, {"N": 4096})["x"]).__name__ == "_Untouched"


@pytest.mark.parametrize("body", [
    "m = 3; x = rng.random(n).astype(np.float32); y = np.zeros(n, np.float32)",  # a count of repeats
    "m = 12345; x = rng.random(n).astype(np.float32); y = np.zeros(n, np.float32)",  # a fixed seed
    "m = 3; x = rng.random(n).astype(np.float32); y = np.zeros(9, np.float32)",  # y stays as x grows (trial 105)
    # trial 111: a stride in flat arrays (the kernel wrote past them when given 8), an offset, a halo
    "m = 4; x = rng.random(n * m).astype(np.float32); y = np.zeros(n * m, np.float32)",
    "m = 3; x = rng.random(n + m).astype(np.float32); y = np.zeros(n, np.float32)",
    "m = 3; x = rng.random(n + 2 * m).astype(np.float32); y = np.zeros(n, np.float32)",
    # trial 114: a halo of 1, a halo of 2-D arrays, a divisor, one factor of a ratio of 6
    "m = 1; x = rng.random(n + 2 * m).astype(np.float32); y = np.zeros(n, np.float32)",
    "m = 2; x = rng.random((n // 16 + 2 * m, 16 + 2 * m)).astype(np.float32); y = np.zeros((n // 16, 16), np.float32)",
    "m = 4; x = rng.random(n * m).astype(np.float32); y = np.zeros(n, np.float32)",
    "m = 2; x = rng.random(n * m * 3).astype(np.float32); y = np.zeros(n, np.float32)",
])
def test_an_integer_that_is_no_data_is_held_however_the_arrays_take_it(tmp_path: Path, monkeypatch, body):
    """Trials 102-114: each rule that left an integer free by the array sizes (a count of its
    own) let some call write past a buffer (a stride, an offset, a halo, a divisor, a factor);
    the kernel was verified with inputs()' value alone, so every integer but data is held to it,
    and one the application chooses is a problem key (trial 109's count of repeats, refused)."""
    text = SCALE_YAML.replace("args: [x, y]", "args: [x, y, n]")
    spec = specs.load(write_spec(tmp_path, text, ref=_SIZED_REF.replace("BODY", body)))
    monkeypatch.setattr(arguments, "_needs_cache", {})
    needs = arguments._arg_needs(spec, {"N": 256}, ("x", "y", "n"))
    assert needs["n"].must_be == int(body.split(";")[0].split("=")[1]) and needs["n"].fixed, needs["n"]


@needs_opencl
def test_a_held_stride_is_refused_smaller_and_larger_with_the_way_to_choose_it(tmp_path: Path, monkeypatch, queue):
    """Trial 111: a stride of 4 in arrays of 4 N was free, and 8 wrote past them; trial 114: a
    smaller one let a divisor write past its output, so none but 4 is taken."""
    text = SCALE_YAML.replace("args: [x, y]", "args: [x, y, n]")
    spec = specs.load(write_spec(tmp_path, text, ref=_SIZED_REF.replace(
        "BODY", "m = 4; x = rng.random(n * m).astype(np.float32); y = np.zeros(n * m, np.float32)")))
    monkeypatch.setattr(arguments, "_needs_cache", {})
    args = arguments.Arguments(spec, {"N": 256}, ("x", "y", "n"), queue.context, queue.device)
    x, y = buffer(queue, 4 * 1024), buffer(queue, 4 * 1024)
    assert args.bind((x, y, 4), {})["n"] == 4
    for wrong in (8, 2, 0, -1):
        with pytest.raises(ValueError, match=rf"argument n is {wrong}, .* passes n=4, and it stays so at other sizes: "
                           r"pass 4; where the application chooses it, make it a problem key"):
            args.bind((x, y, wrong), {})


@needs_opencl
def test_a_drawn_integer_stays_within_its_draws_unless_the_spec_declares_its_values(tmp_path: Path, monkeypatch,
                                                                                    queue):
    """Trial 115: k = rng.integers(0, N), data, was free, and k = 10**9 read and wrote past x;
    trial 117: kept below the least array's length, a drawn offset, a row index and a negative
    draw still wrote past their arrays. A drawn integer stays within what inputs() drew, unless
    the spec's arguments: declares the values a call may pass."""
    text = SCALE_YAML.replace("args: [x, y]", "args: [x, y, n]")
    body = "m = int(rng.integers(0, n)); x = rng.random(n).astype(np.float32); y = np.zeros(n, np.float32)"
    spec = specs.load(write_spec(tmp_path, text, ref=_SIZED_REF.replace("BODY", body)))
    monkeypatch.setattr(arguments, "_needs_cache", {})
    needs = arguments._arg_needs(spec, {"N": 256}, ("x", "y", "n"))
    lo, hi = needs["n"].drawn
    assert needs["n"].must_be is None and 0 <= lo < hi < 256
    args = arguments.Arguments(spec, {"N": 256}, ("x", "y", "n"), queue.context, queue.device)
    x, y = buffer(queue, 4 * 256), buffer(queue, 4 * 256)
    assert [args.bind((x, y, k), {})["n"] for k in (lo, hi)] == [lo, hi]
    for wrong in (hi + 1, 10**9, lo - 1):
        with pytest.raises(ValueError, match=rf"argument n is {wrong}, but the reference module's inputs\(\) draws it "
                           rf"from {lo} to {hi} \(over the seeds tried\), .* or declare the values a call may pass in "
                           r"the spec's arguments:"):
            args.bind((x, y, wrong), {})
    declared = specs.load(write_spec(tmp_path / "declared", text + 'arguments: {n: "0 <= n < N"}\n',
                                     ref=_SIZED_REF.replace("BODY", body)))
    args = arguments.Arguments(declared, {"N": 256}, ("x", "y", "n"), queue.context, queue.device)
    assert [args.bind((x, y, k), {})["n"] for k in (0, 255)] == [0, 255]
    with pytest.raises(ValueError, match=r"argument n is 256, but the spec allows it where 0 <= n < N "
                       r"\(arguments.n\), at N=256"):
        args.bind((x, y, 256), {})
    # trial 115: a drawn 0 or 1 alike at seeds 0-3 was held; at small problems more seeds are drawn
    flip = specs.load(write_spec(tmp_path / "flip", text, ref=_SIZED_REF.replace(
        "BODY", "x = rng.uniform(-1, 1, n).astype(np.float32); m = int(rng.integers(0, 2)); "
                "y = np.zeros(n, np.float32)")))
    assert [int(flip.host_module().inputs({"N": 2048}, np.random.default_rng(s))["n"]) for s in range(4)] == [0] * 4
    assert arguments._arg_needs(flip, {"N": 2048}, ("x", "y", "n"))["n"].drawn == (0, 1)
    # trial 119: a value drawn from -100 to 100 was taken from 3 to 97, over 4 seeds; ten where cheap
    wide = specs.load(write_spec(tmp_path / "wide", text, ref=_SIZED_REF.replace(
        "BODY", "m = int(rng.integers(-100, 100)); x = rng.random(n).astype(np.float32); y = np.zeros(n, np.float32)")))
    draws = [int(wide.host_module().inputs({"N": 256}, np.random.default_rng(s))["n"]) for s in range(10)]
    assert arguments._arg_needs(wide, {"N": 256}, ("x", "y", "n"))["n"].drawn == (min(draws), max(draws))


def test_arguments_declares_integers_only_and_mul1_its_digit(tmp_path: Path, monkeypatch):
    text = SCALE_YAML + 'arguments: {x: "x > 0"}\n'
    spec = specs.load(write_spec(tmp_path, text))
    monkeypatch.setattr(arguments, "_needs_cache", {})
    with pytest.raises(SpecError, match=r"arguments.x: inputs\(\) gives x as .*, not an integer"):
        arguments._arg_needs(spec, {"N": 256}, ("x", "y"))
    with pytest.raises(SpecError, match=r"arguments.N: must be the name of a kernel argument"):
        specs.load(write_spec(tmp_path / "key", SCALE_YAML + 'arguments: {N: "N > 0"}\n'))
    with pytest.raises(SpecError, match=r"arguments.reps: is not an argument of any launch step"):
        specs.load(write_spec(tmp_path / "stray", SCALE_YAML + 'arguments: {reps: "reps > 0"}\n'))
    # trial 118: each of these was found at a call, or never
    sized = SCALE_YAML.replace("args: [x, y]", "args: [x, y, n]")
    ref = _SIZED_REF.replace("BODY", "m = n; x = rng.random(n).astype(np.float32)")
    for arguments_block, said in [('{n: "n + 1"}', r"arguments.n: 'n \+ 1' gives 2, not true or false"),
                                  ('{nn: "nn > 0"}', r"arguments.nn: is not an argument of any launch step \(did you "
                                                     r"mean n\?\)"),
                                  ('{n: "n > 0"}\nscratch: {n: "16"}', r"arguments.n: is a scratch buffer"),
                                  # trial 119: "did you mean nn?" steered the condition to the misspelt key
                                  ('{nn: "n >= 1"}', r"arguments.nn: 'n >= 1' reads n, not nn: .* if the argument "
                                                     r"is n, name the key so")]:
        with pytest.raises(SpecError, match=said):
            specs.load(write_spec(tmp_path / "bad", sized + f"arguments: {arguments_block}\n", ref=ref))
    refused = specs.load(write_spec(tmp_path / "refused", sized + 'arguments: {n: "n > 1000"}\n', ref=ref))
    with pytest.raises(SpecError, match=r"arguments.n: inputs\(\) gives n=256 at N=256, which 'n > 1000' refuses: the "
                                        r"kernel would be verified at a value no call may pass"):
        arguments._arg_needs(refused, {"N": 256}, ("x", "y", "n"))
    # an edit of arguments: in the process is taken (it is left out of the spec hash, not the cache's key)
    wide = specs.load(write_spec(tmp_path / "refused", sized + 'arguments: {n: "n > 0"}\n', ref=ref))
    assert wide.spec_hash == refused.spec_hash
    assert arguments._arg_needs(wide, {"N": 256}, ("x", "y", "n"))["n"].allowed.source == "n > 0"
    mul1 = specs.load("mul1")  # its digit may be any of the base's, not only the draws
    assert arguments._arg_needs(mul1, mul1.resolve_problem({"N": 4096}), ("k",))["k"].allowed is not None


def test_an_integer_a_choice_of_the_problem_gives_names_that_choice(tmp_path: Path, monkeypatch):
    """Trial 109: c, the problem's C, was told to become a problem key, which it is."""
    text = SCALE_YAML.replace("problem: {N: 256}", "problem: {N: 256, C: {default: '4', choices: ['1', '2', '4']}}")
    body = "m = int(problem['C']); x = rng.random(n * m).astype(np.float32); y = np.zeros(n * m, np.float32)"
    spec = specs.load(write_spec(tmp_path, text.replace("args: [x, y]", "args: [x, y, n]"),
                                 ref=_SIZED_REF.replace("BODY", body)))
    monkeypatch.setattr(arguments, "_needs_cache", {})
    needs = arguments._arg_needs(spec, spec.resolve_problem({"C": "2"}), ("x", "y", "n"))
    assert (needs["n"].must_be, needs["n"].size_of) == (2, "C")


def test_an_integer_equal_to_a_choice_by_chance_is_not_that_choice(tmp_path: Path, monkeypatch):
    """Trial 111: a count of repeats of 3 was taken for V=3, and a call at V=3 refused a count
    of 5, "or load the kernel for V=5", which is no choice."""
    text = SCALE_YAML.replace("problem: {N: 256}", "problem: {N: 256, V: {default: '3', choices: ['1', '3']}}")
    spec = specs.load(write_spec(tmp_path, text.replace("args: [x, y]", "args: [x, y, n]"), ref=_SIZED_REF.replace(
        "BODY", "m = 3; x = rng.random(n).astype(np.float32); y = np.zeros(n, np.float32)")))
    monkeypatch.setattr(arguments, "_needs_cache", {})
    needs = arguments._arg_needs(spec, spec.resolve_problem({"V": "3"}), ("x", "y", "n"))
    assert needs["n"].must_be == 3 and needs["n"].size_of is None  # held as a count, not as V


def test_a_slow_inputs_runs_few_times_and_is_said(tmp_path: Path, monkeypatch):
    """Trial 104: an inputs() of 0.5 s made load_kernel take 5.5 s (10 runs) without a word."""
    text = SCALE_YAML.replace("args: [x, y]", "args: [x, y, n]")
    body = "import time; time.sleep(0.2); CALLS.append(type(rng).__name__); m = n; x = rng.random(m).astype(np.float32)"
    spec = specs.load(write_spec(tmp_path, text, ref="CALLS = []\n" + _SIZED_REF.replace("BODY", body)))
    monkeypatch.setattr(arguments, "_needs_cache", {})
    monkeypatch.setattr(arguments.hosttime, "NOTE_AFTER_S", 0.3)
    with pytest.warns(autotune.AutotuneWarning, match=r"scale: learning the sizes of its arguments for N=256 from .*"
                      r"ref\.py's inputs\(\) \(run at other seeds and sizes too\) has taken 0\.3 s so far; a faster "
                      r"inputs\(\) shortens it"):
        needs = arguments._arg_needs(spec, {"N": 256}, ("x", "y", "n"))
    assert (needs["n"].must_be, needs["n"].size_of) == (256, "N")
    # the stand-in, then for real at N=256 (its draws are small) and at one other size, which shows n is N
    assert spec.host_module().CALLS == ["_ShapeRng", "Generator", "Generator"]


def test_a_reference_the_stand_in_does_not_fit_gets_a_real_generator(tmp_path: Path, monkeypatch):
    ref = '''
import numpy as np

def inputs(problem, rng):
    assert isinstance(rng, np.random.Generator)
    n = problem["N"]
    return {"x": rng.uniform(-1, 1, n).astype(np.float32), "y": np.zeros(n, np.float64)}

def reference(problem, arrays):
    return {"y": 2.0 * arrays["x"]}
'''
    spec = specs.load(write_spec(tmp_path, SCALE_YAML, ref=ref))
    monkeypatch.setattr(arguments, "_needs_cache", {})
    needs = arguments._arg_needs(spec, {"N": 300}, ("x", "y"))
    assert (needs["x"].nbytes, needs["y"].nbytes, needs["y"].dtype) == (1200, 2400, np.float64)


@pytest.mark.parametrize("body, message", [
    ("    return None\n", "inputs() must return a dict of arrays by argument name, got None"),
    ("    raise RuntimeError('no data')\n", "scale_ref.py: inputs() raised "),
    ("    return {'x': np.zeros(4, np.float32)}\n", "args: y not returned by the reference module's inputs()"),
])
def test_a_reference_that_gives_no_sizes_is_a_spec_error(tmp_path: Path, monkeypatch, body, message):
    ref = f"import numpy as np\ndef inputs(problem, rng):\n{body}def reference(problem, arrays):\n    return {{}}\n"
    spec = specs.load(write_spec(tmp_path, SCALE_YAML, ref=ref))
    monkeypatch.setattr(arguments, "_needs_cache", {})
    with pytest.raises(autotune.AutotuneError, match=re.escape(message)):
        arguments._arg_needs(spec, {"N": 256}, ("x", "y"))


TWO_STEPS_CL = """
__kernel void twice(__global const float* x, __global float* t) { int i = get_global_id(0); t[i] = 2.0f * x[i]; }
__kernel void plus_one(__global const float* t, __global float* y) { int i = get_global_id(0); y[i] = t[i] + 1.0f; }
"""
TWO_STEPS_YAML = """
kernel: twosteps
template: scale.cl
reference: scale_ref.py
problem: {N: 262144}
parameters: {WG: [64]}
scratch: {t: "4 * N"}
outputs: [y]
launch:
  - {entry: twice, args: [x, t], global: [N], local: [WG]}
  - {entry: plus_one, args: [t, y], global: [N], local: [WG]}
metrics: {GB/s: "12 * N / seconds / 1e9"}
"""
TWO_STEPS_REF = """
import numpy as np

def inputs(problem, rng):
    n = problem["N"]
    return {"x": rng.uniform(-1, 1, n).astype(np.float32), "y": np.zeros(n, np.float32)}

def reference(problem, arrays):
    return {"y": (2.0 * arrays["x"].astype(np.float64) + 1.0).astype(np.float32)}
"""


@needs_opencl
def test_the_steps_of_a_kernel_run_in_order_on_an_out_of_order_queue(queue, tmp_path, monkeypatch):
    """On an out-of-order queue the second step waits for the first (it read the scratch buffer
    before the first had written it: wrong results, and no error); on an in-order queue the
    queue orders them, with no wait list."""
    path = write_spec(tmp_path, TWO_STEPS_YAML, template=TWO_STEPS_CL, ref=TWO_STEPS_REF, name="twosteps.yaml")
    enqueue, waits = cl.enqueue_nd_range_kernel, []

    def spy(queue, kernel, gsize, lsize, wait_for=None, **kw):
        event = enqueue(queue, kernel, gsize, lsize, wait_for=wait_for, **kw)
        waits.append((list(wait_for or []), event))
        return event

    monkeypatch.setattr(cl, "enqueue_nd_range_kernel", spy)
    props = cl.command_queue_properties
    for flags in (props.OUT_OF_ORDER_EXEC_MODE_ENABLE, 0):
        try:
            q = cl.CommandQueue(queue.context, properties=flags)
        except cl.Error:
            pytest.skip("this runtime has no out-of-order queues")
        k = load(str(path), q)
        x = np.random.default_rng(0).uniform(-1, 1, 262144).astype(np.float32)
        xb = cl.Buffer(q.context, cl.mem_flags.READ_ONLY | cl.mem_flags.COPY_HOST_PTR, hostbuf=x)
        yb = cl.Buffer(q.context, cl.mem_flags.READ_WRITE, x.nbytes)
        waits.clear()
        k(xb, yb).wait()
        y = np.empty_like(x)
        cl.enqueue_copy(q, y, yb, is_blocking=True)
        assert np.allclose(y, 2 * x + 1, atol=1e-6)
        first, second = waits
        assert second[0] == ([first[1]] if flags else []), "step 2 waits for step 1 only out of order"


@needs_opencl
def test_the_queues_device_is_known_by_its_selector_for_the_command_that_tunes_it(queue, ocl_device):
    assert device.of(queue.device).selector == ocl_device


@needs_opencl
def test_an_output_that_shares_memory_with_another_argument_is_refused(queue, enqueued):
    """The kernel would read what it already overwrote (a trial's reverse(a, a) gave wrong
    results): the same buffer, overlapping views or sub-buffers are refused; inputs may share
    (A·A), and disjoint views of one buffer are fine."""
    rev = load("reverse", queue, N=1024)
    data = cl_array.to_device(queue, np.zeros(4096, np.uint8))
    parent = buffer(queue, 4096)
    for src, dst in [(data, data), (data[:1024], data[512:1536]),
                     (parent.get_sub_region(0, 1024), parent.get_sub_region(896, 1024))]:
        with pytest.raises(ValueError, match="reverse: arguments src and dst share memory, and dst is written: "
                                             "pass dst a buffer of its own"):
            rev(src, dst)
    assert enqueued == []
    rev(data[:1024], data[1024:2048])
    rev(parent.get_sub_region(0, 1024), parent.get_sub_region(1024, 1024))
    mm = load("matmul", queue, M=64, N=64, K=64)
    a, c = cl_array.zeros(queue, 64 * 64, np.float32), cl_array.zeros(queue, 64 * 64, np.float32)
    mm(a, a, c)
    with pytest.raises(ValueError, match="arguments B and C share memory"):
        mm(a, c, c)
    assert len(enqueued) == 3


@needs_opencl
def test_buffers_over_one_host_array_share_its_memory(queue, enqueued):
    """Trial 90: two USE_HOST_PTR buffers over one numpy array passed the check, and reverse wrote
    over what it still had to read: a wrong result, no error."""
    rev = load("reverse", queue, N=1024)
    flags, host = cl.mem_flags.READ_WRITE | cl.mem_flags.USE_HOST_PTR, np.zeros(8192, np.uint8)
    with pytest.raises(ValueError, match="arguments src and dst share memory"):
        rev(cl.Buffer(queue.context, flags, hostbuf=host[:1024]), cl.Buffer(queue.context, flags, hostbuf=host[512:]))
    assert enqueued == []
    rev(cl.Buffer(queue.context, flags, hostbuf=host[:1024]), cl.Buffer(queue.context, flags, hostbuf=host[4096:]))
    assert len(enqueued) == 1
    # trial 94: sub-buffers lie where their parent's host memory and their offset say
    whole = cl.Buffer(queue.context, flags, hostbuf=host)
    rev(whole.get_sub_region(0, 1024), whole.get_sub_region(4096, 1024))
    assert len(enqueued) == 2
    with pytest.raises(ValueError, match="arguments src and dst share memory"):
        rev(whole.get_sub_region(4096, 1024), cl.Buffer(queue.context, flags, hostbuf=host[4096 + 512:]))


@needs_opencl
def test_a_buffer_made_for_the_other_direction_is_refused(queue, enqueued):
    """Trial 90: a READ_ONLY output and a WRITE_ONLY input were accepted; OpenCL leaves them undefined."""
    rev = load("reverse", queue, N=1024)

    def made(flag: int) -> cl.Buffer:
        return cl.Buffer(queue.context, flag, 1024)

    with pytest.raises(TypeError, match=r"argument dst: its buffer was made READ_ONLY, and the kernel writes it; "
                                        r"make it with mem_flags.READ_WRITE$"):
        rev(made(cl.mem_flags.READ_ONLY), made(cl.mem_flags.READ_ONLY))
    with pytest.raises(TypeError, match=r"argument src: its buffer was made WRITE_ONLY, and the kernel reads it"):
        rev(made(cl.mem_flags.WRITE_ONLY), made(cl.mem_flags.WRITE_ONLY))
    assert enqueued == []
    rev(made(cl.mem_flags.READ_ONLY), made(cl.mem_flags.WRITE_ONLY))
    assert len(enqueued) == 1


@needs_opencl
def test_arrays_and_buffers_of_a_memory_pool_are_taken_and_computed_right(queue):
    """Trial 90: refused as "an array without a buffer (PooledBuffer)", although memory pools are
    pyopencl's own allocator."""
    import pyopencl.tools as cl_tools

    pool = cl_tools.MemoryPool(cl_tools.ImmediateAllocator(queue))
    rev = load("reverse", queue, N=1000)
    at = queue.device.mem_base_addr_align // 8  # where a view may start (512 bytes on NVIDIA's)
    x = (np.arange(4 * at + 4096) % 251).astype(np.uint8)
    src = cl_array.to_device(queue, x, allocator=pool)
    dst = cl_array.zeros(queue, 2 * at + 1000, np.uint8, allocator=pool)
    rev(src[at:at + 1000], dst[2 * at:])  # views of pooled arrays, at an offset
    assert np.array_equal(dst.get()[2 * at:], x[at:at + 1000][::-1])
    a, b = pool.allocate(1000), pool.allocate(1000)
    cl.enqueue_copy(queue, a, x[:1000])
    rev(a, b)
    got = np.empty(1000, np.uint8)
    cl.enqueue_copy(queue, got, b)
    assert np.array_equal(got, x[:1000][::-1])
    with pytest.raises(ValueError, match="arguments src and dst share memory"):
        rev(a, a)  # two Buffers made over one pooled buffer are one memory
    with pytest.raises(ValueError, match="arguments src and dst share memory"):
        rev(src[:1000], src[:1000])


def test_a_float_scalar_too_large_for_its_type_is_refused_not_made_inf():
    # trial 11: 10**40 for a float argument ran as inf, said only by numpy's overflow warning
    from autotune.arguments import _scalar

    with pytest.raises(ValueError, match=r"argument a: 1e\+40 does not fit its type float32 \(it would be inf\)"):
        _scalar("argument a", 1e40, np.dtype(np.float32))
    with pytest.raises(ValueError, match="does not fit its type float32"):
        _scalar("argument a", 10 ** 40, np.dtype(np.float32))
    assert _scalar("argument a", float("inf"), np.dtype(np.float32)) == np.inf  # asked for
    assert _scalar("argument a", 2.5, np.dtype(np.float32)) == np.float32(2.5)
    assert _scalar("argument a", np.float64(2.5), np.dtype(np.float32)) == np.float32(2.5)
    # trial 27: a complex number raised float()'s bare TypeError, naming neither kernel nor argument
    with pytest.raises(TypeError, match=r"^argument a must be a number \(float32\), got complex$"):
        _scalar("argument a", 1j, np.dtype(np.float32))


SIZE_ARG_REF = '''
import numpy as np

def inputs(problem, rng):
    n = problem["N"]
    return {"x": rng.uniform(-1, 1, n).astype(np.float32), "y": np.zeros(n, np.float32),
            "n": np.int32(n), "reps": np.int32(256), "seed": np.int32(rng.integers(1, 9)),
            "total": np.int32(3 * n)}

def reference(problem, arrays):
    return {"y": 2.0 * arrays["x"]}
'''


@needs_opencl
def test_a_number_that_inputs_gives_as_a_problem_size_must_be_the_loaded_size(tmp_path: Path, queue):
    """Trial 22: a kernel loaded for COLS=4096 and called with cols=8192 crashed the process
    (and with 2048 gave wrong numbers without an error): only the number's type was checked."""
    spec = specs.load(write_spec(tmp_path, SCALE_YAML.replace("args: [x, y]", "args: [x, y, n, reps, seed]"),
                                 ref=SIZE_ARG_REF))
    needs = arguments._input_needs(spec, {"N": 256})
    # reps is 256 too, and stays 256 at N = 512: as the length of x it may size x, so it is held
    # (trial 107: one that sized a dimension of every array went unchecked); the drawn seed is data
    assert {a: (needs[a].size_of, needs[a].must_be) for a in ("n", "reps", "seed")} == {
        "n": ("N", 256), "reps": (None, 256), "seed": (None, None)}
    args = arguments.Arguments(spec, {"N": 256}, ("x", "y", "n", "reps", "seed"), queue.context, queue.device)
    x, y = buffer(queue, 4 * 512), buffer(queue, 4 * 512)
    for wrong in (512, 128):
        with pytest.raises(ValueError, match=rf"argument n is {wrong}, but the kernel was loaded for N=256, which "
                           r"the reference module's inputs\(\) passes as n: pass 256, or load the kernel for "
                           rf"N={wrong}$"):
            args.bind((x, y, wrong, 256, 5), {})
    with pytest.raises(ValueError, match=r"argument n is 0, .* passes as n: pass 256$"):  # N=0 is no size
        args.bind((x, y, 0, 256, 5), {})
    assert args.bind((x, y, 256, 256, 5), {})["n"] == 256
    with pytest.raises(ValueError, match=r"argument reps is 3, but the kernel was loaded for N=256, for which the "
                       r"reference module's inputs\(\) passes reps=256, and it stays so at other sizes: pass 256; "
                       r"where the application chooses it, make it a problem key of the spec"):
        args.bind((x, y, 256, 3, 5), {})
    # trial 27: a number computed from the sizes (W * H) was not checked, and the kernel wrote past y
    assert (needs["total"].must_be, needs["total"].size_of) == (768, None)
    with_total = arguments.Arguments(spec, {"N": 256}, ("x", "y", "n", "total"), queue.context, queue.device)
    with pytest.raises(ValueError, match=r"argument total is 1536, but the kernel was loaded for N=256, for which the "
                       r"reference module's inputs\(\) passes total=768: pass 768, or load the kernel for the problem "
                       r"that gives 1536$"):
        with_total.bind((x, y, 256, 1536), {})
    assert with_total.bind((x, y, 256, 768), {})["total"] == 768


@needs_opencl
def test_arguments_too_big_for_the_address_space_are_refused_before_any_warning(queue):
    """Trial 29: load_kernel warned that it was "using the default configuration" and told how
    to tune the size, then raised because the size's arguments cannot exist on this machine."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(ProblemError, match="more memory than this machine can give"):
            autotune.load_kernel("matmul", queue, M=2**30, N=2**30, K=2**30)
    assert not [w for w in caught if issubclass(w.category, autotune.AutotuneWarning)]


def test_the_documented_types_are_importable_from_the_package():
    """Trial 29: the README says a call returns a ``Run``; ``autotune.Run`` raised AttributeError."""
    for name in autotune.__all__:
        assert getattr(autotune, name) is not None
    assert autotune.Run is loader.Run and autotune.TunedKernel is loader.TunedKernel
    assert issubclass(autotune.OptionError, autotune.AutotuneError)  # trial 41: the README names it


@needs_opencl
def test_a_queue_on_a_pocl_whose_launches_abort_is_refused_before_anything_is_built(queue, monkeypatch) -> None:
    """PoCL 3.0 on an AMD Zen 4 builds every kernel and aborts the application at the first
    launch of 16-wide vector code (see health.mismatched_target): load_kernel refuses its queue
    up front, with the build check's reason and the devices that work."""
    from autotune import health
    from autotune.errors import DeviceError

    reason = "PoCL targets this CPU as znver3 (without AVX-512; ...)"
    monkeypatch.setattr(health, "mismatched_target", lambda version, flags: reason)
    monkeypatch.setattr(device, "build_checks", lambda found, recheck=False: {
        d.selector: health.BuildCheck(False, reason) for d, _ in found})
    monkeypatch.setattr(loader, "choose", lambda *a, **k: pytest.fail("nothing is chosen, built or timed"))
    with pytest.raises(DeviceError, match=re.escape(f"cannot run OpenCL kernels: {reason}; ")):
        autotune.load_kernel("mul1", queue, N=64)


TWO_STEP_CL = """
__kernel void once(__global const float* x, __global float* y) { int i = get_global_id(0); y[i] = 2.0f * x[i]; }
__kernel void zero(__global float* y) { y[get_global_id(0)] = 0.0f; }
__kernel void add2(__global const float* x, __global float* y) { int i = get_global_id(0); y[i] += 2.0f * x[i]; }
"""


@needs_opencl
@pytest.mark.parametrize("variant", [0, 1])
def test_a_positional_call_means_the_same_whichever_variant_was_loaded(tmp_path, queue, monkeypatch, variant):
    """Trial 50: a variant whose first step zeroes the output took (y, x), the other (x, y), so
    a call written for one zeroed the caller's input under the other."""
    monkeypatch.setenv("AUTOTUNE_MEASURE_UNTUNED", "0")  # the default configuration, as loaded
    text = SCALE_YAML.replace("  MODE: [0]\n", "  TWO: [0, 1]\n").replace(
        'launch:\n  entry: scale\n  global: ["N // WPT"]\n  local: [WG]\n',
        'launch:\n  - {entry: once, when: "TWO == 0", args: [x, y], global: [N]}\n'
        '  - {entry: zero, when: "TWO == 1", args: [y], global: [N]}\n'
        '  - {entry: add2, when: "TWO == 1", args: [x, y], global: [N]}\n'
    ).replace("args: [x, y]\n", "").replace("baseline: {WPT: 1, WG: 16}", f"default: {{TWO: {variant}}}")
    kern = load(str(write_spec(tmp_path, text, template=TWO_STEP_CL)), queue, N=256)
    assert kern.params["TWO"] == variant and kern.arg_names == ("x", "y")
    x = cl_array.to_device(queue, np.arange(256, dtype=np.float32))
    y = cl_array.zeros(queue, 256, np.float32)
    kern(x, y).wait()
    assert (y.get() == 2 * np.arange(256)).all() and (x.get() == np.arange(256)).all()


@needs_opencl
def test_a_loaded_kernel_says_where_its_configuration_came_from(queue, monkeypatch):
    """Trial 55: an application could learn whether a kernel was tuned, and how fast, only from
    undocumented attributes; the entry and the profile file it is in are part of the API now."""
    from autotune import settings

    picked = load("reverse", queue, N=3000)  # no entry: timed at first use, saved
    assert picked.origin == "measured" and picked.entry is not None and picked.entry.picked
    assert picked.profile == profiles.path_for(device.of(queue.device).slug, settings.profiles_dir())
    assert picked.entry.time_ms > 0 and picked.problem == {"N": 3000}
    monkeypatch.setenv("AUTOTUNE_MEASURE_UNTUNED", "0")
    untuned = load("reverse", queue, N=3001)
    assert untuned.origin in ("nearest", "default")
    assert (untuned.entry is None) == (untuned.profile is None) == (untuned.origin == "default")


@needs_opencl
def test_a_kernel_of_ones_own_named_without_its_path_is_answered_with_the_spec_file(tmp_path, queue):
    """Trial 63: `autotune run stencil1d` named the spec file its entries were tuned with, and
    load_kernel("stencil1d", queue) only said "unknown kernel"."""
    from autotune import record, settings
    from autotune.errors import SpecError
    from autotune.result import Measurement, Status

    path = write_spec(tmp_path, SCALE_YAML)
    spec = specs.load(path)
    m = Measurement(Status.OK, "", (1.0,), params=spec.baseline_config)
    profiles.save(record.entry(spec, spec.default_problem(), m, trials=1), "scale", device.of(queue.device)
                  .profile_header(), profiles.path_for(device.of(queue.device).slug, settings.profiles_dir()))
    with pytest.raises(SpecError, match=rf"unknown kernel 'scale'.*; the tuned entries of scale here were tuned "
                                        rf"with {re.escape(str(path))}: give that path"):
        autotune.load_kernel("scale", queue)
    assert load(str(path), queue).origin == "exact"


@needs_opencl
def test_a_tuned_kernel_refuses_pickling_with_the_way_out_and_copies_shallowly(mm):
    """Trial 75: pickling gave pyopencl's bare "cannot pickle 'CommandQueue' object"."""
    import copy
    import pickle

    for refuse in (pickle.dumps, copy.deepcopy):
        with pytest.raises(TypeError, match=r"cannot be pickled or deep-copied: another process calls "
                                            r"autotune.load_kernel itself, and copy.copy gives a second handle"):
            refuse(mm)
    twin = copy.copy(mm)
    assert twin.params == mm.params and twin.queue is mm.queue


def test_format_report_of_something_else_is_a_type_error_that_names_what_it_takes():
    """Trial 75: format_report(None) was an AttributeError from inside."""
    for wrong in (None, "report"):
        with pytest.raises(TypeError, match=r"format_report takes the TuneReport tune\(\) returns"):
            autotune.format_report(wrong)
