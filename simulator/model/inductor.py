"""torch.compile (Inductor) as a fusion model: an eager op list in, the kernels Inductor leaves out.

`compile_ops(ops, dynamic=...)` applies Inductor's lowering and fusion rules to an eager op list
(`simulator.model.workload.build_step(model, shape, "none").ops` or any list named the same way) instead
of a hand-written table. It works in Inductor's own two phases (facts from torch/_inductor: config.py's
thresholds, ir.py's should_realize_on_reuse, scheduler.py's can_fuse, codegen/simd.py's can_fuse and
choices.py's should_use_persistent_reduction):

1. Lowering (which values become buffers). Views launch nothing and vanish: inside the compiled graph they
   are index arithmetic, so they cost no host time either. Pointwise ops (elementwise, casts, `cat`, the
   embedding gather) are inlined into every consumer; a pointwise value is *realized* (gets a buffer and a
   scheduler node) only when an extern kernel reads it (extern inputs must be real buffers), when nothing
   reads it (a graph output), when its inlined body reads more than `REALIZE_ACC_READS_THRESHOLD` buffers,
   or when several ops read it and its body reads more than `REALIZE_READS_THRESHOLD` buffers or holds more
   than `REALIZE_OPCOUNT_THRESHOLD` ops (the residual stream is recomputed in the next norms until it reads
   more than four buffers, then stored; the measured kernel names show it: layer 0's and layer 1's norms
   carry `embedding` in their names, layer 2's do not). Reductions (norm means) are always realized; so is
   a copy into a mutated buffer (the KV cache's `index_copy_` lowers to a scatter store whose value function
   inlines its pointwise producer), and an in-place op on a buffer (a name ending in `_`: StaticCache's
   position `add_`, stored back by its own kernel, measured `triton_poi_fused_add_copy_`). GEMMs, attention
   (SDPA), collectives and sampling stay extern (path COMPILED_EXTERN for GEMM and attention): they are
   barriers to fusion, and each of their inputs is a buffer (the rotary bmm's two operands: two kernels where
   transformers casts both, one where the reference casts only the positions).
2. Scheduling (which buffers share a kernel). A realized node fuses with a realized producer it reads when
   the loop sizes match: pointwise with pointwise of equal numel; a pointwise prologue into a reduction
   whose numel x rnumel equals it; a reduction with a pointwise (or scatter) epilogue of numel equal to the
   reduction's numel x rnumel (or to its numel: a pointwise at the reduced size); never when the fused
   group would depend on itself through a node outside it (an extern in between), nor past
   `MAX_FUSION_SIZE` nodes. Two kernels that do not depend on each other fuse horizontally when their numel
   and rnumel match and they read a common buffer the same way (a read through a split/chunk view is a
   slice, another index), unless one stores into a mutated buffer (measured: transformers' K and V cache
   writes share the position read and stay apart). dynamic=True (measured), where the symbolic sizes reach
   the KV cache and the weights (`dynamic_inputs`: the reference decoder passes them as arguments;
   transformers does not, and launches the same kernels either way): a reduction does not take a scatter
   store as its epilogue (qwen3's k-norm stays its own persistent reduction and RoPE-k + cache write a
   pointwise kernel, +1 kernel per layer; static, the three are one kernel), and the hidden-size norms are
   looped.

Each fused kernel: flops = the sum of its home members' flops (a node inlined into several kernels is
counted once, in the first); bytes = the group's external reads (distinct realized producers' outputs,
graph inputs) plus the outputs read outside the group, never more than its home members' eager bytes
summed; path COMPILED; name `triton_{per|red|poi}:{groups}`; shape keeps numel, rnumel and whether the
reduction is persistent (one block holds a row). Fused kernels are placed right after the last extern or
kernel they read, as Inductor's scheduler emits them.

What the eager list does not say (which op reads which) is inferred from the op names workload.py uses
(`group.step`; a run of consecutive ops with one group prefix is one module: each op reads the previous
one, the first reads the groups `_FEEDS` names, which a recipe extends with `feeds`); an op whose group is
not listed reads the previous kernel op (which reduces to "each run between two extern kernels is one
kernel"). Callers with real data flow pass `reads` instead. An op with shape key `graph_break=1` runs
eagerly between two compiled regions.

Not modelled (said where it matters): cuBLAS split-K reduce kernels (a property of the GEMM, counted by
CostModel.gemm_kernels from the GEMM tables, as for eager), Inductor's split reductions for very large
reductions, CSE of identical ops, and ops that carry a table key (fp8 quant, MoE routing/grouped GEMMs) or
a fixed time, which are kept unchanged as barriers.

Memo: the scheduling decisions of an op list are kept as a `_Plan` per list structure and reused for a list whose
fusion-relevant sizes are the plan's times one factor (the same decisions, proved in `_Plan`'s docstring; checked
against fresh schedules by tests/model/test_inductor_plans.py): a sweep's compiled steps over the batch axis are
scheduled once and priced per size (`_emit`). A traced list (engine/batchbuild.py: sizes that are symbols,
`kernels.Traced`) takes the same path: the fit test and `_emit` make the same comparisons on the symbols (the
trace's guards), so one traced build prices many batch sizes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from types import MappingProxyType
from typing import Mapping, Sequence

import numpy as np

from simulator.common.errors import UserError
from simulator.common.memo import memo
from simulator.model.kernels import LORA_TARGETS, MARKER_KEYS, LaunchPath, Op, OpClass, Traced

REALIZE_READS_THRESHOLD = 4  # torch._inductor.config.realize_reads_threshold: a reused value reading more is stored
REALIZE_ACC_READS_THRESHOLD = 8  # config.realize_acc_reads_threshold: a value reading more is stored, reused or not
REALIZE_OPCOUNT_THRESHOLD = 30  # config.realize_opcount_threshold: a reused value with a larger body is stored
MAX_FUSION_SIZE = 64  # config.max_fusion_size: scheduler nodes in one fused kernel
# InductorChoices.should_use_persistent_reduction: rnumel <= 1024 for a contiguous (INNER-hinted) reduction, <= 64
# otherwise. A norm whose only input is the embedding gather over several rows reads through an index (taken as
# not INNER): measured, the batch-16 static first norm is triton_red, the batch-1 one triton_per, and the later
# norms that recompute the gather next to a GEMM output stay triton_per.
PERSISTENT_RNUMEL_INNER, PERSISTENT_RNUMEL_OTHER = 1024, 64
PERSISTENT_RNUMEL_DYNAMIC = 1023  # measured dynamic=True: head_dim 128 persistent, hidden 1024 looped (triton_red)
# measured (calibration/measured/h200-round-b/timing.json, qwen3-0.6b batch 16 compiled eager): host 7.736 ms
# for 453 kernels dynamic vs 6.718 ms for 425 static; beyond the 28 extra launches at the static 15.81 us each,
# the dynamic wrapper costs (7.736 - 453 * 6.718 / 425) / 453 = 1.28 us more per launch (size arguments from
# symbolic sizes). CostModel.host_s adds it to each launch of a step built with compile_dynamic=True (the step knob).
DYNAMIC_WRAPPER_EXTRA_US = (7.736474 - 453 * 6.718204 / 425) / 453 * 1000.0

VERIFY_PART = MARKER_KEYS[1]  # "verify_part", shape key of recipes.verify_part (kept on a kernel all of whose members carry it)
_VERIFY_PART_KEYS = frozenset({VERIFY_PART, "heads", "kv_heads", "head_dim", "q_len"})
GRAPH_BREAK = MARKER_KEYS[0]  # "graph_break", shape key: the op runs eagerly outside the compiled graph (kept as it is, a barrier)
_OPAQUE_KEYS = frozenset({"fp8", "quant", "grouped", "routing"})  # ops a calibrated table prices as they are
_EXTERN_CLASSES = frozenset({OpClass.GEMM, OpClass.ATTENTION, OpClass.COLLECTIVE, OpClass.SAMPLING})

# group prefix (or a full op name, which wins) -> what its first op reads ('a|b': the most recent of a or b; each
# alternative a full op name or a group prefix). The names of workload.py's reference decoder and of
# recipes.py's hf recipe (transformers' modeling code: StaticCache index_copy_, repeat_kv, SDPA's mask).
_NORMS_IN = "residual_add|embedding|embed_scale"
_FEEDS_BASE: dict[str, tuple[str, ...]] = {
    "embedding": (), "rotary": (), "rotary_local": (), "mask": (), "sliding_mask": (), "cache": (),
    "embed_scale": ("embedding",),
    # the rotary bmm's two operands are both extern inputs (both realized: two kernels where both are copies)
    "rotary.pos_float": (), "rotary.matmul": ("rotary.inv_freq_float", "rotary.pos_float"),
    "rotary_local.pos_float": (), "rotary_local.matmul": ("rotary_local.inv_freq_float", "rotary_local.pos_float"),
    "input_norm": (_NORMS_IN,), "input_layernorm": (_NORMS_IN,),
    "post_norm": (_NORMS_IN,), "final_norm": (_NORMS_IN,),
    "post_attention_layernorm": ("residual_add|o_proj",),  # after the residual add; sandwich norms: after o_proj
    "pre_feedforward_layernorm": ("residual_add",), "post_feedforward_layernorm": ("down_proj",),
    "q_proj": ("input_norm|input_layernorm",), "k_proj": ("input_norm|input_layernorm",),
    "v_proj": ("input_norm|input_layernorm",), "qkv_proj": ("input_norm|input_layernorm",),
    "qkv": ("qkv_proj",),
    "q_norm": ("q_proj|qkv_proj",), "k_norm": ("k_proj|qkv_proj",),
    "rope_q": ("q_norm|q_proj|qkv_proj", "rotary"), "rope_k": ("k_norm|k_proj|qkv_proj", "rotary"),
    "cache_write_k": ("rope_k",), "cache_write_v": ("v_proj|qkv_proj",),
    "cache.index_copy_k": ("rope_k", "cache.pos_add_"), "cache.index_copy_v": ("v_proj|qkv_proj", "cache.pos_add_"),
    "cache.cat_k": ("rope_k",), "cache.cat_v": ("v_proj|qkv_proj",),
    "repeat_kv_k": ("cache.index_copy_k",), "repeat_kv_v": ("cache.index_copy_v",),
    "sdpa": ("mask|sliding_mask",),
    "attention": ("rope_q", "repeat_kv_k|cache.index_copy_k|cache.cat_k|cache_write_k",
                  "repeat_kv_v|cache.index_copy_v|cache.cat_v|cache_write_v", "sdpa"),
    "attn": ("attention",),
    "o_proj": ("attn|attention",),
    # the reference decoder's sandwich norms (Gemma: post_attn_norm after o_proj, post_mlp_norm after down_proj)
    "post_attn_norm": ("o_proj",), "post_mlp_norm": ("down_proj",),
    "residual_add": ("o_proj|down_proj|post_attention_layernorm|post_feedforward_layernorm|post_attn_norm|"
                     "post_mlp_norm", _NORMS_IN),
    "gate_proj": ("post_norm|post_attention_layernorm|pre_feedforward_layernorm",),
    "up_proj": ("post_norm|post_attention_layernorm|pre_feedforward_layernorm",),
    "gate_up_proj": ("post_norm|post_attention_layernorm|pre_feedforward_layernorm",),
    "silu": ("gate_proj|gate_up_proj",), "act": ("gate_proj|gate_up_proj",),
    # the reference decoder names a non-SiLU activation by itself (families.ACTIVATIONS)
    "gelu_pytorch_tanh": ("gate_proj|gate_up_proj",), "gelu": ("gate_proj|gate_up_proj",),
    "gelu_new": ("gate_proj|gate_up_proj",),
    "mul": ("silu|act|gelu_pytorch_tanh|gelu|gelu_new", "up_proj|gate_up_proj"),
    "down_proj": ("mul",),
    "lm_head": ("final_norm",), "logit_softcap": ("lm_head",),
}
# a LoRA adapter on a projection (workload._Builder.lora_delta): the shrink GEMM reads the projection's input, the
# expand GEMM the shrink, the scaling the expand; the add (in the projection's group, so its readers read the sum)
# reads the projection's GEMM and the scaling
_FEEDS: Mapping[str, tuple[str, ...]] = MappingProxyType({**_FEEDS_BASE, **{
    k: v for p in LORA_TARGETS
    for k, v in ((f"lora_A.{p}", _FEEDS_BASE[p]), (f"lora_B.{p}", (f"lora_A.{p}",)),
                 (f"lora_scale.{p}", (f"lora_B.{p}",)), (f"{p}.lora_add", (p, f"lora_scale.{p}")))}})
# steps of one module that read an earlier step of the same run besides the previous one (RMSNorm's x * rsqrt
# reads the fp32 x; RoPE's sum reads x * cos)
_STEP_READS = {"mul": ("to_fp32",), "add": ("mul_cos",)}
_SCATTER_PREFIXES = ("cache_write",)  # copies into a mutated buffer (the static KV cache's index_copy_)
_SCATTER_NAMES = (".index_copy",)
# copies that read a whole buffer no listed op writes whole: the KV cache (transformers' repeat_kv expands and copies
# every StaticCache slot to every query head; DynamicCache's cat copies the past keys with the new one), where the
# listed producer (the cache write, RoPE-k) writes one token into it. Their eager bytes are the cache read plus
# the output (flops = output elements): the output is flops x act_bytes, the rest a graph-input read. Without this
# the "output as wide as each input" rule halved them and dropped the cache read (transformers qwen3-0.6b batch 64,
# 640 slots: 126 MB where a repeat_kv copy moves 252 MB).
_WHOLE_BUFFER_READERS = ("repeat_kv_", "cache.cat_")


class InductorError(UserError):
    """An op list the fusion model cannot read (a `reads` entry naming an op that is not before it)."""


def _prefix(op: Op) -> str:
    return op.name.split(".", 1)[0]


def _kind(op: Op) -> str:
    """extern | opaque | reduction | scatter | pointwise | view."""
    if op.op_class is OpClass.VIEW:
        return "view"
    # a fixed GPU time marks an op the pass does not know (an imported trace's kernel), unless a recipe names it
    # (the hf recipe prices repeat_kv's strided copy at a fixed measured rate: it is still a pointwise copy)
    known = op.name in _FEEDS
    if (op.fixed_gpu_s is not None and not known) or op.path is LaunchPath.CUSTOM_OP \
            or any(k in _OPAQUE_KEYS for k, _ in op.shape) or op.dim(GRAPH_BREAK):
        return "opaque"
    if op.op_class in _EXTERN_CLASSES:
        return "extern"
    if op.op_class is OpClass.REDUCTION:
        return "reduction"
    if op.op_class is OpClass.COPY and (_prefix(op).startswith(_SCATTER_PREFIXES) or
                                        any(t in op.name for t in _SCATTER_NAMES)):
        return "scatter"
    if "." in op.name and op.name.endswith("_") and op.op_class in (OpClass.ELEMENTWISE, OpClass.COPY):
        return "scatter"  # an in-place op on a buffer (StaticCache's position add_): a mutation, stored back
    return "pointwise"  # ELEMENTWISE, COPY (casts, cat, contiguous), EMBEDDING (a gather)


def infer_reads(ops: Sequence[Op], feeds: Mapping[str, tuple[str, ...]] | None = None) -> tuple[tuple[int, ...], ...]:
    """Which earlier ops each op reads, from the op names (see the module docstring): `feeds` (a group prefix or
    full op name -> what it reads, 'a|b' = the most recent of a or b) extends and overrides `_FEEDS`. An op
    whose full name is listed reads what it names; otherwise the first op of a run of one group prefix reads
    what its prefix names, the others the previous op of the run; an unlisted group's first op reads the
    previous kernel op. Views read nothing and are read by nobody (they vanish)."""
    table = {**_FEEDS, **(feeds or {})}
    reads: list[tuple[int, ...]] = []
    last_of: dict[str, int] = {}  # group prefix or full op name -> index of its most recent kernel op
    last_kernel = -1
    prev_prefix, prev_in_run = None, -1  # the current run of one group prefix and its last kernel op
    run_ops: dict[str, int] = {}  # the current run's ops by name

    def resolve(entry: tuple[str, ...]) -> tuple[int, ...]:
        got = []
        for alts in entry:
            cands = [last_of[a] for a in alts.split("|") if a in last_of]
            if cands:
                got.append(max(cands))
        return tuple(sorted(set(got)))

    for i, op in enumerate(ops):
        p = _prefix(op)
        if op.op_class is OpClass.VIEW:
            reads.append(())
            if p != prev_prefix:
                prev_prefix, prev_in_run, run_ops = p, -1, {}
            continue
        if op.name in table:
            r: tuple[int, ...] = resolve(table[op.name])
        elif p == prev_prefix and prev_in_run >= 0:
            step = op.name[len(p) + 1:]
            extra = [run_ops[f"{p}.{t}"] for t in _STEP_READS.get(step, ()) if f"{p}.{t}" in run_ops]
            r = tuple(sorted({prev_in_run, *extra}))
        elif p in table:
            r = resolve(table[p])
        else:
            r = (last_kernel,) if last_kernel >= 0 else ()
        reads.append(r)
        if p != prev_prefix:
            run_ops = {}
        run_ops[op.name] = i  # the run's ops by name, for _STEP_READS
        prev_prefix, prev_in_run = p, i
        last_of[p] = i
        last_of[op.name] = i
        last_kernel = i
    return tuple(reads)


def _reads_whole_buffer(op: Op) -> bool:
    return op.op_class is OpClass.COPY and op.name.startswith(_WHOLE_BUFFER_READERS)


def _out_bytes(op: Op, n_in: int, kind: str, act_bytes: int) -> float:
    """Bytes of the op's output tensor, from its eager bytes (which count every input and the output)."""
    if _reads_whole_buffer(op):
        return min(op.bytes, op.flops * act_bytes)
    if kind in ("extern", "opaque"):
        if op.op_class is OpClass.GEMM:
            return act_bytes * op.dim("m") * op.dim("n")
        if op.op_class is OpClass.ATTENTION:
            return act_bytes * op.dim("batch") * op.dim("q_len", 1) * op.dim("heads") * op.dim("head_dim")
        return op.bytes / 2
    if op.op_class is OpClass.EMBEDDING:
        return op.bytes  # the gathered rows (eager counts them once)
    if kind == "reduction" and op.flops > 0:
        per = op.bytes / op.flops  # in_b + out_b / rnumel per input element: the fraction is the output
        return op.bytes - op.flops * _int(per)
    return op.bytes / (n_in + 1)  # the output as wide as each input


