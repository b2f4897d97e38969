"""Check the implementation recipes (simulator/model/recipes.py) against measured torch.profiler traces.

For each trace: the first step's kernels (memsets and cuBLAS's split-K reduce kernels dropped: the GEMM tables
count those), each named by the aten op that launched it (the innermost cpu op), split into preamble, L identical
layers and tail (the smallest layer period that makes L repeats); the recipe's ops for the same model, batch,
context and cache are named the same way (`ATEN_OF`) and compared position by position.

    python -m calibration.build_recipes            # round c's Qwen3-0.6B traces (the fit)
    python -m calibration.build_recipes TRACE MODEL CACHE BATCH CTX MAX_CACHE_LEN LAYERS

Prints one line per trace (kernels per layer measured / recipe, preamble, tail, first mismatch) and a summary last.
CPU only (reads the traces with simulator/traces/read.py).
"""

from __future__ import annotations

import sys
from pathlib import Path

ROUND_C = Path(__file__).parent / "measured" / "h200-round-c"
# (trace, model, cache, batch, ctx, max_cache_len): ctx 512 prefill then 4 decode calls before the traced steps;
# the dynamic traces' cache holds 516 keys (the trace's cat inputs [B, 8, 516, 128]), the static 576 slots
FIT = (("hf_qwen3-0.6b_static_b1.trace.json.gz", "qwen3-0.6b", "static", 1, 516, 576),
       ("hf_qwen3-0.6b_static_b8.trace.json.gz", "qwen3-0.6b", "static", 8, 516, 576),
       ("hf_qwen3-0.6b_dynamic_b1.trace.json.gz", "qwen3-0.6b", "dynamic", 1, 516, None),
       ("hf_qwen3-0.6b_dynamic_b8.trace.json.gz", "qwen3-0.6b", "dynamic", 8, 516, None))

# recipe op name (its last dotted part, or the whole name) -> the aten op that launches its kernel
ATEN_OF = {
    "to_fp32": "copy_", "to_bf16": "copy_", "weight_fp32": "copy_", "pow": "pow", "mean": "mean", "add_eps": "add",
    "rsqrt": "rsqrt", "mul": "mul", "mul_weight": "mul", "one_plus_weight": "add", "mul_cos": "mul", "neg": "neg",
    "cat": "cat", "mul_sin": "mul", "add": "add", "arange": "arange", "pos_add": "add", "pos_add_": "add_",
    "index_copy_k": "index_copy_", "index_copy_v": "index_copy_", "repeat_kv_k": "copy_", "repeat_kv_v": "copy_",
    "mask_fill": "fill_", "mask_where": "where", "attention": "_cudnn_attention_forward",
    "split_kv_reduce": "_cudnn_attention_forward", "residual_add": "add", "silu": "silu",
    "gelu_pytorch_tanh": "gelu", "cat_k": "cat", "cat_v": "cat", "embedding": "index_select", "arange_kv": "arange",
    "add_kv": "add", "le": "le", "fill": "fill_", "sub": "sub", "gt": "gt", "and_window": "bitwise_and",
    "and_causal": "bitwise_and", "inv_freq_float": "copy_", "pos_float": "copy_",
    "matmul": "bmm", "cos": "cos", "cos_scale": "mul", "sin": "sin", "sin_scale": "mul", "cos_cast": "copy_",
    "sin_cast": "copy_", "cat_pass": "cat", "cast": "copy_", "div": "div", "tanh": "tanh",
    "roll_k": "roll", "roll_v": "roll", "index_put_k": "_index_put_impl_", "index_put_v": "_index_put_impl_",
}


def aten_of(op) -> str:
    from simulator.model.kernels import OpClass

    if op.op_class is OpClass.GEMM and not op.name.endswith("matmul"):
        return "addmm" if op.dim("bias") else "mm"
    last = op.name.rsplit(".", 1)[-1]
    return ATEN_OF.get(last, ATEN_OF.get(op.name, op.name))


def trace_tokens(path) -> list[str]:
    """The first step's kernels as aten-op names (memsets and split-K reduce kernels dropped)."""
    from simulator.traces.importer import link
    from simulator.traces.read import read_trace

    ks, _, _ = link(read_trace(path))
    out = []
    for k in ks:
        if k.cat != "kernel" or "splitKreduce" in k.name:
            continue
        name = k.chain[-1].name.replace("aten::", "") if k.chain else k.name
        if name == "index_select" and out:
            break  # the next step's embedding
        out.append(name)
    return out


