"""Inputs of the wrong width for the kernel's declared types (autotune.signatures; no device)."""

from __future__ import annotations

import re
import subprocess
import sys
import warnings
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from test_readme import readme_example

from autotune import spec as specs
from autotune.errors import AutotuneWarning, SpecError
from autotune.measure import make_workload
from autotune.signatures import check_inputs, check_launch, check_outputs, declared
from autotune.tuner import TuneOptions, tune
from conftest import REF_PY, SCALE_YAML, TEMPLATE_CL, write_spec

SOURCE = """
// a comment with __kernel void fake(double* no)
#if VARIANT == 1
__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void k(__global const float* restrict x, __global int *n, const unsigned m) {}
#else
kernel void k(global const float4* x, __global int* n, uint m) {}
#endif
__kernel void bytes(__global const uchar* src, __global T* dst) {}
"""


def test_arguments_are_read_through_qualifiers_attributes_and_comments():
    kernels = declared(SOURCE)
    assert set(kernels) == {"k", "bytes"}
    assert kernels["k"] == (("x", "float4", True), ("n", "int", True), ("m", "uint", False))
    assert kernels["bytes"] == (("src", "uchar", True), ("dst", "T", True))


def _check(numbers: frozenset[str] = frozenset(), **inputs):
    """check_inputs for a spec whose template is SOURCE, launching k and then bytes (a stand-in
    with the KernelSpec attributes it reads)."""
    steps = [SimpleNamespace(entry="k", args=("x", "n", "m")), SimpleNamespace(entry="bytes", args=("src", "dst"))]
    spec = SimpleNamespace(path="k.yaml", template=Path("k.cl"), source=SOURCE, launch=steps, scratch=())
    check_inputs(spec, inputs, numbers)  # type: ignore[arg-type]


def _launch(*steps: tuple[str, tuple[str, ...]]) -> None:
    """check_launch for a spec whose template is SOURCE, launching these (entry, args) steps."""
    spec = SimpleNamespace(path="k.yaml", template=Path("k.cl"), source=SOURCE + MACRO_ARGS, parameters=(),
                           problem=(), launch=[SimpleNamespace(entry=e, args=a) for e, a in steps])
    check_launch(spec)  # type: ignore[arg-type]


MACRO_ARGS = ("__kernel void m(ARGUMENTS) {}\n__kernel void s(__global struct pair* p, int n) {}\n"
              "__kernel void h(__global const half* x, local half *buf, int n) {}\n")


def test_a_launch_step_naming_no_kernel_or_the_wrong_number_of_arguments_is_refused():
    """Both failed every configuration they ran in, the second with a traceback from set_args."""
    with pytest.raises(SpecError, match=r"launch: entry 'kk' is not a kernel of k.cl \(it defines bytes, h, k, m, s\)"):
        _launch(("kk", ("x", "n", "m")))
    with pytest.raises(SpecError, match=r"kernel k in k.cl takes 3 arguments, but args lists 2 \(x, n\); list one"):
        _launch(("k", ("x", "n")))
    _launch(("k", ("x", "n", "m")), ("bytes", ("src", "dst")))
    _launch(("m", ("a", "b", "c")), ("s", ("p",)))  # parameters it cannot read are not counted


def test_a_kernel_argument_named_as_a_number_autotune_passes_is_refused_before_any_build(tmp_path):
    """Trial 63: `int n` beside the problem key n (-Dn=65536) failed four builds before the
    explanation came."""
    from conftest import TEMPLATE_CL
    for name, what in (("N", "problem key"), ("WPT", "parameter")):
        template = TEMPLATE_CL.replace("__global float* y)", f"__global float* y, int {name})")
        spec = specs.load(write_spec(tmp_path / name, SCALE_YAML.replace("args: [x, y]", f"args: [x, y, {name}]"),
                                     template=template))
        with pytest.raises(SpecError, match=rf"kernel scale in scale.cl has an argument named {name}, the {what} "
                           rf"autotune passes to the compiler as -D{name}=<its value>, so the argument's name becomes"):
            check_launch(spec)
    check_launch(specs.load(write_spec(tmp_path / "ok", SCALE_YAML)))
    # trial 65: an argument the template #undefs first, and a kernel under #if 0, are not refused
    undone = TEMPLATE_CL.replace("__global float* y)", "__global float* y, int N)").replace(
        "__kernel void scale", "#undef N\n__kernel void scale")
    check_launch(specs.load(write_spec(tmp_path / "undef", SCALE_YAML.replace("args: [x, y]", "args: [x, y, N]"),
                                       template=undone)))
    unused = "#if 0\n#if WPT\n#endif\n__kernel void old(__global float* y, int N) {}\n#endif\n" + TEMPLATE_CL
    check_launch(specs.load(write_spec(tmp_path / "if0", SCALE_YAML, template=unused)))
    with pytest.raises(SpecError, match="kernel old in scale.cl has an argument named N"):
        check_launch(specs.load(write_spec(tmp_path / "else", SCALE_YAML, template=unused.replace(
            "#endif\n__kernel void old", "#endif\n#else\n__kernel void old"))))


