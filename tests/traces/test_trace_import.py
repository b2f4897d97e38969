"""Trace import, step detection, workload what-ifs, fusion rules, export round trip and bad input."""

from __future__ import annotations

import copy
import gzip
import json

import pytest
from typer.testing import CliRunner

from simulator.cli import app, main
from simulator.model.costs import CostModel
from simulator.model.kernels import OpClass
from simulator.engine.predict import predict, simulate
from simulator.model.profile import load_profile, parse_profile
from simulator.traces.export import chrome_trace
from simulator.traces.fusion import fuse, summary
from simulator.traces.importer import import_trace
from simulator.traces.read import TraceError, read_trace
from simulator.traces.steps import find_period
from simulator.traces.retarget import RetargetError
from simulator.traces.whatif import workload_step
from simulator.traces.workload import workload_from_trace
from simulator.model.workload_file import load_workload, save_workload

runner = CliRunner()
PID, TID = 4242, 4242


class Trace:
    """A torch.profiler-shaped Chrome trace built launch by launch (times in µs)."""

    def __init__(self):
        self.ev = [{"ph": "M", "name": "process_name", "pid": PID, "tid": 0, "args": {"name": "python"}}]
        self.corr = 0

    def launch(self, op, t, op_dur, launch_at, launch_dur, kernel, k_ts, k_dur, dims=None, inner=None,
               inner_dims=None):
        """A top-level cpu op [t, t+op_dur] (optionally holding `inner`) whose cudaLaunchKernel ends at
        launch_at + launch_dur; its kernel runs [k_ts, k_ts + k_dur]."""
        self.corr += 1
        args = {"External id": self.corr}
        if dims is not None:
            args.update({"Input Dims": dims, "Input type": ["c10::BFloat16"] * len(dims)})
        self.ev.append({"ph": "X", "cat": "cpu_op", "name": op, "pid": PID, "tid": TID, "ts": t, "dur": op_dur,
                        "args": args})
        if inner is not None:
            a = {"Input Dims": inner_dims, "Input type": ["c10::BFloat16"] * 2} if inner_dims else {}
            self.ev.append({"ph": "X", "cat": "cpu_op", "name": inner, "pid": PID, "tid": TID, "ts": t + 1,
                            "dur": op_dur - 2, "args": a})
        self.ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": PID, "tid": TID,
                        "ts": launch_at, "dur": launch_dur, "args": {"correlation": self.corr, "cbid": 211}})
        self.ev.append({"ph": "X", "cat": "kernel", "name": kernel, "pid": 0, "tid": 7, "ts": k_ts, "dur": k_dur,
                        "args": {"correlation": self.corr, "stream": 7, "device": 0}})
        self.ev.append({"ph": "s", "cat": "ac2g", "name": "ac2g", "id": self.corr, "pid": PID, "tid": TID,
                        "ts": launch_at})

    def mark(self, name, t, dur, cat="user_annotation"):
        self.ev.append({"ph": "X", "cat": cat, "name": name, "pid": PID, "tid": TID, "ts": t, "dur": dur, "args": {}})

    def sync(self, t, dur):
        self.ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaDeviceSynchronize", "pid": PID, "tid": TID,
                        "ts": t, "dur": dur, "args": {"correlation": 10_000 + int(t)}})

    def three(self, t0, gemm_us=30.0, dims=True):
        """The hand-computed step: 3 launches; host 15, 17, 18 µs, tail 2 µs; kernels 30, 5, 8 µs."""
        self.launch("aten::linear", t0 + 0, 20, t0 + 10, 5, "nvjet_tst_64x8_64x16_4x1_v_bz_TNT", t0 + 16, gemm_us,
                    dims=[[1, 1, 1024], [3072, 1024]] if dims else None, inner="aten::mm",
                    inner_dims=[[1, 1024], [1024, 3072]] if dims else None)
        self.launch("aten::mul", t0 + 25, 10, t0 + 28, 4,
                    "void at::native::vectorized_elementwise_kernel<4, at::native::BinaryFunctor<mul>>",
                    t0 + 47, 5, dims=[[1, 1, 1024], [1024]] if dims else None)
        self.launch("aten::mean", t0 + 40, 12, t0 + 45, 5,
                    "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, MeanOps>>", t0 + 52, 8)
        return t0 + 60  # end of GPU work

    def write(self, path, gz=False):
        data = {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA H200"}], "traceEvents": self.ev}
        raw = json.dumps(data).encode()
        path.write_bytes(gzip.compress(raw) if gz else raw)
        return path


def test_three_launches_exact_step_figures(tmp_path):
    t = Trace()
    t.three(100.0)
    imp = import_trace(read_trace(t.write(tmp_path / "t.json")))
    assert imp.method.startswith("single step")
    assert [k.op_class for k in imp.kernels] == [OpClass.GEMM, OpClass.ELEMENTWISE, OpClass.REDUCTION]
    assert [k.host_us for k in imp.kernels] == pytest.approx([15.0, 17.0, 18.0])
    assert [k.top_op for k in imp.kernels] == ["aten::linear", "aten::mul", "aten::mean"]
    assert imp.tails_us == pytest.approx([2.0])  # aten::mean ends at 152, last launch returns at 150
    row = imp.step_rows[0]
    assert row["kernels"] == 3
    assert row["host_ms"] == pytest.approx(0.052)
    assert row["gpu_ms"] == pytest.approx(0.043)
    assert row["step_ms"] == pytest.approx(0.060)  # 100 -> last kernel ends at 160


def test_gzip_and_plain_read_the_same(tmp_path):
    t = Trace()
    t.three(0.0)
    a = import_trace(read_trace(t.write(tmp_path / "a.json")))
    b = import_trace(read_trace(t.write(tmp_path / "b.json.gz", gz=True)))
    assert [(k.name, k.dur, k.host_us) for k in a.kernels] == [(k.name, k.dur, k.host_us) for k in b.kernels]


def test_profiler_step_markers_and_sync_excluded(tmp_path):
    t = Trace()
    for s, t0 in enumerate((1000.0, 2000.0)):
        t.mark(f"ProfilerStep#{s + 3}", t0 - 10, 200)
        t.three(t0)
        t.sync(t0 + 60, 100)  # blocked until the GPU finished: not host work
    imp = import_trace(read_trace(t.write(tmp_path / "m.json")))
    assert imp.method == "markers 'ProfilerStep#N'"
    assert [r["label"] for r in imp.step_rows] == ["ProfilerStep#3", "ProfilerStep#4"]
    for r in imp.step_rows:
        # first launch measured from the marker start (10 µs earlier); tail to marker end minus the sync
        assert r["host_ms"] == pytest.approx((25 + 17 + 18 + (190 - 50 - 100)) / 1e3)
        assert r["sync_ms"] == pytest.approx(0.1)
        assert r["step_ms"] == pytest.approx(0.2)


def test_annotation_steps_pick_outermost(tmp_path):
    t = Trace()
    for t0 in (0.0, 500.0, 1000.0):
        t.mark("decode_step", t0 - 5, 100)
        t.mark("layer", t0, 30)
        t.mark("layer", t0 + 38, 20)
        t.three(t0)
    imp = import_trace(read_trace(t.write(tmp_path / "a.json")))
    assert imp.method == "annotations 'decode_step'"
    assert [r["kernels"] for r in imp.step_rows] == [3, 3, 3]


def test_repetition_finds_steps_and_phase(tmp_path):
    t = Trace()
    # a partial step first (only the reduction), then 3 whole steps, steps separated by 400 µs of host idle
    t.launch("aten::mean", 0, 12, 5, 5, "void at::native::reduce_kernel<512, 1, MeanOps>", 12, 8)
    for t0 in (500.0, 1000.0, 1500.0):
        t.three(t0, gemm_us=30.0 + t0 / 500)
    imp = import_trace(read_trace(t.write(tmp_path / "r.json")))
    assert imp.method == "repetition (period 3 kernels)"
    assert [w.i0 for w in imp.steps] == [1, 4, 7]
    assert imp.outside == 1
    wl, _ = workload_from_trace(tmp_path / "r.json")
    assert wl.kernels[0].gpu_us == pytest.approx(32.0)  # median of 31, 32, 33


def test_find_period_prefers_whole_step_over_layer():
    step = ["emb"] + ["a", "b", "c"] * 4 + ["head"]
    assert find_period(step * 3)[1] == len(step)
    assert find_period(["x", "y", "z"]) is None


def test_steps_n_and_bad_n(tmp_path):
    t = Trace()
    t.three(0.0)
    t.three(200.0)
    path = t.write(tmp_path / "n.json")
    imp = import_trace(read_trace(path), 2)
    assert [r["kernels"] for r in imp.step_rows] == [3, 3]
    with pytest.raises(TraceError, match="do not split into 4 equal steps"):
        import_trace(read_trace(path), 4)


def test_graph_launch_kernels_share_one_host_cost(tmp_path):
    t = Trace()
    t.ev.append({"ph": "X", "cat": "cpu_op", "name": "graph.replay", "pid": PID, "tid": TID, "ts": 0, "dur": 12,
                 "args": {}})
    t.ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaGraphLaunch", "pid": PID, "tid": TID, "ts": 4,
                 "dur": 6, "args": {"correlation": 77}})
    for i in range(3):
        t.ev.append({"ph": "X", "cat": "kernel", "name": f"k{i}", "pid": 0, "tid": 7, "ts": 20 + 10 * i, "dur": 9,
                     "args": {"correlation": 77}})
    imp = import_trace(read_trace(t.write(tmp_path / "g.json")), 1)
    assert [k.host_us for k in imp.kernels] == pytest.approx([10.0, 0.0, 0.0])
    assert [k.graph_pos for k in imp.kernels] == [0, 1, 2]


