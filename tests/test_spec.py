"""Spec loading and validation: every mistake gets a message naming the file, key and fix."""

from __future__ import annotations

import os
import re
import warnings
from pathlib import Path

import pytest

from autotune import spec as specs
from autotune.errors import AutotuneWarning, ProblemError, SpecError
from conftest import SCALE_YAML, TEMPLATE_CL, write_spec


def test_user_spec_loads_and_builds_options(tmp_path):
    sp = specs.load(write_spec(tmp_path, SCALE_YAML))
    params = sp.complete({"WPT": 4, "mad": True})
    opts = sp.build_options(params, {"N": 256})
    assert "-DN=256" in opts and "-DWPT=4" in opts and opts[-1] == "-cl-mad-enable"
    assert sp.host_module().inputs({"N": 8}, __import__("numpy").random.default_rng(0))["x"].shape == (8,)


def test_string_values_define_upper_cased_macros(tmp_path):
    sp = specs.load(write_spec(tmp_path, SCALE_YAML.replace("MODE: [0]", "ORDER: [contiguous, strided]")))
    opts = sp.build_options(sp.complete({"ORDER": "strided"}), {"N": 256})
    assert "-DORDER=strided" in opts and "-DORDER_STRIDED=1" in opts
    assert sp.macros({"N": 256}) == {"N": 256, "WPT": 1, "WG": 16, "ORDER": "contiguous", "ORDER_CONTIGUOUS": 1}


def test_lint_names_parameters_the_template_never_mentions(tmp_path):
    yaml_text = SCALE_YAML.replace("MODE: [0]", "MODE: [0]\n  ORDER: [contiguous, strided]\n  UNUSED: [1, 2]"
                                   "\n  UNROLL: [1, 2]")
    # trial 12: a template whose macro was misspelt UNROL was told it mentions `unroll`, the pragma
    template = "#if ORDER_contiguous\n#endif\n#pragma unroll UNROL\n" + __import__("conftest").TEMPLATE_CL
    sp = specs.load(write_spec(tmp_path, yaml_text, template=template))
    warnings = specs.lint(sp)
    assert len(warnings) == 3, warnings
    assert "parameters.ORDER has no effect: scale.cl never mentions ORDER or ORDER_CONTIGUOUS or " \
           "ORDER_STRIDED; it mentions ORDER_contiguous (the macro is ORDER_CONTIGUOUS)" in warnings[0]
    assert "parameters.UNUSED has no effect" in warnings[1]
    # trial 42: a typo was not named when it differs by more than case
    assert warnings[2].endswith("parameters.UNROLL has no effect: scale.cl never mentions UNROLL; it mentions "
                                "UNROL (the macro is UNROLL)"), warnings[2]
    # trial 42: the README's own default block made USE_LOCAL "mentioned", and its typo went unseen
    typo = "#ifndef USE_LOCAL\n#define USE_LOCAL 0\n#endif\n#if USE_LOCL\n#endif\n" + __import__("conftest").TEMPLATE_CL
    (warning,) = specs.lint(specs.load(write_spec(tmp_path / "typo", SCALE_YAML.replace(
        "MODE: [0]", "MODE: [0]\n  USE_LOCAL: [0, 1]"), template=typo)))
    assert warning.endswith("parameters.USE_LOCAL has no effect: scale.cl only gives it a default (#ifndef) and "
                            "never uses USE_LOCAL; it mentions USE_LOCL (the macro is USE_LOCAL)"), warning
    # WG appears only in the launch geometry, MODE and WPT in the template: neither is flagged
    assert specs.lint(specs.load(write_spec(tmp_path / "ok", SCALE_YAML))) == []
    assert all(specs.lint(specs.load(name)) == [] for name in specs.builtin_names())
    # trial 109: 1e-3 unquoted is text to YAML 1.1, and no quoted number: loaded as before, unwarned
    exponent = specs.load(write_spec(tmp_path / "exponent", SCALE_YAML.replace(
        "  MODE: [0]", "  MODE: [0]\n  SCALE: [2.5, 1e-3]\n  EPS: [1e-30, 1e-20]\n  TINY: [0, 1e-6]")))
    assert not [w for w in specs.lint(exponent) if "quotes" in w]  # trial 112: TINY, the template's alone, loads
    # trial 105: numbers in quotes, which the expressions read as text
    text = SCALE_YAML.replace("WG: [16, 32, 64, 128, 512]", 'WG: ["16", "32"]')
    quoted = specs.load(write_spec(tmp_path / "quoted", text.replace("baseline: {WPT: 1, WG: 16}",
                                                                     'baseline: {WPT: 1, WG: "16"}')))
    assert specs.lint(quoted) == [f"{quoted.path}: parameters.WG: its values ['16', '32'] are numbers in quotes, which "
                                  "the spec's expressions read as text ('16' is not 16, and WG * 2 is '1616'); write "
                                  "them without quotes, unless they only name variants"]


def test_lint_names_a_parameter_or_problem_key_the_template_defines_without_a_guard(tmp_path):
    """Trial 63: a Kernel Tuner port's plain ``#define use_local 0`` replaced the -D of the
    parameter, both of its values ran the same code, and one was saved as the winner."""
    from conftest import TEMPLATE_CL
    plain = TEMPLATE_CL.replace("#ifndef MODE\n#define MODE 0\n#endif", "#define MODE 0\n#define N 64")
    found = specs.lint(specs.load(write_spec(tmp_path, SCALE_YAML, template=plain)))
    assert [w.split(": ", 1)[1] for w in found] == [
        "scale.cl defines MODE (#define MODE) with no #ifndef MODE before it, so its value replaces the one autotune "
        "gives for parameters.MODE: every configuration gets the template's; guard it (#ifndef MODE ... #endif) or "
        "delete it",
        "scale.cl defines N (#define N) with no #ifndef N before it, so its value replaces the one autotune gives for "
        "problem key N: every configuration gets the template's; guard it (#ifndef N ... #endif) or delete it"]
    # a default behind any conditional on the name is a guard (matmul.cl: #if !defined(A) && !defined(B))
    guarded = TEMPLATE_CL.replace("#ifndef MODE", "#if !defined(OTHER) && !defined(MODE)")
    assert specs.lint(specs.load(write_spec(tmp_path / "ok", SCALE_YAML, template=guarded))) == []
    # trial 65: one in a comment is no definition; an #if that only tests it is no default
    commented = "/* to build alone:\n#define MODE 1\n*/\n// #define WPT 2\n" + TEMPLATE_CL
    assert specs.lint(specs.load(write_spec(tmp_path / "comment", SCALE_YAML, template=commented))) == []
    tested = TEMPLATE_CL.replace("#ifndef MODE\n#define MODE 0\n#endif",
                                 "#if MODE > 3\n#error no\n#endif\n#define MODE 0")
    (warning,) = specs.lint(specs.load(write_spec(tmp_path / "tested", SCALE_YAML, template=tested)))
    assert "scale.cl defines MODE (#define MODE) with no #ifndef MODE before it" in warning


def test_kernel_tuners_names_get_what_to_write_instead(tmp_path):
    """Trial 63: a port's `problem_size` in an expression was asked "did you mean
    global_mem_size?", and a launch without `local:` beside block_size_x gave only wrong results
    and a crash, with nothing pointing at the work-group."""
    sized = SCALE_YAML.replace('"(N // WPT) % WG == 0"', '"(problem_size // WPT) % WG == 0"')
    with pytest.raises(SpecError, match=r"uses unknown name\(s\) problem_size \(Kernel Tuner's problem_size is "
                       r"the problem's own keys here, by name: N\); known"):
        specs.load(write_spec(tmp_path / "size", sized))
    blocks = SCALE_YAML.replace("WG:", "block_size_x:").replace("% WG", "% block_size_x").replace(
        "WG: 16", "block_size_x: 16")
    local = blocks.replace("local: [WG]", "local: [block_size_x]")
    assert specs.lint(specs.load(write_spec(tmp_path / "local", local))) == []
    # the template never mentions it either (it sized the launch alone): that is said too
    unused, warning = specs.lint(specs.load(write_spec(tmp_path / "none", blocks.replace("  local: [WG]\n", ""))))
    assert "parameters.block_size_x has no effect" in unused
    assert warning.endswith("scale.yaml: launch has no local: the work-group size is the OpenCL runtime's choice, "
                            "not block_size_x (which Kernel Tuner launches as the block); give local: [block_size_x]")