def test_a_local_memory_pointer_argument_is_refused_with_the_way_to_declare_it():
    """Trial 27: a scratch buffer bound to `__local half* buf` failed every configuration with
    pyopencl's INVALID_ARG_VALUE traceback."""
    with pytest.raises(SpecError, match=r"^k.yaml: launch: kernel h takes buf as a local-memory pointer \(local half "
                                        r"\*buf\), bound to tmp; .* declare the array inside the kernel instead"):
        _launch(("h", ("x", "tmp", "n")))


def test_a_local_memory_pointer_nothing_gives_is_named_as_one_before_the_inputs_are_checked(tmp_path):
    """Trial 113: `__local float* sh` in args was first told to come from inputs() or scratch,
    and only once declared as scratch, to be declared inside the kernel."""
    from autotune.measure import compute_workload

    template = TEMPLATE_CL.replace("__global float* y)", "__global float* y, __local float* sh)")
    spec = specs.load(write_spec(tmp_path, SCALE_YAML.replace("args: [x, y]", "args: [x, y, sh]"), template=template))
    with pytest.raises(SpecError, match=r"takes sh as a local-memory pointer .* declare the array inside the kernel"):
        compute_workload(spec, spec.resolve_problem({}))


def test_an_output_every_kernel_takes_as_const_is_refused():
    """Trial 12: an input listed in outputs was filled with NaN, and every trial failed naming
    the real output as unwritten."""
    def outputs(*names: str, steps: tuple[tuple[str, tuple[str, ...]], ...] = (("k", ("x", "n", "m")),)) -> None:
        spec = SimpleNamespace(path="k.yaml", template=Path("k.cl"), source=SOURCE, outputs=names,
                               launch=[SimpleNamespace(entry=e, args=a) for e, a in steps])
        check_outputs(spec)  # type: ignore[arg-type]

    with pytest.raises(SpecError, match=r"outputs: x is read-only in kernel k \(__global const float\* restrict x\)"):
        outputs("n", "x")
    outputs("n")
    outputs("x", steps=(("k", ("x", "n", "m")), ("bytes", ("src", "x"))))  # another step writes it
    outputs("dst", steps=(("bytes", ("src", "dst")),))


def test_a_number_where_the_kernel_takes_a_buffer_or_the_reverse_is_refused():
    with pytest.raises(SpecError, match=r"kernel k in k.cl takes argument 3 \(m\) as a number, but args gives it "
                                        r"m, an array of inputs\(\) or a scratch buffer; list the arguments"):
        _check(x=np.zeros(4, np.float32), n=np.zeros(4, np.int32), m=np.zeros(4, np.int32))
    with pytest.raises(SpecError, match=r"takes argument 2 \(n\) as a buffer, but args gives it n, a number"):
        _check(frozenset({"n"}), x=np.zeros(4, np.float32))  # n: an integer problem key, not an input


