"""Traces for benchmarks/validate_trace_import.py, recorded on the GPU machine (torch only):

    OUT=<dir> PYTHONPATH=. python3 calibration/scripts/trace_import_capture.py

qwen3-0.6b, fusion none, ctx 512, reference decoder with random weights. For batch 1 and 8: a
torch.profiler trace (CPU + CUDA, record_shapes) of 3 eager steps each followed by a synchronize
(eager_shapes_b{B}.json.gz), the unprofiled eager and CUDA-graph replay step times (p10/p50/p90 of
single synchronised steps: 20 eager, 100 replays), and for batch 1 a profiled trace of 3 graph
replays (graph_replay_b1.json.gz). Writes OUT/own.json with the timings.
"""
import gzip, json, os, shutil, time, torch
from torch.profiler import profile, ProfilerActivity
from calibration.reference_decoder import Runner, make_weights
from simulator.model.models import PRESETS
OUT = os.environ["OUT"]; res = {"torch": torch.__version__, "gpu": torch.cuda.get_device_name()}
w = make_weights(PRESETS["qwen3-0.6b"])
def prof(fn, name, shapes=False, n=3):
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=shapes) as p:
        for _ in range(n):
            fn(); torch.cuda.synchronize()
    tmp = f"/tmp/{name}.json"; p.export_chrome_trace(tmp)
    with open(tmp, "rb") as f, gzip.open(f"{OUT}/{name}.json.gz", "wb") as g: shutil.copyfileobj(f, g)
def timed(fn, n):
    ts = []
    for _ in range(n):
        torch.cuda.synchronize(); t0 = time.perf_counter(); fn(); torch.cuda.synchronize(); ts.append((time.perf_counter() - t0) * 1e3)
    ts.sort(); return {"p10": ts[n // 10], "p50": ts[n // 2], "p90": ts[9 * n // 10], "n": n}
for b in (1, 8):
    r = Runner("qwen3-0.6b", "none", b, 512, weights=w)
    for _ in range(3): r.step()
    prof(r.step, f"eager_shapes_b{b}", shapes=True)
    res[f"eager_b{b}_unprofiled_ms"] = timed(r.step, 20)
    g = r.capture()
    for _ in range(5): g.replay()
    res[f"graph_b{b}_ms"] = timed(g.replay, 100)
    if b == 1: prof(g.replay, "graph_replay_b1")
    print(b, res[f"graph_b{b}_ms"], flush=True)
    r.graph = r.out = None; del g, r; torch.cuda.empty_cache()
json.dump(res, open(f"{OUT}/own.json", "w"), indent=1)
