"""Aligning a shape-less imported step with an implementation's recipe, so its small kernels retarget per op.

A trace without recorded input shapes that names its model (`import-trace --model`) gives the GEMMs and the
attention call their shapes from the model (simulator/traces/retarget.py `model_dims`); every other kernel would
be a token-proportional activation of `hidden` elements, which under-states how the small kernels grow with
the batch (a row mean's block height, the norms' fp32 temporaries, the MLP's 3x wider activations, the rotary
muls over [batch, heads, 1, head_dim]). Here the trace's kernel calls are aligned, in launch order, with the
kernel ops of each recipe launchsim has for that model (`reference` eager; `hf` static cache of `ctx` slots;
`hf` dynamic cache: simulator/model/workload.py `build_step`), by op class (a call's class: GEMM if it runs a
GEMM kernel, attention if it runs an attention kernel, else its first kernel's), with difflib's longest matching
blocks (simulator/traces/blocks.py finds the same blocks without difflib's quadratic search). The recipe that
matches the most calls is kept when the matched calls are at least `MIN_MATCHED` of the trace's calls and of the
recipe's ops (a recipe of another decoder, or a partial trace, is not used); each matched call is then re-priced
by its own op: t_new = t_traced x price(op at the new shape) / price(op at the traced shape), the op found at the
new shape by (name, occurrence). The attention call keeps retarget's table ratio (the recipe op's own ratio was
tried and is far off for Phi-3 at batch 1 -> 8: +160 %), but takes from the recipe the K/V heads SDPA reads after
repeat_kv, which decide cuDNN's split-KV combine and the table the ratio is read from (retarget.py: the shapes a
recorded trace would give). Unmatched calls keep retarget's rules.
"""

from __future__ import annotations

import dataclasses

from simulator.model.kernels import OpClass
from simulator.model.workload_file import KernelEntry
from simulator.traces.blocks import matching_blocks

MIN_MATCHED = 0.9  # of the trace's kernel calls and of the recipe's kernel ops, for a recipe to be used at all
_ATTN_WORDS = ("flash", "fmha", "sdpa", "attention", "attn")


def spec_of(record: dict):
    """The ModelSpec a workload's `model` record stands for: every field when the record has them (written by
    this version of `model_record`), else the preset of that name when its shape fields agree, else a Llama of
    those shapes."""
    from simulator.model.models import PRESETS, ModelSpec

    names = {f.name for f in dataclasses.fields(ModelSpec)}
    kw = {k: (tuple(v) if isinstance(v, list) else v) for k, v in record.items() if k in names}
    if "family" not in record:
        p = PRESETS.get(str(record.get("name")))
        if p is not None and all(getattr(p, k) == v for k, v in kw.items() if k != "name"):
            return p
    try:
        return ModelSpec(**kw)
    except (TypeError, ValueError):
        return None


def call_token(ks: list[KernelEntry], idx: list[int]) -> str:
    cls = [OpClass(ks[i].op_class) for i in idx]
    if OpClass.GEMM in cls:
        return "gemm"
    if OpClass.ATTENTION in cls and any(any(w in ks[i].name.lower() for w in _ATTN_WORDS) for i in idx):
        return "attention"
    first = next((ks[i] for i in idx if ks[i].event != "gpu_memset"), ks[idx[0]])
    return OpClass(first.op_class).value


def _recipe_ops(spec, impl: str, kw: dict, batch: int, ctx: int):
    """The recipe's kernel ops (a call each: the attention call's further kernels, cuDNN's split-KV reduce, are in
    the trace's attention call) at (batch, ctx); None where the recipe cannot build that step."""
    from simulator.common.errors import UserError
    from simulator.model.workload import build_step, decode

    opts = dict(kw)
    shape_ctx = ctx
    if opts.get("cache") == "static":  # a static cache attends over its `ctx` slots: ctx - 1 cached + the new one
        opts["max_cache_len"], shape_ctx = ctx, ctx - 1
    try:
        step = build_step(spec, decode(batch, shape_ctx), "none", impl, **opts)
    except (UserError, ValueError):
        return None
    return [o for o in step.ops if o.launches_kernel and not o.attention_part]


CANDIDATES = (("reference", {}), ("hf", {"cache": "static"}), ("hf", {"cache": "dynamic"}))


@dataclasses.dataclass(frozen=True)
class Alignment:
    impl: str
    options: dict
    matched: dict[int, tuple[str, int]]  # call index -> (recipe op name, occurrence of that name)
    calls: int

    @property
    def label(self) -> str:
        return self.impl + (f" ({self.options['cache']} cache)" if self.options.get("cache") else "")


def _keys(ops) -> list[tuple[str, int]]:
    seen: dict[str, int] = {}
    out = []
    for o in ops:
        n = seen.get(o.name, 0)
        seen[o.name] = n + 1
        out.append((o.name, n))
    return out


def align(ks: list[KernelEntry], groups: list[list[int]], spec, batch: int, ctx: int) -> Alignment | None:
    """The recipe whose kernel ops match the most of the trace's calls (at least MIN_MATCHED of the calls and of the
    recipe's ops), or None."""
    tokens = [call_token(ks, idx) for idx in groups]
    best: Alignment | None = None
    for impl, kw in CANDIDATES:
        ops = _recipe_ops(spec, impl, kw, batch, ctx)
        if not ops:
            continue
        keys = _keys(ops)
        blocks = matching_blocks(tokens, [o.op_class.value for o in ops])
        matched = {a + t: keys[b + t] for a, b, n in blocks for t in range(n)}
        if len(matched) >= MIN_MATCHED * max(len(tokens), len(ops)) and \
                (best is None or len(matched) > len(best.matched)):
            best = Alignment(impl, dict(kw), matched, len(tokens))
    return best


def ratios(al: Alignment, spec, costs, b0: int, c0: int, b1: int, c1: int) -> tuple[dict[int, float], dict[int, int]]:
    """Call index -> price(op at (b1, c1)) / price(op at (b0, c0)) for every matched call whose op exists at both
    shapes with a positive price; and, for matched attention calls, the KV heads SDPA sees at (b1, c1) (after
    transformers' repeat_kv: `sdpa_kv_heads`), which decide cuDNN's split-KV combine (retarget.SPLITKV_MAX_WITH)."""
    old = _recipe_ops(spec, al.impl, al.options, b0, c0)
    new = _recipe_ops(spec, al.impl, al.options, b1, c1)
    if not old or not new:
        return {}, {}
    po = {k: o for k, o in zip(_keys(old), old)}
    pn = {k: o for k, o in zip(_keys(new), new)}
    out: dict[int, float] = {}
    heads: dict[int, int] = {}
    for c, key in al.matched.items():
        a, b = po.get(key), pn.get(key)
        if a is None or b is None:
            continue
        t0 = costs.gpu_s(a)
        if t0 > 0:
            out[c] = costs.gpu_s(b) / t0
        if b.op_class is OpClass.ATTENTION:
            heads[c] = b.dim("sdpa_kv_heads") or b.dim("kv_heads")
    return out, heads
