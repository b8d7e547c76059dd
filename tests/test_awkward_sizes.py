"""Every built-in kernel at awkward sizes: it runs, or it is refused up front with one line.

Prime N (reverse, mul1, mathpath) and odd image and output sizes (correlate) run through their
edge code: reverse's tail step, the bounds checks of mul1 and mathpath, correlate's guards.
Past 2^31 the templates switch their indexes from int to long; the tests force that path at
small sizes (``-DINDEX=long``, ``-DPLANE=long``) and check where the switch happens. What no
configuration can compute is refused when the problem is resolved: mathpath's P past 127 (x^P
overflows a float) and correlate's images of 2^31 pixels or more (int pixel indexes).
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from autotune import cli, profiles
from autotune import spec as specs
from autotune.errors import ProblemError, SpecError
from autotune.measure import Bench, make_workload
from autotune.resources import data_dir
from autotune.result import Status
from autotune.space import check
from autotune.spec import KernelSpec
from autotune.yamlload import read_yaml
from conftest import FAKE, FAST, every_runtime, needs_opencl, verified

#: What this module checks is the OpenCL runtime's own: its tests run on every device that builds.
pytestmark = every_runtime

ODD_IMAGE = {"W": 37, "H": 29, "OW": 19, "OH": 11}  # nothing divides anything

#: Awkward problems of each kernel.
AWKWARD: dict[str, list[dict[str, int]]] = {
    "reverse": [{"N": 7}, {"N": 1000003}],
    "mul1": [{"N": 1}, {"N": 7}, {"N": 1000003}],
    "mathpath": [{"N": 1}, {"N": 7}, {"N": 1000003}],
    "correlate": [ODD_IMAGE],
}

#: The 64-bit index path of each kernel that has one (its macro), at awkward sizes, in
#: configurations that take its every branch: mul1's variants (v3 with int4 blocks and
#: without), mathpath's ragged chunks, correlate's planes of partial sums.
WIDE: dict[str, tuple[str, list[dict[str, int]], list[dict[str, Any]]]] = {
    "mul1": ("INDEX", [{"N": 7}, {"N": 1000003}],
             [{"VARIANT": "v1", "WG": 32}, {"VARIANT": "v2", "WG": 32}, {"VARIANT": "v3", "BLOCK_SIZE": 4, "WG": 32},
              {"VARIANT": "v3", "BLOCK_SIZE": 2, "WG": 64}, {"VARIANT": "v4", "WG": 64}]),
    "mathpath": ("INDEX", [{"N": 7}, {"N": 1000003}],
                 [{"FORMULA": "pown", "WG": 32, "IPT": 4}, {"FORMULA": "mul", "WG": 64, "IPT": 1}]),
    "correlate": ("PLANE", [ODD_IMAGE],
                  [{"VARIANT": "swept", "WGX": 4, "OPX": 2, "KSG": 4},
                   {"VARIANT": "swept", "WGX": 8, "WGY": 2, "OPX": 1, "OPY": 2, "KSL": 2, "KSG": 8}]),
}


def shipped(spec: KernelSpec) -> list[dict[str, Any]]:
    """The configurations of ``spec``'s kernel tuned on the H200 (the profile shipped here), the
    first only for correlate: its two differ in KSG and flags alone, and each build takes seconds."""
    doc = profiles.read(data_dir("profiles") / "nvidia-corporation-h200.yaml")
    configs = [spec.from_stored(e.params, e.build_flags) for e in profiles.entries(doc, spec.name)]
    assert configs and None not in configs, f"{spec.name}: the shipped entries no longer fit the space"
    return [c for c in configs if c is not None][: 1 if spec.name == "correlate" else None]


def indexed(spec: KernelSpec, macro: str, index_type: str) -> KernelSpec:
    """``spec`` with one more parameter, ``macro`` = ``index_type``: the index type its template
    would otherwise choose by size (long: the path past 2^31, at any size)."""
    raw = read_yaml(spec.path, SpecError)
    raw["parameters"] = {**raw["parameters"], macro: [index_type]}
    return specs.parse(raw, spec.path)


def bench(device: tuple[Any, Any], spec: KernelSpec, sizes: dict[str, int]) -> Bench:
    info, ctx = device
    problem = spec.resolve_problem(sizes)
    return Bench(spec, problem, ctx, make_workload(spec, problem, seed=1), info.facts(), FAST)


def all_verify(b: Bench, configs: list[dict[str, Any]]) -> None:
    """Every configuration verifies (or its work-group is refused, which is legal); one at least."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # compiler chatter
        ran = sum(verified(b.measure(c), f"{b.spec.name} {c} at {b.problem}") for c in configs)
    assert ran >= 1, f"{b.spec.name} at {b.problem}: the device refused every work-group"