def test_workload_file_round_trip_and_predict(tmp_path):
    t = Trace()
    t.three(100.0)
    wl, _ = workload_from_trace(t.write(tmp_path / "t.json"), batch=1, host_time="trace")
    save_workload(tmp_path / "w.json", wl)
    back = load_workload(tmp_path / "w.json")
    assert back == wl
    costs = CostModel(load_profile("datasheet-h200"))
    wi = workload_step(back, costs)
    assert [o.fixed_gpu_s for o in wi.step.kernel_ops()] == pytest.approx([30e-6, 5e-6, 8e-6])
    res, _ = simulate(wi.step, costs, "none")
    assert res.cpu_busy_s == pytest.approx(52e-6)
    full, _ = simulate(wi.step, costs, "full")
    d = costs.profile.device
    gpu = 43e-6 + d.eager_gap_us * 1e-6 + 2 * d.graph_node_us * 1e-6
    assert full.step_s == pytest.approx(costs.graph_launch_s(3) + gpu)


def _gemm_profile():
    raw = json.loads(load_profile("datasheet-h200").model_dump_json())
    raw["device"]["tables"]["gemm"] = [{"n": 3072, "k": 1024, "m": [1, 4, 8], "us": [10.0, 16.0, 24.0]}]
    return parse_profile(raw)