def test_lint_names_a_template_default_for_a_near_miss_of_a_parameter(tmp_path):
    # trial 10: WPTS in the YAML (launch: N // WPTS) and WPT in the template, whose #define WPT 1
    # default then ran every configuration with one item per work-item
    yaml_text = SCALE_YAML.replace("WPT: [1, 2, 4, 8, 16]", "WPTS: [1, 2, 4, 8, 16]").replace(
        "N // WPT", "N // WPTS").replace("{WPT: 1, WG: 16}", "{WPTS: 1, WG: 16}")
    sp = specs.load(write_spec(tmp_path, yaml_text))
    (warning,) = specs.lint(sp)
    assert warning.endswith("scale.cl gives WPT a default (#ifndef WPT), but no parameter or problem key is named "
                            "WPT, and parameters.WPTS is never mentioned there: if they are one, use one name "
                            "(every configuration gets the default now)"), warning


def test_lint_names_a_template_default_for_a_derived_value(tmp_path):
    """Trial 45: a derived name the template gives a default fell back to it, silently."""
    yaml_text = SCALE_YAML.replace("constraints:", "derived:\n  ITEMS: N // WPT\nconstraints:")
    template = "#ifndef ITEMS\n#define ITEMS 64\n#endif\n" + __import__("conftest").TEMPLATE_CL
    (warning,) = specs.lint(specs.load(write_spec(tmp_path, yaml_text, template=template)))
    assert warning.endswith("scale.cl gives ITEMS a default (#ifndef ITEMS), and ITEMS is a derived value of the "
                            "spec, which is not passed to the compiler (only problem keys and parameters are): every "
                            "configuration gets the default; compute it in the template instead"), warning
    # trial 46: one the template computes as the spec does is no default to warn of
    computed = template.replace("#define ITEMS 64", "#define ITEMS (N / WPT)")
    assert specs.lint(specs.load(write_spec(tmp_path / "computed", yaml_text, template=computed))) == []


def test_lint_names_a_scratch_buffer_no_step_takes(tmp_path):
    (warning,) = specs.lint(specs.load(write_spec(tmp_path, SCALE_YAML.replace(
        "args: [x, y]", "args: [x, y]\nscratch: {t: \"4 * N\"}"))))
    assert warning.endswith("scratch.t is in no launch step's args: it is made and never given to a kernel")


def test_lint_names_a_derived_value_that_fails_for_some_values(tmp_path):
    """Trial 15: `TS // WPT` with a WPT of 0 made those configurations invalid, and the run
    said only `valid space 30 of 40`."""
    yaml_text = WHEN_YAML.replace("WPT: [1, 2, 4, 8, 16]", "WPT: [0, 1, 2, 4, 8, 16]")
    (warning,) = specs.lint(specs.load(write_spec(tmp_path, yaml_text, template=__import__("conftest").TEMPLATE_CL
                                                  .replace("#ifndef MODE", "#if TILE\n#endif\n#ifndef MODE"))))
    assert re.search(r"derived\.ITEMS cannot be computed where WPT=0, WG=16 \('N // WPT': integer division or "
                     r"modulo by zero\) and in \d+ more combinations; those configurations are invalid",
                     warning), warning


def test_lint_names_a_variant_no_launch_step_applies_to(tmp_path):
    """Trial 12: a value added to a variant parameter with no launch step for it made its
    configurations invalid, and the run said nothing of it."""
    yaml_text = SCALE_YAML.replace("MODE: [0]", "MODE: [0, 1, 2]").replace("  entry: scale",
                                                                         "  entry: scale\n  when: MODE < 2")
    (warning,) = specs.lint(specs.load(write_spec(tmp_path, yaml_text)))
    assert warning.endswith("launch: no step applies where MODE=2, so those configurations never run; give a step "
                            "a 'when' that holds there, or drop the value"), warning
    assert specs.lint(specs.load(write_spec(tmp_path / "ok", yaml_text.replace("MODE < 2", "MODE < 3")))) == []
    # trial 13: a step whose when never holds (WG > 1000 with WG at most 512) never runs
    (warning,) = specs.lint(specs.load(write_spec(tmp_path / "never", yaml_text.replace("MODE < 2", "WG > 1000"))))
    assert warning.endswith("launch[0] (scale): its when 'WG > 1000' holds for no configuration, so it never runs; "
                            "widen the condition or drop the step"), warning
    # one on the problem may hold at another size: not judged
    assert specs.lint(specs.load(write_spec(tmp_path / "n", yaml_text.replace("MODE < 2", "N > 100000")))) == []


def test_unknown_kernel_suggests_a_name():
    with pytest.raises(SpecError, match="did you mean 'matmul'"):
        specs.load("matmull")


def test_missing_file():
    with pytest.raises(SpecError, match="does not exist"):
        specs.load("/nonexistent/x.yaml")


