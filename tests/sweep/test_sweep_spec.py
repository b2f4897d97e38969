"""Speculative axes of the sweep (issue 21 item 4): spec_tokens and acceptance lists, rows with tokens_per_step,
ms_per_token and the plain decode step, old caches still read, and the refusals."""

import json

import pytest

from simulator.config import ConfigError, parse_scenario
from simulator.engine.spec import predict_spec, spec_request
from simulator.sweep.grid import CACHE_FILE, ROW_KEYS, load_cache
from simulator.studies.sweep import build_points, run_sweep_scenario

BASE = {"kind": "sweep", "name": "x", "models": ["llama3-8b"], "profiles": ["h200"], "graph": ["full"],
        "attention_backend": "fa3", "layouts": [{"name": "v", "sizes": "vllm", "max_num_seqs": 256}],
        "distributions": [{"name": "d", "histogram": {2: 1.0, 8: 3.0}}], "workers": 1}


def _closed(a: float, k: int) -> float:
    return (1 - a ** (k + 1)) / (1 - a)


def test_points_expand_the_spec_axes_and_keep_plain_keys():
    sc = parse_scenario({**BASE, "spec_tokens": [0, 2], "acceptance": [0.6, 0.9]})
    pts = build_points(sc)
    assert [(p.spec_tokens, p.acceptance) for p in pts] == [(0, None), (2, 0.6), (2, 0.9)]
    plain = build_points(parse_scenario(BASE))[0]
    assert pts[0].key() == plain.key()  # a k = 0 point keeps the key caches were written under
    fi = build_points(parse_scenario({**{k: v for k, v in BASE.items() if k != "attention_backend"},
                                      "spec_tokens": [0]}))[0]
    assert fi.key() == fi.base_key()  # every field at its default: the pre-routing-fields key
    # k > 0: vLLM's spec-decode list in tokens (full verify graphs with fa3: multiples of 1 + k)
    sp, vs, ds = spec_request(2, 0.6, "eagle", "vllm", None, 256, graph="full")
    assert pts[1].sizes == tuple(vs) and all(s % 3 == 0 for s in pts[1].sizes) and pts[1].decode_sizes == tuple(ds)


def test_spec_rows_equal_the_engine_and_the_closed_form():
    sc = parse_scenario({**BASE, "spec_tokens": [0, 3], "acceptance": [0.7]})
    rows = run_sweep_scenario(sc, None, progress=False)["rows"]
    plain, spec = rows
    assert plain["tokens_per_step"] == 1.0 and plain["ms_per_token"] == plain["expected_step_ms"]
    assert spec["tokens_per_step"] == pytest.approx(_closed(0.7, 3), rel=1e-12)
    sp, vs, ds = spec_request(3, 0.7, "eagle", "vllm", None, 256, graph="full")
    want = want_dec = 0.0
    for b, w in ((2, 0.25), (8, 0.75)):
        r = predict_spec("llama3-8b", b, 1024, "fused", "full", sp, "h200", vs, backend="fa3", baseline_sizes=ds)
        want += w * (r.verify_ms + r.draft_ms)
        want_dec += w * r.decode_ms
    assert spec["expected_step_ms"] == pytest.approx(want, rel=1e-12)
    assert spec["decode_step_ms"] == pytest.approx(want_dec, rel=1e-12) == pytest.approx(plain["expected_step_ms"])
    assert spec["ms_per_token"] == pytest.approx(want / _closed(0.7, 3), rel=1e-12)
    assert spec["speedup_vs_eager"] is None  # not computed for speculative points (said in grid.py)


def test_rows_cached_before_the_spec_axes_are_read_as_plain_decode(tmp_path):
    sc = parse_scenario(BASE)
    res = run_sweep_scenario(sc, tmp_path, progress=False)
    key = build_points(sc)[0].key()
    row = {k: v for k, v in res["rows"][0].items() if k in ROW_KEYS[:-5]}  # an old row: no spec keys
    (tmp_path / CACHE_FILE).write_text(json.dumps({"key": key, "row": row}) + "\n")
    got = load_cache(tmp_path)[key]
    assert got == res["rows"][0]
    assert list(got) == list(ROW_KEYS)


@pytest.mark.parametrize("extra,needle", [
    ({"spec_tokens": [3]}, "needs acceptance"),
    ({"acceptance": [0.5]}, "need spec_tokens > 0"),
    ({"spec_tokens": [3], "acceptance": [1.5]}, "acceptance"),
    ({"spec_tokens": [3, 3], "acceptance": [0.5]}, "duplicate"),
    ({"spec_tokens": [3], "acceptance": ["0.9,0.7,0.5"]}, "acceptance"),
    ({"spec_tokens": [3], "acceptance": [0.5], "mixed": {"share": 0.1}}, "mixed"),
    ({"spec_tokens": [65], "acceptance": [0.5]}, "spec_tokens"),
])
def test_spec_axis_refusals(extra, needle):
    with pytest.raises(ConfigError, match=needle):
        parse_scenario({**BASE, **extra})


def test_shipped_sweep_and_buckets_scenarios_take_spec_tokens():
    import yaml

    from tests.paths import ROOT

    sw = yaml.safe_load((ROOT / "scenarios" / "sweep_layouts_qwen3_0p6b.yaml").read_text())
    sw.pop("mixed", None)
    assert parse_scenario({**sw, "spec_tokens": [0, 2], "acceptance": [0.5]}).spec_tokens == [0, 2]
    with pytest.raises(ConfigError, match="spec_tokens"):
        parse_scenario({**sw, "spec_tokens": 2, "acceptance": 0.5})  # an axis: a list
    bk = yaml.safe_load((ROOT / "scenarios" / "optimize_bimodal.yaml").read_text())
    assert parse_scenario({**bk, "spec_tokens": 2}).spec_tokens == 2
    with pytest.raises(ConfigError, match="acceptance does not change"):
        parse_scenario({**bk, "spec_tokens": 2, "acceptance": 0.5})