def test_a_vector_taken_by_value_is_named_as_one_with_the_way_to_pass_it():
    """Trial 38: `float4 s` by value was "a number"; the arguments' order, which was right, was blamed."""
    spec = SimpleNamespace(path="v.yaml", template=Path("v.cl"), scratch=(),
                           source="__kernel void v(__global const float4* a, float4 s) {}",
                           launch=[SimpleNamespace(entry="v", args=("a", "s"))])
    with pytest.raises(SpecError, match=r"takes argument 2 \(s\) by value as a float4, a vector, which autotune "
                                        r"cannot pass .*; declare it `__constant float4\* s` and read s\[0\]"):
        check_inputs(spec, {"a": np.zeros(16, np.float32), "s": np.zeros(4, np.float32)},  # type: ignore[arg-type]
                     frozenset())
    # trial 40: a number for it reached clSetKernelArg (INVALID_ARG_SIZE, a traceback), and a
    # macro type given an array blamed the order again
    with pytest.raises(SpecError, match=r"by value as a float4, a vector, .*\(inputs\(\) gives s a number\)"):
        check_inputs(spec, {"a": np.zeros(16, np.float32), "s": np.float32(2.5)}, frozenset())  # type: ignore[arg-type]
    macro = SimpleNamespace(**{**vars(spec), "source": "#define VEC float4\n__kernel void v(__global const float4* a, "
                                                       "const VEC s) {}"})
    with pytest.raises(SpecError, match=r"by value as a VEC, a type autotune does not know \(a macro or a typedef\?\)"):
        check_inputs(macro, {"a": np.zeros(16, np.float32), "s": np.zeros(4, np.float32)},  # type: ignore[arg-type]
                     frozenset())
    check_inputs(macro, {"a": np.zeros(16, np.float32), "s": np.float32(2.5)}, frozenset())  # type: ignore[arg-type]


def test_numpys_default_widths_for_a_float_or_int_argument_are_refused():
    with pytest.raises(SpecError, match=r"kernel k in k.cl takes x as float\*, but inputs\(\) gives float64 "
                                        r"elements .*return x.astype\(np.float32\)"):
        _check(x=np.zeros(4), n=np.zeros(4, np.int32))
    with pytest.raises(SpecError, match=r"takes n as int\*, but inputs\(\) gives int64"):
        _check(x=np.zeros(4, np.float32), n=np.zeros(4, np.int64))
    # trial 45: every configuration then failed as "x: read past its end"
    with pytest.raises(SpecError, match=r"takes x as float\*, but inputs\(\) gives bool elements \(1 bytes each"):
        _check(x=np.zeros(4, bool), n=np.zeros(4, np.int32))


def test_a_list_for_a_buffer_argument_is_refused_naming_the_array_to_return():
    with pytest.raises(SpecError, match=r"takes n as a buffer, but inputs\(\) gives a list; return a numpy "
                                        r"array, e.g. np.asarray\(n, np.int32\)"):
        _check(x=np.zeros(4, np.float32), n=[0, 0, 0, 0])
    with pytest.raises(SpecError, match=r"takes dst as a buffer, but inputs\(\) gives a float"):
        _check(dst=1.5)  # a macro type: a buffer all the same
    # trial 58: None or True for a buffer got the by-value advice ("use np.int32(1)")
    for given, shown in ((True, "True"), (None, "None")):
        with pytest.raises(SpecError, match=rf"takes n as a buffer, but inputs\(\) gives {shown}; return a numpy "
                                            r"array, e.g. np.asarray\(n, np.int32\)$"):
            _check(x=np.zeros(4, np.float32), n=given)


def test_bytes_bit_casts_unknown_types_and_scalars_pass():
    _check(x=np.zeros(4, np.float32), n=np.zeros(4, np.int32), m=np.uint32(3),
           src=np.zeros(4, np.float64), dst=np.zeros(4, np.int64))  # uchar* and a macro type: any
    # int bits as float, float bits as int: a view says they are meant; raw bytes too (trial 51)
    _check(x=np.zeros(4, np.int32).view(np.float32), n=np.zeros(4, np.float32).view(np.int32))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _check(x=np.frombuffer(bytes(16), np.uint8), n=np.zeros(16, np.int8))


def test_numbers_of_another_kind_are_refused_at_another_width_and_warned_of_at_the_same():
    """Trial 50: float64 data for a `uint*` histogram input passed (another kind was taken to be
    meant), and float32 too; every configuration then failed as a wrong result that blamed the
    reference. Bits of the same width may be meant: a warning names the view that says so."""
    with pytest.raises(SpecError, match=r"takes n as int\*, but inputs\(\) gives float64 elements"):
        _check(x=np.zeros(4, np.float32), n=np.zeros(4))
    with pytest.warns(AutotuneWarning, match=r"takes n as int\*, but inputs\(\) gives float32 elements, whose bits it "
                                             r"reads as int: return n.astype\(np.int32\) from inputs\(\) for their "
                                             r"values, or n.view\(np.int32\) where the bits are meant"):
        _check(x=np.zeros(4, np.float32), n=np.zeros(4, np.float32))


