"""Memory process: CUDA-graph pools as engines pin them (issue 16). Nothing here is timed.

    python3 -m calibration.child_memory --out DIR --job MODEL:FUSION [--quick]

For one model and fusion level (`none`, or `compiled` with dynamic shapes, as vLLM compiles once and
captures every size), and for graph modes `full` and `piecewise` (one graph per piece between
attention ops, attention eager; piece outputs stay alive because the next piece reads them), decode
steps at ctx CTX are captured at batch 1, 2, 4, ..., 512 three ways:
- private: each size into its own fresh pool;
- shared_keep: one pool, largest size first, each size's output kept alive (SGLang keeps its output
  buffers);
- shared_drop: one pool, largest first, each output released after capture (vLLM keeps only a weak
  reference to it).
Before every capture the step runs `WARMUP` times eagerly, as engines do, so lazily created
workspaces (cuBLAS) are not allocated inside the pool. For each capture: growth of
`memory_reserved` (segments the caching allocator holds: what engines budget) and of
`memory_allocated` (live tensors), cumulative for the shared pools. Static buffers (input ids,
positions, slot mapping, sequence lengths, block table, logits for the largest size) are allocated
separately, engine-style, and measured the same way.
"""

from __future__ import annotations

import argparse
import math
import os

from .jsonio import dump as _dump

BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
WARMUP = 2


def _mem():
    import torch

    torch.cuda.synchronize()
    return torch.cuda.memory_reserved(), torch.cuda.memory_allocated()


def _warm(r, mode):
    import torch

    if mode == "piecewise":
        fns, _ = r._piece_list()
        for _ in range(WARMUP):
            for f in fns:
                f()
    else:
        for _ in range(WARMUP):
            r.step()
    torch.cuda.synchronize()


def static_buffers(m, largest: int, block: int = 16) -> dict:
    """Engine-style static buffers for the largest captured size: computed bytes and allocator growth."""
    import torch

    torch.cuda.empty_cache()
    r0, a0 = _mem()
    cols = math.ceil(m.max_position_embeddings / block)
    bufs = [torch.zeros(largest, dtype=torch.long, device="cuda"),  # input ids
            torch.zeros(largest, dtype=torch.long, device="cuda"),  # positions
            torch.zeros(largest, dtype=torch.long, device="cuda"),  # slot mapping
            torch.zeros(largest, dtype=torch.int32, device="cuda"),  # sequence lengths
            torch.zeros(largest, cols, dtype=torch.int32, device="cuda"),  # block table
            torch.zeros(largest, m.vocab_size, dtype=torch.bfloat16, device="cuda")]  # logits
    r1, a1 = _mem()
    nbytes = sum(b.numel() * b.element_size() for b in bufs)
    del bufs
    return {"largest": largest, "bytes": nbytes, "reserved": r1 - r0, "allocated": a1 - a0}


def measure(name, fusion, mode, batches, ctx, quick, log):
    import torch

    from .reference_decoder import Runner, make_cache, make_weights, model_spec

    m = model_spec(name, quick)
    w = make_weights(m)
    cache = make_cache(m, max(batches), ctx)

    def runner(b):
        return Runner(m, fusion, b, ctx, weights=w, cache=[(k[:b], v[:b]) for k, v in cache], dynamic=True)

    out = {"model": name, "fusion": fusion, "mode": mode, "ctx": ctx, "batch": list(batches)}
    priv_r, priv_a = [], []
    for b in batches:
        r = runner(b)
        _warm(r, mode)
        torch.cuda.empty_cache()
        r0, a0 = _mem()
        r.capture(pool=torch.cuda.graph_pool_handle(), warmup=0, mode=mode)
        r1, a1 = _mem()
        priv_r.append(r1 - r0)
        priv_a.append(a1 - a0)
        r.release()
        del r
        torch.cuda.empty_cache()
    out["private_reserved"], out["private_allocated"] = priv_r, priv_a
    for keep in (True, False):
        torch.cuda.empty_cache()
        pool = torch.cuda.graph_pool_handle()
        held, cum_r, cum_a = [], {}, {}
        base_r, base_a = _mem()
        for b in sorted(batches, reverse=True):
            r = runner(b)
            _warm(r, mode)
            r.capture(pool=pool, warmup=0, mode=mode)
            if not keep:
                r.out = None
                if r.pieces is not None:
                    r._piece_state.pop("out", None)
            held.append(r)
            r1, a1 = _mem()
            cum_r[b], cum_a[b] = r1 - base_r, a1 - base_a
        tag = "shared_keep" if keep else "shared_drop"
        out[tag + "_reserved"] = [cum_r[b] for b in batches]  # cumulative after capturing sizes >= b
        out[tag + "_allocated"] = [cum_a[b] for b in batches]
        for r in held:
            r.release()
        del held
        torch.cuda.empty_cache()
    log(f"[memory] {name} {fusion} {mode}: private {[round(x / 2**20) for x in priv_r]} MiB; shared_drop total "
        f"{out['shared_drop_reserved'][0] / 2**20:.0f} MiB, keep {out['shared_keep_reserved'][0] / 2**20:.0f} MiB")
    del cache, w
    torch.cuda.empty_cache()
    return out


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--job", required=True)
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args(argv)
    log = lambda s: print(s, flush=True)  # noqa: E731
    from . import microbench as mb
    from .reference_decoder import model_spec

    name, fusion = a.job.split(":")
    batches = (1, 8, 64) if a.quick else BATCHES
    ctx = 512 if name == "qwen3-0.6b" else 128  # decode activations do not depend on ctx; GPU memory is shared
    res = {"kind": "launchsim-graph-memory", "environment": mb.environment(), "warmup_runs": WARMUP,
           "static_buffers": static_buffers(model_spec(name, a.quick), max(batches)), "layouts": []}
    path = os.path.join(a.out, f"memory_{name}_{fusion}.json")
    for mode in ("full", "piecewise"):
        try:
            res["layouts"].append(measure(name, fusion, mode, batches, ctx, a.quick, log))
        except Exception as e:  # noqa: BLE001  (recorded; the other mode still runs)
            import traceback

            traceback.print_exc()
            res["layouts"].append({"model": name, "fusion": fusion, "mode": mode, "error": f"{type(e).__name__}: {e}"[:400]})
        _dump(res, path)


if __name__ == "__main__":
    main()