def compile_ops(ops: Sequence[Op], dynamic: bool, *, reads: Sequence[Sequence[int]] | None = None,
                feeds: Mapping[str, tuple[str, ...]] | None = None, act_bytes: int = 2,
                dynamic_inputs: bool | None = None) -> tuple[Op, ...]:
    """The host ops a torch.compile'd (Inductor, default mode) version of eager `ops` launches.

    `reads[i]`: indices of the earlier ops op i reads (default: inferred from the names, `infer_reads(ops,
    feeds)`). An op whose shape carries `graph_break=1` runs eagerly between compiled regions: kept as it is,
    and nothing fuses across it. `act_bytes`: bytes per activation element (an extern's output size).
    `dynamic_inputs`: whether dynamic=True's symbolic sizes reach the KV cache and the weights, which is what
    changes the kernels (measured: the reference decoder, which passes weights and cache as arguments, gains the
    k-norm / cache-write split and looped hidden-size norms; transformers, whose weights are module parameters
    and whose StaticCache marks its tensors static, launches the same kernels with dynamic True and False).
    None: dynamic, except for a transformers op list (one with an `input_layernorm`), where False.
    `dynamic` may be passed by position (workload.py's hf recipe does). Pure: same input, same output.

    The scheduling decisions (phases 1 and 2 of the module docstring) are memoised as a `_Plan` per op-list
    structure (names, classes, paths, shape keys: `_structure_key`); a later list of the same structure reuses
    them when its fusion-relevant sizes are the plan's scaled by one factor (`_Plan.fits`: every comparison the
    scheduler makes between them comes out the same), and only the kernels' figures are computed again
    (`_emit`, the same code either way). A sweep's compiled steps over the batch axis are such lists."""
    ops = tuple(ops)
    if dynamic_inputs is None:
        dynamic_inputs = dynamic and not any(_prefix(o) == "input_layernorm" for o in ops)
    sym = dynamic and dynamic_inputs  # symbolic sizes inside the kernels (the wrapper's cost is dynamic's alone)
    if reads is not None and feeds is not None:
        raise InductorError("give reads or feeds, not both: feeds only name-infer reads")
    rest = (dynamic, sym, None if reads is None else tuple(tuple(r) for r in reads),
            None if feeds is None else tuple(sorted((k, tuple(v)) for k, v in feeds.items())))
    head = (len(ops),) + rest
    for k in _BY_HEAD.get(head, ()):  # the plan the full key below would find, told from the repeated layers
        plan = _PLANS.get(k)
        if plan is not None and plan.repeats(ops) and plan.structure_at_firsts(ops):
            if plan.fits_repeated(ops):
                return _emit(plan, ops, dynamic, sym, act_bytes, shared=True)
            break  # this key's plan, whose sizes do not fit: the full path schedules it again
    key = (_structure_key(ops),) + rest
    plan = _PLANS.get(key)
    if plan is None or not plan.fits(ops):
        plan = _schedule(ops, sym, reads, feeds)
        if len(_PLANS) >= _PLANS_MAX:
            clear_plans()
        _PLANS[key] = plan
        keys = _BY_HEAD.setdefault(head, [])
        if key not in keys:
            keys.append(key)
    return _emit(plan, ops, dynamic, sym, act_bytes)