def test_batch_what_if_scales_known_shapes_and_refuses_unshaped_kernels(tmp_path):
    """A kernel without a recorded shape (aten::mean here) used to be kept at its batch-1 time in a batch-4
    answer; now the what-if refuses in one line naming it (simulator/traces/retarget.py)."""
    t = Trace()
    t.three(100.0)
    wl, _ = workload_from_trace(t.write(tmp_path / "t.json"), batch=1)
    costs = CostModel(_gemm_profile())
    with pytest.raises(RetargetError, match=r"1 kernel call\(s\) cannot be classified \(aten::mean\)") as e:
        workload_step(wl, costs, batch=4)
    assert "\n" not in str(e.value)
    assert [o.fixed_gpu_s for o in workload_step(wl, costs).step.kernel_ops()] == pytest.approx([30e-6, 5e-6, 8e-6])
    shaped = wl.model_copy(update={"kernels": [*wl.kernels[:2], wl.kernels[2].model_copy(
        update={"dims": [[1, 1, 1024]], "shape_op": "aten::mean", "dtypes": ["float"]})]})
    wi = workload_step(shaped, costs, batch=4)
    gpu = [o.fixed_gpu_s * 1e6 for o in wi.step.kernel_ops()]
    # gemm table: 10 µs at m=1, 16 µs at m=4: measured 30 µs x 1.6
    assert gpu[0] == pytest.approx(48.0)
    assert wi.unscaled == [] and wi.scaled == 3 and wi.roles == {"gemm": 1, "bytes": 2}


