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


SHIPPED_DIR = "calibration/validation"  # the committed validation files
DEFAULT_OUT = "out/calibration"  # where a validator writes unless told otherwise: never a tracked file


def add_out_args(ap) -> None:
    """`--out DIR` (default out/calibration) and `--write-shipped` (regenerate the committed files in
    calibration/validation): a user running a validator never gets a dirty tree by accident."""
    ap.add_argument("--out", default=None, help=f"folder for the report (default {DEFAULT_OUT})")
    ap.add_argument("--write-shipped", action="store_true",
                    help=f"regenerate the committed files in {SHIPPED_DIR} (maintainers, after a calibration change)")


def out_dir(a, root=None):
    """The folder the parsed args `a` write to (`root`: the repository root a relative SHIPPED_DIR is under)."""
    from pathlib import Path

    if a.write_shipped and a.out is not None:
        raise SystemExit("give --out DIR or --write-shipped, not both")
    if a.write_shipped:
        return Path(root) / SHIPPED_DIR if root is not None else Path(SHIPPED_DIR)
    return Path(a.out if a.out is not None else DEFAULT_OUT)
