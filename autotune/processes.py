"""A process as its claims and temporary folders name it (host and process id), and whether
such a process of this host has ended.

Example:
    >>> gone(owner_name())
    False
"""

from __future__ import annotations

import os
import socket


def owner_name() -> str:
    """This process: host and process id."""
    return f"{socket.gethostname()}:{os.getpid()}"


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
