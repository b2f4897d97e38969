"""Speculative-decoding capture sizes per engine (simulator/layouts/spec.py) and `buckets --spec-tokens`.

The vLLM rule, as read in vllm/config/compilation.py (`adjust_cudagraph_sizes_for_spec_decode`):
    rounded_sizes = sorted(set(round_up(size, multiple_of) for size in cudagraph_capture_sizes
                               if round_up(size, multiple_of) <= max_cudagraph_capture_size))
    if len(rounded_sizes) == 0 and multiple_of <= max_cudagraph_capture_size: rounded_sizes = [multiple_of]
with multiple_of = 1 + num_speculative_tokens, applied when cudagraph_mode.decode_mode() == FULL.
The lists below are worked out by hand from it; `_oracle` is a second, independent transcription.
"""

import json

import pytest
from hypothesis import given, strategies as st
from typer.testing import CliRunner

from simulator.cli import app, main
from simulator.layouts.spec import (SpecLayoutError, accepts, allowed_sizes, sglang_spec_batch_sizes, spec_layout,
                                    vllm_round_for_spec, vllm_spec_max_size)

runner = CliRunner()


def _vllm_default(mx):
    return [s for s in [1, 2, 4] if s <= mx] + list(range(8, min(mx + 1, 256), 8)) + list(range(256, mx + 1, 16))


def _oracle(k, mx):
    q = k + 1
    out = set()
    for s in _vllm_default(mx):
        r = (s + q - 1) // q * q
        if r <= mx:
            out.add(r)
    return sorted(out) or ([q] if q <= mx else [])


# hand-computed at max 64: base [1, 2, 4, 8, 16, 24, 32, 40, 48, 56, 64]
VLLM_64 = {
    1: [2, 4, 8, 16, 24, 32, 40, 48, 56, 64],  # 1 -> 2
    2: [3, 6, 9, 18, 24, 33, 42, 48, 57],  # 1, 2 -> 3; 4 -> 6; 8 -> 9; 16 -> 18; 32 -> 33; 40 -> 42; 56 -> 57; 64 -> 66 dropped
    3: [4, 8, 16, 24, 32, 40, 48, 56, 64],  # 1, 2, 4 -> 4
    4: [5, 10, 20, 25, 35, 40, 50, 60],  # 1, 2, 4 -> 5; 8 -> 10; 16 -> 20; 24 -> 25; 32 -> 35; 48 -> 50; 56 -> 60; 64 -> 65 dropped
}
# counts at max 512 (51 base sizes): k=1: {2, 4} + 31 + 17 = 50; k=2: {3, 6} + 31 + 16 (512 -> 513 dropped) = 49;
# k=3: {4} + 31 + 17 = 49; k=4: {5} + 31 + 16 (512 -> 515 dropped) = 48
VLLM_512_COUNT = {1: 50, 2: 49, 3: 49, 4: 48}


@pytest.mark.parametrize("k", [1, 2, 3, 4])
def test_vllm_hand_computed_at_64(k):
    assert list(spec_layout("vllm", k, max_size=64).tokens) == VLLM_64[k]


@pytest.mark.parametrize("k", [1, 2, 3, 4])
def test_vllm_counts_at_512(k):
    t = spec_layout("vllm", k, max_size=512).tokens
    assert len(t) == VLLM_512_COUNT[k]
    assert t[-1] == max(s for s in t)
    assert all(s % (k + 1) == 0 for s in t)


def test_vllm_last_sizes_at_512():
    # k=2: 480 = 3 x 160 stays, 496 -> 498 (3 x 166), 512 -> 513 dropped; k=4: 480 stays, 496 -> 500, 512 -> 515
    assert spec_layout("vllm", 2, max_size=512).tokens[-2:] == (480, 498)
    assert spec_layout("vllm", 4, max_size=512).tokens[-2:] == (480, 500)


@pytest.mark.parametrize("k", [1, 2, 3, 4])
@pytest.mark.parametrize("mx", [64, 96, 128, 192, 256, 320, 384, 448, 512])
def test_vllm_table_matches_rule(k, mx):
    assert list(spec_layout("vllm", k, max_size=mx).tokens) == _oracle(k, mx)


def test_vllm_default_max_from_max_num_seqs():
    # min(max_num_seqs * (1 + k) * 2, 512), then capped at max_num_batched_tokens
    assert vllm_spec_max_size(3, 16) == 128 and vllm_spec_max_size(3, 256) == 512
    assert vllm_spec_max_size(1, 16, max_num_batched_tokens=48) == 48
    assert spec_layout("vllm", 3, max_num_seqs=16).tokens[-1] == 128
    assert spec_layout("vllm", 3, max_num_seqs=16).requests[-1] == 32


