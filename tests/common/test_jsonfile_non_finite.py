"""simulator/common/jsonfile.py: the substring pre-check that lets a clean JSON text skip the non-finite walk never
lets a non-finite number through (hypothesis over texts with NaN, Infinity, huge exponents and long literals)."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.common.errors import UserError
from simulator.common.jsonfile import _first_non_finite, _may_be_non_finite, parse_json_text

NUMBERS = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
    st.integers(-10**6, 10**6).map(str),
    st.sampled_from(["NaN", "Infinity", "-Infinity", "1e999", "-2E+308", "1.5e308", "9e-999", "1E0400",
                     "9" * 309 + ".5", "9" * 320, "1e99", "0.0"]),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(NUMBERS, min_size=1, max_size=6), st.text(max_size=8))
def test_the_pre_check_never_hides_a_non_finite_number(nums, key):
    text = "{" + json.dumps(key) + ": [" + ", ".join(nums) + "]}"
    data = json.loads(text)
    bad = any(isinstance(v, float) and not math.isfinite(v) for v in data[key])
    if bad:
        assert _may_be_non_finite(text)
        with pytest.raises(UserError, match="not a finite number"):
            parse_json_text(text, "x.json")
    else:
        assert parse_json_text(text, "x.json") == data
    assert (_first_non_finite(data, text) is None) == (not bad)


def test_hand_cases():
    assert not _may_be_non_finite('{"a": [1e-05, 2.5e+20, 123456789], "note": "e12 of 2"}')
    for t in ('{"a": NaN}', '{"a": 1e308}', '{"a": 1E-400}', '{"s": "Infinity"}', '{"a": ' + "1" * 309 + "}"):
        assert _may_be_non_finite(t), t  # may: the walk decides (1e308 is finite, a string is not a number)
    assert parse_json_text('{"s": "NaN", "a": 1e308}', "x.json") == {"s": "NaN", "a": 1e308}
