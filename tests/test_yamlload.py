"""Spec and profile YAML: alias bombs and non-UTF-8 files get one-line errors, not hangs or tracebacks."""

from __future__ import annotations

import textwrap
import time

import pytest

from autotune import profiles, yamlload
from autotune import spec as specs
from autotune.errors import ProfileError, SpecError
from conftest import SCALE_YAML, write_spec


def alias_bomb(levels: int) -> str:
    """A flow list of ``levels`` anchors, each ten aliases of the previous: 10**levels values."""
    items = ["&a0 [x, x, x, x, x, x, x, x, x, x]"]
    items += [f"&a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, levels)]
    return f"[{', '.join(items)}]"


def test_alias_bomb_is_refused_before_it_is_expanded():
    # 30 levels stand for 10**30 values; PyYAML alone loads them as shared lists, quickly
    text = f"args: {alias_bomb(30)}\n"
    assert len(text) < 2500
    start = time.monotonic()
    with pytest.raises(SpecError, match=r"^demo.yaml: refused: its aliases expand to more than 100000 values; "):
        yamlload.safe_load(text, "demo.yaml", SpecError)
    assert time.monotonic() - start < 2
    assert yamlload.safe_load(f"args: {alias_bomb(4)}\n", "demo.yaml", SpecError)["args"][3][9][9][9][9] == "x"


@pytest.mark.parametrize(("text", "problem"), [
    ("a: &a [1, *a]\n", "refused: an alias refers to a node that contains it"),
    ("- " * 1000 + "x\n", "refused: collections are nested too deeply"),
    ("a: " + "[" * 150 + "]" * 150 + "\n", "refused: collections are nested too deeply"),  # libyaml takes it
    ("when: 2024-13-45\n", "a value cannot be read (month must be in 1..12)"),
], ids=["recursive alias", "1000 nested lists", "150 nested flow lists", "impossible date"])
def test_other_unreadable_documents_get_one_line_errors(text, problem):
    with pytest.raises(ProfileError, match=r"^demo.yaml: ") as info:
        yamlload.safe_load(text, "demo.yaml", ProfileError)
    assert problem in str(info.value) and "\n" not in str(info.value)


# 6 levels (10**6 values) are ten times the limit yet cheap to expand, so a regression fails fast
def test_spec_with_an_alias_bomb_in_launch_args_is_refused_quickly(tmp_path):
    text = textwrap.dedent(SCALE_YAML).replace("  entry: scale\n", f"  entry: scale\n  args: {alias_bomb(6)}\n")
    path = write_spec(tmp_path, text)
    assert path.stat().st_size < 1024
    start = time.monotonic()
    with pytest.raises(SpecError, match=rf"^{path}: refused: its aliases expand to more than 100000 values"):
        specs.load(path)
    assert time.monotonic() - start < 2


def test_profile_with_an_alias_bomb_is_refused_quickly(tmp_path):
    path = tmp_path / "dev.yaml"
    path.write_text("device: {name: Dev}\nkernels:\n  mm:\n  - {problem: {N: 64}, params: {TS: 16, junk: "
                    f"{alias_bomb(6)}}}, time_ms: 1.0, spec_hash: h1}}\n")
    start = time.monotonic()
    with pytest.raises(ProfileError, match=rf"^{path}: refused: its aliases expand to more than 100000 values"):
        profiles.read(path)
    assert time.monotonic() - start < 2


def test_non_utf8_spec_and_profile_get_one_line_errors(tmp_path):
    path = write_spec(tmp_path, SCALE_YAML)
    path.write_bytes(path.read_bytes().replace(b"y = 2x", b"caf\xe9"))  # Latin-1, as an old editor saves it
    with pytest.raises(SpecError, match=rf"^{path}: not UTF-8 text \(byte 0xe9 at offset \d+\); save it as UTF-8$"):
        specs.load(path)
    profile = tmp_path / "dev.yaml"
    profile.write_bytes(b"\xff\xfed\x00e\x00")  # UTF-16
    with pytest.raises(ProfileError, match=rf"^{profile}: not UTF-8 text \(byte 0xff at offset 0\); save it as UTF-8$"):
        profiles.read(profile)


def test_shipped_specs_and_profiles_still_load():
    from autotune.resources import data_dir

    assert {specs.load(name).name for name in specs.builtin_names()} == set(specs.builtin_names())
    shipped = sorted(data_dir("profiles").glob("*.yaml"))
    assert shipped and all(profiles.read(path)["kernels"] for path in shipped)


def test_ordinary_yaml_errors_keep_their_messages(tmp_path):
    with pytest.raises(SpecError, match=r"scale.yaml:\d+: invalid YAML \(.*\); fix the syntax there$"):
        specs.load(write_spec(tmp_path, SCALE_YAML + "bad: [unclosed\n"))
    profile = tmp_path / "dev.yaml"
    profile.write_text("kernels: {mm: [\n")
    with pytest.raises(ProfileError, match=r"dev.yaml:\d+: corrupt profile"):
        profiles.read(profile)


@pytest.mark.parametrize("values", ["[yes, no]", "[on, off]", "[Off, On]"])
def test_a_spec_with_yes_no_on_off_unquoted_is_refused_with_both_readings(tmp_path, values):
    """Trial 24: CHECK: [yes, no] was read as true/false (YAML 1.1), so the template's CHECK_YES was
    never defined and every configuration wrote past its output."""
    path = write_spec(tmp_path, SCALE_YAML.replace("  MODE: [0]\n", f"  MODE: [0]\n  CHECK: {values}\n"))
    word = values[1:values.index(",")]
    with pytest.raises(SpecError, match=rf"^{path}:\d+: '{word}' is a boolean in YAML 1.1 and a string in YAML 1.2, "
                                        rf"so it is refused: quote it \('{word}'\) for the string, or write true"):
        specs.load(path)
    named = write_spec(tmp_path, SCALE_YAML.replace("  MODE: [0]\n", "  MODE: [0]\n  OFF: [1, 2]\n"))
    with pytest.raises(SpecError, match=r"'OFF' is a boolean .* quote it \('OFF'\) for the string"):  # a name too
        specs.load(named)
    quoted = write_spec(tmp_path, SCALE_YAML.replace("  MODE: [0]\n", "  MODE: [0]\n  CHECK: ['yes', 'no']\n"))
    assert {p.name: p.values for p in specs.load(quoted).parameters}["CHECK"] == ("yes", "no")
    plain = write_spec(tmp_path, SCALE_YAML.replace("  MODE: [0]\n", "  MODE: [0]\n  CHECK: [true, False]\n"))
    assert {p.name: p.values for p in specs.load(plain).parameters}["CHECK"] == (True, False)


def test_a_large_document_without_aliases_is_no_bomb_whatever_its_text_holds():
    """Trial 48: one "R&D" in a profile of 2,600 entries (133,000 values, no alias) made the
    alias walk run and refuse it as a document whose aliases expand past the limit."""
    text = "kernels:\n" + "".join(f"  - {{N: {i}, note: R&D, t: [1, 2, 3]}}\n" for i in range(20_000))
    doc = yamlload.safe_load(text, "big.yaml", ProfileError)
    assert len(doc["kernels"]) == 20_000 and doc["kernels"][0]["note"] == "R&D"
