"""Checks of command-line numbers, shared by the commands: each bad value is one `UserError` line naming the flag."""

from __future__ import annotations

import math

from .. import limits as L
from ..errors import UserError


def count(flag: str, v: int | None, cap: int, low: int = 1) -> int | None:
    """An integer flag in [low, cap] (None passes)."""
    if v is None:
        return None
    if v < low:
        raise UserError(f"{flag} must be {'a positive integer' if low == 1 else f'>= {low}'}, got {v}")
    if v > cap:
        raise UserError(f"{flag} {v:,} is above the limit of {cap:,}")
    return v


def seed(flag: str, v: int | None) -> int | None:
    return count(flag, v, L.MAX_SEED, low=0)


def number(flag: str, v: float | None, cap: float, what: str = "a positive number", zero_ok: bool = False):
    """A finite float flag in (0, cap] ([0, cap] with zero_ok)."""
    if v is None:
        return None
    if not math.isfinite(v) or v < 0 or (v == 0 and not zero_ok):
        raise UserError(f"{flag} must be {what}, got {v:g}")
    if v > cap:
        raise UserError(f"{flag} {v:g} is above the limit of {cap:g}")
    return v
