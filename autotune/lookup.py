"""The spec a kernel name or path names, for the commands and ``load_kernel`` alike: a name
that is no built-in kernel but that tuned entries here record a spec file for is answered with
that file (trial 52: `show conv` found it, `run conv` did not; trial 63: `load_kernel` neither).
"""

from __future__ import annotations

from . import profiles, settings
from . import spec as specs
from .errors import SpecError


def load_spec(name: str) -> specs.KernelSpec:
    """:func:`autotune.spec.load`, with the spec files the profiles record for an unknown name."""
    try:
        return specs.load(name)
    except SpecError as exc:
        recorded = profiles.recorded_spec_files(name, settings.profiles_dir()) \
            if str(exc).startswith(f"unknown kernel {name!r}") else []
        if not recorded:
            raise
        which = f"{recorded[0]}: give that path" if len(recorded) == 1 else \
            f"{', '.join(recorded)}: give the path of the one you mean"  # trial 53: the first alone
        raise SpecError(f"{exc}; the tuned entries of {name} here were tuned with {which}") from None