def test_vllm_piecewise_does_not_round_unless_asked():
    base = spec_layout("vllm", 0, max_size=64).tokens
    assert spec_layout("vllm", 3, max_size=64, graph="piecewise").tokens == base
    assert spec_layout("vllm", 3, max_size=64, graph="piecewise", round_piecewise=True).tokens == tuple(VLLM_64[3])


def test_vllm_sequence_parallel():
    # multiple_of = max(1 + k, tp) must be a multiple of both
    assert spec_layout("vllm", 3, max_size=64, tp=2, sequence_parallel=True).tokens == tuple(VLLM_64[3])
    assert spec_layout("vllm", 1, max_size=64, tp=4, sequence_parallel=True).tokens == (4, 8, 16, 24, 32, 40, 48,
                                                                                          56, 64)
    with pytest.raises(SpecLayoutError, match="multiple of both"):
        spec_layout("vllm", 2, max_size=64, tp=2, sequence_parallel=True)


def test_vllm_round_edge_cases():
    # nothing survives rounding but multiple_of fits: [multiple_of]
    assert vllm_round_for_spec([4], 4, 6) == [5]
    with pytest.raises(SpecLayoutError, match="no capture size"):
        vllm_round_for_spec([1, 2], 4, 4)
    assert vllm_round_for_spec([1, 2, 4], 0, 4) == [1, 2, 4]


def test_sglang_spec_list():
    bs = sglang_spec_batch_sizes()
    # range(1, 9) + range(10, 33, 2) + range(40, 65, 4) + range(72, 257, 8): 8 + 12 + 7 + 24
    assert len(bs) == 51 and bs[:10] == [1, 2, 3, 4, 5, 6, 7, 8, 10, 12] and bs[-2:] == [248, 256]
    assert 36 not in bs and 40 in bs and 44 in bs and 68 not in bs and 72 in bs
    assert sglang_spec_batch_sizes(tp=4)[-3:] == [480, 496, 512] and len(sglang_spec_batch_sizes(tp=4)) == 51 + 16
    for k in (1, 2, 3, 4):
        L = spec_layout("sglang", k)
        assert L.tokens == tuple(b * (k + 1) for b in bs) and L.requests == tuple(bs)
        assert L.draft["draft"] == tuple(bs) and L.draft["draft_extend"] == L.tokens
        assert L.graphs == 3 * len(bs)
    assert spec_layout("sglang", 2, max_size=20).requests == (1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 14, 16, 18, 20)


def test_trtllm_spec_list():
    for k in (1, 2, 3, 4):
        L = spec_layout("trtllm", k)
        assert L.requests == (1, 2, 4) + tuple(range(8, 129, 8))
        assert L.tokens == tuple(b * (k + 1) for b in L.requests)
    two = spec_layout("trtllm", 3, draft_lens=(0, 3))
    assert two.draft["target_draft_len_0"] == two.requests and two.graphs == 2 * len(two.requests)
    with pytest.raises(SpecLayoutError, match="draft_lens"):
        spec_layout("trtllm", 3, draft_lens=(5,))


def test_padding_in_tokens():
    L = spec_layout("vllm", 3, max_size=64)  # 4, 8, 16, 24, ...
    assert L.padded_tokens(3) == 16 and L.pad_tokens(3) == 4  # 3 x 4 = 12 tokens -> 16
    assert L.padded_tokens(16) == 64 and L.padded_tokens(17) is None and L.pad_tokens(17) == 0
    p = spec_layout("vllm", 3, max_size=64, graph="piecewise")  # unrounded: 1, 2, 4, 8, 16, 24, ...
    assert p.padded_tokens(3) == 16 and p.padded_tokens(5) == 24


@pytest.mark.parametrize("engine", ["vllm", "sglang", "trtllm"])
def test_allowed_sizes_and_predicate(engine):
    assert allowed_sizes(engine, 3, 20) == [4, 8, 12, 16, 20]
    assert accepts(engine, 3, 12) and not accepts(engine, 3, 10)
    assert allowed_sizes(engine, 0, 3) == [1, 2, 3]


@given(k=st.integers(1, 8), mx=st.integers(1, 2048))
def test_allowed_sizes_are_fixed_points_of_vllm_rounding(k, mx):
    """A layout the optimizer draws from allowed_sizes survives vLLM's rounding unchanged."""
    a = allowed_sizes("vllm", k, mx)
    if a:
        assert vllm_round_for_spec(a, k, mx) == a
    assert all(accepts("vllm", k, s) for s in a) and len(a) == mx // (k + 1)


@given(k=st.integers(1, 8), sizes=st.lists(st.integers(1, 600), min_size=1, max_size=40), mx=st.integers(1, 600))
def test_vllm_rounding_properties(k, sizes, mx):
    q = k + 1
    try:
        out = vllm_round_for_spec(sizes, k, mx)
    except SpecLayoutError:
        assert q > mx
        return
    assert out == sorted(set(out)) and all(s % q == 0 and s <= mx for s in out)
    for s in sizes:  # every size whose rounding fits is covered by a captured size >= it
        if (s + q - 1) // q * q <= mx:
            assert any(o >= s for o in out)


