"""Registering the pip-installed CPU runtimes with the ICD loader, without losing the system's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from autotune import runtimes
from autotune.runtimes import Runtime

INTEL = Runtime("intel-cpu", Path("/venv/lib/libintelocl.so"))


@pytest.fixture(autouse=True)
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("AUTOTUNE_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _system(tmp_path: Path, **icds: str) -> Path:
    folder = tmp_path / "vendors"
    folder.mkdir()
    for name, library in icds.items():
        (folder / f"{name}.icd").write_text(library + "\n")
    return folder


def _contents(folder: Path) -> dict[str, str]:
    return {p.name: p.read_text().strip() for p in folder.iterdir()}


def test_the_folder_keeps_every_system_icd_and_adds_the_runtime(tmp_path: Path) -> None:
    system = _system(tmp_path, nvidia="/usr/lib/libnvidia-opencl.so.1", amdocl64="libamdocl64.so")
    folder = runtimes.vendors_folder([INTEL], str(system))
    assert folder is not None
    assert _contents(folder) == {"nvidia.icd": "/usr/lib/libnvidia-opencl.so.1",
                                 "amdocl64.icd": "libamdocl64.so",
                                 "autotune-intel-cpu.icd": "/venv/lib/libintelocl.so"}
    assert runtimes.vendors_folder([INTEL], str(system)) == folder, "same content, same folder"


def test_the_private_temporary_cache_is_made_only_where_the_caches_folder_is_no_good(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Trial 87: `import autotune` made an empty autotune-cache-<uid> in the temporary folder
    at every import, though the user's cache was fine."""
    made: list[bool] = []
    monkeypatch.setattr(runtimes.settings, "private_temp", lambda: made.append(True) or None)
    assert runtimes.vendors_folder([INTEL], str(_system(tmp_path, nvidia="/usr/lib/x.so"))) is not None
    assert made == []


def test_files_a_cache_cleaner_removed_from_the_folder_are_written_again(tmp_path: Path) -> None:
    """Trial 39: a cleaner that deletes old files and leaves folders removed the runtime's ICD
    file; the folder existed, so it was never refilled, and Intel's runtime was gone for good."""
    system = _system(tmp_path, nvidia="/usr/lib/libnvidia-opencl.so.1")
    folder = runtimes.vendors_folder([INTEL], str(system))
    assert folder is not None
    whole = _contents(folder)
    (folder / "autotune-intel-cpu.icd").unlink()
    (folder / "nvidia.icd").write_text("")  # cut short
    assert runtimes.vendors_folder([INTEL], str(system)) == folder and _contents(folder) == whole


def test_a_runtime_the_system_registers_is_not_added_twice(tmp_path: Path) -> None:
    system = _system(tmp_path, intel="/opt/intel/oneapi/lib/libintelocl.so")
    assert runtimes.vendors_folder([INTEL], str(system)) is None


def test_a_single_icd_file_or_library_in_the_variable_is_kept(tmp_path: Path) -> None:
    system = _system(tmp_path, nvidia="/usr/lib/libnvidia-opencl.so.1")
    one = runtimes.vendors_folder([INTEL], str(system / "nvidia.icd"))
    assert one is not None and _contents(one)["nvidia.icd"] == "/usr/lib/libnvidia-opencl.so.1"
    lib = runtimes.vendors_folder([INTEL], "/usr/lib/libnvidia-opencl.so.1")
    assert lib is not None and "/usr/lib/libnvidia-opencl.so.1" in _contents(lib).values()


def test_register_points_the_loader_at_the_folder_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    system = _system(tmp_path, nvidia="/usr/lib/libnvidia-opencl.so.1")
    monkeypatch.setenv("OCL_ICD_VENDORS", str(system))
    monkeypatch.delenv("AUTOTUNE_SYSTEM_OPENCL", raising=False)
    monkeypatch.setattr(runtimes, "installed", lambda: [INTEL])
    assert runtimes.register() == [INTEL]
    folder = Path(os.environ["OCL_ICD_VENDORS"])
    assert folder != system and set(_contents(folder)) == {"nvidia.icd", "autotune-intel-cpu.icd"}
    assert runtimes.register() == [] and os.environ["OCL_ICD_VENDORS"] == str(folder), \
        "a worker process (which inherits the variable) registers nothing more"