@pytest.mark.parametrize("edit, message", [
    (("parameters:", "paramters:"), r"paramters: unknown key; did you mean 'parameters'"),
    (("WPT: [1, 2, 4, 8, 16]", "WPT: []"), r"parameters.WPT: give a non-empty list"),
    (('"(N // WPT) % WG == 0"', '"(N // WPT) %% WG"'), r"constraints\[0\].*not a valid expression"),
    (('"(N // WPT) % WG == 0"', '"N % TILE == 0"'), r"constraints\[0\].*unknown name\(s\) TILE"),
    (("template: scale.cl", "template: nothere.cl"), r"template: template file 'nothere.cl' not found"),
    (("reference: scale_ref.py", "reference: nope.py"), r"reference: reference module 'nope.py' not found"),
    (('global: ["N // WPT"]', 'global: ["N // WPT", 1, 1, 1]'), r"launch.global: give 1 to 3"),
    (("baseline: {WPT: 1, WG: 16}", "baseline: {WPT: 3}"), r"baseline.WPT: 3 is not among"),
    (("problem: {N: 256}", "problem: {N: -4}"), r"problem.N: expected a positive integer"),
    (("  GB/s:", "  GB/s: 1\n  bad: \"os.system\"\n  x:"), r"metrics.bad.*not allowed"),
    # found when the spec loads, not after a whole run: evaluated on the default problem
    (("  GB/s:", "  bad: N / 0\n  GB/s:"), r"metrics.bad: .*division by zero.*\(on the default problem\)"),
    (("  GB/s:", "  bad: \"'fast'\"\n  GB/s:"), r"metrics.bad: \"'fast'\" gives 'fast' for the default problem"),
    (("outputs: [y]", "outputs: [y]\ntolerance: {atol: -1}"), r"tolerance.atol: '-1' gives -1"),
    (("  WPT: [1, 2, 4, 8, 16]", "  WPT: [1, 2.0, 4, 8, 16]"),  # trial 40
     r"parameters.WPT: values .* mix whole numbers with floats \(2.0\); write them all alike"),
    # trial 103: a quoted number ran as text, and a kernel named by no text was tuned as None
    (("  WG: [16, 32, 64, 128, 512]", "  WG: [16, \"32\", 64]"),
     r"parameters.WG: values \[16, '32', 64\] mix numbers with text that reads as one \('32'\); write it without"),
    (("  WPT: [1, 2, 4, 8, 16]", "  WPT: [1, 2, \"0x4\"]"),  # trial 105
     r"parameters.WPT: values \[1, 2, '0x4'\] mix numbers with text that reads as one \('0x4'\)"),
    (("  WPT: [1, 2, 4, 8, 16]", "  WPT: [1, 2, \"" + "9" * 400 + "\"]"),  # the fuzz: an OverflowError
     r"parameters.WPT: values .* mix numbers with text that reads as one"),
    (("  WPT: [1, 2, 4, 8, 16]", "  WPT: [1, 2, \"" + "9" * 5000 + "\"]"),  # past Python's int limit
     r"parameters.WPT: values .* mix numbers with text that reads as one"),
    (("  WPT: [1, 2, 4, 8, 16]", "  WPT: [1, 2, 1e3]"),  # trial 111: YAML's text, then '1e31e31e31e3'
     r"parameters.WPT: values \[1, 2, '1e3'\] mix numbers with 1e3, which YAML reads as text, and the spec's "
     r"expressions compute with WPT; write the whole number \(1000\)"),
    (("  WPT: [1, 2, 4, 8, 16]", "  WPT: [1, 2, 1.5e3]"),
     r"parameters.WPT: values \[1, 2, '1.5e3'\] mix numbers with 1.5e3, .*; write the whole number \(1500\)"),
    (("  WPT: [1, 2, 4, 8, 16]", "  WPT: [1, 2, 1e-30]"),
     r"parameters.WPT: values \[1, 2, '1e-30'\] mix numbers with 1e-30, .*; write them all as floats with a "
     r"dot and a signed exponent"),
    # trial 114: refused only at F=2, mid-run, once flags of 0 and 1 were taken as conditions
    (('  - "(N // WPT) % WG == 0"', '  - "(N // WPT) % WG == 0"\n  - "WPT or WG == 16"'),
     r"constraints\[1\]: 'WPT or WG == 16' takes WPT as true or false by itself, but its values \[1, 2, 4, 8, 16\] "
     r"are not all 0 and 1 \(false and true\); compare it, as WPT != 0 for WPT alone and WPT == 0 for not WPT"),
    (("  MODE: [0]", "  MODE: [0]\n  F: [0, 1, 2]\n  G: {values: [1, 2], when: 'not F'}"),
     r"parameters.G.when: .* takes F as true or false by itself"),
    (("  MODE: [0]", "  MODE: [0]\n  R: [0.5, 1e3]\nlocal_memory: '4 * R'"),  # trial 114: beside floats too
     r"parameters.R: values \[0.5, '1e3'\] mix numbers with 1e3, .*; write it as 1000.0"),
    (("  MODE: [0]", "  MODE: [0]\n  R: [0.5, 1e-6]\nlocal_memory: '4 * R'"),  # trial 115: "as 1e-06", text again
     r"parameters.R: values \[0.5, '1e-6'\] mix numbers with 1e-6, .*; write it as 1.0e-06"),
    (('  - "(N // WPT) % WG == 0"', '  - "(N // WPT) % WG == 0"\n  - "D or WG == 32"\nderived: {D: WPT // 2}'),
     r"constraints\[1\]: 'D or WG == 32' takes the derived D as true or false by itself, but it gives 2 where WPT=4; "
     r"compare it"),  # trial 115: a derived flag failed at its value 2 mid-run
    (("kernel: scale", "kernel:"), r"kernel: None is no name: give the kernel's name, an identifier"),
    (("kernel: scale", "kernel: true"), r"kernel: True is no name"),
    (("problem: {N: 256}", "problem: {N: 256}\nrequires: [\"N > 1000\"]"),
     r"requires\[0\]: 'N > 1000' does not hold for the default problem"),
])
def test_malformed_spec_messages(tmp_path, edit, message):
    old, new = edit
    assert old in SCALE_YAML
    path = write_spec(tmp_path, SCALE_YAML.replace(old, new, 1))
    with pytest.raises(SpecError, match=message) as info:
        specs.load(path)
    assert str(path) in str(info.value)


def test_invalid_yaml_names_the_line(tmp_path):
    path = write_spec(tmp_path, SCALE_YAML.replace("args: [x, y]", "args: [x, y"))
    with pytest.raises(SpecError, match=r"scale.yaml:\d+: invalid YAML"):
        specs.load(path)


def test_reference_module_without_functions(tmp_path):
    path = write_spec(tmp_path, SCALE_YAML, ref="def inputs(problem, rng):\n    return {}\n")
    for _ in range(2):  # and again: the failed module is not kept half-checked (an AttributeError then)
        with pytest.raises(SpecError, match="must define reference"):
            specs.load(path).host_module()


def test_problem_overrides_are_checked():
    sp = specs.load("matmul")
    assert sp.resolve_problem({"M": "64", "layout": "col"})["M"] == 64
    with pytest.raises(ProblemError, match="no problem key 'Q'"):
        sp.resolve_problem({"Q": 1})
    with pytest.raises(ProblemError, match="must be a positive integer"):
        sp.resolve_problem({"M": "0"})
    with pytest.raises(ProblemError, match="choose one of row, col"):
        sp.resolve_problem({"layout": "diagonal"})
    # trial 105: 1_024 was taken, where --size 1_024 is not; trial 107: digits of other scripts
    for bad in (True, "True", 2.5, "abc", "1_024", "\uff11\uff10\uff12\uff14", "\u0663\u0662"):
        with pytest.raises(ProblemError, match="must be a positive integer$"):  # no bound matmul does not have
            sp.resolve_problem({"M": bad})
    with pytest.raises(ProblemError, match=r"^M='0x10000': matmul's M must be a positive integer in decimal "
                                           r"\(65536\)$"):  # trial 105
        sp.resolve_problem({"M": "0x10000"})
    assert sp.resolve_problem({"M": " +64 "})["M"] == 64
    with pytest.raises(ProblemError, match="must be at most 2\\*\\*40$"):
        sp.resolve_problem({"M": 10**400})
    with pytest.raises(ProblemError, match=r"matmul needs M < 2 \*\* 31"):  # its own, tighter bound
        sp.resolve_problem({"M": 2**31})


def test_a_spec_path_that_is_no_file_says_what_it_is() -> None:
    with pytest.raises(SpecError, match="spec file '/dev/null' is not a regular file; check the path"):
        specs.load("/dev/null")
    with pytest.raises(SpecError, match="spec file '/no/such.yaml' does not exist; check the path"):
        specs.load("/no/such.yaml")


def test_a_folder_given_as_a_spec_says_so(tmp_path):
    with pytest.raises(SpecError, match="is a folder; give the spec's YAML file inside it"):
        specs.load(str(tmp_path) + "/")


def test_hash_ignores_comments_but_not_values(tmp_path):
    base = specs.load(write_spec(tmp_path / "a", SCALE_YAML)).spec_hash
    commented = specs.load(write_spec(tmp_path / "b", "# a note\n" + SCALE_YAML)).spec_hash
    changed = specs.load(write_spec(tmp_path / "c", SCALE_YAML.replace("WG: [16,", "WG: [8, 16,"))).spec_hash
    described = specs.load(write_spec(tmp_path / "d", SCALE_YAML.replace(
        "description: y = 2x", "description: doubles\nhints: [{WPT: 2}]"))).spec_hash
    assert base == commented == described != changed


def test_hash_covers_the_reference_module(tmp_path):
    """A fixed reference must not leave the old one's verdicts (a study, a tuned entry) standing."""
    path = write_spec(tmp_path, SCALE_YAML)
    before = specs.load(path).spec_hash
    ref = tmp_path / "scale_ref.py"
    ref.write_text(ref.read_text().replace("(2.0 *", "(2.5 *"))
    assert "2.5 *" in ref.read_text() and specs.load(path).spec_hash != before


