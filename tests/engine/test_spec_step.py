"""simulator/engine/spec.py: a speculative step = verify (q_len 1 + k, routed in tokens) + the draft loop."""

import math

import pytest

from calibration.build_spec import add_to_profile
from simulator.engine.predict import predict
from simulator.engine.spec import SpecSetup, SpecStepError, predict_spec
from simulator.layouts.spec import spec_layout
from simulator.model.costs import CostError
from simulator.model.profile import load_profile, parse_profile
from simulator.model.spec import Acceptance
from simulator.model.workload import StepShape


@pytest.fixture(scope="module")
def prof():
    """The shipped h200 profile plus synthetic q_len tables (16/8/128 heads: qwen3-0.6b) on a small grid."""
    p = load_profile("h200").model_dump()
    rows = [{"table": "attention", "q_heads": 16, "kv_heads": 8, "head_dim": 128, "batch": b, "ctx": c, "q_len": q,
             "device_us": 8.0 + 1e-3 * b * c * (1 + 0.1 * q)}
            for q in (2, 3, 4, 5, 8) for b in (1, 8, 32, 64) for c in (256, 512, 2048, 8192)]
    add_to_profile(p, {"rows": rows})
    return parse_profile(p, "test")


def test_verify_routes_in_tokens_and_per_token_arithmetic(prof):
    sizes = list(spec_layout("vllm", 3, max_size=64).tokens)  # 4, 8, 16, 24, ...
    sp = predict_spec("qwen3-0.6b", 3, 1000, "fused", "full", SpecSetup(3, Acceptance.constant(0.6, 3)), prof,
                      sizes=sizes, backend="fa3")
    assert sp.verify_route.rows == 12 and sp.verify_route.padded == 16 and sp.verify_route.mode == "full"
    same = predict("qwen3-0.6b", 3, 1000, "fused", "full", prof, shape=StepShape(3, 1000, q_len=4), sizes=sizes,
                   backend="fa3")
    assert math.isclose(sp.verify_ms, same.result.step_s * 1e3)
    assert math.isclose(sp.tokens_per_step, 1 + 0.6 + 0.36 + 0.216)
    assert math.isclose(sp.ms_per_token, (sp.verify_ms + sp.draft_ms) / sp.tokens_per_step)
    # vLLM's drafter: piecewise, one pass over the 12 verified tokens (pads to 16), two single-token passes (3 -> 4)
    assert [(p["tokens"], p["count"], p["padded"], p["mode"]) for p in sp.draft_passes] == [
        (12, 1, 16, "piecewise"), (3, 2, 4, "piecewise")]
    assert math.isclose(sp.draft_ms, sum(p["ms"] * p["count"] for p in sp.draft_passes))
    d = sp.as_dict()
    assert {"spec_tokens", "verify_ms", "draft_ms", "tokens_per_step", "ms_per_token"} <= set(d)
    assert math.isclose(d["spec_speedup"], d["decode_ms_per_token"] / d["ms_per_token"])


def test_sglang_draft_runs_full_graphs(prof):
    sizes = list(spec_layout("sglang", 2).tokens)
    sp = predict_spec("qwen3-0.6b", 8, 1000, "fused", "full", SpecSetup(2, Acceptance.constant(0.5, 2),
                                                                          engine="sglang"), prof, sizes=sizes)
    assert all(p["mode"] == "full" for p in sp.draft_passes)


def test_zero_acceptance_never_pays(prof):
    sp = predict_spec("qwen3-0.6b", 8, 1000, "fused", "full", SpecSetup(2, Acceptance.constant(0.0, 2)), prof)
    assert sp.tokens_per_step == 1.0 and sp.ms_per_token > sp.decode_ms


def test_refusals(prof):
    with pytest.raises(CostError, match="no verify-attention table"):
        predict_spec("qwen3-0.6b", 8, 1000, "fused", "full", SpecSetup(2, Acceptance.constant(0.5, 2)),
                     "datasheet-h200")
    with pytest.raises(SpecStepError, match="per-position"):
        SpecSetup(3, Acceptance.constant(0.5, 2))
    with pytest.raises(SpecStepError, match="engine"):
        SpecSetup(2, Acceptance.constant(0.5, 2), engine="seed")


