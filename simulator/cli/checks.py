"""Checks of command-line numbers, shared by the commands: each bad value is one `UserError` line naming the flag."""

from __future__ import annotations

import math
from contextlib import contextmanager

from simulator.common import limits as L
from simulator.common.errors import UserError


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


@contextmanager
def named(flag: str):
    """Prefix any UserError raised in the body with the flag whose value caused it."""
    try:
        yield
    except UserError as e:
        if str(e).startswith(flag):
            raise
        raise UserError(f"{flag}: {e}") from None


@contextmanager
def as_flags(fields: dict[str, str]):
    """Name flags where a lower layer's error names the fields they fill (`max_size must be ...` ->
    `--max-size must be ...`): layers below cli/ speak in fields (tests/test_architecture.py)."""
    import re

    try:
        yield
    except UserError as e:
        msg = str(e)
        for f in sorted(fields, key=len, reverse=True):
            msg = re.sub(rf"(?<![-\w.]){f}(?![-\w])", fields[f], msg)
        raise UserError(msg) from None


def model_flag(flag: str, v: str | None):
    """Load a --model value (preset or config.json) with errors naming the flag."""
    if v is None:
        return None
    from simulator.model.models import load_model

    with named(flag):
        return load_model(v)


def profile_flag(flag: str, v: str | None):
    from simulator.model.profile import load_profile

    with named(flag):
        if v is not None and not v.strip():
            raise UserError("empty profile name")
        return load_profile(v)


def workload_fusion(fusion) -> None:
    """traces/whatif.check_workload_fusion, its error naming --fusion."""
    from simulator.traces.whatif import check_workload_fusion

    try:
        check_workload_fusion(fusion)
    except UserError as e:
        raise UserError(f"--fusion: {e}") from None


def ctx_fits(model, ctx: int, extra: int = 1) -> None:
    if ctx + extra > model.max_position_embeddings:
        raise UserError(f"--ctx {ctx} (+{extra} new token(s)) exceeds {model.name}'s max_position_embeddings "
                        f"{model.max_position_embeddings}")