def test_batch_what_if_without_batch_is_an_error(tmp_path):
    t = Trace()
    t.three(100.0, dims=False)
    wl, _ = workload_from_trace(t.write(tmp_path / "t.json"))
    assert wl.batch is None
    with pytest.raises(RetargetError, match="re-import it with the traced batch"):
        workload_step(wl, CostModel(load_profile("datasheet-h200")), batch=8)


def test_fusion_rule_counts():
    E, R, G, A, C = OpClass.ELEMENTWISE, OpClass.REDUCTION, OpClass.GEMM, OpClass.ATTENTION, OpClass.COPY
    seq = [("g", G, 9.0, "kernel"), ("e1", E, 2.0, "kernel"), ("e2", E, 3.0, "kernel"), ("r", R, 4.0, "kernel"),
           ("g", G, 9.0, "kernel"), ("e1", E, 2.0, "kernel"), ("a", A, 7.0, "kernel"), ("c1", C, 1.0, "kernel"),
           ("c2", C, 1.5, "kernel"), ("m", C, 1.0, "gpu_memcpy"), ("e1", E, 2.0, "kernel")]
    merged = fuse(seq)
    assert [len(f.members) for f in merged] == [1, 3, 1, 1, 1, 2, 1, 1]
    assert merged[1].op_class is R and merged[1].gpu_us == 4.0
    assert merged[5].op_class is C and merged[5].gpu_us == 1.5
    s = summary(seq, merged)
    assert (s["kernels_before"], s["kernels_after"], s["saved"]) == (11, 8, 3)
    assert [g["pattern"] for g in s["groups"]] == ["e1 + e2 + r", "c1 + c2"]


def test_fusion_limits_one_reduction_and_indexed_writes():
    E, R, C = OpClass.ELEMENTWISE, OpClass.REDUCTION, OpClass.COPY
    # an RMSNorm-like run with two reductions, then two KV-cache writes, then a tail
    seq = [("aten::pow", E, 1.0, "kernel"), ("aten::mean", R, 2.0, "kernel"), ("aten::mul", E, 1.0, "kernel"),
           ("aten::mean", R, 2.0, "kernel"), ("aten::mul", E, 1.0, "kernel"), ("aten::index_copy_", C, 2.5, "kernel"),
           ("aten::index_copy_", C, 2.0, "kernel"), ("aten::add", E, 1.0, "kernel")]
    merged = fuse(seq)
    assert [f.members for f in merged] == [(0, 1, 2), (3, 4, 5), (6,), (7,)]
    assert [f.gpu_us for f in merged] == [2.0, 2.5, 2.0, 1.0]
    assert summary(seq, merged)["saved"] == 4


