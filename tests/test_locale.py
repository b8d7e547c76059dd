"""autotune in a locale that is not UTF-8 (trial 34: in a Latin-1 locale every shipped template
decoded to other text, so every tuned entry read as stale and a run replaced good ones; `list`
and `probe` ended in UnicodeEncodeError tracebacks)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from autotune import profiles
from autotune import spec as specs

#: An ASCII locale with Python's UTF-8 mode and C-locale coercion off, as on a system whose
#: locale is neither C nor UTF-8.
ASCII = {"LC_ALL": "C", "LANG": "C", "PYTHONUTF8": "0", "PYTHONCOERCECLOCALE": "0"}


def _python(code: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, **ASCII, AUTOTUNE_HOME=str(tmp_path / "home"))
    return subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=120, env=env,
                          encoding="utf-8", errors="replace")


def test_spec_hashes_and_profiles_do_not_depend_on_the_locale(tmp_path: Path) -> None:
    names = ["matmul", "mul1", "correlate"]  # their templates hold non-ASCII characters
    profile = tmp_path / "dev.yaml"
    code = (f"import json, sys; from autotune import profiles, spec; print(sys.getfilesystemencoding(), "
            f"json.dumps([spec.load(n).spec_hash for n in {names!r}])); "
            f"profiles.save(profiles.Entry(problem={{'N': 8}}, params={{'WG': 1}}, build_flags=(), time_ms=1.0, "
            f"throughput={{}}, trials=1, tuned_at='', spec_hash='h'), 'k', {{'name': 'D\\u00e9v \\u00b5'}}, "
            f"__import__('pathlib').Path({str(profile)!r}))")
    done = _python(code, tmp_path)
    assert done.returncode == 0, done.stderr
    encoding, hashes = done.stdout.split(" ", 1)
    assert encoding == "ascii", "the subprocess did not get an ASCII locale: the test tests nothing"
    assert json.loads(hashes) == [specs.load(n).spec_hash for n in names]
    assert profiles.read(profile)["device"]["name"] == "Dév µ"
    assert "name: Dév µ" in profile.read_text(encoding="utf-8")  # as written (trial 99: "D\xE9v \xB5")


def test_output_with_characters_the_locale_lacks_is_not_a_traceback(tmp_path: Path) -> None:
    done = _python("from autotune.cli import main; raise SystemExit(main(['list']))", tmp_path)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert "multi-precision number ? one digit" in done.stdout  # Σ-free, '?' for what ASCII lacks


def test_a_utf8_home_under_an_ascii_locale_is_told_to_use_a_utf8_locale_not_called_bytes(tmp_path: Path) -> None:
    """Trial 83: a valid UTF-8 AUTOTUNE_HOME under LANG=C and PYTHONUTF8=0 was refused as "bytes
    that are not UTF-8 text"."""
    home = tmp_path / "h\u00f6me"
    home.mkdir()
    code = (f"import os; os.environ['AUTOTUNE_HOME'] = os.fsdecode({os.fsencode(home)!r}); "
            "import sys\nfrom autotune import settings\ntry: settings.default_storage()\n"
            "except Exception as e: sys.stdout.buffer.write(str(e).encode())")
    done = _python(code, tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == (f"AUTOTUNE_HOME ({home}) is not ASCII, and this process reads file names as ascii "
                                   "(its locale), so a database URL cannot name it; use a UTF-8 locale "
                                   "(LC_ALL=C.UTF-8) or set PYTHONUTF8=1"), done.stdout