_PLANS_MAX = 64
_PLANS = memo("model.inductor._PLANS", "compile_ops' scheduling decisions by op-list structure (a value key: the "
              "ops' structures and the compile options); every process's compiled steps share them", _PLANS_MAX)
# (list length, the key's other parts) -> the structure keys of _PLANS under them: a list that repeats a plan's
# layers as its schedule-time list did (`_Plan.repeats`) has that plan's key when its first occurrences have the
# plan's structures (`_Plan.structure_at_firsts`), found without the full structure key (a tuple of every op's)
_BY_HEAD = memo("model.inductor._BY_HEAD", "the _PLANS keys under each (list length, options): cleared with "
                "_PLANS, so it never holds more heads than _PLANS holds plans", _PLANS_MAX)


def clear_plans() -> None:
    """Forget every memoised plan (tests compare a reused plan with a fresh schedule)."""
    _PLANS.clear()
    _BY_HEAD.clear()


def _structure_key(ops: tuple[Op, ...]) -> "_Key":
    """What the scheduler reads of the ops besides their sizes (`Op.structure`: name, class, path, whether a fixed
    time is set, shape keys, the graph-break and verify-part markers)."""
    return _Key(tuple([o.structure for o in ops]), hash(tuple([o.structure_hash for o in ops])))