def test_export_then_import_gives_the_same_kernels(tmp_path):
    prof = load_profile("datasheet-h200")
    p = predict("qwen3-0.6b", 2, 256, "none", "none", prof)
    path = tmp_path / "sim.json"
    path.write_text(json.dumps(chrome_trace(p.timeline, p.step)))
    wl, imp = workload_from_trace(path, host_time="trace")
    assert imp.method == "markers 'ProfilerStep#N'"
    assert [k.name for k in wl.kernels] == [o.name for o in p.step.kernel_ops()]
    assert [k.op_class for k in wl.kernels] == [o.op_class.value for o in p.step.kernel_ops()]
    assert [k.gpu_us for k in wl.kernels] == pytest.approx(list(p.timeline.plan.gpu_s * 1e6), abs=1e-3)
    assert [k.host_us for k in wl.kernels] == pytest.approx(list(p.timeline.plan.host_s * 1e6), abs=1e-3)
    costs = CostModel(prof)
    for graph in ("none", "full"):
        again, _ = simulate(workload_step(wl, costs).step, costs, graph)
        ref, _ = simulate(p.step, costs, graph)
        assert again.step_s == pytest.approx(ref.step_s, rel=1e-6)


def test_cli_import_predict_export(tmp_path):
    t = Trace()
    for s, t0 in enumerate((1000.0, 2000.0)):
        t.mark(f"ProfilerStep#{s}", t0 - 30, 220)
        t.launch("aten::embedding", t0 - 25, 20, t0 - 15, 4,
                 "void at::native::(anonymous namespace)::indexSelectLargeIndex<c10::BFloat16>", t0 - 10, 3,
                 dims=[[151936, 1024], [1, 1]])
        t.three(t0)
    tr = t.write(tmp_path / "t.json.gz", gz=True)
    wl = tmp_path / "w.json"
    r = runner.invoke(app, ["import-trace", str(tr), "--out", str(wl)])
    assert r.exit_code == 0, r.output
    assert "ProfilerStep#1" in r.output and wl.exists()
    r = runner.invoke(app, ["predict", "--workload", str(wl), "--graph", "full", "--json",
                            "--profile", "datasheet-h200"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert d["launches"] == 1 and d["kernels"] == 4 and d["batch"] == 1  # batch from the embedding's ids
    r = runner.invoke(app, ["predict", "--workload", str(wl), "--fusion", "compiled", "--profile", "datasheet-h200"])
    assert r.exit_code == 0 and "(1 saved)" in r.output  # aten::mul + aten::mean merge
    out = tmp_path / "sim.json"
    r = runner.invoke(app, ["export-trace", "--workload", str(wl), "--graph", "piecewise", "--out", str(out),
                            "--profile", "datasheet-h200"])
    assert r.exit_code == 0, r.output
    data = json.loads(out.read_text())
    assert {e["ph"] for e in data["traceEvents"]} == {"M", "X", "s", "f"}
    lanes = {e["args"]["name"] for e in data["traceEvents"] if e["name"] == "thread_name"}
    assert lanes == {"launch lane", "stream 7"}


def test_workload_scenario_runs(tmp_path, monkeypatch):
    t = Trace()
    t.three(0.0)
    wl, _ = workload_from_trace(t.write(tmp_path / "t.json"), batch=1, host_time="trace")
    # every kernel needs a shape to be re-priced at batch 2 (the toy's aten::mean recorded none)
    wl = wl.model_copy(update={"kernels": [*wl.kernels[:2], wl.kernels[2].model_copy(
        update={"dims": [[1, 1, 1024]], "shape_op": "aten::mean", "dtypes": ["float"]})]})
    save_workload(tmp_path / "w.json", wl)
    (tmp_path / "s.yaml").write_text("kind: workload\nname: w\nworkload: w.json\nprofile: datasheet-h200\n"
                                     "graph: [none, full]\nbatch: [1, 2]\n")
    monkeypatch.chdir(tmp_path)
    r = runner.invoke(app, ["run", "s.yaml", "--out", "o"])
    assert r.exit_code == 0, r.output
    res = json.loads((tmp_path / "o" / "result.json").read_text())
    assert [(x["graph"], x["batch"]) for x in res["rows"]] == [("none", 1), ("none", 2), ("full", 1), ("full", 2)]


def _bad(tmp_path, name, content: bytes):
    p = tmp_path / name
    p.write_bytes(content)
    return p


def _cpu_only():
    t = Trace()
    t.three(0.0)
    return json.dumps({"traceEvents": [e for e in t.ev if e.get("cat") != "kernel"]}).encode()


@pytest.mark.parametrize("name,content,message", [
    ("bin.json", b"\x00\x01\x02\xff", "not a Chrome trace"),
    ("obj.json", b'{"hello": 1}', "without a 'traceEvents' list"),
    ("cpu.json", None, "no CUDA kernels"),
    ("cut.json", b'{"traceEvents": [{"ph": "X", "name": "a", "ts": 1, "dur": 2}, {"ph": "X", "na', "truncated JSON"),
    ("bad.json.gz", gzip.compress(b'{"traceEvents": []}', mtime=0)[:-12], "damaged gzip"),
    ("fake.json.gz", b'{"traceEvents": []}', "not gzip data"),
])
def test_bad_input_exits_2_with_one_line(tmp_path, capsys, name, content, message):
    p = _bad(tmp_path, name, _cpu_only() if content is None else content)
    with pytest.raises(SystemExit) as e:
        main(["import-trace", str(p), "--out", str(tmp_path / "w.json")])
    assert e.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err and str(p) in err
    assert not (tmp_path / "w.json").exists()


@pytest.mark.parametrize("args,message", [
    (["predict", "--workload", "{w}", "--fusion", "fused"], "not available for an imported workload"),
    (["predict", "--workload", "{w}", "--model", "qwen3-0.6b"], "not both"),
    (["predict", "--workload", "{missing}"], "no such workload file"),
    (["predict", "--workload", "{trace}"], "not a launchsim workload"),
    (["export-trace", "--out", "{o}"], "exactly one of --model or --workload"),
    (["import-trace", "{trace}", "--out", "{o}", "--steps", "zero"], "--steps must be"),
])
def test_workload_cli_errors(tmp_path, capsys, args, message):
    t = Trace()
    t.three(0.0)
    trace = t.write(tmp_path / "t.json")
    wl, _ = workload_from_trace(trace, batch=1)
    save_workload(tmp_path / "w.json", wl)
    names = {"w": tmp_path / "w.json", "missing": tmp_path / "nope.json", "trace": trace, "o": tmp_path / "o.json"}
    with pytest.raises(SystemExit) as e:
        main([a.format(**names) for a in args])
    assert e.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err


def test_workload_file_version_checked(tmp_path, capsys):
    t = Trace()
    t.three(0.0)
    wl, _ = workload_from_trace(t.write(tmp_path / "t.json"))
    raw = copy.deepcopy(wl.model_dump(mode="json"))
    raw["format_version"] = 99
    (tmp_path / "w.json").write_text(json.dumps(raw))
    with pytest.raises(SystemExit) as e:
        main(["predict", "--workload", str(tmp_path / "w.json")])
    assert e.value.code == 2 and "format_version is 99" in capsys.readouterr().err


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_CLASSES = [OpClass.GEMM, OpClass.ATTENTION, OpClass.ELEMENTWISE, OpClass.REDUCTION, OpClass.COPY,
            OpClass.EMBEDDING, OpClass.SAMPLING]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(_CLASSES), st.floats(0.5, 50.0), st.booleans()), min_size=1, max_size=40))
