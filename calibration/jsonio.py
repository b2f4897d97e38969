"""Atomic JSON writes for the GPU-side scripts (stdlib only: they run where launchsim's deps may be missing)."""

from __future__ import annotations

import json
import os


def dump(obj, path) -> None:
    """Write `obj` as JSON to `path` atomically (temp file + os.replace), so a run cut short keeps the last whole file."""
    tmp = str(path) + ".tmp"
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=1)
    os.replace(tmp, path)