class _Key:
    """A tuple of op structures hashed from the ops' cached hashes (hashing the tuple itself would hash every
    field of every op on each lookup); equal when the tuples are."""

    __slots__ = ("items", "h")

    def __init__(self, items: tuple, h: int):
        self.items, self.h = items, h

    def __hash__(self) -> int:
        return self.h

    def __eq__(self, other) -> bool:
        return isinstance(other, _Key) and self.h == other.h and self.items == other.items


def _row_length(ops: tuple[Op, ...], i: int, readers) -> int:
    """Reduction i's rnumel: its elements over the smallest consumer's (the rows: the mean's `add eps`); 0 where
    no consumer has fewer elements."""
    cons = [ops[u].flops for u in readers if ops[u].flops > 0]
    rows = min(cons) if cons else 0
    return _round_int(ops[i].flops / rows) if rows != 0 and rows < ops[i].flops else 0


# int(x), int(round(x)) and float(x) of a size, which in a traced build (engine/batchbuild.py) is a symbol
# (`kernels.Traced`): `_emit` prices a traced step's kernels with the same code (the comparisons it makes are the
# trace's guards), so a sweep's compiled steps are built over the batch axis at once
def _int(x):
    return x.as_int() if isinstance(x, Traced) else int(x)


def _round_int(x):
    return x.round_int() if isinstance(x, Traced) else int(round(x))


def _float(x):
    return x.as_float() if isinstance(x, Traced) else float(x)


def _integer_flops(ops: tuple[Op, ...], idx: tuple[int, ...]) -> np.ndarray | None:
    """The flops of ops `idx` as float64, or None unless every one is an exact integer (what `_Plan.fits`
    compares exactly)."""
    a = np.fromiter((ops[i].flops for i in idx), np.float64, len(idx))
    return a if np.array_equal(a, np.floor(a)) else None


@dataclass(frozen=True)
class _Group:
    """One fused kernel of a plan: its members and what its figures sum over (orders as the scheduler iterates)."""

    mem: tuple[int, ...]  # realized members
    home: tuple[int, ...]  # members and inlined ops whose flops this kernel counts (sorted)
    body: tuple[int, ...]  # members and every op they inline
    ext_reads: tuple[int, ...]  # ops outside the body it reads
    writes: tuple[int, ...]  # members whose buffer is read outside the kernel
    red: tuple[int, ...]  # reduction members
    names: str
    op_class: OpClass
    gathers: bool  # reads no buffer and gathers embedding rows (persistent threshold: not INNER)
    verify: bool  # every member a verify-block part
    gin: tuple[tuple[int, bool], ...]  # body ops that read graph inputs: (op, all its bytes (a gather) or not)