def test_fusion_invariants(items):
    seq = [("aten::index_copy_" if m and c is OpClass.ELEMENTWISE else f"k{i}", c, t,
            "gpu_memcpy" if m and c is OpClass.COPY else "kernel") for i, (c, t, m) in enumerate(items)]
    merged = fuse(seq)
    assert [i for f in merged for i in f.members] == list(range(len(seq)))  # every kernel once, in order

    def ok(i):
        return seq[i][1] in (OpClass.ELEMENTWISE, OpClass.REDUCTION, OpClass.COPY, OpClass.EMBEDDING) \
            and seq[i][3] == "kernel"

    for f, g in zip(merged, merged[1:]):
        if len(f.members) > 1 or ok(f.members[0]):
            assert all(ok(i) for i in f.members)
            assert sum(seq[i][1] is OpClass.REDUCTION for i in f.members) <= 1
            assert all("index_copy" not in seq[i][0] for i in f.members[:-1])
        if ok(f.members[-1]) and ok(g.members[0]):  # two fusible neighbours stayed apart: a limit says why
            assert "index_copy" in seq[f.members[-1]][0] or (
                seq[g.members[0]][1] is OpClass.REDUCTION
                and any(seq[i][1] is OpClass.REDUCTION for i in f.members))
    for f in merged:
        assert f.gpu_us == max(seq[i][2] for i in f.members)
    assert summary(seq, merged)["saved"] == len(seq) - len(merged)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from("abcd"), min_size=1, max_size=12), st.integers(2, 4), st.integers(0, 3))
