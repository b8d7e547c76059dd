"""A process as its claims and temporary folders name it (host and process id), and whether
such a process of this host has ended.

Example:
    >>> gone(owner_name())
    False
"""

from __future__ import annotations

import multiprocessing as mp
import os
import socket

#: How a worker process of a command on several devices is named (:mod:`autotune.fleet`).
WORKER_PREFIX = "autotune-worker-"


def owner_name() -> str:
    """This process: host and process id."""
    return f"{socket.gethostname()}:{os.getpid()}"


def command_name() -> str:
    """The autotune command this process works for, as :func:`owner_name` names it: its
    parent, in a worker of a command on several devices; else this process."""
    parent = mp.parent_process()
    if parent is not None and parent.pid is not None and mp.current_process().name.startswith(WORKER_PREFIX):
        return f"{socket.gethostname()}:{parent.pid}"
    return owner_name()


def gone(owner: str) -> bool:
    """Whether ``owner`` (:func:`owner_name`) was a process of this host that no longer runs;
    False for another host's, whose processes cannot be seen from here."""
    host, _, pid = owner.rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except OSError:  # it runs, as another user's
        return False
    return False
