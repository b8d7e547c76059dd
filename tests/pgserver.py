"""A throw-away PostgreSQL server for the worker tests: Debian's package, a cluster in a
temporary folder, reached on a Unix socket there (no port, no password: trust on the socket).

The package is installed with apt-get when it is missing and this runs as root (CI's clean
machine); otherwise the tests that need it are skipped with the reason. PostgreSQL refuses to
run as root, so as root the server runs as the ``postgres`` user the package creates.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


class Unavailable(Exception):
    """No PostgreSQL server can be had here; the message says why."""


def _bin_dir() -> Path | None:
    found = shutil.which("pg_ctl")
    if found:
        return Path(os.path.realpath(found)).parent
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
    return Path(versions[-1]).parent if versions else None


def _install() -> None:
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        raise Unavailable("PostgreSQL is not installed, and installing it needs root and apt-get "
                          "(apt-get install postgresql)")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for args in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", "postgresql"]):
        done = subprocess.run(args, env=env, capture_output=True, text=True, timeout=600)
        if done.returncode != 0:
            raise Unavailable(f"{' '.join(args)} failed: {done.stderr.strip()[-300:]}")


def _as_server_user(args: list[str]) -> list[str]:
    return ["runuser", "-u", "postgres", "--", *args] if os.geteuid() == 0 else args


@contextmanager
def server() -> Iterator[str]:
    """Start a cluster in a new temporary folder; yields its SQLAlchemy URL; stops it and
    removes the folder afterwards. (Not pytest's tmp_path: as root that is closed to the
    server's user.)"""
    import psycopg2  # noqa: F401  (the driver the URL names: part of the test extra)

    bin_dir = _bin_dir()
    if bin_dir is None:
        _install()
        bin_dir = _bin_dir()
        if bin_dir is None:
            raise Unavailable("apt-get installed postgresql, but no pg_ctl was found")
    folder = Path(tempfile.mkdtemp(prefix="autotune-pg-"))
    data, sock = folder / "data", folder / "sock"
    sock.mkdir(exist_ok=True)
    if os.geteuid() == 0:
        shutil.chown(folder, "postgres")
        shutil.chown(sock, "postgres")
    run = lambda *args: subprocess.run(_as_server_user([str(bin_dir / args[0]), *args[1:]]),  # noqa: E731
                                       capture_output=True, text=True, timeout=120)
    init = run("initdb", "-D", str(data), "-U", "autotune", "--auth=trust", "-E", "UTF8")
    if init.returncode != 0:
        raise Unavailable(f"initdb failed: {init.stderr.strip()[-300:]}")
    start = run("pg_ctl", "-D", str(data), "-l", str(folder / "server.log"), "-w", "-o",
                f"-k {sock} -c listen_addresses='' -c max_connections=100", "start")
    if start.returncode != 0:
        log = (folder / "server.log").read_text() if (folder / "server.log").exists() else ""
        raise Unavailable(f"pg_ctl start failed: {(start.stderr + log).strip()[-300:]}")
    try:
        yield f"postgresql+psycopg2://autotune@/postgres?host={sock}"
    finally:
        run("pg_ctl", "-D", str(data), "-m", "immediate", "-w", "stop")
        shutil.rmtree(folder, ignore_errors=True)
