"""Per-node GPU gap inside a replayed CUDA graph of real decoder kernels (torch only, on the GPU):

    OUT=<dir> PYTHONPATH=. python3 calibration/node_gap_capture.py   (then: python -m calibration.node_gap)

llama3-8b, fusion none, ctx 512, batch 1 and 8, reference decoder with random weights: a profiled trace
of 3 graph replays each (node_gap_llama3-8b_b{B}.json.gz) and the unprofiled replay step time. The gap
per node, (span of a replay's kernels - sum of their durations) / (nodes - 1), is the cost a node adds
between *different* decoder kernels as CUPTI timestamps show them. It is measured on llama3-8b so
that the qwen3-0.6b trace-import validation (benchmarks/validate_trace_import.py) is not fitted on
its own graph.
"""
import gzip, json, os, shutil, time, torch
from torch.profiler import profile, ProfilerActivity
from calibration.reference_decoder import Runner, make_weights
from simulator.models import PRESETS
OUT = os.environ["OUT"]; res = {"torch": torch.__version__, "gpu": torch.cuda.get_device_name()}
w = make_weights(PRESETS["llama3-8b"])
def timed(fn, n):
    ts = []
    for _ in range(n):
        torch.cuda.synchronize(); t0 = time.perf_counter(); fn(); torch.cuda.synchronize(); ts.append((time.perf_counter() - t0) * 1e3)
    ts.sort(); return {"p10": ts[n // 10], "p50": ts[n // 2], "p90": ts[9 * n // 10], "n": n}
for b in (1, 8):
    r = Runner("llama3-8b", "none", b, 512, weights=w)
    for _ in range(3): r.step()
    g = r.capture()
    for _ in range(5): g.replay()
    res[f"graph_b{b}_ms"] = timed(g.replay, 50)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as p:
        for _ in range(3):
            g.replay(); torch.cuda.synchronize()
    tmp = f"/tmp/ng{b}.json"; p.export_chrome_trace(tmp)
    with open(tmp, "rb") as f, gzip.open(f"{OUT}/node_gap_llama3-8b_b{b}.json.gz", "wb") as z: shutil.copyfileobj(f, z)
    print(b, res[f"graph_b{b}_ms"], flush=True)
    r.graph = r.out = None; del g, r; torch.cuda.empty_cache()
json.dump(res, open(f"{OUT}/node_gap.json", "w"), indent=1)
