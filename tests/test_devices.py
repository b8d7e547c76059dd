"""The suite's own precondition: some OpenCL device here can build kernels."""

from __future__ import annotations

from conftest import DEVICE_LINES, DEVICES


def test_an_opencl_device_can_build_kernels() -> None:
    # Fails rather than skipping the OpenCL tests: a suite that tested no device would pass
    # while proving nothing about the kernels.
    assert DEVICES, ("no OpenCL device can build kernels, so no OpenCL test ran: "
                     + "; ".join(DEVICE_LINES or ["no device found"])
                     + ". Install the CPU runtimes with pip install -e '.[cpu]'")