def index_width(ctx: Any, spec: KernelSpec, params: dict[str, Any], problem: dict[str, Any],
                macro: str) -> int:
    """sizeof(macro) as the template defines it for this build: the device's own preprocessor
    decides, so this builds at any size and runs one work-item on a 4-byte buffer."""
    import pyopencl as cl

    from autotune.launch import build_quietly

    probe = f"\n__kernel void index_width(__global int* out) {{ out[0] = sizeof({macro}); }}\n"
    program = build_quietly(ctx, spec.source + probe, spec.build_options(params, problem))
    queue = cl.CommandQueue(ctx)
    out = cl.Buffer(ctx, cl.mem_flags.WRITE_ONLY, 4)
    program.index_width(queue, (1,), None, out)
    got = np.zeros(1, np.int32)
    cl.enqueue_copy(queue, got, out)
    return int(got[0])


# --------------------------------------------------------------------------- on a device


@needs_opencl
@pytest.mark.parametrize("kernel, sizes", [(k, sizes) for k, table in AWKWARD.items() for sizes in table])
def test_default_and_shipped_configurations_run(device: tuple[Any, Any], kernel: str,
                                                sizes: dict[str, int]) -> None:
    """What load_kernel gives for an untuned problem: the default, or a tuned neighbour's."""
    spec = specs.load(kernel)
    all_verify(bench(device, spec, sizes), [spec.default_config, *shipped(spec)])


@needs_opencl
@pytest.mark.parametrize("kernel, sizes", [(k, sizes) for k, (_, table, _) in WIDE.items() for sizes in table])
def test_wide_index_path_verifies(device: tuple[Any, Any], kernel: str, sizes: dict[str, int]) -> None:
    macro, _, partials = WIDE[kernel]
    spec = indexed(specs.load(kernel), macro, "long")
    all_verify(bench(device, spec, sizes), [spec.complete(p) for p in partials])


@needs_opencl
@pytest.mark.parametrize("kernel", ["mul1", "mathpath"])
def test_every_index_has_the_chosen_type(device: tuple[Any, Any], kernel: str) -> None:
    """With 16-bit indexes (which wrap inside the buffers) every configuration is wrong past
    2^16 elements: no kernel indexes with a type of its own, so the long path covers them all."""
    macro, _, partials = WIDE[kernel]
    spec = indexed(specs.load(kernel), macro, "ushort")
    b = bench(device, spec, {"N": 70001})  # prime, past 2^16
    for p in partials:
        m = b.measure(spec.complete(p))
        assert m.status is Status.WRONG_RESULT, (p, m.status.value, m.message)


#: (kernel, macro, configuration, problem, bytes of the index): the last int size, the first long.
SWITCH = [
    ("mathpath", "INDEX", {"WG": 512, "IPT": 16}, {"N": 2**31 - 8192}, 4),
    ("mathpath", "INDEX", {"WG": 512, "IPT": 16}, {"N": 2**31 - 8191}, 8),
    ("mathpath", "INDEX", {"WG": 32, "IPT": 1}, {"N": 2**31 - 32}, 4),
    ("mul1", "INDEX", {"VARIANT": "v3", "BLOCK_SIZE": 64, "WG": 512}, {"N": 2**31 - 32770}, 4),
    ("mul1", "INDEX", {"VARIANT": "v3", "BLOCK_SIZE": 64, "WG": 512}, {"N": 2**31 - 32769}, 8),
    ("mul1", "INDEX", {"VARIANT": "v1", "WG": 32}, {"N": 2**31 - 34}, 4),
    ("correlate", "PLANE", {"VARIANT": "swept", "WGX": 4, "OPX": 1, "KSG": 128},
     {"W": 4096, "H": 4096, "OW": 4096, "OH": 4096}, 4),
    ("correlate", "PLANE", {"VARIANT": "swept", "WGX": 4, "OPX": 1, "KSG": 128},
     {"W": 4097, "H": 4096, "OW": 4097, "OH": 4096}, 8),
]