def test_system_opencl_only_leaves_the_loader_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OCL_ICD_VENDORS", "/somewhere")
    monkeypatch.setenv("AUTOTUNE_SYSTEM_OPENCL", "1")
    monkeypatch.setattr(runtimes, "installed", lambda: [INTEL])
    assert runtimes.register() == [] and os.environ["OCL_ICD_VENDORS"] == "/somewhere"


def test_no_writable_cache_keeps_the_system_setup_and_the_advice_says_why(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("AUTOTUNE_CACHE", str(blocker / "cache"))  # a file where a folder must go
    monkeypatch.setenv("OCL_ICD_VENDORS", str(_system(tmp_path, nvidia="/usr/lib/libnvidia-opencl.so.1")))
    monkeypatch.delenv("AUTOTUNE_SYSTEM_OPENCL", raising=False)
    monkeypatch.setattr(runtimes, "installed", lambda: [INTEL])
    monkeypatch.setattr(runtimes, "_hidden", None)
    before = os.environ["OCL_ICD_VENDORS"]
    monkeypatch.setattr(runtimes.settings, "private_temp", lambda: None)  # and no private one in /tmp
    assert runtimes.register() == [] and os.environ["OCL_ICD_VENDORS"] == before
    advice = runtimes.cpu_fix()
    assert "intel-cpu is not visible" in advice and "AUTOTUNE_CACHE" in advice, advice
    assert "pip install" not in advice, "the runtime is installed: installing it again fixes nothing"


@pytest.mark.parametrize("value", ["1", "on", "Yes"])
def test_the_advice_names_autotune_system_opencl_where_it_hides_the_installed_runtime(monkeypatch, value):
    monkeypatch.setenv("AUTOTUNE_SYSTEM_OPENCL", value)
    monkeypatch.setattr(runtimes, "installed", lambda: [INTEL])
    assert runtimes.cpu_fix() == (f"AUTOTUNE_SYSTEM_OPENCL={value} hides the installed runtime intel-cpu; "
                                  "unset it to use it")


_PLATFORMS = "import autotune, json, pyopencl as cl; print(json.dumps([p.name for p in cl.get_platforms()]))"


def _platforms(env: dict[str, str]) -> list[str]:
    out = subprocess.run([sys.executable, "-c", _PLATFORMS], capture_output=True, text=True,
                         timeout=120, env=env, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(not runtimes.installed(), reason="intel-opencl-rt is not installed (the cpu extra)")
def test_importing_autotune_finds_intels_runtime_and_a_system_driver(tmp_path: Path, cache: Path) -> None:
    # The "system driver" is PyOpenCL's bundled PoCL, registered by path as a GPU driver would be.
    import pyopencl

    pocl = next((Path(pyopencl.__file__).parent / ".libs").glob("libpocl*.so*"), None)
    if pocl is None:
        pytest.skip("this pyopencl bundles no PoCL to stand in for a system driver")
    base = {k: v for k, v in os.environ.items() if k not in ("OCL_ICD_VENDORS", "AUTOTUNE_SYSTEM_OPENCL")}
    base["AUTOTUNE_CACHE"] = str(cache)
    empty = tmp_path / "empty"
    empty.mkdir()
    without = _platforms(dict(base, OCL_ICD_VENDORS=str(empty)))
    with_driver = _platforms(dict(base, OCL_ICD_VENDORS=str(_system(tmp_path, driver=str(pocl)))))
    assert without.count("Intel(R) OpenCL") == 1 and with_driver.count("Intel(R) OpenCL") == 1
    pocl_name = "Portable Computing Language"
    assert with_driver.count(pocl_name) == without.count(pocl_name) + 1, \
        "the system's ICD was lost when autotune registered its runtime"
    system_only = _platforms(dict(base, OCL_ICD_VENDORS=str(empty), AUTOTUNE_SYSTEM_OPENCL="1"))
    assert "Intel(R) OpenCL" not in system_only


@pytest.mark.parametrize(("value", "on"), [("1", True), (" On ", True), ("yes", True), ("0", False),
                                           ("off", False), ("FALSE", False), ("", False)])
def test_system_opencl_reads_the_usual_on_and_off_words(monkeypatch, value, on):
    from autotune import settings

    monkeypatch.setenv("AUTOTUNE_SYSTEM_OPENCL", value)
    assert settings.system_opencl_only() is on


def test_an_on_off_variable_with_another_value_warns_and_keeps_its_default(monkeypatch):
    from autotune import settings
    from autotune.errors import AutotuneWarning

    monkeypatch.setattr(settings, "_WARNED", set())
    monkeypatch.setenv("AUTOTUNE_MEASURE_UNTUNED", "of")  # a typo of "off"
    with warnings.catch_warnings():  # trial 101: made an error, it was raised by the first call alone
        warnings.simplefilter("error", AutotuneWarning)
        for _ in range(2):
            with pytest.raises(AutotuneWarning, match="AUTOTUNE_MEASURE_UNTUNED='of' is neither on"):
                settings.measure_untuned()
    with pytest.warns(AutotuneWarning, match=r"AUTOTUNE_MEASURE_UNTUNED='of' is neither on .* default, on"):
        assert settings.measure_untuned() is True
    with warnings.catch_warnings():  # trial 57: once a process, not on every load_kernel call
        warnings.simplefilter("error")
        assert settings.measure_untuned() is True
    monkeypatch.setenv("AUTOTUNE_SYSTEM_OPENCL", "y")
    with pytest.warns(AutotuneWarning, match="default, off"):
        assert settings.system_opencl_only() is False


def test_a_bad_system_opencl_value_is_one_warning_line_from_the_cli(tmp_path: Path) -> None:
    """Read at import, it warned in Python's two-line form (file, line, then the source line
    ``from autotune.cli import main``) before the CLI could print it as its other warnings."""
    env = {k: v for k, v in os.environ.items() if k != "OCL_ICD_VENDORS"}
    env.update(AUTOTUNE_SYSTEM_OPENCL="maybe", AUTOTUNE_CACHE=str(tmp_path / "c"), AUTOTUNE_HOME=str(tmp_path / "h"),
               OCL_ICD_VENDORS=str(tmp_path / "none"))  # no system driver to probe
    out = subprocess.run([sys.executable, "-m", "autotune", "show"], capture_output=True, text=True, timeout=120,
                         env=env)
    warned = [line for line in out.stderr.splitlines() if "AUTOTUNE_SYSTEM_OPENCL='maybe'" in line]
    assert warned == ["autotune: warning: $AUTOTUNE_SYSTEM_OPENCL='maybe' is neither on (1, true, yes, on) nor off "
                      "(0, false, no, off); taking the default, off"], out.stderr
    assert "Traceback" not in out.stderr


@pytest.mark.parametrize(("value", "selector"), [(" 0:0\n", "0:0"), ("  ", None), ("nvidia", "nvidia")])
def test_the_device_variable_is_read_without_surrounding_blanks(monkeypatch, value, selector):
    from autotune import settings

    monkeypatch.setenv("AUTOTUNE_DEVICE", value)
    assert settings.default_device_selector() == selector


def test_the_advice_names_import_order_where_the_installed_runtime_is_not_listed(monkeypatch) -> None:
    """Trial 32: a context made before `import autotune` was on PoCL alone, and load_kernel's
    error said to `pip install 'autotune[cpu]'`, which was installed."""
    import pyopencl as cl

    class Platform:
        name = "Portable Computing Language"

    monkeypatch.delenv("AUTOTUNE_SYSTEM_OPENCL", raising=False)
    monkeypatch.setattr(runtimes, "_hidden", None)
    monkeypatch.setattr(runtimes, "installed", lambda: [INTEL])
    monkeypatch.setattr(cl, "get_platforms", lambda: [Platform()])
    advice = runtimes.cpu_fix()
    assert advice.startswith("the installed runtime intel-cpu is not among this process's OpenCL platforms: "
                             "import autotune before anything lists them"), advice
    assert advice.endswith("where autotune came first, the runtime failed to load (/venv/lib/libintelocl.so)")
    Platform.name = "Intel(R) OpenCL"
    assert runtimes.cpu_fix().startswith("install a CPU OpenCL runtime"), "listed: nothing to say of the order"
    monkeypatch.setattr(runtimes, "installed", lambda: [])
    Platform.name = "Portable Computing Language"
    assert runtimes.cpu_fix().startswith("install a CPU OpenCL runtime"), "not installed: install it"


def test_pyopencls_caches_go_under_autotunes_where_the_home_cache_cannot_be_written(tmp_path: Path,
                                                                                   monkeypatch: pytest.MonkeyPatch):
    """Trial 39: with a read-only home, pyopencl's cache could not be written: `run` said to
    install a CPU OpenCL runtime, and load_kernel raised a raw OSError."""
    from autotune import caches

    home_cache = tmp_path / "home" / ".cache"
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("AUTOTUNE_CACHE", str(tmp_path / "autotune-cache"))
    # as platformdirs does: the variable's folder where it is set
    monkeypatch.setattr(caches.platformdirs, "user_cache_dir",
                        lambda *a, **k: os.environ.get("XDG_CACHE_HOME") or str(home_cache))
    monkeypatch.setattr(caches.settings, "usable", lambda path: not path.is_relative_to(tmp_path / "home"))
    assert caches.redirect() == tmp_path / "autotune-cache" / "xdg"
    assert os.environ["XDG_CACHE_HOME"] == str(tmp_path / "autotune-cache" / "xdg")
    assert caches.redirect() is None, "a variable naming a writable folder is left as it is"
    # trial 77: set to a folder this user cannot write (a site's), it is redirected too
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "home" / "site-cache"))
    assert caches.redirect() == tmp_path / "autotune-cache" / "xdg"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setattr(caches.settings, "usable", lambda path: True)
    assert caches.redirect() is None and "XDG_CACHE_HOME" not in os.environ