@dataclass(frozen=True, eq=False)
class _Plan:
    """The scheduling of one op list: which ops fuse into which kernels and in what order. `fits(ops)`: a list
    of the same structure whose scheduler-relevant flops are this plan's times one positive factor gets the same
    decisions: every size test phase 2 makes (equal numel, numel x rnumel, rnumel equal / zero) is invariant under
    a common scale (rnumel is a ratio of two such flops), and phase 1 and the order read no sizes. Thresholds on a
    size itself (persistent rnumel, rows > 1, GEMM m > 1) are tested again in `_emit`."""

    R: tuple[tuple[int, ...], ...]
    kind: tuple[str, ...]
    red_users: dict[int, tuple[int, ...]]  # reduction -> the ops that read it
    scaled: tuple[int, ...]  # ops whose flops the scheduler compared
    flops: np.ndarray | None  # their flops (exact integers) at schedule time; None: never reused
    groups: tuple[_Group, ...]
    rep: tuple[int, ...]  # each group's representative: the first group whose figures read the same op objects
    same: tuple[tuple[int, int, int], ...]  # (i, j, k): ops[i:i+k] were ops[j:j+k] at schedule time (`rep` needs
    # them equal, by value: then the groups of a class have equal figures)
    order: tuple[tuple[str, int], ...]  # ("g", group) | ("x", extern op) | ("o", opaque op) | ("e", expand candidate)
    # where `same` holds (`repeats`), every op equals the op at its first occurrence (`firsts`, the positions no run
    # covers), so these stand for the whole list: the structures at the first occurrences, the scaled ops' first
    # occurrences (`scaled_at`: positions into `scaled_firsts`), and `_emit`'s output order as its distinct entries
    # (`emit_firsts`, order positions) and runs copied from them (`emit_runs`: (t, s, k), out[t:t+k] = out[s:s+k])
    firsts: tuple[int, ...] = ()
    first_structures: tuple = ()
    scaled_firsts: tuple[int, ...] = ()
    scaled_at: np.ndarray | None = None
    emit_firsts: tuple[int, ...] = ()
    emit_runs: tuple[tuple[int, int, int], ...] = ()

    def repeats(self, ops: tuple[Op, ...]) -> bool:
        """Whether `ops` repeats its ops where the schedule-time list did (`same`): identity first, then values."""
        return all(ops[i:i + k] == ops[j:j + k] for i, j, k in self.same)

    def structure_at_firsts(self, ops: tuple[Op, ...]) -> bool:
        """With `repeats(ops)`: whether `_structure_key(ops)` equals this plan's list's (the other positions hold
        equal ops)."""
        return [ops[i].structure for i in self.firsts] == list(self.first_structures)

    def fits_repeated(self, ops: tuple[Op, ...]) -> bool:
        """`fits(ops)` where `repeats(ops)`: the scaled ops' flops read at their first occurrences."""
        if self.flops is None or self.scaled_at is None:
            return False
        vals = [ops[i].flops for i in self.scaled_firsts]
        if any(isinstance(v, Traced) for v in vals):
            return self._fits_traced(vals, self.scaled_at.tolist())
        a = np.fromiter(vals, np.float64, len(vals))
        if not np.array_equal(a, np.floor(a)):
            return False
        return self._fits_flops(a[self.scaled_at])

    def fits(self, ops: tuple[Op, ...]) -> bool:
        if self.flops is None:
            return False
        vals = [ops[i].flops for i in self.scaled]
        if any(isinstance(v, Traced) for v in vals):
            return self._fits_traced(vals, range(len(vals)))
        return self._fits_flops(_integer_flops(ops, self.scaled))

    def _fits_traced(self, vals: list, at) -> bool:
        """`_fits_flops` of the flops `vals[k]` for k in `at` where some are symbols of a traced build
        (engine/batchbuild.py): the same test as comparisons the trace records as its guards (each answered at the
        probe shape, then checked per shape), every one exact: each flops an exact integer (x // 1 == x), the first
        nonzero scaled op's positive, and new * a == old * b (a, b: the old and new flops of that op) where both
        products are below 2**53, so the float products are the exact ones (`_fits_flops` compares exact integers,
        its a and b reduced by their gcd: the same equality)."""
        old = self.flops
        if old is None:
            return False
        for v in vals:
            if not v // 1 == v:
                return False
        new = [vals[k] for k in at]
        nz = np.flatnonzero(old)
        if not nz.size:
            return all(v == 0 for v in new)
        a = int(old[nz[0]])
        b = new[nz[0]]
        if not b > 0:
            return False
        lim = 2.0 ** 53
        for k, o in dict.fromkeys(zip(at, old.tolist())):
            v = vals[k]
            if not (v * a < lim and b * o < lim and v * a == b * o):
                return False
        return True

    def _fits_flops(self, new: np.ndarray | None) -> bool:
        old = self.flops
        if old is None:
            return False
        if new is None:
            return False  # not all exact integers: not compared here
        nz = np.flatnonzero(old)
        if not nz.size:
            return not new.any()
        a, b = int(old[nz[0]]), int(new[nz[0]])
        if b <= 0:
            return False
        g = math.gcd(a, b)
        a, b = a // g, b // g
        if float(new.max(initial=0.0)) * a < 2.0 ** 62 and float(old.max()) * b < 2.0 ** 62:
            return bool(np.array_equal(old.astype(np.int64) * b, new.astype(np.int64) * a))
        return all(int(x) * b == int(y) * a for x, y in zip(old, new))


def _repeat_runs(src: Sequence[int]) -> tuple[tuple[int, int, int], ...]:
    """Where `src[i]` is the first index holding what index i holds: the runs (i, j, length) in which indices
    i .. i + length - 1 repeat j .. j + length - 1 (first occurrences, src[i] == i, are in no run)."""
    runs: list[list[int]] = []
    for i, c in enumerate(src):
        if c == i:
            continue
        if runs and runs[-1][0] + runs[-1][2] == i and runs[-1][1] + runs[-1][2] == c:
            runs[-1][2] += 1
        else:
            runs.append([i, c, 1])
    return tuple((i, c, k) for i, c, k in runs)


