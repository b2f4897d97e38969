"""Padding waste per step and in expectation (hand computed; routing itself: tests/test_routing.py), and the
null KV block that dummy rows write to (hypothesis: no padded write lands on a real request's block)."""

import pytest
from hypothesis import given, settings, strategies as st

from simulator.layouts.distribution import from_histogram
from simulator.layouts.padding import NULL_BLOCK, NullBlockAllocator, PaddingError, expected_padding, step_padding

SIZES = [1, 2, 4, 8]


def linear_ms(rows, mode):
    """A toy step-time function: 1 ms per row, +10 ms when no graph runs."""
    return rows * 1e-3 + (10e-3 if mode == "none" else 0.0)


def test_step_padding_by_hand():
    s = step_padding(3, SIZES, "full", linear_ms)
    assert (s.padded, s.waste_rows, s.waste) == (4, 1, 0.25)
    assert s.step_s == pytest.approx(4e-3) and s.unpadded_s == pytest.approx(3e-3)
    assert s.cost_s == pytest.approx(1e-3)
    s = step_padding(4, SIZES, "full", linear_ms)
    assert (s.waste_rows, s.cost_s) == (0, 0.0)


def test_expected_padding_by_hand():
    dist = from_histogram({1: 1, 3: 2, 9: 1})
    e = expected_padding(dist, SIZES, "full", linear_ms)
    # rows executed: 1, 4, 4, 9 (9 runs eager, unpadded); padded rows: 0, 1, 1, 0
    assert e.padded_rows == pytest.approx(0.5)
    assert e.waste == pytest.approx(2 / 18)
    assert e.waste_mean == pytest.approx((0 + 0.25 + 0.25 + 0) / 4)
    assert e.overflow_frac == pytest.approx(0.25)
    assert e.step_s == pytest.approx((1 + 4 + 4 + 19) * 1e-3 / 4)
    assert e.cost_s == pytest.approx(0.5e-3)
    none = expected_padding(dist, SIZES, "none", linear_ms)
    assert (none.waste, none.overflow_frac, none.cost_s) == (0.0, 0.0, 0.0)


def test_vllm_case_257():
    from simulator.layouts.buckets import preset_sizes

    s = step_padding(257, preset_sizes("vllm"), "full", linear_ms)
    assert s.padded == 272 and s.waste == pytest.approx(15 / 272)


def test_allocator_reserves_block_zero():
    a = NullBlockAllocator(num_blocks=4, block_size=2)
    assert a.allocate("r1", 3) == [1, 2]
    assert a.slot_mapping(["r1"], 4) == [2 * 2 + 1, 0, 0, 0]  # r1's 4th token: block 2 offset 1
    assert a.owner(0) is None and a.owner(5) == "r1"
    with pytest.raises(PaddingError, match="out of KV blocks"):
        a.allocate("r2", 5)
    with pytest.raises(PaddingError):
        NullBlockAllocator(num_blocks=1)
    with pytest.raises(PaddingError):
        a.slot_mapping(["r1"], 0)


ops = st.lists(st.tuples(st.sampled_from(["new", "step", "free"]), st.integers(0, 7), st.integers(1, 40),
                         st.integers(0, 5)), min_size=1, max_size=40)


@settings(max_examples=150, deadline=None)
@given(ops, st.integers(1, 8))
def test_padded_rows_never_write_real_blocks(program, block_size):
    a = NullBlockAllocator(num_blocks=200, block_size=block_size)
    live: list[int] = []
    for op, req, tokens, extra in program:
        if op == "new" and req not in live:
            a.allocate(req, tokens)
            live.append(req)
        elif op == "free" and req in live:
            a.free(req)
            live.remove(req)
        elif op == "step" and live:
            padded = len(live) + extra
            slots = a.slot_mapping(live, padded)
            real, dummy = slots[:len(live)], slots[len(live):]
            assert all(s // block_size == NULL_BLOCK for s in dummy)
            assert all(a.owner(s) is None for s in dummy)
            assert [a.owner(s) for s in real] == live  # each real row writes its own request's block
            assert len(set(real)) == len(real)
        for t in a.tables.values():
            assert NULL_BLOCK not in t  # block 0 is never handed to a request
        assert NULL_BLOCK not in a.free_blocks