def test_a_cache_folder_on_a_full_disk_is_not_usable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Trial 83: a full ~/.cache (writable, no room) broke every command with pyopencl's and
    pytools' "database or disk is full" tracebacks; it is passed over as an unwritable one is."""
    from autotune import settings

    real = os.statvfs(tmp_path)
    assert settings.usable(tmp_path / "not" / "made") == (real.f_bavail * real.f_frsize >= settings.ROOM_BYTES)

    class Full:
        f_bavail, f_frsize = 7, 4096

    monkeypatch.setattr(settings.os, "statvfs", lambda path: Full())
    assert not settings.usable(tmp_path / "not" / "made") and settings.writable(tmp_path / "not" / "made")


def test_a_home_whose_cache_cannot_be_written_gets_a_private_temporary_cache(tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch):
    """Trial 55: with a read-only home, import autotune registered no bundled runtime (silently),
    and pyopencl waited a minute on its cache lock for each build."""
    from autotune import settings

    home_cache = tmp_path / "home" / ".cache"
    monkeypatch.delenv("AUTOTUNE_CACHE", raising=False)
    monkeypatch.setattr(settings.platformdirs, "user_cache_dir", lambda *a, **k: str(home_cache / "autotune"))
    monkeypatch.setattr(settings, "writable", lambda path: not path.is_relative_to(tmp_path / "home"))
    monkeypatch.setattr(settings.tempfile, "gettempdir", lambda: str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    settings.pin_folders()
    private = tmp_path / "tmp" / f"autotune-cache-{os.getuid()}"
    assert os.environ["AUTOTUNE_CACHE"] == str(private) and settings.cache_dir() == private
    assert private.is_dir() and private.stat().st_mode & 0o777 == 0o700

    monkeypatch.delenv("AUTOTUNE_CACHE")  # a folder others may write, or a link planted there, is not used
    private.chmod(0o777)
    settings.pin_folders()
    assert "AUTOTUNE_CACHE" not in os.environ
    private.rmdir()
    private.symlink_to(tmp_path / "tmp")
    settings.pin_folders()
    assert "AUTOTUNE_CACHE" not in os.environ

    monkeypatch.setattr(settings, "writable", lambda path: True)  # a home that can be written: its own
    settings.pin_folders()
    assert "AUTOTUNE_CACHE" not in os.environ


def test_import_in_a_folder_that_is_gone_with_a_relative_cache_does_not_fail(tmp_path: Path):
    """Trial 58: the read-only-home fallback read the relative AUTOTUNE_CACHE outside the guard
    for a working folder that is gone, and `import autotune` raised FileNotFoundError."""
    gone = tmp_path / "gone"
    gone.mkdir()
    script = f"import os; os.chdir({str(gone)!r}); os.rmdir({str(gone)!r}); import autotune; print('imported')"
    env = {k: v for k, v in os.environ.items() if k != "OCL_ICD_VENDORS"}  # as in a fresh shell
    for system_only in ("1", "0"):  # trial 61: registering the bundled runtime failed the same way
        out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                             env={**env, "AUTOTUNE_SYSTEM_OPENCL": system_only, "AUTOTUNE_CACHE": "relcache"})
        assert out.returncode == 0 and out.stdout.strip() == "imported", out.stderr[-2000:]
        gone.mkdir()


