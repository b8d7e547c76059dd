"""Where a search starts: this device's earlier winners, else other devices' (autotune.warmstart)."""

from __future__ import annotations

from dataclasses import replace

from autotune import settings
from autotune import spec as specs
from autotune.warmstart import other_devices
from conftest import FAKE, SCALE_YAML, save_winner, write_spec

SIBLING = replace(FAKE, name="Fake GPU 8000")                    # same vendor and type
RIVAL = replace(FAKE, name="Alpha GPU", vendor="AlphaCorp")      # another vendor, first by name
CPU = replace(FAKE, name="Fake CPU", device_type="CPU")


def test_each_other_device_of_the_same_type_gives_its_winner_nearest_the_problem_same_vendor_first(tmp_path):
    sp = specs.load(write_spec(tmp_path, SCALE_YAML))
    save_winner(RIVAL, {"N": 256}, {"WPT": 2, "WG": 32})
    save_winner(SIBLING, {"N": 4096}, {"WPT": 1, "WG": 64})
    save_winner(SIBLING, {"N": 512}, {"WPT": 4, "WG": 16}, ("-cl-mad-enable",))   # nearer 256
    save_winner(CPU, {"N": 256}, {"WPT": 16, "WG": 16})                          # a CPU's: not for a GPU
    save_winner(FAKE, {"N": 256}, {"WPT": 8, "WG": 16})                          # this device's own
    save_winner(replace(FAKE, name="Other"), {"N": 256}, {"WPT": 1, "WG": 16}, kernel="other")  # another kernel
    (settings.profiles_dir() / "broken.yaml").write_text("kernels: [unclosed\n")  # skipped, not fatal
    (settings.profiles_dir() / "odd.yaml").write_text(  # a device block that is not one: no device
        "device: edited by hand\nkernels:\n  scale:\n  - {problem: {N: 256}, params: {WPT: 1, WG: 16}, "
        "build_flags: [], time_ms: 1.0, throughput: {}, trials: 9, tuned_at: '2026-11-21', spec_hash: any}\n")
    found = other_devices(sp, FAKE, {"N": 256})
    assert found == [("Fake GPU 8000", {"WPT": 4, "WG": 16, "MODE": 0, "mad": True}),
                     ("Alpha GPU", {"WPT": 2, "WG": 32, "MODE": 0, "mad": False})]
    assert other_devices(sp, FAKE, {"N": 256}, limit=1) == found[:1]
