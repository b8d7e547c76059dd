"""A broken template or compiler stops the run within a few trials, saying where and what to do."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from autotune import spec as specs
from autotune.diagnose import Located, SameBuildError, errors, explain, signature
from autotune.errors import BuildError
from autotune.result import Measurement, Status
from autotune.tuner import TuneOptions, tune
from conftest import FAKE, SCALE_YAML, TEMPLATE_CL, QuietEvaluator, every_runtime, needs_opencl, write_spec

#: What this module checks is the OpenCL runtime's own: its tests run on every device that builds.
pytestmark = every_runtime

# The same error as runtimes print it: with autotune's #line directives, and without them
# (Intel numbers its programs, NVIDIA and PoCL name a pseudo-file).
INTEL = ("clBuildProgram failed: BUILD_PROGRAM_FAILURE\nBuild on <pyopencl.Device 'AMD EPYC' at 0x5566>:\n"
         "Compilation started\nk.cl:3:31: error: expected ';' after expression\n(source saved as /tmp/tmp0kp.cl)")
NVIDIA = "k.cl:3:31: error: expected ';' after expression"
POCL5 = "error: k.cl:3:31: expected ';' after expression | error: k.cl:3:31 <Spelling=<command line>:5:11>: x"
BARE = ["7:3:31: error: expected ';' after expression", "<kernel>:3:31: error: expected ';' after expression",
        "<stdin>:3:31: error: expected ';' after expression | Device pthread failed to build the program"]


def test_located_errors_read_alike_from_each_runtime() -> None:
    want = (Located("k.cl", 3, "expected ';' after expression"),)
    assert errors(INTEL) == errors(NVIDIA) == errors(POCL5)[:1] == want
    assert errors(POCL5)[1] == Located("k.cl", 3, "x")
    assert [(e.line, e.text) for m in BARE for e in errors(m)] == [(3, "expected ';' after expression")] * 3
    assert signature(INTEL) == signature(NVIDIA)
    assert errors("error: unknown target CPU 'generic'") == ()
    noisy = [f"Build on <pyopencl.Device 'x' at 0x{n}>: error: unknown target CPU 'generic' (/tmp/t{n}.cl)"
             for n in (1, 2)]
    assert signature(noisy[0]) == signature(noisy[1]), "addresses and temporary files are noise"


def test_the_watch_fires_on_the_third_identical_build_error_only(tmp_path: Path) -> None:
    failed, built = Status.COMPILE_ERROR, Status.OK
    watch = SameBuildError()
    assert [watch.add(failed, m) for m in (INTEL, NVIDIA, INTEL)] == [False, False, True]
    other = SameBuildError()
    assert not any(other.add(failed, m) for m in (INTEL, "<kernel>:9:1: error: unknown type", INTEL, INTEL))
    # trial 103: the same mistake in each variant's branch fails each at its own line
    template = tmp_path / "k.cl"
    template.write_text("\n" * 20)
    branches = SameBuildError(template=template)
    assert [branches.add(failed, f"k.cl:{line}:5: error: use of undeclared identifier 'x'") for line in (6, 14, 6)] \
        == [False, False, True]
    assert branches.places() == [("k.cl", 6), ("k.cl", 14)]
    assert explain("k.cl:6:5: error: use of undeclared identifier 'x'", template, {}, "Dev", 3,
                   places=branches.places()).endswith("fix k.cl at line 6 (other configurations fail the same way "
                                                      "at k.cl:14)")
    # trial 111: another error at another line was "the same way" too
    said = explain("k.cl:6:5: error: use of undeclared identifier 'x'", template, {}, "Dev", 2, same=False,
                   places=[("k.cl", 6), ("k.cl", 4)])
    assert "(2 tried, errors differ, one of them)" in said
    assert said.endswith("(other configurations fail too at k.cl:4)")
    (tmp_path / "helper.h").write_text("\n" * 8)  # trial 105: or in each branch of a header it includes
    header = SameBuildError(template=template)
    assert [header.add(failed, f"helper.h:{line}:5: error: use of undeclared identifier 'x'") for line in (2, 4, 6)] \
        == [False, False, True]
    ok_first = SameBuildError()
    assert not any(ok_first.add(s, INTEL) for s in (built, failed, failed, failed, failed))


def test_explain_names_the_line_the_clash_or_the_device(tmp_path: Path) -> None:
    template = tmp_path / "k.cl"
    template.write_text('#include "part.cl"\n')
    (tmp_path / "part.cl").write_text("__kernel void k(__global float* y, int N) {\n  y[0] = 1.0f\n}\n")
    clash = explain("part.cl:1:40: error: expected ')' | <command line>:1:12: note: expanded from macro 'N'",
                    template, {"N": 4096, "WPT": 2}, "Dev (Plat)", 3)
    assert "part.cl:1: error: expected ')' in `__kernel void k(__global float* y, int N) {`" in clash
    assert "`N` is defined by autotune as a macro (-DN=4096)" in clash and "rename it" in clash
    syntax = explain(NVIDIA.replace("k.cl:3:", "part.cl:2:"), template, {"M": 4096}, "Dev (Plat)", 3)
    assert "part.cl:2: error: expected ';' after expression in `y[0] = 1.0f`; fix part.cl at line 2" in syntax
    derived = explain("part.cl:2:3: error: use of undeclared identifier 'LY'", template, {"TS": 8}, "Dev (Plat)", 3,
                      derived=["LY"])
    assert derived.endswith("; `LY` is a derived value of the spec, and those are not passed to the compiler (only "
                            "problem keys and parameters are, as macros): compute it in the template from those")
    # trial 30: a macro broke the compiler's own header, and the line was called the template's
    header = explain("./OPENCL_CTH_PRE_RELEASE_H:115:1: error: expected identifier or '(' | <command line>:4:16: "
                     "note: expanded from macro 'min'", template, {"min": 1}, "Dev (Plat)", 3)
    assert "OPENCL_CTH_PRE_RELEASE_H:115 (the compiler's, not k.cl): error: expected identifier" in header
    assert "k.cl:115" not in header and "rename it in the template, or the key or parameter in the spec" in header
    device = explain("error: unknown target CPU 'generic'", template, {}, "pthread-EPYC (PoCL)", 3)
    assert device.startswith("every configuration fails to build on pthread-EPYC (PoCL) (3 tried")
    assert "unknown target CPU 'generic'" in device and "--device" in device and "autotune[cpu]" in device


class BrokenCompiler(QuietEvaluator):
    """Every configuration fails to build with one message, as on a compiler that cannot target the CPU."""

    def __init__(self, message: str) -> None:
        self.message, self.calls = message, 0

    def evaluate(self, params, limit_s, cutoff_ms=None, verify=True):
        self.calls += 1
        return Measurement(Status.COMPILE_ERROR, self.message)



def test_tuning_stops_after_four_identical_build_errors_and_keeps_them(tmp_path: Path) -> None:
    """Three, then one that shares as few values with them as the space allows."""
    import optuna

    spec = specs.load(write_spec(tmp_path, SCALE_YAML))
    ev = BrokenCompiler("error: unknown target CPU 'generic'")
    with pytest.raises(BuildError, match=r"every configuration fails to build on Fake GPU 9000 .*\(4 tried, same"):
        tune(spec, TuneOptions(trials=40, timeout_s=None), evaluator=ev, info=FAKE)
    assert ev.calls == 4
    study = optuna.load_study(study_name=optuna.get_all_study_names(
        f"sqlite:///{tmp_path / 'home' / 'studies.db'}")[0], storage=f"sqlite:///{tmp_path / 'home' / 'studies.db'}")
    assert [t.user_attrs["status"] for t in study.trials] == ["compile_error"] * 4, "the study keeps them"


def test_three_build_errors_of_one_shared_value_do_not_stop_the_run(tmp_path: Path) -> None:
    """Trial 42: the baseline, the default and a hint all had PY=4, under which the template
    did not build; the run ended as "every configuration fails to build"."""
    text = SCALE_YAML.replace("baseline: {WPT: 1, WG: 16}", "baseline: {WPT: 4, WG: 16}\n"
                              "default: {WPT: 4, WG: 32}\nhints:\n  - {WPT: 4, WG: 64}")
    spec = specs.load(write_spec(tmp_path, text))

    class WptFour(BrokenCompiler):
        def evaluate(self, params, limit_s, cutoff_ms=None, verify=True):
            self.calls += 1
            if params["WPT"] == 4:
                return Measurement(Status.COMPILE_ERROR, "<kernel>:7:1: error: expected ';'")
            return Measurement(Status.OK, "", (1.0 + params["WG"] / 1000,), 0.0, 0.0, params=params)

    ev = WptFour("")
    report = tune(spec, TuneOptions(trials=12, timeout_s=None, storage=":memory:", save=False),
                  evaluator=ev, info=FAKE)
    assert report.failures["compile_error"] >= 3 and report.best is not None and report.best.params["WPT"] != 4


def test_errors_that_differ_by_configuration_do_not_stop_the_run(tmp_path: Path) -> None:
    spec = specs.load(write_spec(tmp_path, SCALE_YAML))

    class PerConfig(BrokenCompiler):
        def evaluate(self, params, limit_s, cutoff_ms=None, verify=True):
            self.calls += 1
            # a line of its own for every configuration (WPT alone repeats: that was flaky)
            line = 1000 * params["WPT"] + params["WG"] + 512 * params["mad"]
            return Measurement(Status.COMPILE_ERROR, f"<kernel>:{line}:1: error: too many registers")

    ev = PerConfig("")
    report = tune(spec, TuneOptions(trials=8, timeout_s=None), evaluator=ev, info=FAKE)
    assert ev.calls == 8 and report.best is None


@needs_opencl
def test_configurations_a_templates_error_directive_rejects_do_not_stop_the_run(tmp_path: Path) -> None:
    """`#error` under `#if` refuses some configurations on purpose; three of them first in a
    run stopped it as 'every configuration fails to build', though the others build."""
    guard = "#if WPT != 1 || WG == 16\n#error unsupported combination\n#endif\n"
    spec = specs.load(write_spec(tmp_path, SCALE_YAML, template=TEMPLATE_CL.replace("__kernel", guard + "__kernel", 1)))
    report = tune(spec, TuneOptions(sampler="grid", trials=100, timeout_s=None))
    assert report.stopped_by == "exhausted" and report.best is not None
    assert report.best.params["WPT"] == 1 and report.best.params["WG"] != 16
    # the compiler's words, located as each runtime does ("error: f.cl:9:2: ..." on PoCL)
    assert "unsupported combination" in report.failure_examples["compile_error"]


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "autotune", *args], capture_output=True, text=True, timeout=300)


# Compilers place a missing ';' on the line of the expression (Intel) or of the next token
# (NVIDIA); either is the template's line the message names.
@needs_opencl
@pytest.mark.parametrize("edit, expect", [
    (("y[base + i] = 2.0f * x[base + i];", "y[base + i] = 2.0f * x[base + i]"),
     r"scale\.cl:(19|20): error: expected ';' after expression in `[^`]+`; fix scale\.cl at line (19|20)"),
    # a kernel argument named so is refused before any build (signatures); a variable is not
    (("const int base =", "const int N = 1;\n    const int base ="),
     r"scale\.cl:\d+: error: .*`N` is defined by autotune as a macro \(-DN=256\)"),
])
def test_a_broken_template_stops_in_at_most_five_trials_with_the_line(tmp_path: Path, edit, expect) -> None:
    path = write_spec(tmp_path, SCALE_YAML, template=TEMPLATE_CL.replace(*edit))
    out = _cli("run", str(path), "--trials", "40")
    assert out.returncode == 1 and "Traceback" not in out.stderr
    assert re.search(expect, out.stderr), out.stderr
    assert 1 <= out.stdout.count("compile_error") <= 5
    assert len(out.stderr.strip().splitlines()) == 1


@needs_opencl
def test_a_misspelt_entry_is_reported_as_the_specs_fault_not_the_compilers(tmp_path: Path) -> None:
    path = write_spec(tmp_path, SCALE_YAML.replace("entry: scale", "entry: scal"))
    out = _cli("run", str(path), "--trials", "40")
    assert out.returncode == 1 and "Traceback" not in out.stderr
    assert "launch: entry 'scal' is not a kernel of scale.cl (it defines scale)" in out.stderr, out.stderr
    assert "compile_error" not in out.stdout, "refused before anything is built"
    # a kernel that only some configurations define (under #if): found missing when built
    only_some = TEMPLATE_CL.replace("__kernel void scale(", "#if WPT == 1\n#define scal scale\n#endif\n"
                                    "__kernel void scale(", 1)
    path = write_spec(tmp_path, SCALE_YAML.replace("entry: scale", "entry: scal"), template=only_some)
    out = _cli("run", str(path), "--trials", "40")
    assert out.returncode == 1 and "Traceback" not in out.stderr
    assert "no kernel 'scal' in scale.cl for this configuration (its kernels: scale)" in out.stderr, out.stderr
    assert "fix the `entry` of the spec's launch step" in out.stderr and "--device" not in out.stderr


def test_the_names_around_an_error_in_a_header_include_those_around_its_include(tmp_path: Path) -> None:
    """Trial 114: a bare #error in a header the template includes under `#if N > 2048` was told
    to become a constraint, its #if unread."""
    from autotune.diagnose import guarded_by

    template = tmp_path / "k.cl"
    template.write_text('#if N > 2048\n#include "big.h"\n#endif\n__kernel void k() {}\n')
    (tmp_path / "big.h").write_text("#error big problems are not supported\n")
    assert guarded_by("big.h:1:2: error: big problems are not supported", template) == {"N"}


def test_the_names_around_an_error_include_those_its_own_defines_read(tmp_path: Path) -> None:
    """Trial 117: `#define TILE (WG * 2)` then `#if N % TILE != 0` / `#error` was taken to read
    problem keys only, and told to become a requires entry, though WG=8 builds."""
    from autotune.diagnose import guarded_by

    template = tmp_path / "k.cl"
    template.write_text("#define TILE (WG * 2)\n#if N % TILE != 0\n#error N must be a multiple of TILE\n#endif\n")
    assert guarded_by("k.cl:3:2: error: N must be a multiple of TILE", template) == {"N", "TILE", "WG"}
