"""simulator/traces/blocks.py gives difflib's matching blocks exactly: `SequenceMatcher(None, a, b,
autojunk=False).get_matching_blocks()` (difflib's get_opcodes is built from those blocks alone, so it follows), on
random sequences (small alphabets, periodic runs like a decoder's layers, one element dominating as a junk-heavy
trace would, past 200 elements where difflib's autojunk would start, which align.py turns off) and on a real
trace aligned with each recipe."""

from __future__ import annotations

import difflib

from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.traces.blocks import matching_blocks
from tests.paths import ROOT


def _difflib(a, b) -> list[tuple[int, int, int]]:
    return [tuple(m) for m in difflib.SequenceMatcher(None, a, b, autojunk=False).get_matching_blocks()]


def _seq(alphabet: int, max_size: int = 400):
    return st.lists(st.integers(0, alphabet - 1), max_size=max_size)


@st.composite
def _periodic(draw):
    """A layer's tokens repeated, with a few edits: the shape of a decoder trace against a recipe."""
    layer = draw(st.lists(st.sampled_from("gnamer"), min_size=1, max_size=40))
    out = layer * draw(st.integers(1, 30))
    for _ in range(draw(st.integers(0, 8))):
        at = draw(st.integers(0, len(out)))
        if draw(st.booleans()) and at < len(out):
            del out[at]
        else:
            out.insert(at, draw(st.sampled_from("gnamerx")))
    return out


@st.composite
def _junk_heavy(draw):
    """One element far above 1 % of a long sequence (difflib's autojunk would drop it as popular)."""
    n = draw(st.integers(201, 320))
    return draw(st.lists(st.sampled_from(["e"] * 8 + ["g", "n", "a"]), min_size=n, max_size=n))


@settings(max_examples=150, deadline=None)
@given(st.integers(1, 6).flatmap(lambda k: st.tuples(_seq(k), _seq(k))))
def test_small_alphabets(ab):
    a, b = ab
    assert matching_blocks(a, b) == _difflib(a, b)


@settings(max_examples=100, deadline=None)
@given(_periodic(), _periodic())
def test_periodic_sequences(a, b):
    assert matching_blocks(a, b) == _difflib(a, b)


@settings(max_examples=30, deadline=None)
@given(_junk_heavy(), _junk_heavy())
def test_junk_heavy_long_sequences(a, b):
    assert matching_blocks(a, b) == _difflib(a, b)


@settings(max_examples=60, deadline=None)
@given(_periodic(), st.data())
def test_a_sequence_against_an_edited_copy(a, data):
    cut = data.draw(st.integers(0, len(a)))
    b = a[cut:] + data.draw(st.lists(st.sampled_from("gnx"), max_size=20)) + a[:cut]
    assert matching_blocks(a, b) == _difflib(a, b)
    assert matching_blocks(a, a) == _difflib(a, a) == [(0, 0, len(a)), (len(a), len(a), 0)][(not a):]


@settings(max_examples=40, deadline=None)
@given(_seq(700, 300), _seq(700, 300))
def test_more_than_256_distinct_elements(a, b):
    assert matching_blocks(a, b) == _difflib(a, b)


def test_a_real_trace_against_each_recipe():
    """The Round C hf qwen3-0.6b b1 trace's calls, by op class, against the kernel ops of each recipe (the
    sequences align.py matches; windows of them, as difflib takes seconds on the full ones)."""
    from simulator.model.models import PRESETS
    from simulator.traces import align as A
    from simulator.traces.retarget import calls
    from simulator.traces.workload import workload_from_trace

    wl = workload_from_trace(ROOT / "calibration/measured/h200-round-c/hf_qwen3-0.6b_static_b1.trace.json.gz")[0]
    ks = list(wl.kernels)
    tokens = [A.call_token(ks, idx) for idx in calls(ks)]
    for impl, kw in A.CANDIDATES:
        ops = [o.op_class.value for o in A._recipe_ops(PRESETS["qwen3-0.6b"], impl, kw, 1, 576)]
        assert len(set(tokens) | set(ops)) > 4 and len(tokens) > 1000 and len(ops) > 1000
        for a, b in ((tokens[:300], ops[:300]), (tokens[-300:], ops[-350:]), (tokens[500:800], ops[450:800])):
            assert matching_blocks(a, b) == _difflib(a, b)