@needs_opencl
@pytest.mark.parametrize("kernel, macro, partial, sizes, width", SWITCH)
def test_indexes_widen_exactly_past_int(device: tuple[Any, Any], kernel: str, macro: str,
                                        partial: dict[str, Any], sizes: dict[str, int], width: int) -> None:
    spec = specs.load(kernel)
    assert index_width(device[1], spec, spec.complete(partial), spec.resolve_problem(sizes), macro) == width


# --------------------------------------------------------------------------- refused up front


def test_mathpath_takes_every_n() -> None:
    spec = specs.load("mathpath")
    for n in (1, 7, 1000003, 2**31 - 1, 2**31 + 1, 2**40):
        assert check(spec, spec.default_config, spec.resolve_problem({"N": n}), FAKE.facts()) is None


REFUSED = [
    ("mathpath", "P=128", "mathpath needs P <= 127 (P=128)"),
    ("correlate", "W=65536,H=32768,OW=1,OH=1", "correlate needs W * H < 2 ** 31 (H=32768, W=65536)"),
    ("correlate", "W=9,H=7,OW=10,OH=7", "correlate needs OW <= W and OH <= H (H=7, OH=7, OW=10, W=9)"),
]


@pytest.fixture
def no_build(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any OpenCL program built in this process fails the test."""
    import pyopencl as cl

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("a refused problem built a program")

    monkeypatch.setattr(cl, "Program", refuse)


@pytest.mark.parametrize("command", ["run", "bench"])
@pytest.mark.parametrize("kernel, size, message", REFUSED)
def test_cli_refuses_in_one_line(capsys: pytest.CaptureFixture[str], home: Path, no_build: None,
                                 command: str, kernel: str, size: str, message: str) -> None:
    assert cli.main([command, kernel, "-s", size]) == 1
    out, err = capsys.readouterr()
    assert err == f"autotune: error: {message}\n" and out == ""
    assert not home.exists() or not any(home.iterdir()), "a refused problem left a study or profile"


@needs_opencl
@pytest.mark.parametrize("kernel, size, message", REFUSED)
def test_load_kernel_refuses(device: tuple[Any, Any], no_build: None, kernel: str, size: str,
                             message: str) -> None:
    import pyopencl as cl

    import autotune

    _, ctx = device
    sizes = {k: int(v) for k, v in (kv.split("=") for kv in size.split(","))}
    with pytest.raises(ProblemError) as refused:
        autotune.load_kernel(kernel, cl.CommandQueue(ctx), **sizes)
    assert str(refused.value) == message


AXPY_CL = """
__kernel void scale(__global const float* x, __global float* y) {
    const int i = get_global_id(0) * WPT;
    for (int k = 0; k < WPT; ++k) y[i + k] += 2.0f * x[i + k];
}
"""
AXPY_REF = """
import numpy as np

def inputs(problem, rng):
    n = problem["N"]
    return {"x": rng.uniform(-1, 1, n).astype(np.float32), "y": rng.uniform(-1, 1, n).astype(np.float32)}

def reference(problem, arrays):
    return {"y": arrays["y"] + 2 * arrays["x"]}
"""


@needs_opencl
def test_a_kernel_that_reads_its_output_is_told_to_declare_it_inplace(device, tmp_path):
    from conftest import SCALE_YAML, write_spec

    plain = specs.load(write_spec(tmp_path / "plain", SCALE_YAML, template=AXPY_CL, ref=AXPY_REF))
    m = bench(device, plain, {"N": 256}).measure({"WPT": 1, "WG": 16, "MODE": 0, "mad": False})
    assert m.status is Status.WRONG_RESULT and "not finite" in m.message
    assert "declare `inplace: [y]` in the spec" in m.message, m.message
    # NaN read from the poisoned y is written back: each element is written, though it holds the poison
    assert "no element was written" not in m.message and "check that 'args' lists" in m.message, m.message
    declared = specs.load(write_spec(tmp_path / "inplace", SCALE_YAML + "inplace: [y]\n", template=AXPY_CL,
                                     ref=AXPY_REF))
    assert verified(bench(device, declared, {"N": 256}).measure({"WPT": 1, "WG": 16, "MODE": 0, "mad": False}),
                    "y += 2x, inplace")

