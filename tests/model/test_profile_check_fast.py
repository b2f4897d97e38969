"""simulator/model/profile_check.py: the C-speed shortcuts (lists of clean numbers not walked item by item, clean
axes and columns of plain values checked at once) give the same first error, or none, as the item-by-item checks
they replace. The reference below is check_profile as it was before them (commit 5fd205d), run on the shipped
profiles with one value (a number, an axis, a column, a row) replaced by hypothesis."""

from __future__ import annotations

import copy
import json
import math

from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.common.errors import UserError
from simulator.common.jsonfile import field_error
from simulator.model.profile import ProfileError, profile_path
from simulator.model.profile_check import AXES, NEEDED_TABLES, SKIP, SKIP_PATHS, check_profile


def _num(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _walk(x, loc: tuple):
    stack = [(loc, x)]
    while stack:
        loc, x = stack.pop()
        yield loc, x
        if isinstance(x, dict):
            stack.extend(reversed([(loc + (k,), v) for k, v in x.items()
                                   if not (loc == () and k in SKIP) and loc + (k,) not in SKIP_PATHS]))
        elif isinstance(x, list):
            stack.extend(reversed([(loc + (i,), v) for i, v in enumerate(x)]))


def _check_table(d: dict, loc: tuple, fail) -> None:
    axes = [k for k in AXES if isinstance(d.get(k), list)]
    for a in axes:
        xs = d[a]
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
        if k in axes or not isinstance(v, list) or any(isinstance(r, dict) for r in v):
            continue
        if v and all(isinstance(r, list) for r in v):
            if len(v) != n0:
                fail(loc + (k,), f"needs {n0} rows (one per {axes[0]} value), got {len(v)}")
            if len(axes) > 1:
                n1 = len(d[axes[1]])
                for i, r in enumerate(v):
                    if len(r) != n1:
                        fail(loc + (k, i), f"needs {n1} values (one per {axes[1]} value), got {len(r)}")
        elif len(v) != n0:
            fail(loc + (k,), f"needs {n0} values (one per {axes[0]} value), got {len(v)}")


def reference_check(raw, where, text, error) -> None:
    """check_profile before the shortcuts (item by item)."""
    if not isinstance(raw, dict):
        return

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


_RAW = {n: json.loads(profile_path(n).read_text()) for n in ("h200", "h100-sxm", "datasheet-h200")}
_LISTS = {n: [loc for loc, v in _walk(raw, ()) if isinstance(v, list) and loc[:1] == ("device",)]
          for n, raw in _RAW.items()}

SCALARS = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-3, 10**400), st.booleans(),
                    st.none(), st.just("x"), st.just(-0.0), st.just(0))


def _outcome(check, raw):
    try:
        check(raw, "p.json", None, ProfileError)
    except UserError as e:
        return str(e)
    except (OverflowError, TypeError) as e:  # the item checks' own failures on odd values: the same in both
        return f"{type(e).__name__}: {e}"
    return None


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(sorted(_RAW)), st.data())
def test_shortcuts_find_what_the_item_checks_find(name, data):
    # the profile with the containers on the path to the changed list copied (the rest shared with _RAW: neither
    # check writes what it reads), the same value a deep copy gives at a small part of its cost
    loc = data.draw(st.sampled_from(_LISTS[name]))
    raw = node = copy.copy(_RAW[name])
    for k in loc:
        node[k] = copy.copy(node[k])
        node = node[k]
    how = data.draw(st.sampled_from(["item", "shuffle", "drop", "append", "empty", "scalars"]))
    if how == "item" and node:
        node[data.draw(st.integers(0, len(node) - 1))] = data.draw(SCALARS)
    elif how == "shuffle":
        node.reverse()
    elif how == "drop" and node:
        node.pop()
    elif how == "append":
        node.append(data.draw(SCALARS))
    elif how == "empty":
        node.clear()
    elif how == "scalars":
        node[:] = data.draw(st.lists(SCALARS, max_size=5))
    assert _outcome(check_profile, raw) == _outcome(reference_check, raw)


def test_the_shipped_profiles_pass_both():
    for raw in _RAW.values():
        assert _outcome(check_profile, raw) is None and _outcome(reference_check, raw) is None