def test_find_period_is_a_real_period(step, reps, cut):
    names = (step * reps)[cut:]
    found = find_period(names)
    if found is None:
        return
    s, p, span = found
    assert p <= len(step) or cut > 0
    assert all(names[i] == names[i + p] for i in range(s, s + span - p))
    assert span // p >= 2


@settings(max_examples=15, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(_CLASSES), st.floats(0.5, 40.0), st.floats(0.0, 30.0)),
                min_size=1, max_size=25), st.sampled_from(["none", "full", "piecewise"]))
def test_export_import_round_trip_property(tmp_path_factory, items, graph):
    from simulator.model.kernels import Op, Step
    from simulator.traces.classify import EAGER_PATH

    ops = tuple(Op(f"op{i}", c, EAGER_PATH[c], fixed_gpu_s=g * 1e-6, fixed_host_s=h * 1e-6)
                for i, (c, g, h) in enumerate(items))
    step = Step(ops, label="random")
    costs = CostModel(load_profile("datasheet-h200"))
    ref, tl = simulate(step, costs, graph)
    path = tmp_path_factory.mktemp("rt") / "x.json"
    path.write_text(json.dumps(chrome_trace(tl, step)))
    wl, _ = workload_from_trace(path, 1, host_time="trace")
    assert [k.name for k in wl.kernels] == [o.name for o in ops]
    assert [k.gpu_us for k in wl.kernels] == pytest.approx([g for _, g, _ in items], abs=1e-3)
    if graph == "none":
        assert [k.host_us for k in wl.kernels] == pytest.approx([h for _, _, h in items], abs=1e-3)
        again, _ = simulate(workload_step(wl, costs).step, costs, graph)
        assert again.step_s == pytest.approx(ref.step_s, abs=1e-8)


def test_rescale_dims_handles_tensor_lists_and_attention_ctx():
    from simulator.traces.whatif import cost_op, rescale_dims
    from simulator.model.workload_file import KernelEntry

    cat = [[[1, 16, 1, 64], [1, 16, 1, 64]], []]
    assert rescale_dims(cat, 1, 4, 1, None, None, False) == [[[4, 16, 1, 64], [4, 16, 1, 64]], []]
    k = KernelEntry(name="CatArrayBatchedCopy", op_class="copy", gpu_us=2.0, host_us=1.0, shape_op="aten::cat",
                    dims=cat, dtypes=["TensorList", "Scalar"])
    assert cost_op(k, cat).bytes == 2 * (1024 * 2) + 1024 * 2  # two 1024-element inputs read, the larger written
    sdpa = [[2, 16, 1, 128], [2, 8, 512, 128], [2, 8, 512, 128]]
    assert rescale_dims(sdpa, 2, 4, 1, 512, 1024, True) == [[4, 16, 1, 128], [4, 8, 1024, 128], [4, 8, 1024, 128]]
    assert rescale_dims([[1024], [2, 1024]], 2, 8, 1, None, None, False) == [[1024], [8, 1024]]  # 1-D kept
