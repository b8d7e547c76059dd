"""The suite's own precondition: some OpenCL device here can build kernels."""

from __future__ import annotations

from conftest import DEVICE_LINES, DEVICES


def test_an_opencl_device_can_build_kernels() -> None:
    # Fails rather than skipping the OpenCL tests: a suite that tested no device would pass
    # while proving nothing about the kernels.
    assert DEVICES, ("no OpenCL device can build kernels, so no OpenCL test ran: "
                     + "; ".join(DEVICE_LINES or ["no device found"])
                     + ". Install the CPU runtimes with pip install -e '.[cpu]'")


def test_a_name_substring_matching_devices_of_two_models_is_warned_of_once(monkeypatch):
    """Trial 71: `-d amd` matched Intel's runtime and PoCL's on one CPU and took the first unsaid."""
    import warnings
    from dataclasses import replace

    from autotune import device
    from autotune.errors import AutotuneWarning
    from conftest import FAKE

    class Platform:
        vendor = "FakeCorp"

    class Dev:
        platform = Platform()

    first = replace(FAKE, selector="0:0", name="AMD EPYC", platform="Intel(R) OpenCL")
    found = [(first, Dev()), (replace(first, selector="1:0", name="pthread-AMD EPYC", platform="PoCL"), Dev())]
    monkeypatch.setattr(device, "list_devices", lambda: found)
    monkeypatch.setattr(device, "_ambiguous_said", set())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert device.select("amd", require_build=False)[0] is first
        assert device.select("amd", require_build=False)[0] is first
        assert device.select("pthread", require_build=False)[0].selector == "1:0"
    said = [str(w.message) for w in caught if issubclass(w.category, AutotuneWarning)]
    assert said == ["'amd' matches 0:0 (AMD EPYC, Intel(R) OpenCL), 1:0 (pthread-AMD EPYC, PoCL): using 0:0; give "
                    "a selector such as 1:0 to choose another"]
    same_model = [(first, Dev()), (replace(first, selector="0:1"), Dev())]  # two GPUs of one model: no word
    monkeypatch.setattr(device, "list_devices", lambda: same_model)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert device.select("epyc", require_build=False)[0] is first
