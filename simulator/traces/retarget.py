"""Re-pricing an imported step at another batch and context (`predict --workload W --batch N --ctx C`).

Every traced kernel keeps its measured time as the anchor: t_new = t_traced x model(new) / model(traced),
where model() is the profile's price (GEMM and attention tables, byte curves) of the kernel's work at that
shape. The kernels are first grouped into aten calls (a call's first kernel has the call's launch path,
further kernels of the same call `raw`) and each call gets a ROLE:

- `gemm`: a matmul call (aten::linear / mm / addmm / matmul with a 2-D weight): (m, n, k) from its recorded
  input shapes, m scaling with tokens. The whole call (cuBLAS's main kernel, its split-K reduce kernel, a
  memset) is priced as one: the profile's GEMM table includes the reduce kernel. Where the table records
  kernels per call (`kernels`, 2 = split-K + reduce) and that count differs between the traced and the new
  m, the reduce kernel is dropped or added (an added one takes the median traced reduce kernel's time, or
  the profile's min_kernel_us when the trace has none); the call's total stays traced x ratio.
- `attention`: the SDPA call: its attention kernel(s) (flash/fmha/sdpa by kernel name) scale with the
  attention table at (batch, context); helper kernels of the call (mask fills, mask arithmetic over
  [batch, 1, 1, ctx]) are per-step constants (flat at decode sizes: 2.33 -> 2.44 µs from batch 1 to 8 in
  the round-c HF traces); the split-KV combine kernel (cuDNN `lean_reduction`, flash `combine`/`splitkv`) is
  kept (at its traced time) while batch x kv_heads <= `SPLITKV_MAX_WITH` and dropped above it; it is never
  invented for a trace that lacks it (see below).
- `bytes`: elementwise / reduction / copy / embedding calls: bytes from the recorded shapes (tensors whose
  leading dim is batch or batch x tokens resize, attention-sized KV tensors take the new context), priced
  by the byte curves;
- `constant`: ops whose recorded inputs are all 0-dim (scalar index arithmetic) and GEMM/memset helpers:
  the traced time, at any size.

A trace without recorded shapes retargets only when the workload names the model (`import-trace --model`):
then GEMM calls are mapped in launch order onto the model's projections (per layer q, k, v, o, gate, up,
down; or packed qkv / gate_up, by the count of linear calls per layer) plus the LM head, the attention call
gets [batch, heads, 1, head_dim] x [batch, kv_heads, ctx, head_dim], the embedding [batch, 1] ids into
[vocab, hidden], and every other kernel is taken as moving a token-proportional activation of `hidden`
elements, unless its traced time is more than `BIG_FACTOR` x the byte curve's price of such an activation
(it moves something larger: a KV cache copy, a weight cast): that kernel cannot be classified.
A kernel that cannot be classified refuses any other batch or context (one line, `RetargetError`); the
traced batch and context are never answered for another.

Split-KV (attention kernel count changing with batch): SDPA at decode adds a combine kernel (cuDNN's
`lean_reduction_kernel`) when the (batch, KV head) grid is small. Measured on the H200 (torch 2.11, cuDNN,
calibration/splitkv_probe.py -> calibration/measured/h200-traces/splitkv_probe.json; 108 calls): with the
mask + repeat_kv form (static cache) and with enable_gqa (dynamic cache), 16 or 32 query heads, 8/16/32 KV
heads, contexts 576, 1024 and 4096, the combine kernel is there exactly when batch x kv_heads <= 64 and absent
from 96 up, whatever the context; `SPLITKV_MAX_WITH` = 64 (65-95 not measured: taken as without). The
round-c traces agree (static b1: 16, with; b8: 128, without; dynamic b1: 8 and b8: 64, with). Going down in
batch from a trace without the combine kernel, one is not invented (its time is unknown): the retarget says
so in its notes.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from simulator.common.errors import UserError
from simulator.model.kernels import OpClass
from simulator.model.workload_file import KernelEntry, Workload

GEMM_CALL_OPS = ("aten::linear", "aten::mm", "aten::addmm", "aten::matmul")
SPLITKV_WORDS = ("lean_reduction", "combine", "splitkv", "split_kv", "flash_fwd_splitkv_combine")
ATTN_KERNEL_WORDS = ("flash", "fmha", "sdpa", "attention", "attn")
SPLITKV_MAX_WITH = 64  # largest batch x kv_heads measured WITH the combine kernel (96: the smallest without)
BIG_FACTOR = 2.5


class RetargetError(UserError):
    """An imported workload that cannot be re-priced at the batch / context asked for."""


@dataclass
class Retargeted:
    kernels: list[KernelEntry]
    gpu_us: list[float]
    roles: dict[str, int] = field(default_factory=dict)  # kernels per role
    notes: list[str] = field(default_factory=list)
    dropped: int = 0
    added: int = 0


def calls(ks: list[KernelEntry]) -> list[list[int]]:
    """Kernel indices grouped into aten calls: a kernel continues the previous call when its launch path is
    `raw` (a further kernel of the same aten call) or it is a node of a graph launch."""
    out: list[list[int]] = []
    for i, k in enumerate(ks):
        cont = out and (k.path == "raw" or k.graph_node > 0) and ks[out[-1][0]].op == k.op
        if cont:
            out[-1].append(i)
        else:
            out.append([i])
    return out


def _lname(k: KernelEntry) -> str:
    return k.name.lower()


def _is_attention_kernel(k: KernelEntry) -> bool:
    n = _lname(k)
    return any(w in n for w in ATTN_KERNEL_WORDS) and not any(w in n for w in SPLITKV_WORDS)


def _is_splitkv(k: KernelEntry) -> bool:
    n = _lname(k)
    return any(w in n for w in SPLITKV_WORDS)


def _is_splitk_reduce(k: KernelEntry) -> bool:
    n = _lname(k)
    return "splitkreduce" in n or ("splitk" in n and "reduce" in n)


def _scalar_only(dims) -> bool:
    return isinstance(dims, list) and bool(dims) and all(isinstance(d, list) and not d for d in dims)


def _call_dims(ks: list[KernelEntry], idx: list[int]):
    for i in idx:
        if ks[i].dims and not _scalar_only(ks[i].dims):
            return ks[i].dims, ks[i].shape_op, ks[i].dtypes
    return None, None, None


# ------------------------------------------------------------------ shapes from the model (no recorded shapes)

_LAYOUTS = {7: ("q", "k", "v", "o", "gate", "up", "down"), 5: ("qkv", "o", "gate", "up", "down"),
            4: ("qkv", "o", "gate_up", "down")}


def _proj_nk(m: dict, p: str) -> tuple[int, int]:
    h, q, kv, i = m["hidden_size"], m["num_attention_heads"] * m["head_dim"], m["num_key_value_heads"] * m["head_dim"], \
        m["intermediate_size"]
    return {"q": (q, h), "k": (kv, h), "v": (kv, h), "qkv": (q + 2 * kv, h), "o": (h, q), "gate": (i, h),
            "up": (i, h), "gate_up": (2 * i, h), "down": (h, i), "lm_head": (m["vocab_size"], h)}[p]


def model_dims(wl: Workload, groups: list[list[int]], costs,
               aligned: frozenset[int] = frozenset()) -> tuple[dict[int, tuple], list[str]]:
    """Synthesised (dims, shape_op) per call index for a workload without recorded shapes, from `wl.model`;
    and the labels of calls that cannot be classified (`aligned`: calls a recipe op prices, never refused)."""
    from simulator.traces.shapes import _gpu_s, cost_op, label

    m = wl.model
    ks = wl.kernels
    b, q, ctx = wl.batch or 1, wl.q_len or 1, wl.ctx
    tokens = b * q
    out: dict[int, tuple] = {}
    bad: list[str] = []
    big: list[str] = []
    lin = [c for c, idx in enumerate(groups) if ks[idx[0]].op == "aten::linear" and
           any(OpClass(ks[i].op_class) is OpClass.GEMM for i in idx)]
    L = m["num_hidden_layers"]
    if lin:
        per, head = None, 0
        for h in (1, 0):
            if (len(lin) - h) % L == 0 and (len(lin) - h) // L in _LAYOUTS:
                per, head = (len(lin) - h) // L, h
                break
        if per is None:
            bad.append(f"{len(lin)} linear calls do not map onto {L} layers of q/k/v/o/gate/up/down projections "
                       "(packed or not) plus an LM head")
        else:
            names = [p for _ in range(L) for p in _LAYOUTS[per]] + (["lm_head"] if head else [])
            for c, p in zip(lin, names):
                n, k = _proj_nk(m, p)
                out[c] = ([[tokens, k], [n, k]], "aten::linear")
    for c, idx in enumerate(groups):
        if c in out:
            continue
        k0 = ks[idx[0]]
        if any(_is_attention_kernel(ks[i]) for i in idx) and OpClass(k0.op_class) is OpClass.ATTENTION:
            if ctx is None:
                bad.append(f"{label(k0)} (no context length, field 'ctx': give the traced context at import)")
                continue
            H, KV, hd = m["num_attention_heads"], m["num_key_value_heads"], m["head_dim"]
            out[c] = ([[b, H, q, hd], [b, KV, ctx, hd], [b, KV, ctx, hd]], "aten::scaled_dot_product_attention")
            continue
        cls = OpClass(k0.op_class)
        if cls is OpClass.EMBEDDING:
            out[c] = ([[m["vocab_size"], m["hidden_size"]], [b, q]], "aten::embedding")
            continue
        if cls is OpClass.GEMM:
            out[c] = (None, "constant")  # a small matmul outside the projections (rotary frequencies)
            continue
        dims = [[tokens, m["hidden_size"]]]
        op = cost_op(k0.model_copy(update={"shape_op": None, "dtypes": None}), dims)
        t = _gpu_s(costs, op) * 1e6
        if c not in aligned and max(ks[i].gpu_us for i in idx) > BIG_FACTOR * t:
            bad.append(label(k0))
            if not big:
                big.append(f"{label(k0)}: {max(ks[i].gpu_us for i in idx):.2f} µs traced, > {BIG_FACTOR:g} x the "
                           f"{t:.2f} µs a {tokens} x {m['hidden_size']} activation costs, so it moves something "
                           "larger")
            continue
        out[c] = (dims, None)
    return out, bad + [f"({b})" for b in big]


# ------------------------------------------------------------------ re-pricing


def kv_ctx(dims: list, c0: int | None, c1: int | None) -> list:
    """KV-cache-sized tensors take the new context: rank >= 4 tensors whose second-last dim is the traced
    context ([batch, kv_heads, (n_rep,) ctx, head_dim]: repeat_kv copies, cache slices) and attention masks
    [batch, 1, 1, ctx]."""
    if not c0 or not c1 or c0 == c1:
        return dims

    def one(d):
        if not (isinstance(d, list) and len(d) >= 4 and all(isinstance(x, int) for x in d)):
            return [one(x) for x in d] if isinstance(d, list) and d and isinstance(d[0], list) else d
        d = list(d)
        if d[-2] == c0:
            d[-2] = c1
        elif len(d) == 4 and d[-1] == c0 and d[1] == 1 and d[2] == 1:
            d[-1] = c1
        return d

    return [one(d) for d in dims]


def attention_s(costs, op) -> float:
    """Decode attention time: the profile's attention table for (heads, kv_heads, head_dim) where it has one and
    covers (batch, ctx); else (outside that table's grid, or a shape with no table) the nearest table read at the
    context that reads the same KV bytes, extrapolated linearly (CostModel.attention_nearest_s: the rule the cost
    model prices transformers' masked SDPA of a shape without a table by); else the cost model (roofline)."""
    t = costs.table_s(op)
    if t is not None:
        return t
    v = costs.attention_nearest_s(op) if op.dim("q_len", 1) == 1 else None
    return costs.gpu_s(op) if v is None else v


def _ratio(costs, k: KernelEntry, dims, shape_op, b0, b1, q, c0, c1) -> float | None:
    from simulator.traces.shapes import _gpu_s, cost_op, rescale_dims

    kk = k.model_copy(update={"shape_op": shape_op, "dims": dims})
    attn = OpClass(k.op_class) is OpClass.ATTENTION
    old = cost_op(kk, dims)
    new = cost_op(kk, kv_ctx(rescale_dims(dims, b0, b1, q, c0, c1, attn), c0, c1))
    if old is None or new is None:
        return None
    price = attention_s if attn and old.shape else _gpu_s
    t0, t1 = price(costs, old), price(costs, new)
    return t1 / t0 if t0 > 0 else 1.0


def _gemm_kernels(costs, k: KernelEntry, dims, shape_op, b0, b1, q) -> tuple[int | None, int | None]:
    from simulator.traces.shapes import cost_op, rescale_dims

    kk = k.model_copy(update={"shape_op": shape_op, "dims": dims})
    old, new = cost_op(kk, dims), cost_op(kk, rescale_dims(dims, b0, b1, q, None, None, False))
    if old is None or new is None or not old.shape:
        return None, None
    t = costs._gemm.get((old.dim("n"), old.dim("k")))
    if t is None or t.kernels is None:
        return None, None
    return costs.gemm_kernels(old), costs.gemm_kernels(new)


def retarget(wl: Workload, costs, batch: int | None, ctx: int | None) -> Retargeted:
    """The workload's kernels and GPU µs at (batch, ctx); raises RetargetError where it cannot re-price."""
    from simulator.traces.shapes import label

    ks = list(wl.kernels)
    b0, c0 = wl.batch, wl.ctx
    b1 = batch if batch is not None else b0
    c1 = ctx if ctx is not None else c0
    if b1 == b0 and c1 == c0:
        return Retargeted(ks, [k.gpu_us for k in ks])
    if b0 is None:
        raise RetargetError(f"workload '{wl.name}' has no batch size (field 'batch': its trace has no input shapes): "
                            f"re-import it with the traced batch and the model's config to re-price it at batch {b1}")
    if c1 != c0 and c0 is None:
        raise RetargetError(f"workload '{wl.name}' has no context length (no attention shapes recorded, none given "
                            "at import, field 'ctx'): it cannot be re-priced at another context")
    q = wl.q_len or 1
    groups = calls(ks)
    synth, bad = ({}, [])
    by_op: dict[int, float] = {}
    by_heads: dict[int, int] = {}
    al = None
    if any(_call_dims(ks, idx)[0] is None and not any(_scalar_only(ks[i].dims) for i in idx) for idx in groups):
        if wl.model is not None:
            from simulator.traces import align as A

            spec = A.spec_of(wl.model)
            al = A.align(ks, groups, spec, b0, c0) if spec is not None and c0 else None
            by_op, by_heads = A.ratios(al, spec, costs, b0, c0, b1, c1) if al is not None else ({}, {})
            synth, bad = model_dims(wl, groups, costs, frozenset(by_op))
    where = f"batch {b1}" + (f", ctx {c1}" if c1 != c0 else "")
    reduce_us = [ks[i].gpu_us for idx in groups for i in idx if _is_splitk_reduce(ks[i])]
    add_reduce_us = statistics.median(reduce_us) if reduce_us else costs.profile.device.min_kernel_us
    new_ks: list[KernelEntry] = []
    new_us: list[float] = []
    roles: dict[str, int] = {}
    notes: list[str] = []
    dropped = added = 0
    unclassified: list[str] = list(bad)

    def put(k, us, role):
        new_ks.append(k)
        new_us.append(max(float(us), 0.0))
        roles[role] = roles.get(role, 0) + 1

    for c, idx in enumerate(groups):
        k0 = ks[idx[0]]
        dims, shape_op, _ = _call_dims(ks, idx)
        if dims is None and any(_scalar_only(ks[i].dims) for i in idx):
            for i in idx:
                put(ks[i], ks[i].gpu_us, "constant")
            continue
        if dims is None:
            if c in synth:
                dims, shape_op = synth[c]
                if shape_op == "constant":
                    for i in idx:
                        put(ks[i], ks[i].gpu_us, "constant")
                    continue
            else:
                if not bad or wl.model is None:
                    unclassified.append(label(k0))
                continue
        cls = OpClass(k0.op_class)
        gemm_call = cls is OpClass.GEMM or any(OpClass(ks[i].op_class) is OpClass.GEMM for i in idx)
        main = next((i for i in idx if OpClass(ks[i].op_class) is OpClass.GEMM and not _is_splitk_reduce(ks[i])),
                    None)
        if gemm_call and main is not None and (shape_op or "") in GEMM_CALL_OPS + ("aten::bmm", "aten::baddbmm"):
            r = _ratio(costs, ks[main].model_copy(update={"op_class": "gemm"}), dims, shape_op, b0, b1, q, c0, c1)
            if r is None:
                unclassified.append(label(k0))
                continue
            n0, n1 = _gemm_kernels(costs, ks[main], dims, shape_op, b0, b1, q)
            red = [i for i in idx if _is_splitk_reduce(ks[i])]
            keep = list(idx)
            total = sum(ks[i].gpu_us for i in idx) * r
            extra = None
            if n0 is not None and n1 is not None and n1 < n0 and red:
                keep = [i for i in idx if i not in red]
                dropped += len(red)
            elif n0 is not None and n1 is not None and n1 > n0 and not red:
                extra = ks[main].model_copy(update={"name": "cublasLt::splitKreduce_kernel (added: the profile's GEMM "
                                                            "table records split-K at this m)", "path": "raw",
                                                    "host_ops": 0, "gap_us": 0.0, "graph_node": 0})
                added += 1
            base = sum(ks[i].gpu_us for i in keep)
            body = total - (add_reduce_us if extra is not None else 0.0)
            for i in keep:
                put(ks[i], body * ks[i].gpu_us / base if base > 0 else 0.0, "gemm")
            if extra is not None:
                put(extra, min(add_reduce_us, total), "gemm")
            continue
        if cls is OpClass.ATTENTION and any(_is_attention_kernel(ks[i]) for i in idx):
            main = next(i for i in idx if _is_attention_kernel(ks[i]))
            if c in synth and by_heads.get(c):  # a shape-less trace: SDPA reads the K/V heads the recipe gives it
                # (after transformers' repeat_kv, every query head), as a recorded trace's shapes would say
                dims = [dims[0]] + [[d[0], by_heads[c], *d[2:]] for d in dims[1:]]
            r = _ratio(costs, ks[main], dims, shape_op or "aten::scaled_dot_product_attention", b0, b1, q, c0, c1)
            if r is None:
                unclassified.append(label(k0))
                continue
            heads = by_heads.get(c) or _heads(dims)
            for i in idx:
                k = ks[i]
                if _is_attention_kernel(k):
                    put(k, k.gpu_us * r, "attention")
                elif _is_splitkv(k):
                    if heads is not None and b1 * heads > SPLITKV_MAX_WITH:
                        dropped += 1
                    else:
                        put(k, k.gpu_us, "attention_splitkv")
                else:
                    put(k, k.gpu_us, "constant")
            if heads is not None and b1 < b0 and b1 * heads <= SPLITKV_MAX_WITH and \
                    not any(_is_splitkv(ks[i]) for i in idx) and "splitkv" not in roles:
                roles["splitkv"] = 0
                notes.append(f"attention at batch {b1} x {heads} KV heads may add a split-KV combine kernel per call "
                             "that the trace (taken at a larger batch) does not show: not added")
            continue
        for i in idx:
            k = ks[i]
            if k.event == "gpu_memset":
                put(k, k.gpu_us, "constant")
                continue
            if c in by_op and OpClass(k.op_class) is not OpClass.GEMM:
                put(k, k.gpu_us * by_op[c], "recipe")
                continue
            if OpClass(k.op_class) is OpClass.GEMM:  # a matmul kernel under an op whose shapes do not give m, n, k
                unclassified.append(f"{label(k)} (a GEMM kernel under {shape_op or 'an op without shapes'})")
                break
            r = _ratio(costs, k, dims, shape_op, b0, b1, q, c0, c1)
            if r is None:
                unclassified.append(label(k))
                break
            put(k, k.gpu_us * r, "bytes")
    if unclassified:
        from collections import Counter

        why = [u for u in unclassified if u.startswith("(")]
        names = [u for u in unclassified if not u.startswith("(")]
        top = ", ".join(f"{n} x{c}" if c > 1 else n for n, c in Counter(names).most_common(3)) + \
            "".join(f" {w}" for w in why)
        unclassified = names
        how = ("its trace recorded no input shapes for them and the workload names no model (field 'model'): "
               "re-import the trace with the model's config, or record it with record_shapes=True"
               if wl.model is None else f"the shapes of model '{wl.model.get('name')}' do not place them")
        raise RetargetError(f"workload '{wl.name}' (traced at batch {b0}, ctx {c0 or '?'}) cannot be re-priced at "
                            f"{where}: "
                            f"{len(unclassified)} kernel call(s) cannot be classified ({top}); {how}")
    if dropped:
        notes.append(f"{dropped} kernels dropped at {where} (split-K reduce / split-KV combine the profile's tables "
                     "or the split-KV rule say are not launched there)")
    if added:
        notes.append(f"{added} split-K reduce kernels added at {where} (the profile's GEMM table records split-K)")
    if synth:
        notes.append(f"shapes from the model '{wl.model.get('name')}' (the trace recorded none): GEMMs mapped onto "
                     "its projections in launch order, other kernels taken as token-sized activations"
                     + (f" except {roles.get('recipe', 0)} re-priced by the op they align with in the "
                        f"'{al.label}' recipe ({len(al.matched)} of {al.calls} calls aligned)" if roles.get("recipe")
                        and al is not None else ""))
    return Retargeted(new_ks, new_us, roles, notes, dropped, added)


def _heads(dims) -> int | None:
    """The KV heads SDPA sees (dim 1 of its key tensor [batch, kv_heads, ctx, head_dim]): cuDNN's decode grid runs
    over (batch, kv head) pairs, so the split-KV choice follows batch x kv_heads."""
    d = dims[1] if dims and len(dims) > 1 else None
    return int(d[1]) if isinstance(d, list) and len(d) == 4 and all(isinstance(x, int) for x in d) else None


def model_record(spec) -> dict:
    """The ModelSpec fields a workload keeps (`import-trace --model`): the shapes GEMMs and attention are given, and
    the rest (family, norms, biases, packing, ...) that pick and shape the recipe its calls are aligned with
    (simulator/traces/align.py)."""
    import dataclasses

    return {k: (list(v) if isinstance(v, tuple) else v) for k, v in dataclasses.asdict(spec).items()}


def readiness(wl: Workload, costs=None) -> str:
    """One line: whether `predict --workload` can re-price this workload at other batches / contexts."""
    from simulator.model.costs import CostModel
    from simulator.model.profile import load_profile

    costs = costs or CostModel(load_profile(None))
    if wl.batch is None:
        return ("retarget: no (batch unknown: no shapes recorded; give the traced batch and the model at import to "
                "re-price other batches)")
    try:
        r = retarget(wl, costs, wl.batch * 2, None)
    except RetargetError as e:
        return "retarget: no: " + str(e).split(": ", 1)[1]
    roles = ", ".join(f"{k} {v}" for k, v in sorted(r.roles.items()) if v)
    return f"retarget: yes, to any batch{' and context' if wl.ctx else ''} (kernels by role: {roles})"