def split_layers(tokens: list[str], layers: int) -> tuple[list, list, list] | None:
    """(preamble, one layer, tail): the smallest period p and offset a with tokens[a : a + p L] p-periodic."""
    n = len(tokens)
    for p in range(8, n // layers + 1):
        for a in range(min(64, n - p * layers) + 1):
            body = tokens[a:a + p * layers]
            if all(body[i] == body[i % p] for i in range(len(body))):
                return tokens[:a], body[:p], tokens[a + p * layers:]
    return None


def recipe_tokens(model, cache: str, batch: int, ctx: int, slots: int | None,
                  positions: str = "given") -> tuple[list, list, list]:
    from simulator.model import recipes_hf as R
    from simulator.model.workload import _Builder, decode

    def kernels(fn):
        b = _Builder(model, decode(batch, ctx))
        fn(b)
        return [aten_of(o) for o in b.ops if o.launches_kernel]

    s = slots or ctx + 1
    period = layer_period(model)

    def layers(b):
        for i in range(period):
            R.hf_layer(b, i, cache, s)

    return kernels(lambda b: R.hf_preamble(b, cache, s, positions)), kernels(layers), kernels(R.hf_tail)


def layer_period(model) -> int:
    """Layers in one repeating unit of the kernel sequence: 1, or the sliding pattern's period (gemma2: 2)."""
    pat = [model.sliding_at(i) for i in range(model.num_hidden_layers)]
    for p in range(1, len(pat) + 1):
        if len(pat) % p == 0 and all(pat[i] == pat[i % p] for i in range(len(pat))):
            return p
    return len(pat)


def compare(path, model, cache, batch, ctx, slots, positions: str = "given") -> dict:
    got = split_layers(trace_tokens(path), model.num_hidden_layers // layer_period(model))
    if got is None:
        return {"trace": str(path), "error": "no layer period found"}
    pre, layer, tail = got
    rp, rl, rt = recipe_tokens(model, cache, batch, ctx, slots, positions)
    first = next((i for i, (x, y) in enumerate(zip(layer, rl)) if x != y), None)
    if first is None and len(layer) != len(rl):
        first = min(len(layer), len(rl))
    return {"trace": Path(path).name, "measured_layer": len(layer), "recipe_layer": len(rl),
            "measured_preamble": len(pre), "recipe_preamble": len(rp), "measured_tail": len(tail),
            "recipe_tail": len(rt), "layer_equal": layer == rl, "preamble_equal": pre == rp, "tail_equal": tail == rt,
            "first_layer_mismatch": first, "measured": layer, "recipe": rl}


def compare_step(path, model, cache, batch, ctx, slots, positions: str = "given") -> dict:
    """The whole first step, kernel by kernel, against the recipe's step (for a layer pattern with no period that
    divides the layers, gemma3's 5:1 over 26): equal, the first mismatch and both lengths."""
    from simulator.model.workload import build_step, decode

    got = trace_tokens(path)
    st = build_step(model, decode(batch, ctx), "none", "hf", cache=cache, max_cache_len=slots, positions=positions)
    mine = [aten_of(o) for o in st.ops if o.launches_kernel]  # split-K reduces: in neither list (GEMM tables)
    first = next((i for i, (x, y) in enumerate(zip(got, mine)) if x != y), None)
    if first is None and len(got) != len(mine):
        first = min(len(got), len(mine))
    return {"trace": Path(path).name, "measured": len(got), "recipe": len(mine), "equal": got == mine,
            "first_mismatch": first}


REF_TRACE = Path(__file__).parent / "measured" / "h200-round-a" / "ref_qwen3-0.6b_none_b1_ctx512.trace.json.gz"


def _gaps(path) -> list[tuple[float, int]]:
    """Per traced step: (interpreter µs outside every top-level op, host calls: launching calls + host-only ops)."""
    from simulator.traces.importer import import_trace
    from simulator.traces.read import read_trace

    imp = import_trace(read_trace(path))
    out = []
    for w in imp.steps:
        ks = imp.kernels[w.i0:w.i1]
        calls = {id(k.chain[0]) for k in ks if k.chain and k.launch is not None and k.graph_pos == 0}
        bare = sum(1 for k in ks if not k.chain and k.launch is not None and k.graph_pos == 0)
        out.append((sum(k.gap_us for k in ks), len(calls) + bare + sum(k.host_ops for k in ks)))
    return out


def interpreter_excess(path, layers: int, ref=REF_TRACE) -> float:
    """µs per layer of interpreter time in `path`'s steps beyond the reference decoder's gap per host call (whose
    clean eager step the profile's per-path launch costs reproduce): the median over the traced steps."""
    import statistics

    r = _gaps(ref)
    per_call = sum(g for g, _ in r) / sum(n for _, n in r)
    return statistics.median((g - per_call * n) / layers for g, n in _gaps(path))


def main(argv: list[str]) -> int:
    from simulator.model.models import PRESETS, load_model

    if argv:
        path, model, cache, batch, ctx, slots, *_ = argv + [None] * 7
        rows = [compare(path, PRESETS.get(model) or load_model(model), cache, int(batch), int(ctx),
                        int(slots) if slots not in (None, "none") else None)]
    else:
        rows = [compare(ROUND_C / t, PRESETS[m], c, b, x, s) for t, m, c, b, x, s in FIT]
    ok = 0
    for r in rows:
        if "error" in r:
            print(f"{r['trace']}: {r['error']}")
            continue
        ok += r["layer_equal"] and r["preamble_equal"] and r["tail_equal"]
        print(f"{r['trace']}: layer {r['measured_layer']} measured / {r['recipe_layer']} recipe "
              f"(equal: {r['layer_equal']}), preamble {r['measured_preamble']}/{r['recipe_preamble']} "
              f"({r['preamble_equal']}), tail {r['measured_tail']}/{r['recipe_tail']} ({r['tail_equal']})"
              + (f", first mismatch at {r['first_layer_mismatch']}" if not r["layer_equal"] else ""))
    print(f"summary: {ok}/{len(rows)} traces equal to the recipe position by position (split-K reduce kernels and "
          "memsets excluded)")
    return 0 if ok == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