def _schedule(ops: tuple[Op, ...], sym: bool, reads, feeds) -> _Plan:
    """Phases 1 and 2 of the module docstring over `ops`: the plan `_emit` prices."""
    n = len(ops)
    R = tuple(tuple(r) for r in (infer_reads(ops, feeds) if reads is None else reads))
    if len(R) != n:
        raise InductorError(f"reads has {len(R)} entries for {n} ops")
    for i, r in enumerate(R):
        for j in r:
            if not 0 <= j < i or ops[j].op_class is OpClass.VIEW:
                raise InductorError(f"reads[{i}] ({ops[i].name}) names op {j}, which is not an earlier non-view op")
    kind = [_kind(o) for o in ops]
    users: list[list[int]] = [[] for _ in range(n)]
    for i, r in enumerate(R):
        for j in r:
            users[j].append(i)

    # -- phase 1: lowering -----------------------------------------------------------------------
    realized = [False] * n
    leaves: list[frozenset] = [frozenset()] * n  # what an inlined body reads: realized producers, graph inputs

    def opcount(i: int) -> int:
        """Eager ops in node i's inlined body (each at least one op of Inductor's inner function)."""
        seen, stack = {i}, [j for j in R[i] if not realized[j]]
        while stack:
            j = stack.pop()
            if j not in seen:
                seen.add(j)
                stack.extend(x for x in R[j] if not realized[x])
        return len(seen)
    for i in range(n):
        k = kind[i]
        if k == "view":
            continue
        if k in ("extern", "opaque", "reduction", "scatter"):
            realized[i] = True
        elif not users[i] or any(kind[u] in ("extern", "opaque") for u in users[i]):
            realized[i] = True
        body = set()
        for j in R[i]:
            body |= {("buf", j)} if realized[j] else leaves[j]
        if not R[i] or ops[i].op_class is OpClass.EMBEDDING:
            body.add(("in", i))  # a graph input (weights, ids, positions)
            if ops[i].op_class is OpClass.EMBEDDING:
                body.add(("ids", i))
        if kind[i] == "pointwise" and not realized[i]:
            if len(body) > REALIZE_ACC_READS_THRESHOLD:
                realized[i] = True
            elif len(users[i]) > 1 and (len(body) > REALIZE_READS_THRESHOLD or opcount(i) > REALIZE_OPCOUNT_THRESHOLD):
                realized[i] = True
        leaves[i] = frozenset(body)

    def inlined_closure(i: int) -> list[int]:
        """Non-realized pointwise ops whose bodies node i inlines (transitively)."""
        out, stack, seen = [], list(R[i]), set()
        while stack:
            j = stack.pop()
            if j in seen or realized[j]:
                continue
            seen.add(j)
            out.append(j)
            stack.extend(R[j])
        return out

    fusible = [realized[i] and kind[i] in ("pointwise", "reduction", "scatter") for i in range(n)]
    inl = {i: inlined_closure(i) for i in range(n) if fusible[i]}
    rnumel = {i: _row_length(ops, i, users[i]) for i in range(n) if kind[i] == "reduction"}
    # scheduler-node dependencies (realized producers a realized node reads, through inlined bodies)
    deps: dict[int, set[int]] = {}
    for i in range(n):
        if realized[i]:
            deps[i] = {j for j in R[i] if realized[j]} | {j2 for j in inl.get(i, []) for j2 in R[j] if realized[j2]}

    # -- phase 2: scheduling (vertical fusion by union-find) -------------------------------------
    parent = list(range(n))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    def sizes(i: int) -> tuple[float, int]:
        return ops[i].flops, rnumel.get(i, 0)

    def compatible(p: int, c: int) -> bool:
        kp, kc = kind[p], kind[c]
        if kp == "scatter":
            return False  # its output is the mutated cache, read by attention (extern)
        ep, ec = ops[p].flops, ops[c].flops
        if kp == "reduction" and kc == "scatter" and sym:
            return False
        if kp == "reduction" and kc == "reduction":
            return sizes(p) == sizes(c)
        if ep == ec and ep > 0:  # pointwise<->pointwise, prologue, epilogue: total elements match
            return True
        # a pointwise at the reduced size (the numel of the reduction's output), either side
        if kp == "reduction" and rnumel.get(p, 0) > 0 and ec * rnumel[p] == ep:
            return True
        return kc == "reduction" and rnumel.get(c, 0) > 0 and ep * rnumel[c] == ec

    members: dict[int, list[int]] = {i: [i] for i in range(n) if fusible[i]}  # group root -> its nodes

    def reaches(both: set, src: int, dst: int) -> bool:
        """Does group src depend on group dst through a node outside both? (Reads point to earlier ops, so a
        path between them never passes below the lowest index of either.)"""
        lo = min(both)
        stack = [j for i in members[src] for j in deps[i] if j not in both and j > lo]
        seen = set()
        while stack:
            j = stack.pop()
            if j in seen:
                continue
            seen.add(j)
            for d in deps.get(j, ()):
                if d in both and find(d) == dst:
                    return True
                if d not in both and d > lo:
                    stack.append(d)
        return False

    def creates_cycle(gp: int, gc: int) -> bool:
        """Would merging groups gp and gc make the group depend on itself via a node outside both?"""
        both = set(members[gp]) | set(members[gc])
        return reaches(both, gc, gp) or reaches(both, gp, gc)

    def union(ga: int, gb: int) -> None:
        parent[gb] = ga
        members[ga] += members.pop(gb)

    for c in range(n):
        if not fusible[c]:
            continue
        for p in sorted(deps[c]):
            if not fusible[p] or find(p) == find(c):
                continue
            gp, gc = find(p), find(c)
            if len(members[gp]) + len(members[gc]) <= MAX_FUSION_SIZE and compatible(p, c) \
                    and not creates_cycle(gp, gc):
                union(gp, gc)

    # horizontal fusion: two kernels that do not depend on each other, with the same numel and rnumel, reading
    # the same buffer the same way (Inductor: score_fusion_memory > 0, i.e. a common MemoryDep; "no shared
    # data" never fuses). A read through a split/chunk view reads a slice: another index, not shared.
    sliced = set()
    for i in range(n):
        if kind[i] != "view":
            j = i + 1
            while j < n and kind[j] == "view":
                if ops[j].name.endswith((".split", ".chunk")):
                    sliced.add(i)
                j += 1

    def shared_reads(mem: list[int], g: int) -> set:
        out = set()
        for m in mem:
            for i in [m, *inl[m]]:
                out.update((j, ops[i].flops) for j in R[i] if realized[j] and j not in sliced
                           and not (fusible[j] and find(j) == g))
        return out

    def gsize(mem: list[int]) -> tuple:
        return max(ops[i].flops for i in mem), max((rnumel.get(i, 0) for i in mem if kind[i] == "reduction"),
                                                   default=0)

    roots = sorted(members)
    info = {g: (gsize(members[g]), shared_reads(members[g], g), {d for i in members[g] for d in deps[i]})
            for g in roots}
    for a_i, a in enumerate(roots):
        for b in roots[a_i + 1:]:
            ga, gb = find(a), find(b)
            if ga == gb:
                continue
            (sa, ra, da), (sb, rb, db) = info[ga], info[gb]
            if sa != sb or not (ra & rb) or any(kind[i] == "scatter" for i in members[ga] + members[gb]):
                continue  # measured: kernels storing into a mutated buffer stay apart (hf's K and V cache writes)
            if any(fusible[d] and find(d) == gb for d in da) or any(fusible[d] and find(d) == ga for d in db):
                continue  # one reads the other: a vertical pair, decided above
            if len(members[ga]) + len(members[gb]) <= MAX_FUSION_SIZE and not creates_cycle(ga, gb):
                union(ga, gb)
                info[ga] = (sa, ra | rb, da | db)

    # -- the plan: each kernel's members and sums, and the launch order ---------------------------
    groups: dict[int, list[int]] = {}
    for i in range(n):
        if fusible[i]:
            groups.setdefault(find(i), []).append(i)
    home: dict[int, int] = {}  # inlined op -> the group that counts its flops (its first consumer's)
    for i in sorted(inl):
        for j in inl[i]:
            home.setdefault(j, find(i))
    bodies: dict[int, set[int]] = {}
    inlined_in: dict[int, set[int]] = {}  # inlined op -> the groups whose kernels recompute it
    for g, mem in groups.items():
        bodies[g] = set(mem)
        for i in mem:
            bodies[g].update(inl[i])
            for j in inl[i]:
                inlined_in.setdefault(j, set()).add(g)

    def read_outside(i: int, g: int) -> bool:
        """Is member i's buffer read by anything but group g's own kernel?"""
        return not users[i] or any(u not in bodies[g] or len(inlined_in.get(u, ())) > 1 for u in users[i])

    plan_groups: list[_Group] = []
    index_of: dict[int, int] = {}
    for g, mem in groups.items():
        body = bodies[g]
        ext_reads = {j for i in body for j in R[i] if j not in body}
        names = []
        for i in sorted(body):
            if _prefix(ops[i]) not in names and (i in mem or home.get(i) == g):
                names.append(_prefix(ops[i]))
        index_of[g] = len(plan_groups)
        plan_groups.append(_Group(
            mem=tuple(mem), home=tuple(i for i in sorted(body) if i in mem or home.get(i) == g), body=tuple(body),
            ext_reads=tuple(ext_reads), writes=tuple(i for i in mem if read_outside(i, g)),
            red=tuple(i for i in mem if kind[i] == "reduction"), names="+".join(names),
            op_class=(OpClass.REDUCTION if any(kind[i] == "reduction" for i in mem) else
                      OpClass.COPY if all(ops[i].op_class is OpClass.COPY for i in mem) else OpClass.ELEMENTWISE),
            gathers=not ext_reads and any(ops[i].op_class is OpClass.EMBEDDING for i in body),
            verify=all(ops[i].dim(VERIFY_PART) for i in mem),
            gin=tuple((i, ops[i].op_class is OpClass.EMBEDDING) for i in body
                      if ops[i].op_class is OpClass.EMBEDDING or _reads_whole_buffer(ops[i]) or not R[i])))
    # order: externs keep their places; a fused kernel runs as soon as what it reads is ready (right after the
    # extern or kernel it waits for last), as Inductor's scheduler places it (measured: q_proj, q-norm+RoPE-q,
    # k_proj, k-norm+RoPE-k+cache write, v_proj, cache write v)
    keys: dict[int, tuple] = {}

    def group_key(g: int) -> tuple:
        if g not in keys:
            mem = set(groups[g])
            after = [(d, 0, d) if not fusible[d] else group_key(find(d)) for m in mem for d in deps[m] if d not in mem]
            last = max(after, default=(-1, 0, -1))
            keys[g] = (last[0], last[1] + 1, min(mem))
        return keys[g]

    placed: list[tuple[tuple, tuple[str, int]]] = [(group_key(g), ("g", index_of[g])) for g in groups]
    pending: list[int] = []  # broadcast (expand) views waiting for the extern that reads them
    for i, op in enumerate(ops):
        k = kind[i]
        if k == "view":
            if op.name.endswith(".expand"):
                pending.append(i)
            continue
        if k == "extern":
            if pending and op.op_class is OpClass.GEMM and len(R[i]) < 2 and \
                    all(_prefix(ops[v]) == _prefix(op) for v in pending):
                placed.append(((i, -1, i), ("e", i)))  # materialized where its m > 1 (`_emit`)
            pending = []
            placed.append(((i, 0, i), ("x", i)))
        elif k == "opaque":
            placed.append(((i, 0, i), ("o", i)))
    scaled = tuple(sorted({i for i in range(n) if kind[i] in ("pointwise", "reduction", "scatter")} |
                          {u for i in range(n) if kind[i] == "reduction" for u in users[i]}))
    # groups whose figures read the same op objects at the same structural places (a repeated layer's kernels:
    # the builders repeat a layer's op objects) give the same kernel: `_emit` prices one per class while the list
    # it is given repeats its objects as this one did (`same`)
    canon: list[int] = []
    first: dict[int, int] = {}
    for i, o in enumerate(ops):
        canon.append(first.setdefault(id(o), i))
    same = _repeat_runs(canon)  # (i, j, length): ops[i:i + length] were ops[j:j + length] (a repeated layer)

    def out_sig(idx) -> tuple:
        return tuple((canon[j], len(R[j]), kind[j]) for j in idx)

    rep_of: dict[tuple, int] = {}
    rep = []
    for gi, gr in enumerate(plan_groups):
        sig = (tuple(canon[i] for i in gr.mem), tuple(canon[i] for i in gr.home), out_sig(gr.ext_reads),
               out_sig(gr.writes), tuple((canon[i], g, len(R[i]), kind[i]) for i, g in gr.gin),
               tuple((canon[i], tuple(canon[u] for u in users[i])) for i in gr.red),
               gr.names, gr.op_class, gr.gathers, gr.verify)
        rep.append(rep_of.setdefault(sig, gi))
    order = tuple(e for _, e in sorted(placed, key=lambda t: t[0]))
    firsts = tuple(i for i in range(n) if canon[i] == i)
    scaled_firsts = tuple(sorted({canon[i] for i in scaled}))
    at = {p: q for q, p in enumerate(scaled_firsts)}
    # the output order where `same` holds: an entry stands for the entry of its kernel's representative, or of its
    # op's first occurrence (equal ops: the same output)
    ekey = [("g", rep[i]) if w == "g" else (w, canon[i]) for w, i in order]
    efirst: dict[tuple, int] = {}
    src = [efirst.setdefault(k, t) for t, k in enumerate(ekey)]
    return _Plan(R=R, kind=tuple(kind), red_users={i: tuple(users[i]) for i in range(n) if kind[i] == "reduction"},
                 scaled=scaled, flops=_integer_flops(ops, scaled), groups=tuple(plan_groups),
                 rep=tuple(rep), same=same, order=order, firsts=firsts,
                 first_structures=tuple(ops[i].structure for i in firsts), scaled_firsts=scaled_firsts,
                 scaled_at=np.asarray([at[canon[i]] for i in scaled], dtype=np.intp),
                 emit_firsts=tuple(t for t, s0 in enumerate(src) if s0 == t),
                 emit_runs=_repeat_runs(src))