def test_shipped_profiles_match_the_current_templates_and_spaces():
    """A shipped entry load_kernel cannot use would silently never be used: one tuned with
    another version of the spec, or one that does not name every parameter its configuration
    uses (re-keyed after a parameter was added, without it)."""
    from autotune import profiles
    from autotune.resources import data_dir

    for path in data_dir("profiles").glob("*.yaml"):
        doc = profiles.read(path)
        for kernel in doc["kernels"]:
            spec = specs.load(kernel)
            stale = [e.problem for e in profiles.entries(doc, kernel) if e.spec_hash != spec.spec_hash]
            assert not stale, f"{path.name}: {kernel} entries {stale} were tuned with another spec"
            partial = [e.problem for e in profiles.entries(doc, kernel) if not spec.stores(e)]
            assert not partial, f"{path.name}: {kernel} entries {partial} do not name every parameter"


WHEN_YAML = SCALE_YAML.replace("  MODE: [0]", """  MODE: [0]
  TILE: {values: [1, 2, 4], when: "WPT > 1"}""").replace("constraints:", """derived:
  ITEMS: N // WPT
  GROUPS: ITEMS // WG
requires:
  - "N % 16 == 0"
constraints:
  - "GROUPS >= 1"
""").replace('global: ["N // WPT"]', "global: [ITEMS]")