def test_a_float64_input_stops_the_run_before_anything_is_built(tmp_path):
    path = readme_example(tmp_path)
    ref = tmp_path / "saxpy_ref.py"
    float32 = '"x": rng.uniform(-1, 1, n).astype(np.float32)'
    ref.write_text(ref.read_text().replace(float32, '"x": rng.uniform(-1, 1, n)'))
    out = subprocess.run([sys.executable, "-m", "autotune", "run", str(path), "-s", "N=4096", "-n", "2",
                          "--no-save"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 1 and "Traceback" not in out.stderr
    assert "takes x as float*, but inputs() gives float64" in out.stderr
    assert "tuning" not in out.stdout  # refused before the run started


SCALED_CL = """
__kernel void scale(__global const float* x, __global float* y, const float c, int n) {
    const int i = get_global_id(0);
    if (i < n) y[i] = c * x[i];
}
"""


@pytest.mark.parametrize("c, n", [("2.0", "problem['N']"), ("2", "np.int64(problem['N'])"), ("np.float64(2)", "256.0")])
def test_a_python_or_numpy_number_for_a_scalar_argument_is_passed_as_the_kernels_type(tmp_path, c, n):
    # trial 10: "c": -4.0 from inputs() failed every configuration with clSetKernelArg's
    # INVALID_ARG_SIZE and a traceback, since pyopencl passes a Python float as 8 bytes
    ref = REF_PY.replace('"y": np.zeros(n, np.float32)}', f'"y": np.zeros(n, np.float32), "c": {c}, "n": {n}}}')
    path = write_spec(tmp_path, SCALE_YAML.replace("args: [x, y]", "args: [x, y, c, n]"), template=SCALED_CL, ref=ref)
    report = tune(specs.load(path), TuneOptions(sampler="grid", trials=3, timeout_s=None, save=False))
    assert report.failures == {} and report.best is not None, report.failure_examples


@pytest.mark.parametrize("source, n, message", [
    (SCALED_CL, "2.5", "takes n as int, which cannot hold 2.5 from inputs()"),
    (SCALED_CL, "2**40", "takes n as int, which cannot hold 1099511627776 from inputs()"),
    (SCALED_CL.replace("const float c, int n", "const float c, float n"), "1e40",
     "takes n as float, which cannot hold 1e+40 from inputs()"),
    (SCALED_CL.replace("const float c", "const real c"), "256",
     "takes c as a type autotune does not read (real: a macro or typedef?), and inputs() gives a Python float; "
     "return a numpy value"),
    # an argument left out of args: the count is the fault, not the numbers' types (trial 11)
    (SCALED_CL, "256", "launch: kernel scale in scale.cl takes 4 arguments, but args lists 3"),
])
def test_a_number_the_kernels_scalar_type_cannot_take_is_a_spec_error(tmp_path, source, n, message):
    ref = REF_PY.replace('"y": np.zeros(n, np.float32)}', f'"y": np.zeros(n, np.float32), "c": 2.0, "n": {n}}}')
    args = "args: [x, y, n]" if "lists 3" in message else "args: [x, y, c, n]"
    sp = specs.load(write_spec(tmp_path, SCALE_YAML.replace("args: [x, y]", args), template=source, ref=ref))
    with pytest.raises(SpecError, match=re.escape(message)):
        make_workload(sp, sp.default_problem())


def test_a_size_no_declaration_of_its_argument_can_hold_is_refused_before_any_input(tmp_path):
    """Trial 70: load_kernel at N = 2**31 + 8 of a kernel taking `int N` drew 8 GB of inputs,
    picked a kernel, and only its call refused the size."""
    from autotune.errors import ProblemError
    from autotune.signatures import check_numbers
    from conftest import SCALE_YAML, TEMPLATE_CL, write_spec

    spec = specs.load(write_spec(tmp_path, SCALE_YAML.replace("args: [x, y]", "args: [x, y, N]"),
                                 TEMPLATE_CL.replace("__global float* y)", "__global float* y, int N)")))
    check_numbers(spec, {"N": 2**31 - 1})
    with pytest.raises(ProblemError, match=r"N=2147483656 does not fit the int32 scale takes it as; declare it long"):
        check_numbers(spec, {"N": 2**31 + 8})
    long_n = specs.load(write_spec(tmp_path / "long", SCALE_YAML.replace("args: [x, y]", "args: [x, y, N]"),
                                   TEMPLATE_CL.replace("__global float* y)", "__global float* y, long N)")))
    check_numbers(long_n, {"N": 2**31 + 8})