def test_refusals():
    with pytest.raises(SpecLayoutError, match="not 'seed'"):
        spec_layout("seed", 2)
    with pytest.raises(SpecLayoutError, match="spec_tokens"):
        spec_layout("vllm", -1)
    with pytest.raises(SpecLayoutError, match="max_size"):
        spec_layout("vllm", 2, max_size=0)


def test_buckets_cli_spec_tokens():
    r = runner.invoke(app, ["buckets", "vllm", "--spec-tokens", "3", "--max-size", "64", "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert d["sizes"] == VLLM_64[3] and d["spec_tokens"] == 3 and d["unit"] == "tokens"
    assert d["requests"] == [s // 4 for s in VLLM_64[3]]
    r = runner.invoke(app, ["buckets", "sglang", "--spec-tokens", "2"])
    assert r.exit_code == 0 and "tokens" in r.output and "draft_extend" in r.output
    r = runner.invoke(app, ["buckets", "trtllm", "--spec-tokens", "1", "--json"])
    assert json.loads(r.output)["sizes"][:3] == [2, 4, 8]


@pytest.mark.parametrize("argv,needle", [
    (["buckets", "seed", "--spec-tokens", "2"], "--spec-tokens applies to the vllm, sglang, trtllm presets"),
    (["buckets", "--layout", "1,2,4", "--spec-tokens", "2"], "not --layout"),
    (["buckets", "vllm", "--spec-tokens", "-1"], "--spec-tokens must be >= 0"),
    (["buckets", "vllm", "--spec-tokens", "65"], "--spec-tokens 65 is above the limit"),
    (["buckets", "vllm", "--spec-tokens", "4", "--max-size", "4"], "--spec-tokens: no capture size"),
    (["buckets", "sglang", "--spec-tokens", "2", "--tp", "3"], "--tp must be one of"),
])
def test_buckets_cli_spec_refusals(capsys, argv, needle):
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and needle in err


def test_graph_memory_spec_tokens():
    plain = json.loads(runner.invoke(app, ["graph-memory", "--model", "qwen3-0.6b", "--layout", "vllm",
                                           "--json"]).output)
    r = runner.invoke(app, ["graph-memory", "--model", "qwen3-0.6b", "--layout", "vllm", "--spec-tokens", "3",
                            "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert d["sizes"] == list(spec_layout("vllm", 3).tokens) and d["spec_tokens"] == 3
    assert d["draft_graph_mode"] == "piecewise" and d["draft_graphs"] == len(d["sizes"])
    assert d["draft_total_bytes"] > 0 and d["draft_weights_bytes"] > 0
    assert d["total_with_draft_bytes"] == d["total_bytes"] + d["draft_total_bytes"]
    assert d["kv_tokens"] < plain["kv_tokens"]
    s = json.loads(runner.invoke(app, ["graph-memory", "--model", "qwen3-8b", "--layout", "sglang", "--spec-tokens",
                                       "2", "--draft", "qwen3-0.6b", "--json"]).output)
    assert set(s["draft_families"]) == {"draft", "draft_extend"} and s["draft_kind"] == "model"


@pytest.mark.parametrize("argv,needle", [
    (["graph-memory", "--model", "qwen3-0.6b", "--layout", "1,2,4", "--spec-tokens", "2"], "with spec_tokens it must be one of"),
    (["graph-memory", "--model", "qwen3-8b", "--layout", "vllm", "--spec-tokens", "2", "--draft", "llama3-8b"],
     "draft model llama3-8b has vocab_size"),
])
def test_graph_memory_spec_refusals(capsys, argv, needle):
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and needle in err


def test_startup_spec_tokens():
    # graph full (one capture pass per size): the default became vLLM V1's full_and_piecewise (issue 22 item 4)
    plain = json.loads(runner.invoke(app, ["startup", "--model", "qwen3-0.6b", "--layout", "sglang", "--graph", "full",
                                           "--json"]).output)
    r = runner.invoke(app, ["startup", "--model", "qwen3-0.6b", "--layout", "sglang", "--graph", "full",
                            "--spec-tokens", "3", "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert d["sizes"] == sorted(spec_layout("sglang", 3).tokens) and d["draft_graphs"] == 2 * len(d["sizes"])
    assert d["draft_graph_mode"] == "full" and d["draft_capture_s"] > 0
    assert d["total_with_draft_s"] == pytest.approx(d["total_s"] + d["draft_total_s"], rel=1e-12)
    assert plain["graphs"] == 36
    with pytest.raises(SystemExit) as e:
        main(["startup", "--model", "qwen3-0.6b", "--layout", "seed", "--spec-tokens", "2"])
    assert e.value.code == 2