def test_when_derived_and_requires(tmp_path):
    from autotune.space import check, enumerate_valid, geometry
    from conftest import FAKE

    sp = specs.load(write_spec(tmp_path, WHEN_YAML, template=__import__("conftest").TEMPLATE_CL.replace(
        "#ifndef MODE", "#if TILE\n#endif\n#ifndef MODE")))
    problem = sp.resolve_problem({"N": 256})
    valid = enumerate_valid(sp, problem, FAKE.facts())
    # TILE applies only where WPT > 1: with WPT == 1 it keeps its first value (one copy each)
    assert {c["TILE"] for c in valid if c["WPT"] == 1} == {1}
    assert {c["TILE"] for c in valid if c["WPT"] == 2} == {1, 2, 4}
    assert "TILE" in check(sp, sp.complete({"WPT": 1, "TILE": 2}), problem, FAKE.facts())
    # derived names serve constraints and the launch, and chain in order
    assert geometry(sp, sp.complete({"WPT": 4, "WG": 16}), problem, FAKE.facts()).steps[0].global_size == (64,)
    assert sp.env(problem, sp.complete({"WPT": 4, "WG": 16}))["GROUPS"] == 4
    assert all(256 // c["WPT"] // c["WG"] >= 1 for c in valid)
    assert "-DITEMS" not in " ".join(sp.build_options(valid[0], problem)), "derived values are not macros"
    with pytest.raises(ProblemError, match=r"scale needs N % 16 == 0 \(N=24\)"):
        sp.resolve_problem({"N": 24})


@pytest.mark.parametrize("edit, message", [
    (("  GROUPS: ITEMS // WG", "  WPT: N // 2"), "derived.WPT: must be an identifier that is not a parameter"),
    (("ITEMS: N // WPT", "ITEMS: N // NOPE"), "derived.ITEMS: 'N // NOPE' uses unknown name(s) NOPE"),
    (('when: "WPT > 1"', 'when: "WPT >"'), "parameters.TILE.when"),
    (("  - \"N % 16 == 0\"", "  - \"WPT > 1\""), "requires[0]: 'WPT > 1' uses unknown name(s) WPT (WPT is a "
     "parameter, and this key may use only the problem's keys and derived values of the problem alone)"),
    # trial 15: a name derived further down, a near miss, a derived value of the configuration in a
    # metric, and 'seconds', which replaced the measured time in every metric
    (("  ITEMS: N // WPT\n  GROUPS: ITEMS // WG", "  GROUPS: ITEMS // WG\n  ITEMS: N // WPT"),
     "derived.GROUPS: 'ITEMS // WG' uses unknown name(s) ITEMS (ITEMS is derived further down: derived values are "
     "read in order, so move it above)"),
    (("ITEMS: N // WPT", "ITEMS: N // WTP"), "'N // WTP' uses unknown name(s) WTP (did you mean WPT?)"),
    (('GB/s: "8 * N', 'GB/s: "8 * GROUPS'), "uses unknown name(s) GROUPS (GROUPS is a derived value of "
     "the configuration, and this key may use only the problem's keys and derived values of the problem alone)"),
    (("  ITEMS: N // WPT", "  seconds: N * 2\n  ITEMS: N // WPT"), "derived.seconds: must be an identifier that is "
     "not a parameter, problem key, device fact, earlier derived name or 'seconds'"),
])
def test_when_derived_and_requires_mistakes(tmp_path, edit, message):
    with pytest.raises(SpecError, match=re.escape(message)):
        specs.load(write_spec(tmp_path, WHEN_YAML.replace(*edit)))


def test_includes_are_inlined_with_line_markers_and_hashed(tmp_path):
    path = write_spec(tmp_path, SCALE_YAML, template='#include "helpers.h"\n' + __import__("conftest").TEMPLATE_CL)
    (tmp_path / "helpers.h").write_text("#define TWICE(x) (2.0f * (x))\n")
    sp = specs.load(path)
    lines = sp.source.splitlines()
    assert lines[:4] == ['#line 1 "scale.cl"', '#line 1 "helpers.h"', "#define TWICE(x) (2.0f * (x))",
                         '#line 2 "scale.cl"']
    before = sp.spec_hash
    (tmp_path / "helpers.h").write_text("#define TWICE(x) ((x) + (x))\n")
    assert specs.load(path).spec_hash != before, "an included file is part of what the hash covers"
    (tmp_path / "helpers.h").write_text('#include "scale.cl"\n')
    with pytest.raises(SpecError, match="includes itself"):
        specs.load(path)
    (tmp_path / "helpers.h").unlink()
    with pytest.raises(SpecError, match=r'template: .*scale.cl:1: #include "helpers.h" not found beside it \(nor '
                       r"among autotune's headers: autotune.h\)"):
        specs.load(path)
    # trial 36: a missing header in a branch the compiler may skip was refused; a preprocessor skips it
    path.parent.joinpath("scale.cl").write_text('#ifdef SOME_VENDOR\n#  include "vendor.h"\n#endif\n'
                                                '#if 0\n#include "helpers.h"\n#endif\n' + TEMPLATE_CL)
    assert '#  include "vendor.h"' in specs.load(path).source
    path.parent.joinpath("scale.cl").write_text('#if 0\n#endif\n#include "helpers.h"\n' + TEMPLATE_CL)
    with pytest.raises(SpecError, match=r'scale.cl:3: #include "helpers.h" not found beside it'):
        specs.load(path)
    # trial 40: an #if in a comment opened no block, so a missing header after it was left to
    # the compiler; and an #include in a comment is no include
    for commented in ('/* old:\n#if 0\n*/ int x; /* "*/\n', '// #ifdef X /*\n', 'x = "/*"; /* a */\n'):
        path.parent.joinpath("scale.cl").write_text(commented + '#include "helpers.h"\n' + TEMPLATE_CL)
        with pytest.raises(SpecError, match=r'#include "helpers.h" not found beside it'):
            specs.load(path)
    path.parent.joinpath("scale.cl").write_text('/*\n#include "helpers.h"\n*/\n' + TEMPLATE_CL)
    assert '#include "helpers.h"' in specs.load(path).source
    # trial 45: these forms went to the compiler, which looked them up from the working folder,
    # and an edit to the header left the tuned entries current
    (tmp_path / "helpers.h").write_text("#define TWICE(x) (2.0f * (x))\n")
    for form in ('#include"helpers.h"', '#include "helpers.h" // TWICE', '  #  include "helpers.h" /* x */'):
        path.parent.joinpath("scale.cl").write_text(form + "\n" + TEMPLATE_CL)
        assert '#line 1 "helpers.h"' in specs.load(path).source, form
    # trial 46: a comment opened after it and closed on the next line lost its opening
    path.parent.joinpath("scale.cl").write_text('#include "helpers.h" /* the factor,\nshared */\n' + TEMPLATE_CL)
    assert specs.load(path).source.splitlines()[3:6] == ['#line 1 "scale.cl"', "/* the factor,", "shared */"]
    for form in ("#include <helpers.h>", "#include HELPERS"):
        path.parent.joinpath("scale.cl").write_text(form + "\n" + TEMPLATE_CL)
        with pytest.raises(SpecError, match=rf'scale.cl:1: write the include as #include "FILE" .*, not {form!r}'):
            specs.load(path)
        path.parent.joinpath("scale.cl").write_text("#ifdef VENDOR\n" + form + "\n#endif\n" + TEMPLATE_CL)
        assert form in specs.load(path).source, "left to the compiler where it may be skipped"
    # autotune's own header, for a template anywhere (trial 8: only the built-in ones could use it)
    path.parent.joinpath("scale.cl").write_text('#include "autotune.h"\n' + TEMPLATE_CL)
    assert '#line 1 "autotune.h"' in specs.load(path).source and "MULTIPLY_ADD" in specs.load(path).source


def test_the_baseline_as_shown_names_its_variant_even_when_that_is_the_first():
    """matmul's baseline is the naive variant, the first of ALGO's values: the summary's
    'baseline ... (ALGO=naive MDIMC=16 ...)' must still say so."""
    shown = specs.load("matmul").baseline_overrides()
    assert shown == {"ALGO": "naive", "MDIMC": 16, "NDIMC": 16, "MWG": 16, "NWG": 16}
    assert specs.load("reverse").baseline_overrides() == {"WG": 64}  # no variants: only what differs


def test_lint_names_a_setting_of_default_baseline_or_hints_that_its_variant_ignores(tmp_path):
    """Trial 70: `default: {UNROLL: 2}` without `MODE: slow` measured the fast variant as the
    default, and load_kernel used it, without a word."""
    unroll = "  UNROLL: {values: [1, 2], when: \"MODE == 'slow'\"}"
    text = SCALE_YAML.replace("  MODE: [0]", "  MODE: [fast, slow]\n" + unroll)
    spec = specs.load(write_spec(tmp_path, text + "default: {WG: 32, UNROLL: 2}\nhints: [{MODE: slow, UNROLL: 2}]\n"))
    assert spec.default_config["MODE"] == "fast" and spec.default_config["UNROLL"] == 1
    (ignored,) = [w for w in specs.lint(spec) if "default.UNROLL" in w]
    assert ignored.endswith("default.UNROLL has no effect: UNROLL applies only where MODE == 'slow' "
                            "(parameters.UNROLL.when), and default has MODE=fast (its first value: default does "
                            "not set it); set the variant's parameter in default too, or leave UNROLL out")
    # the first value, which an ignored parameter is set to anyway, changes nothing: not said
    quiet = specs.load(write_spec(tmp_path, text + "default: {WG: 32, UNROLL: 1}\n"))
    assert not [w for w in specs.lint(quiet) if "default.UNROLL" in w]
    assert not [w for w in specs.lint(spec) if "hints" in w]  # the hint chose its variant


def test_lint_names_a_when_that_holds_for_no_configuration_instead_of_advice_that_cannot_work(tmp_path):
    """Trial 80: `when: ALGO == 'local' and VW > 2`, where VW applies only to ALGO vec (so it is 2
    under local), was never tuned without a word, and the default's warning advised setting VW."""
    from conftest import TEMPLATE_CL
    params = ("  MODE: [fast, slow]\n  UNROLL: {values: [1, 2], when: \"MODE == 'slow'\"}\n"
              "  EXTRA: {values: [0, 1], when: \"MODE == 'fast' and UNROLL == 2\"}")
    template = "#if UNROLL || EXTRA\n#endif\n" + TEMPLATE_CL
    path = write_spec(tmp_path, SCALE_YAML.replace("  MODE: [0]", params) + "default: {EXTRA: 1}\n", template=template)
    warnings = specs.lint(specs.load(path))
    assert [w for w in warnings if "EXTRA" in w] == [
        f"{path}: parameters.EXTRA.when \"MODE == 'fast' and UNROLL == 2\" holds for no configuration (UNROLL "
        "applies only where MODE == 'slow', and has its first value elsewhere), so EXTRA is never tuned; name only "
        "parameters that apply where it should"], warnings
    assert "when" not in "".join(specs.lint(specs.load(write_spec(tmp_path, SCALE_YAML.replace(
        "  MODE: [0]", params.replace("MODE == 'fast' and", "MODE == 'slow' and")), template=template))))
    # trial 84: a condition no value meets is told to be corrected, and a chain that reaches a
    # problem key (which may hold at another size) is no KeyError
    never = params.replace("MODE == 'fast' and UNROLL == 2", "WG > 1000")
    (warning,) = [w for w in specs.lint(specs.load(write_spec(tmp_path, SCALE_YAML.replace("  MODE: [0]", never),
                                                              template=template))) if "EXTRA" in w]
    assert warning.endswith("parameters.EXTRA.when 'WG > 1000' holds for no configuration (none of the values it "
                            "names satisfies it), so EXTRA is never tuned; correct the condition"), warning
    chain = params.replace("when: \"MODE == 'slow'\"", "when: \"N > 1000\"")
    assert not [w for w in specs.lint(specs.load(write_spec(tmp_path, SCALE_YAML.replace("  MODE: [0]", chain),
                                                            template=template))) if "when" in w]


def test_lint_names_a_parameter_the_template_tests_for_definition_which_always_holds(tmp_path):
    """Trial 80: `#ifdef CACHE_FILT` took the cached branch for false too (autotune passes
    -DCACHE_FILT=0): every such configuration was a wrong result, and nothing said why."""
    from conftest import TEMPLATE_CL
    yaml_text = SCALE_YAML.replace("  MODE: [0]", "  MODE: [0]\n  CACHE: [false, true]\n  TILE: [1, 2]")
    template = "#ifdef CACHE\n#endif\n#if defined(TILE)\n#endif\n#ifdef MODE_X\n#endif\n" + TEMPLATE_CL
    path = write_spec(tmp_path, yaml_text, template=template)
    tested = [w for w in specs.lint(specs.load(path)) if "tests whether" in w]
    assert tested == [f"{path}: scale.cl tests whether {n} is defined (#ifdef {n}, or defined({n})), which it always "
                      f"is: autotune passes -D{n}=value for every configuration (0 or 1 for a boolean); test its "
                      f"value instead (#if {n})" for n in ("CACHE", "TILE")], tested
    # a default (#ifndef, #if !defined) and a value's own macro are not such tests
    assert not [w for w in specs.lint(specs.load(write_spec(tmp_path / "ok", yaml_text, template=template.replace(
        "#ifdef CACHE", "#if CACHE").replace("defined(TILE)", "!defined(TILE)\n#define TILE 1"))))
        if "tests whether" in w]


def test_a_typo_is_named_before_a_word_that_differs_only_in_case_or_sits_in_a_string(tmp_path):
    """Trial 80: `#if UNROL` was reported as "it mentions unroll", a `_Pragma("unroll")` string."""
    from conftest import TEMPLATE_CL
    template = '#define UNROLL_LOOP _Pragma("unroll")\n#if UNROL\n#endif\n' + TEMPLATE_CL
    path = write_spec(tmp_path, SCALE_YAML.replace("  MODE: [0]", "  MODE: [0]\n  UNROLL: [0, 1]"), template=template)
    (warning,) = [w for w in specs.lint(specs.load(path)) if "UNROLL has no effect" in w]
    assert warning.endswith("it mentions UNROL (the macro is UNROLL)"), warning


@pytest.mark.parametrize("key, text", [
    ("constraints[1]", "constraints:\n  - \"(N // WPT) % WG == 0\"\n  - \"MODE != 'slwo' or WG >= 32\"\n"),
    ("derived.OX", "derived:\n  OX: \"2 if MODE == 'Slow' else 1\"\n"),
    ("local_memory", "local_memory: \"4 * WG if MODE == 'fats' else 0\"\n"),
])
def test_a_parameter_compared_with_a_value_it_never_takes_is_an_error_in_every_expression(tmp_path, key, text):
    """Trial 80: caught in a when, but a constraint's `ALGO != 'locl'` always held, a derived
    value's `ALGO == 'vector'` launched the vec variant with the wrong size, and a local_memory's
    `ALGO == 'Local'` left the device's limit unchecked, each without a word."""
    base = SCALE_YAML.replace("  MODE: [0]", "  MODE: [fast, slow]")
    base = base.replace("constraints:\n  - \"(N // WPT) % WG == 0\"\n", "") + text
    with pytest.raises(SpecError, match=rf"{re.escape(key)}: MODE is never '\w+' \(its values: fast, slow\); "
                                        "check the spelling"):
        specs.load(write_spec(tmp_path, base))


@pytest.mark.parametrize("when, message", [
    ("MODE = 'slow'", r"is not a valid expression \(.*; compare with == \(a single = assigns\)\)"),
    ("MODE == slow", r"uses unknown name\(s\) slow \(slow is a value of MODE: quote it, as in MODE == 'slow'\); "
                     r"known names are: MODE, N, WG, WPT$"),
    ("UNROLL == 1", r"uses unknown name\(s\) UNROLL \(UNROLL is the parameter this condition is for: a when says "
                    r"where UNROLL applies, so it names only other parameters and problem keys\); known names are: "
                    r"MODE, N, WG, WPT$"),
])
def test_a_when_written_as_a_c_or_python_newcomer_would_says_how_to_fix_it(tmp_path, when, message):
    """Trial 80: `=` for `==` and an unquoted value said what was wrong but not the fix, and a
    when's known names listed the parameter it is for, which it then refused."""
    text = SCALE_YAML.replace("  MODE: [0]", f"  MODE: [fast, slow]\n  UNROLL: {{values: [1, 2], when: \"{when}\"}}")
    with pytest.raises(SpecError, match=message):
        specs.load(write_spec(tmp_path, text))


def test_a_when_that_compares_a_parameter_with_a_value_it_never_takes_is_a_spec_error(tmp_path):
    unroll = "  UNROLL: {values: [1, 2], when: \"MODE == 'fats'\"}"
    text = SCALE_YAML.replace("  MODE: [0]", "  MODE: [fast, slow]\n" + unroll)
    with pytest.raises(SpecError, match=r"parameters.UNROLL.when: MODE is never 'fats' \(its values: fast, slow\)"):
        specs.load(write_spec(tmp_path, text))
    assert specs.load(write_spec(tmp_path, text.replace("'fats'", "'fast'"))).parameters
    step = ('launch:\n  entry: scale\n  when: "MODE == \'fats\'"')  # it would never run: its variant is lost
    with pytest.raises(SpecError, match=r"launch.when: MODE is never 'fats' \(its values: fast, slow\)"):
        specs.load(write_spec(tmp_path, text.replace("'fats'", "'fast'").replace("launch:\n  entry: scale", step)))


@pytest.mark.parametrize("edit, message", [
    (("  MODE: [0]", "  MODE: [0]\n  UNROLL: {values: [1, 2], when: \"WG == '16'\"}"),
     r"parameters.UNROLL.when: WG is never '16' \(its values: 16, 32, 64, 128, 512\); it is a number"),
    (("  MODE: [0]", "  MODE: [0]\n  N: [1, 2]"), r"parameters.N: problem.N has that name too"),
    (("  MODE: [0]", "  MODE: ['a b', c]"), r"parameters.MODE: value 'a b' reaches the compiler as -DMODE=a b"),
    (("  MODE: [0]", "  MODE: ['1 -DWPT=3', c]"), r"value '1 -DWPT=3' reaches the compiler"),
    (("  MODE: [0]", "  MODE: ['', c]"), r"value '' reaches the compiler"),
    (("  MODE: [0]", "  MODE: [-O0, c]"), r"value '-O0' reaches the compiler"),
    (("  MODE: [0]", "  MODE: [true, 2]"), r"parameters.MODE: values \[True, 2\] mix true/false with other "
                                          r"values; true reaches the compiler as 1 and false as 0"),
    (("baseline:", "inplace: [yy]\nbaseline:"), r"inplace: yy is not one of the outputs \(y\) \(did you mean y\?\)"),
    (("  mad: -cl-mad-enable", "  WG: -cl-mad-enable"), r"build_flags.WG: a parameter has that name too"),
    # trial 45: each was taken, and reached the compiler
    (("  mad: -cl-mad-enable", "  ovr: -DWPT=4"), r"build_flags.ovr: -DWPT=4 defines WPT, which autotune defines as "
                                                  r"the parameter it is; tune it as that instead"),
    (("  mad: -cl-mad-enable", "  big: -D N=4"), r"build_flags.big: -D N=4 defines N, which autotune defines as "
                                                 r"the problem key it is"),
    (("  mad: -cl-mad-enable", "  wide: -cl-mad-enable -DWPT=4"), r"build_flags.wide: -cl-mad-enable -DWPT=4 defines "
                                                                  r"WPT"),  # trial 46
    (("  MODE: [0]", "  MODE: [0.5, .nan]"), r"parameters.MODE: value nan is not a finite number"),
    (("  MODE: [0]", "  MODE: [a, n]\n  MODE_N: [1]"), r"parameters.MODE: a value defines the macro MODE_N \(as 1\), "
                                                      r"which is the name of a parameter too; rename one"),
    (("  mad: -cl-mad-enable", "  N: -cl-mad-enable"), r"build_flags.N: a problem key has that name too"),
    # trial 30: the device fact was silently replaced in every constraint, or the build broke in
    # the compiler's own header and the error named a template line that does not exist
    (("  MODE: [0]", "  local_mem_size: [1, 2]"), r"parameters.local_mem_size: local_mem_size is the name of a "
                                                  r"device fact, which constraints and launch expressions read"),
    (("  mad: -cl-mad-enable", "  is_gpu: -cl-mad-enable"), r"build_flags.is_gpu: is_gpu is the name of a device"),
    (("problem: {N: 256}", "problem: {N: 256, compute_units: 4}"), r"problem.compute_units: compute_units is"),
    (("  MODE: [0]", "  float: [1, 2]"), r"parameters.float: float is a word of OpenCL C, and autotune passes this "
                                         r"name to the compiler as a macro \(-Dfloat=…\), which would break every"),
    (("  MODE: [0]", "  uint4: [1, 2]"), r"parameters.uint4: uint4 is a word of OpenCL C"),
    (("problem: {N: 256}", "problem: {N: 256, local: 4}"), r"problem.local: local is a word of OpenCL C"),
    (("  WPT: [1, 2, 4, 8, 16]\n  WG: [16, 32, 64, 128, 512]\n  MODE: [0]", "  {}"),
     r"parameters: is empty: give at least one name: value entry"),
])
def test_parameters_that_ran_silently_wrong_are_spec_errors(tmp_path, edit, message):
    """A number compared with a string (never true), a parameter that takes a problem key's
    place, a string value that the compiler would read as more options."""
    with pytest.raises(SpecError, match=message):
        specs.load(write_spec(tmp_path, SCALE_YAML.replace(*edit)))


def test_an_entry_used_as_it_is_may_leave_out_only_parameters_its_configuration_does_not_use():
    corr = specs.load("correlate")
    swept = {"VARIANT": "swept", "WGX": 4, "WGY": 2, "OPX": 4, "OPY": 2, "UNROLL": 1, "ACC": "dot", "KSL": 2, "KSG": 4}
    full = corr.from_stored(swept, ["-cl-mad-enable"], whole=True)  # TX, TY: only 'local' uses them
    assert full is not None and (full["TX"], full["TY"], full["mad"]) == (8, 1, True)
    unroll_left_out = {k: v for k, v in swept.items() if k != "UNROLL"}
    assert corr.from_stored(unroll_left_out, [], whole=True) is None
    assert corr.from_stored(unroll_left_out, [])["UNROLL"] == 1  # a start for a search: filled in


def test_a_spec_named_like_a_built_in_kernel_is_warned_of_once(tmp_path):
    # trial 10: a copy named matmul mixed its entries with the built-in's without a word
    path = write_spec(tmp_path, SCALE_YAML.replace("kernel: scale", "kernel: reverse"))
    with pytest.warns(AutotuneWarning, match=r"kernel 'reverse' is the name of a built-in kernel, so the two share "
                      r"profile entries .* give yours a name of its own") as caught:
        specs.load(path)
        specs.load(path)
    assert len(caught) == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        specs.load("reverse")  # the built-in itself
        specs.load(write_spec(tmp_path / "own", SCALE_YAML))


def test_threads_importing_one_reference_module_each_get_it_whole(tmp_path):
    """Trial 20: load_kernel from several threads took the reference module half imported
    (AttributeError: no attribute 'inputs') while another thread ran its code."""
    from concurrent.futures import ThreadPoolExecutor

    from conftest import REF_PY

    slow = "import time\ntime.sleep(0.3)  # a module that takes a while: its imports, its tables\n" + REF_PY
    path = write_spec(tmp_path, SCALE_YAML, ref=slow)
    with ThreadPoolExecutor(4) as pool:  # as load_kernel(path, ...) in each thread: not imported yet
        whole = list(pool.map(lambda _: callable(getattr(specs.load(path).host_module(), "inputs", None)), range(4)))
    assert whole == [True] * 4, "each thread got the module once its code had run"


def test_a_stored_value_of_another_type_is_not_in_the_space_and_an_ignored_one_is_the_first(tmp_path):
    """Trial 36: a hand-edited `WG: 64.0` equals 64, so it counted as in the space, and was
    defined as -DWG=64.0, which the preprocessor refuses: load_kernel raised, show marked
    nothing, a run kept the entry. A value the variant ignores (WG where MODE is 0) made an
    entry "not valid here" instead of the configuration with the first value."""
    from types import SimpleNamespace as Entry

    sp = specs.load(write_spec(tmp_path, SCALE_YAML.replace(
        "  WG: [16, 32, 64, 128, 512]\n  MODE: [0]",
        "  MODE: [0, 1]\n  WG: {values: [16, 32, 64, 128, 512], when: MODE == 1}")))
    problem = sp.default_problem()

    def entry(**params):
        return Entry(spec_hash=sp.spec_hash, problem=problem, params={"WPT": 1, **params}, build_flags=())

    assert sp.unusable(entry(MODE=1, WG=64)) is None
    assert sp.unusable(entry(MODE=1, WG=64.0)) == ("its configuration is not in the spec's space (WG: 64.0 is a "
                                                   "float, not the int 64; write 64)")
    assert sp.unusable(entry(MODE=1, WG=True)) is not None
    assert sp.unusable(entry(MODE=0, WG=64)) is None
    assert sp.from_stored({"WPT": 1, "MODE": 0, "WG": 64}, (), whole=True) == {"WPT": 1, "MODE": 0, "WG": 16,
                                                                               "mad": False}
    ignored = specs.load(write_spec(tmp_path / "b", SCALE_YAML.replace(
        "  WG: [16, 32, 64, 128, 512]\n  MODE: [0]",
        "  MODE: [0, 1]\n  WG: {values: [16, 32, 64, 128, 512], when: MODE == 1}").replace(
        "baseline: {WPT: 1, WG: 16}", "baseline: {WPT: 1, MODE: 0, WG: 64}")))
    assert ignored.baseline_config["WG"] == 16
    with pytest.raises(SpecError, match=r"default.WG: 64.0 is a float, not the int 64; write 64"):
        specs.load(write_spec(tmp_path / "d", SCALE_YAML.replace("constraints:", "default: {WG: 64.0}\nconstraints:")))


def test_a_when_that_gives_no_true_or_false_is_said_not_taken_to_hold(tmp_path):
    """Trial 45: `when: "WG"` (a number) counted as holding, silently; since trial 114 refused as
    the spec loads (a flag of 0 and 1 may stand alone)."""
    text = SCALE_YAML.replace("  MODE: [0]", "  MODE: [0]\n  UNROLL: {values: [1, 2], when: \"WG\"}")
    with pytest.raises(SpecError, match=r"parameters.UNROLL.when: 'WG' takes WG as true or false by itself, but its "
                                        r"values \[16, 32, 64, 128, 512\] are not all 0 and 1"):
        specs.load(write_spec(tmp_path, text))
    flag = specs.load(write_spec(tmp_path / "flag", text.replace("  MODE: [0]", "  MODE: [0, 1]").replace(
        'when: "WG"', 'when: "MODE"')))
    assert flag.inactive({**flag.default_config, "MODE": 0}, {"N": 256}) == {"UNROLL"}


def test_the_call_takes_the_same_arguments_in_the_same_order_whatever_variant_runs(tmp_path):
    """Trial 50: the loaded kernel's arguments came in order of first use over the steps the
    tuned configuration runs, so a histogram whose zeroing step comes first in one variant took
    (hist, data) there and (data, hist) in the other, and a call written for one wiped the
    input under the other. The order is now that of first use over every step of the spec."""
    text = SCALE_YAML.replace("  MODE: [0]\n", "  MODE: [0]\n  TWO: [0, 1]\n").replace(
        'launch:\n  entry: scale\n  global: ["N // WPT"]\n  local: [WG]\n',
        'scratch:\n  tmp: "4 * N"\nlaunch:\n'
        '  - {entry: scale, when: "TWO == 0", args: [x, tmp, y], global: ["N // WPT"], local: [WG]}\n'
        '  - {entry: zero, when: "TWO == 1", args: [y], global: [N]}\n'
        '  - {entry: scale, when: "TWO == 1", args: [N, x, y], global: ["N // WPT"], local: [WG]}\n'
    ).replace("args: [x, y]\n", "")
    sp = specs.load(write_spec(tmp_path, text, template=TEMPLATE_CL + "__kernel void zero(__global float* y) {}\n"))
    assert sp.call_args({"N": 256}) == ("x", "y"), "no scratch buffer, no problem size, one order"
    mul1 = specs.load("mul1")
    assert mul1.call_args(mul1.default_problem()) == ("x", "z", "k")  # v4's steps alone gave (x, k, z)


def test_an_edited_reference_module_is_imported_again_in_the_same_process(tmp_path, monkeypatch):
    """Trial 66: a notebook that edited its reference between two tune() calls was checked
    against the old one, and a kernel the new one fails was saved as verified."""
    import numpy as np

    path = write_spec(tmp_path, SCALE_YAML)
    x = {"x": np.ones(4, np.float32)}
    assert specs.load(path).host_module().reference({"N": 4}, x)["y"][0] == 2.0
    ref = tmp_path / "scale_ref.py"
    ref.write_text(ref.read_text().replace("2.0 *", "3.0 *"))
    assert specs.load(path).host_module().reference({"N": 4}, x)["y"][0] == 3.0
    # a module beside it imports from any working folder (it did only from the spec's own)
    (tmp_path / "factors.py").write_text("FACTOR = 5.0\n")
    ref.write_text(ref.read_text().replace("import numpy as np", "import numpy as np\nfrom factors import FACTOR")
                   .replace("3.0 *", "FACTOR *"))
    monkeypatch.chdir("/")
    assert specs.load(path).host_module().reference({"N": 4}, x)["y"][0] == 5.0
    (tmp_path / "factors.py").write_text("FACTOR = 6.0\n")  # trial 69: a helper edited, too
    os.utime(tmp_path / "factors.py", ns=(1, 1))  # a time of its own, however fast the test runs
    assert specs.load(path).host_module().reference({"N": 4}, x)["y"][0] == 6.0
    # trial 69: another spec's reference with a helper of the same name gets its own
    other = tmp_path / "other"
    write_spec(other, SCALE_YAML)
    (other / "factors.py").write_text("FACTOR = 7.0\n")
    (other / "scale_ref.py").write_text(ref.read_text())
    assert specs.load(other / "scale.yaml").host_module().reference({"N": 4}, x)["y"][0] == 7.0


def test_a_template_or_reference_that_cannot_be_read_or_is_a_folder_is_said_so(tmp_path, monkeypatch):
    """Trial 71: an unreadable template was a PermissionError traceback; a folder of the
    template's or reference's name was "not found"."""
    path = write_spec(tmp_path, SCALE_YAML)
    real = Path.read_text

    def unreadable(self, *args, **kwargs):
        if self.name == "scale.cl":
            raise PermissionError(13, "Permission denied")
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Path, "read_text", unreadable)
    with pytest.raises(SpecError, match=r"template: .*scale.cl: cannot read it \(Permission denied\)"):
        specs.load(path)
    monkeypatch.undo()
    folder = tmp_path / "folders"
    write_spec(folder, SCALE_YAML)
    (folder / "scale.cl").unlink()
    (folder / "scale.cl").mkdir()
    with pytest.raises(SpecError, match=r"template: .*scale.cl is a folder; give the template's file"):
        specs.load(folder / "scale.yaml")
    (folder / "scale.cl").rmdir()
    write_spec(folder, SCALE_YAML)
    (folder / "scale_ref.py").unlink()
    (folder / "scale_ref.py").mkdir()
    with pytest.raises(SpecError, match=r"reference: .*scale_ref.py is a folder; give the reference module's file"):
        specs.load(folder / "scale.yaml")