def test_vllm_flashinfer_verify_falls_back_to_piecewise(prof):
    """vLLM: decode FULL + spec-decode + a backend below UNIFORM_BATCH (FlashInfer on SM90) -> PIECEWISE."""
    acc = Acceptance.constant(0.6, 2)
    fi = predict_spec("qwen3-0.6b", 8, 1000, "fused", "full_and_piecewise", SpecSetup(2, acc), prof)
    assert fi.verify_graph == "piecewise" and fi.verify_route.mode == "piecewise" and "PIECEWISE" in fi.notes[0]
    fa = predict_spec("qwen3-0.6b", 8, 1000, "fused", "full_and_piecewise", SpecSetup(2, acc), prof, backend="fa3")
    assert fa.verify_graph == "full_and_piecewise" and fa.verify_route.mode == "full" and not fa.notes
    sg = predict_spec("qwen3-0.6b", 8, 1000, "fused", "full", SpecSetup(2, acc, engine="sglang"), prof)
    assert sg.verify_route.mode == "full"


def test_spec_request():
    from simulator.engine.spec import spec_request

    s, v, b = spec_request(3, "0.7", layout="vllm", max_size=64)
    assert s.engine == "vllm" and v == [4, 8, 16, 24, 32, 40, 48, 56, 64] and b[:3] == [1, 2, 4]
    s, v, b = spec_request(2, [0.9, 0.5], layout="sglang", draft="qwen3-0.6b")
    assert s.engine == "sglang" and v[:3] == [3, 6, 9] and s.acceptance.probs == (0.9, 0.5)
    s, v, b = spec_request(2, 0.5, layout="1,2,4")
    assert v == b == [1, 2, 4] and s.engine == "vllm"
    assert spec_request(1, 0.5)[1:] == (None, None)


def test_predict_spec_tokens_json(prof, tmp_path):
    """`launchsim predict --spec-tokens k --acceptance a`: the verify step's figures plus the per-token ones, equal to
    engine/spec.predict_spec_setup for the same setup; a verify step needs the profile's q_len tables."""
    import json

    from typer.testing import CliRunner

    from simulator.cli import app

    f = tmp_path / "p.json"
    f.write_text(json.dumps(prof.model_dump(mode="json")))
    argv = ["predict", "--model", "qwen3-0.6b", "--batch", "8", "--fusion", "fused", "--graph", "full",
            "--layout", "sglang", "--spec-tokens", "2", "--acceptance", "0.8,0.5", "--profile", str(f), "--json"]
    r = CliRunner().invoke(app, argv)
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    want = predict_spec("qwen3-0.6b", 8, 1024, "fused", "full",
                        SpecSetup(2, Acceptance.per_position([0.8, 0.5]), engine="sglang"), prof,
                        sizes=list(spec_layout("sglang", 2).tokens),
                        baseline_sizes=__import__("simulator.layouts.buckets", fromlist=["x"]).preset_sizes("sglang"))
    for key in ("verify_ms", "draft_ms", "tokens_per_step", "ms_per_token", "decode_ms_per_token"):
        assert math.isclose(d[key], want.as_dict()[key]), key
    assert d["step_ms"] == d["verify_ms"] and d["spec_tokens"] == 2 and d["q_len"] == 3
    assert d["padded"] == 24 and d["tokens_per_step"] == 1 + 0.8 + 0.4  # 8 x 3 = 24 tokens, a captured size


@pytest.mark.parametrize("argv,needle", [
    (["--spec-tokens", "2"], "needs acceptance"),
    (["--acceptance", "0.5"], "need spec_tokens > 0"),
    (["--spec-tokens", "2", "--acceptance", "0.5", "--steps", "3"], "needs --steps 0"),
    (["--spec-tokens", "2", "--acceptance", "1.5"], "--acceptance"),
    (["--spec-tokens", "2", "--acceptance", "0.5", "--profile", "datasheet-h200"], "no verify-attention table"),
])
def test_predict_spec_refusals(capsys, argv, needle):
    from simulator.cli import main

    with pytest.raises(SystemExit) as e:
        main(["predict", "--model", "qwen3-0.6b"] + argv)
    assert e.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and needle in err


# serve and capacity run speculative steps (tests/serving/test_serving_spec.py); sweep and buckets too since
# issue 21 items 2 and 4 (tests/sweep/test_sweep_spec.py, tests/optimizer/test_spec_optimize.py)
@pytest.mark.parametrize("name", ["qwen3_0p6b_decode.yaml"])
def test_kinds_without_speculation_refuse_it(name):
    """Every kind has the step knobs (config/stepopts.py); the ones whose study does not run speculative steps yet
    refuse spec_tokens with one message naming the field, instead of ignoring it."""
    import yaml
    from tests.paths import ROOT

    data = yaml.safe_load((ROOT / "scenarios" / name).read_text())
    data.update(spec_tokens=2, acceptance=0.5)
    from simulator.config import parse_scenario

    with pytest.raises(Exception, match="does not run speculative steps"):
        parse_scenario(data)
