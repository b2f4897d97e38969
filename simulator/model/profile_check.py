"""Generic sanity checks of a profile's JSON before schema validation, each failure one line
`FILE:LINE: field 'device.tables.gemm[0].m': message`.

Checked generically, so that new optional fields pass without changes here (unknown keys are never refused; the
GEMM grid, `device.tables.gemm_grid`, ~20k numbers, is left to its own schema model, profile.GemmGrid):
- every number (outside `environment`) is finite and non-negative;
- a distribution (an object with `p50`) has p10 <= p50 <= p90, and the host `step_factor` is positive;
- a table's axes (`bytes`, `m`, `batch`, `ctx`: lists of numbers) are positive and strictly increasing, and each
  list-valued column beside them has one value per axis point (a list of rows: len(batch) rows of len(ctx));
- a measured or derived profile has the kernel-time tables it was measured for (gemm, attention, elementwise):
  without them every kernel would silently fall back to the roofline formula.
"""

from __future__ import annotations

import math
import operator

from simulator.common.errors import UserError
from simulator.common.jsonfile import field_error, read_json

AXES = ("bytes", "m", "batch", "ctx")
SKIP = ("environment",)
SKIP_PATHS = (("device", "tables", "gemm_grid"),)  # checked by its own schema model (profile.GemmGrid)
NEEDED_TABLES = ("gemm", "attention", "elementwise")


def read_profile_file(path, error: type[UserError]):
    """(raw, text) of a profile file; unreadable, binary, non-UTF-8 or malformed JSON is one `error` line."""
    return read_json(path, "profile", error)


def _num(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _walk(x, loc: tuple):
    """(loc, value) of every node, depth first in document order (an explicit stack: a recursive generator passed
    each of h200.json's ~3,900 values up through every level above it); the items of a list of clean numbers
    (`_clean_numbers`: nothing for check_profile to find in them) are not visited."""
    stack = [(loc, x)]
    pop, push = stack.pop, stack.extend
    while stack:
        loc, x = pop()
        yield loc, x
        if isinstance(x, dict):
            push(reversed([(loc + (k,), v) for k, v in x.items()
                           if not (loc == () and k in SKIP) and loc + (k,) not in SKIP_PATHS]))
        elif isinstance(x, list) and not _clean_numbers(x):
            push(reversed([(loc + (i,), v) for i, v in enumerate(x)]))


def _clean_numbers(xs: list) -> bool:
    """Whether `xs` holds only numbers (int or float, no bool), all finite and >= 0: then check_profile's item checks
    (finite, not negative) find nothing in it, and its items, which are not objects, hold no table. At C speed (a
    profile's table columns and grid rows are most of its ~10k checked values); False (its items are then checked
    one by one, as always) for anything else, a sum that overflows included."""
    if not xs or not set(map(type, xs)) <= _NUMBER_TYPES:
        return False
    try:
        return math.isfinite(sum(xs)) and min(xs) >= 0
    except OverflowError:  # an int too large for a float: the item check says so
        return False


_NUMBER_TYPES = {int, float}
_SCALAR_TYPES = {int, float, bool, str, type(None)}  # neither a record (dict) nor a row (list)


def _check_table(d: dict, loc: tuple, fail) -> None:
    axes = [k for k in AXES if isinstance(d.get(k), list)]
    for a in axes:
        xs = d[a]
        if xs and set(map(type, xs)) <= _NUMBER_TYPES and min(xs) > 0 and all(map(operator.lt, xs, xs[1:])):
            continue  # numbers, positive, strictly increasing (at C speed): the checks below find nothing
        if not xs:
            fail(loc + (a,), "an axis needs at least one point")
        for i, v in enumerate(xs):
            if not _num(v) or v <= 0:
                fail(loc + (a, i), f"axis values must be positive numbers, got {v!r}")
        for i in range(1, len(xs)):
            if xs[i] <= xs[i - 1]:
                fail(loc + (a, i), f"axis must be strictly increasing ({xs[i - 1]!r} then {xs[i]!r})")
    if not axes:
        return
    n0 = len(d[axes[0]])
    for k, v in d.items():
        if k in axes or not isinstance(v, list):
            continue
        if set(map(type, v)) <= _SCALAR_TYPES:  # a column of plain values (the usual case, at C speed)
            if len(v) != n0:
                fail(loc + (k,), f"needs {n0} values (one per {axes[0]} value), got {len(v)}")
            continue
        if any(isinstance(r, dict) for r in v):
            continue  # lists of records (e.g. graph_memory layouts) are not columns of this table
        if v and all(isinstance(r, list) for r in v):  # a grid: one row per first-axis point
            if len(v) != n0:
                fail(loc + (k,), f"needs {n0} rows (one per {axes[0]} value), got {len(v)}")
            if len(axes) > 1:
                n1 = len(d[axes[1]])
                for i, r in enumerate(v):
                    if len(r) != n1:
                        fail(loc + (k, i), f"needs {n1} values (one per {axes[1]} value), got {len(r)}")
        elif len(v) != n0:
            fail(loc + (k,), f"needs {n0} values (one per {axes[0]} value), got {len(v)}")


def check_profile(raw: object, where: str, text: str | None, error: type[UserError]) -> None:
    """Raise one `error` line for the first problem found (see the module docstring)."""
    if not isinstance(raw, dict):
        return  # the schema check says "must be a JSON object"

    def fail(loc, msg):
        raise field_error(where, text, loc, msg, error)

    for loc, v in _walk(raw, ()):
        if _num(v):
            if not math.isfinite(v):
                fail(loc, f"must be a finite number, got {v!r}")
            if v < 0:
                fail(loc, f"must not be negative, got {v!r}")
        elif isinstance(v, dict):
            if "p50" in v:
                qs = [(q, v[q]) for q in ("p10", "p50", "p90") if _num(v.get(q))]
                for (qa, a), (qb, b) in zip(qs, qs[1:]):
                    if a > b:
                        fail(loc + (qb,), f"{qa} ({a!r}) > {qb} ({b!r}): percentiles must not decrease")
                if loc[-1:] == ("step_factor",):
                    for q, x in qs:
                        if x <= 0:
                            fail(loc + (q,), f"a step factor must be positive (1 = no drift), got {x!r}")
            if any(isinstance(v.get(a), list) for a in AXES) and loc[:2] in (("device", "tables"),
                                                                               ("device", "graph_memory")):
                _check_table(v, loc, fail)
    dev = raw.get("device")
    if raw.get("source") in ("measured", "derived") and isinstance(dev, dict):
        tables = dev.get("tables")
        if not isinstance(tables, dict):
            fail(("device",), f"a {raw['source']} profile needs 'tables' (measured kernel times); without them "
                              "every kernel falls back to the roofline formula")
        for k in NEEDED_TABLES:
            if not tables.get(k):
                fail(("device", "tables"), f"a {raw['source']} profile needs a non-empty '{k}' table")