def test_a_quoted_boolean_in_a_stored_entry_is_told_to_lose_its_quotes():
    """Trial 72: `USE_RESTRICT: 'true'` in a hand-edited entry was only "not one of False, True"."""
    reverse = specs.load("reverse")
    params = {**reverse.default_config, "USE_RESTRICT": "true"}
    assert reverse._outside(params) == ("USE_RESTRICT: 'true' is text, not the value true (remove its quotes in "
                                        "the YAML)")
    assert reverse._outside({**reverse.default_config, "WG": "64"}) == \
        "WG: '64' is text, not the value 64 (remove its quotes in the YAML)"


def test_a_template_with_a_nul_byte_or_an_include_that_is_no_file_is_refused_and_said(tmp_path):
    """Trial 82: a NUL byte cut the source there ("no kernel 'saxpy' ... its kernels: none" at
    every build), and an #include of a FIFO or /dev/zero was "not found beside it"."""
    import os

    from conftest import TEMPLATE_CL
    path = write_spec(tmp_path, SCALE_YAML, template="// a\n// \0 nul\n" + TEMPLATE_CL)
    with pytest.raises(SpecError, match=r"scale.cl:2: holds a NUL byte \(offset 8\), where the compiler would stop "
                                        r"reading; remove it"):
        specs.load(path)
    os.mkfifo(tmp_path / "pipe.h")
    path.parent.joinpath("scale.cl").write_text('#include "pipe.h"\n' + TEMPLATE_CL)
    with pytest.raises(SpecError, match=r'scale.cl:1: #include "pipe.h" is not a regular file \(a pipe or device, '
                                        r'say\): include a file'):
        specs.load(path)


