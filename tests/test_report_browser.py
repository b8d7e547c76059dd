"""`autotune report` in a real browser: headless Chromium opens the page offline and its
screenshot shows the figures (Debian's chromium package, installed here when missing and root)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from test_report import Evaluator

from autotune import report
from autotune.report.plots import BEST
from conftest import FAKE

pytest.importorskip("matplotlib")

#: Seconds an apt-get step may take before the browser test gives up (skips).
INSTALL_TIMEOUT_S = 600


def _browser() -> str | None:
    return next((found for name in ("chromium", "chromium-browser") if (found := shutil.which(name))), None)


def _install() -> str:
    """Why Chromium could not be installed ('' when it was)."""
    if not shutil.which("apt-get") or os.geteuid() != 0:
        return "chromium is not installed, and apt-get is missing or this is not root"
    try:
        done = _apt("install", "-y", "-q", "chromium")
        if done.returncode != 0:  # the package lists may be missing or stale
            _apt("update", "-q")
            done = _apt("install", "-y", "-q", "chromium")
    except subprocess.TimeoutExpired:
        return f"apt-get took over {INSTALL_TIMEOUT_S} s"
    return "" if done.returncode == 0 else f"apt-get install chromium failed: {done.stderr.strip()[-300:]}"


def _apt(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["apt-get", *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                          timeout=INSTALL_TIMEOUT_S, env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"})


@pytest.fixture(scope="session")
def chromium() -> str:
    """The Chromium executable, installed with apt-get when missing; the test skips, saying why,
    when it cannot be."""
    found = _browser()
    if found is None:
        why = _install()
        found = _browser()
        if found is None:
            pytest.skip(why or "apt-get installed chromium, but no chromium executable is on PATH")
    return found


def _pixels_like(path: Path, colour: str) -> int:
    """How many pixels of a PNG are within a small distance of ``colour`` (#rrggbb)."""
    import numpy as np
    from matplotlib.image import imread

    rgb = imread(path)[..., :3] * 255
    want = np.array([int(colour[i:i + 2], 16) for i in (1, 3, 5)])
    return int((np.abs(rgb - want).max(axis=-1) < 12).sum())


def test_report_page_shows_its_figures_in_headless_chromium(chromium, scale, tmp_path):
    from autotune.tuner import TuneOptions, tune

    tune(scale, TuneOptions(sampler="grid", trials=1000, timeout_s=None), problem={"N": 4096},
         evaluator=Evaluator(), info=FAKE)
    written = report.write(scale, tmp_path / "out")
    shot = tmp_path / "shot.png"
    # a profile folder of its own: the first start writes one; no network is needed or used
    subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                    f"--user-data-dir={tmp_path / 'chromium'}", f"--screenshot={shot}", "--window-size=1200,3200",
                    written.page.as_uri()], capture_output=True, timeout=120, check=True)
    assert shot.is_file(), "Chromium wrote no screenshot"
    # the figures' own colour appears on the rendered page only where the browser drew them: as
    # often as in all the PNG files together, so each one is there (shown at its own size)
    in_files = [_pixels_like(png, BEST) for png in written.figures]
    assert len(in_files) == 3 and min(in_files) > 200, "a figure shows nothing in the figures' colour"
    assert _pixels_like(shot, BEST) >= 0.9 * sum(in_files), "a figure is missing from the page"
    assert _pixels_like(shot, "#ffffff") < 0.97 * 1200 * 3200, "the page is blank"