def test_an_icd_folder_another_user_could_have_written_is_not_used(tmp_path: Path, cache: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Trial 77: in an AUTOTUNE_CACHE shared by a group, another user planted an ICD file beside
    autotune's in the folder of the expected name, and the loader ran that user's library here;
    trial 79: a check of that folder alone let its shared parent be swapped."""
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    monkeypatch.setattr(runtimes.settings, "private_temp", lambda: private)
    system = _system(tmp_path, nvidia="/usr/lib/libnvidia-opencl.so.1")
    own = runtimes.vendors_folder([INTEL], str(system))
    assert own is not None and own.parent.parent == cache
    (own / "zz-planted.icd").write_text("/home/other/evil.so\n")  # while an older version left it writable
    own.chmod(0o777)
    assert runtimes.vendors_folder([INTEL], str(system)) == own  # this user's: tightened, the plant removed
    assert sorted(_contents(own)) == ["autotune-intel-cpu.icd", "nvidia.icd"] and not own.stat().st_mode & 0o022
    cache.chmod(0o777)  # a folder above it that others can write: swappable
    elsewhere = runtimes.vendors_folder([INTEL], str(system))
    assert elsewhere is not None and elsewhere.parent.parent == private
    assert sorted(_contents(elsewhere)) == ["autotune-intel-cpu.icd", "nvidia.icd"]
    assert runtimes.vendors_folder([INTEL], str(system)) == elsewhere, "one private folder, not one a process"
    cache.chmod(0o755)
    if os.getuid() == 0:  # another user's folder of the expected name (root can make one)
        os.chown(own, 65534, -1)
        assert runtimes.vendors_folder([INTEL], str(system)) == elsewhere


def test_a_runtime_that_did_not_load_under_an_address_space_limit_names_the_limit(monkeypatch: pytest.MonkeyPatch):
    """Trial 83: under `ulimit -v 400000` Intel's runtime did not load, and the advice was only
    about the order of imports."""
    import resource

    monkeypatch.setattr(resource, "getrlimit", lambda which: (400000 * 1024, resource.RLIM_INFINITY))
    assert runtimes._limited() == (": this process's address space is limited to 0.4 GiB (ulimit -v), which a "
                                   "runtime mapping its libraries may exceed; raise the limit")
    monkeypatch.setattr(resource, "getrlimit", lambda which: (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
    assert runtimes._limited() == ""
