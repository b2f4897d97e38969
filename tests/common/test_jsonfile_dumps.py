"""`jsonfile.dumps` (compact, and `indent=2` as `write_json` writes) gives exactly the text of the reference
`json.dumps(finite(obj), allow_nan=False, default=_default, **kw)`: checked on random nested values (NaN and
infinities, non-ASCII and control characters, tuples, numpy scalars and arrays, non-string keys) and on a
sweep-sized list of flat rows."""

from __future__ import annotations

import json
import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.common.jsonfile import _default, dumps, finite, write_json


def reference(obj, **kw) -> str:
    return json.dumps(finite(obj), allow_nan=False, default=_default, **kw)


scalars = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=8),
    st.floats(allow_nan=True, allow_infinity=True).map(np.float64),
    st.integers(min_value=-1000, max_value=1000).map(np.int64),
    st.floats(width=32, allow_nan=True).map(np.float32),
    st.lists(st.floats(allow_nan=True), max_size=4).map(np.array),
)
keys = st.one_of(st.text(max_size=6), st.integers(-5, 5), st.booleans(), st.none(),
                 st.floats(allow_nan=False, allow_infinity=False))
values = st.recursive(scalars, lambda kids: st.one_of(
    st.lists(kids, max_size=5), st.lists(kids, max_size=4).map(tuple),
    st.dictionaries(keys, kids, max_size=5)), max_leaves=40)


@settings(max_examples=400, deadline=None)
@given(values)
def test_same_text_as_reference(obj):
    for kw in ({}, {"indent": 2}):
        assert dumps(obj, **kw) == reference(obj, **kw)


def test_hand_case():
    obj = {"a": [1, 2.5, float("nan")], "b": {"c": None, "d": True}, "e": [], "f": {}, 1: "x", "g": (1, "y")}
    assert dumps(obj, indent=2) == (
        '{\n  "a": [\n    1,\n    2.5,\n    null\n  ],\n  "b": {\n    "c": null,\n    "d": true\n  },\n'
        '  "e": [],\n  "f": {},\n  "1": "x",\n  "g": [\n    1,\n    "y"\n  ]\n}')
    assert dumps(obj) == '{"a": [1, 2.5, null], "b": {"c": null, "d": true}, "e": [], "f": {}, "1": "x", "g": [1, "y"]}'


def test_rows_and_file(tmp_path):
    rows = [{"model": "m", "i": i, "x": i / 7, "ok": i % 2 == 0, "note": None if i % 3 else "é\n",
             "inf": math.inf if i == 5 else 1.0} for i in range(2000)]
    obj = {"rows": rows, "n": len(rows)}
    write_json(tmp_path / "r.json", obj)
    assert (tmp_path / "r.json").read_text() == reference(obj, indent=2) + "\n"


def test_errors_as_before():
    for bad in ({(1, 2): 1}, {float("nan"): 1}, object()):
        for kw in ({}, {"indent": 2}):
            try:
                reference(bad, **kw)
            except (TypeError, ValueError) as e:
                want = type(e)
            try:
                dumps(bad, **kw)
            except (TypeError, ValueError) as e:
                assert type(e) is want
            else:
                raise AssertionError(f"{bad!r} was written")


@settings(max_examples=100, deadline=None)
@given(st.lists(st.dictionaries(st.text(max_size=4), scalars, max_size=4), max_size=6), values)
def test_known_text_reused_at_any_depth(rows, other):
    from simulator.common.jsonfile import indented

    known = {id(rows): indented(rows)}
    for obj in (rows, {"a": other, "rows": rows}, [other, {"x": [rows]}]):
        assert indented(obj, known) == reference(obj, indent=2)