def test_a_strings_parts_or_order_may_be_tested_but_a_list_of_values_is_checked(tmp_path):
    """Trial 84: `'_db' not in ALGO` (a substring) and `ALGO < 'v'` were refused as typos, while
    `ALGO in ('vec', 'lokal')` passed."""
    base = SCALE_YAML.replace("  MODE: [0]", "  MODE: [fast, fast_db, slow]")
    for fine in ("'_db' not in MODE or WG >= 32", "MODE < 'g' or WG >= 32"):
        specs.load(write_spec(tmp_path, base.replace('constraints:\n  - "(N // WPT) % WG == 0"',
                                                     f'constraints:\n  - "{fine}"')))
    with pytest.raises(SpecError, match=r"constraints\[0\]: MODE is never 'sloow'"):
        specs.load(write_spec(tmp_path, base.replace('constraints:\n  - "(N // WPT) % WG == 0"',
                                                     'constraints:\n  - "MODE in (\'fast\', \'sloow\') or WG > 16"')))


def test_a_near_miss_is_no_other_parameters_macro_and_a_words_test_is_its_own_macro(tmp_path):
    """Trial 84: BLOCK_SIZE_X was said to be mentioned as BLOCK_SIZE_Y (another parameter, used
    rightly) where block_size_x was the slip; `#ifdef ALGO` was told `#if ALGO`, which is 0."""
    template = ("__kernel void scale(__global const float* x, __global float* y) {\n"
                "  const int i = get_global_id(0) + 0 * block_size_x + 0 * BLOCK_SIZE_Y;\n#ifdef MODE\n#endif\n"
                "  y[i] = 2.0f * x[i];\n}\n")
    yaml_text = SCALE_YAML.replace("  MODE: [0]",
                                   "  MODE: [fast, slow]\n  BLOCK_SIZE_X: [1, 2]\n  BLOCK_SIZE_Y: [1, 2]")
    warnings = specs.lint(specs.load(write_spec(tmp_path, yaml_text, template=template)))
    (near,) = [w for w in warnings if "BLOCK_SIZE_X has no effect" in w]
    assert near.endswith("it mentions block_size_x (the macro is BLOCK_SIZE_X)"), near
    (tested,) = [w for w in warnings if "tests whether MODE" in w]
    assert tested.endswith("test its value instead (#if MODE_FAST)"), tested