new_op = object.__new__
assert not hasattr(Op, "__post_init__") and not hasattr(Op, "__slots__")  # `_emit` makes Ops field by field


def _extern(op: Op) -> Op:
    return op.as_compiled_extern  # made once per (interned) op object, kept on it


def _emit(plan: _Plan, ops: tuple[Op, ...], dynamic: bool, sym: bool, act_bytes: int,
          shared: bool | None = None) -> tuple[Op, ...]:
    """The kernels of `plan` priced at `ops`' sizes: each fused kernel's flops, bytes, numel and rnumel, its
    persistent / looped choice, and the broadcast copies that only a batch above 1 materializes. `shared`: whether
    `plan.repeats(ops)` (None: checked here); then each class of equal kernels (`plan.rep`) is priced once and each
    repeated entry of the output is its first occurrence's (`plan.emit_runs`: equal ops give equal entries)."""
    R, kind = plan.R, plan.kind
    red_users = plan.red_users
    outb_memo: dict[int, float] = {}

    def outb(i: int) -> float:
        v = outb_memo.get(i)
        if v is None:
            v = outb_memo[i] = (_out_bytes(ops[i], max(1, len(R[i])), kind[i], act_bytes)
                                if kind[i] != "view" else 0.0)
        return v

    def gin_bytes(i: int, gather: bool) -> float:
        """What op i reads that no listed op wrote (token ids, positions, gathered rows): counted for ops that
        read no listed op (`_Group.gin`); small weight vectors (norm weights) read by ops with producers are left
        out; a copy reading a whole buffer (the cache) counts it, besides the token its producer wrote."""
        return ops[i].bytes if gather else max(0.0, ops[i].bytes - outb(i))

    def kernel(gr: _Group) -> Op:
        mem = gr.mem
        rd = sum([outb(j) for j in gr.ext_reads]) + sum([gin_bytes(i, g) for i, g in gr.gin])
        wr = sum([outb(i) for i in gr.writes])
        home = [ops[i] for i in gr.home]
        eager_b = sum([o.bytes for o in home])
        rn = max([_row_length(ops, i, red_users[i]) for i in gr.red], default=0)
        top = max([ops[i].flops for i in mem])
        rows = top / rn if rn != 0 else 0
        bound = (PERSISTENT_RNUMEL_DYNAMIC if sym else
                 PERSISTENT_RNUMEL_OTHER if (rows > 1 and gr.gathers) else PERSISTENT_RNUMEL_INNER)
        persistent = int(bool(gr.red) and 0 < rn <= bound)
        tag = ("per" if persistent else "red") if gr.red else "poi"
        shape = {"numel": _int(top), "rnumel": rn, "persistent": persistent}
        if gr.verify:
            # parts of transformers' verify-attention block (recipes.verify_part: repeat_kv, SDPA's mask): the block's
            # measured table prices them where it covers the shape (CostModel.gpu_s), compiled as in eager
            shape.update((k, v) for k, v in ops[mem[0]].shape if k in _VERIFY_PART_KEYS)
        if dynamic:
            shape["dynamic"] = 1
        # Op(...) without the frozen dataclass's per-field __setattr__ (every field given; Op has no post-init)
        k = new_op(Op)
        k.__dict__.update(name=f"triton_{tag}:{gr.names}", op_class=gr.op_class, path=LaunchPath.COMPILED,
                          flops=_float(sum([o.flops for o in home])), bytes=_float(min(rd + wr, eager_b)),
                          shape=tuple(sorted(shape.items())), fixed_gpu_s=None, fixed_host_s=None)
        return k

    def entry(what: str, i: int, kernels) -> Op | None:
        if what == "g":
            return kernels[i]
        if what == "x":
            return _extern(ops[i])
        if what == "o":
            return ops[i]
        op = ops[i]
        if op.dim("m") > 1:
            # measured (batch 16 and 64, not batch 1): the extern bmm's broadcast operand, when no listed op
            # produces it (the reference's inv_freq constant), is materialized by an aten copy
            # (at::native::elementwise_kernel); fp32 [m, n] written from an [n] vector; no arithmetic.
            # transformers' .float() copy of it is a Triton kernel that writes the expanded buffer instead.
            elems = op.dim("m") * op.dim("n")
            return Op(f"{_prefix(op)}.expand_copy", OpClass.COPY, LaunchPath.COMPILED_EXTERN,
                      0.0, _float(elems * 4 + op.dim("n") * 4), (("numel", elems),))
        return None

    if shared is None:
        shared = plan.repeats(ops)
    if shared and plan.scaled_at is not None:
        groups, rep, order = plan.groups, plan.rep, plan.order
        kmemo: dict[int, Op] = {}

        class _Kernels:  # kernels[g]: its class representative's kernel, priced once
            def __getitem__(self, g: int) -> Op:
                r = rep[g]
                k = kmemo.get(r)
                if k is None:
                    k = kmemo[r] = kernel(groups[r])
                return k

        ks = _Kernels()
        res: list = [None] * len(order)
        for t in plan.emit_firsts:
            what, i = order[t]
            res[t] = entry(what, i, ks)
        for t, s0, k in plan.emit_runs:
            res[t:t + k] = res[s0:s0 + k]
        return tuple([o for o in res if o is not None])
    kernels: list[Op] = []
    for gi, gr in enumerate(plan.groups):
        if shared and plan.rep[gi] != gi:
            kernels.append(kernels[plan.rep[gi]])
            continue
        kernels.append(kernel(gr))
    out: list[Op] = []
    for what, i in plan.order:
        o = entry(what, i, kernels)
        if o is not None:
            out.append(o)
    return tuple(out)