def test_a_greater_or_equal_written_backwards_gets_no_assignment_hint(tmp_path):
    """Trial 84: `B => 1` was told to compare with == (a single = assigns)."""
    text = SCALE_YAML.replace("  MODE: [0]", "  MODE: [0, 1]\n  UNROLL: {values: [1, 2], when: \"MODE => 1\"}")
    with pytest.raises(SpecError) as raised:
        specs.load(write_spec(tmp_path, text))
    assert "is not a valid expression" in str(raised.value) and "single =" not in str(raised.value)


def test_a_problem_keys_word_is_checked_and_a_long_name_or_number_is_said_so(tmp_path):
    """Trial 84: `layout == 'rwo'` passed (a parameter's word was checked); trial 82: a kernel
    name of 5,000 characters was saved, and a size of 5,000 nines was "not a positive integer"."""
    base = SCALE_YAML.replace("problem: {N: 256}", "problem: {N: 256, layout: {default: row, choices: [row, col]}}")
    with pytest.raises(SpecError, match=r"constraints\[0\]: layout is never 'rwo' \(its values: row, col\)"):
        specs.load(write_spec(tmp_path, base.replace('"(N // WPT) % WG == 0"', '"layout == \'rwo\' or WG > 16"')))
    with pytest.raises(SpecError, match=r"kernel: a name of 101 characters: give one of at most 100"):
        specs.load(write_spec(tmp_path, base.replace("kernel: scale", "kernel: " + "k" * 101)))
    spec = specs.load(write_spec(tmp_path, base))
    for digits in ("9" * 5000, "+" + "9" * 5000):  # trial 86: with a + it was "not a positive integer"
        with pytest.raises(ProblemError, match=r"scale's N must be at most 2\*\*40"):
            spec.resolve_problem({"N": digits})
