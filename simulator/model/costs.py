"""The cost model: seconds for each op on the host and on the GPU, from one profile.

GPU time: a measured table where the profile has one for the op's class and shape (log-log
interpolation between grid points: kernel time is close to a power law in bytes and tokens between
neighbouring points, so this is exact for both the flat small-kernel floor and the linear
bandwidth-bound tail); a norm's row mean (an eager REDUCTION whose shape carries rows and cols) from the
profile's (rows, row length) table where it has one (`row_mean_us`: aten's launch depends on both, not bytes);
a GEMM whose (n, k) no table holds is priced from the measured tables' slowdowns
over the roofline, interpolated across shapes (simulator/model/gemm_model.py); else a roofline with efficiency:
    t = max(flops / (peak * gemm_efficiency), bytes / (hbm * bw_efficiency), min_kernel).
Host time: the profile's per-launch-path distribution at a quantile (0.5 = median).
Everything the engines consume goes through `CostModel`; swapping the profile swaps every figure.
"""

from __future__ import annotations

from simulator.common.errors import UserError

import bisect
import math
from functools import cached_property
from itertools import filterfalse, repeat

import numpy as np

from simulator.model.kernels import ROLL, SDPA_MASK, TRITON_LIKE, LaunchPath, Op, OpClass
from simulator.model.profile import Curve, Digest, Profile
from simulator.model.tables import POLICIES, REFUSE, loglog, row_mean

US = 1e-6


class CostError(UserError):
    """A cost the profile cannot give (e.g. a launch path it has no figure for)."""


def _loglog(x: float, xs, ys) -> float | None:
    """y(x) in log-log space (simulator/model/tables.py); these tables (gemm by m, curves by bytes) refuse outside
    their grid: None, and the caller falls back to the roofline."""
    return loglog(x, xs, ys, below=REFUSE, above=REFUSE)


def _loglog_many(x: list, xs, ys) -> list[float | None]:
    """`_loglog(v, xs, ys)` for each v of `x`, the log and interpolation over all at once (np.log, np.interp and
    np.exp elementwise: each value bitwise the scalar call's)."""
    if not x:
        return []
    lo, hi = xs[0], xs[-1]
    inside = [lo <= v <= hi for v in x]  # loglog refuses below the first point and above the last
    if len(xs) == 1:
        return [float(ys[0]) if ok else None for ok in inside]
    a = np.asarray(x, dtype=float)
    grid_pos = min(xs) > 0 and min(ys) > 0
    pos = a > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        lg = np.exp(np.interp(np.log(np.where(pos, a, 1.0)), np.log(xs), np.log(ys))) if grid_pos else None
    lin = np.interp(a, xs, ys)
    out = []
    for i, ok in enumerate(inside):
        if not ok:
            out.append(None)
        elif grid_pos and pos[i]:
            out.append(float(lg[i]))
        else:
            out.append(float(lin[i]))
    return out


def _loglog_arr(x: list, xs, ys) -> tuple[np.ndarray, np.ndarray]:
    """`_loglog_many(x, xs, ys)` as arrays: (the values, anything where refused; where they are not refused), the
    same numpy operations on the same arrays, so each value is bitwise the list's."""
    a = np.asarray(x, dtype=float)
    ok = (a >= xs[0]) & (a <= xs[-1])  # ints below 2**53 compare with the grid exactly as floats
    if len(xs) == 1:
        return np.full(a.size, float(ys[0])), ok
    grid_pos = min(xs) > 0 and min(ys) > 0
    pos = a > 0
    lin = np.interp(a, xs, ys)
    if not grid_pos:
        return lin, ok
    with np.errstate(divide="ignore", invalid="ignore"):
        lg = np.exp(np.interp(np.log(np.where(pos, a, 1.0)), np.log(xs), np.log(ys)))
    return np.where(pos, lg, lin), ok


def _seconds(vals: np.ndarray) -> list[float]:
    """us values -> seconds floored at 0 (`max(v * US, 0.0)` of each, as floats)."""
    x = vals * US
    return np.where(0.0 > x, 0.0, x).tolist()


def _interp_curve(c: Curve, x: float, below: str = REFUSE) -> float | None:
    """Time of a byte curve at x bytes: refused above the grid (the roofline), below it as `below` says."""
    return loglog(x, c.bytes, c.us, below=below, above=REFUSE)


def _curve_many(c: Curve, x: list, below: str = REFUSE) -> list[float | None]:
    """`_interp_curve` of each value of `x` (bitwise: the values below a clamped grid through the scalar reader)."""
    out = _loglog_many(x, c.bytes, c.us)
    if below != REFUSE:
        lo = c.bytes[0]
        for i, v in enumerate(x):
            if v < lo:
                out[i] = _interp_curve(c, v, below)
    return out


def _looped_curve(loop: Curve | None, persistent: Curve | None) -> Curve | None:
    """The curve looped reductions (`triton_red:`) are priced by: the measured looped curve, and below its smallest
    size (round i measured rows of 8192; decode's looped norms at batch 1 are rows of 2048-4096, smaller) the
    persistent curve's points (a reduction that small is one or two loop iterations: CUPTI's looped kernels at
    batch 1 ran 1.69 us on round i's independent decoder, the looped curve's floor is 2.4-2.7 us a node)."""
    if loop is None or persistent is None:
        return loop or persistent
    lo = loop.bytes[0]
    below = [(b, u) for b, u in zip(persistent.bytes, persistent.us) if b < lo]
    if not below:
        return loop
    return Curve(bytes=[b for b, _ in below] + list(loop.bytes), us=[u for _, u in below] + list(loop.us))


# Inductor's kernels by name prefix -> their curve key; read below their grid as tables.POLICIES names it
_TRITON_KEYS = {"triton_poi:": "triton_poi", "triton_per:": "triton_per", "triton_red:": "triton_red"}
_BELOW = dict.fromkeys(_TRITON_KEYS.values(), POLICIES["triton_curve.bytes"][0])
# a fused decode layer's hand-fused kernels (workload._layer_fused, marked `triton_like`): Triton-class kernels (round ab's
# measured decoder launches liger-kernel's and its own Triton kernels; vLLM 0.34 compiles these ops with Inductor by
# default, calibration/validation/vllm_source_kernels.md), priced by the profile's Triton curves of their kind, not
# by torch's eager kernels' curves (2.1 us floor against Triton's 1.5-1.6: calibration/validation/impl_fused.md)
_FUSED_KEYS = {OpClass.REDUCTION: "triton_per", OpClass.ELEMENTWISE: "triton_poi"}


class CostModel:
    """The figures of one profile. Besides its own per-op caches it owns the memos of what is derived from it:
    `digest` (the profile's content digest, made when first read: the profile part of the step-time memo keys),
    the GEMM grid's tables and the fallback model of unmeasured GEMM shapes (built once, at first use), and
    `memos` (name -> dict: the engines' figures of this cost model, e.g. engine/plan.py's host samplers and
    engine/startup.py's eager passes). They live as long as it does: a run shares them by sharing its cost model
    (engine/setup.py: one per named profile in the process)."""

    def __init__(self, profile: Profile):
        self.profile = profile
        self.digest = Digest(profile)
        self.memos: dict[str, dict] = {}
        d, h = profile.device, profile.host
        self.peak_flops = d.peak_bf16_tflops * 1e12 * d.gemm_efficiency
        self.bw = d.hbm_tbps * 1e12 * d.bw_efficiency
        self.min_kernel_s = d.min_kernel_us * US
        self.eager_gap_s = d.eager_gap_us * US
        self.graph_node_s = d.graph_node_us * US
        self.graph_node_trace_s = (d.graph_node_us if d.graph_node_trace_us is None else d.graph_node_trace_us) * US
        # device time from a graph launch reaching the GPU to its first node (older profiles: the eager gap)
        self.graph_launch_latency_s = (d.eager_gap_us if d.graph_launch_latency_us is None
                                       else d.graph_launch_latency_us) * US
        self.queue_depth = d.launch_queue_depth
        self.graph_launch_fixed_s = h.graph_launch_fixed_us * US
        self.graph_launch_per_node_s = h.graph_launch_per_node_us * US
        self.compiled_entry_s = h.compiled_entry_us * US
        self.compiled_wrapper_s = h.compiled_wrapper_us * US
        self._gemm = {(t.n, t.k): t for t in d.tables.gemm}
        self._grid = d.tables.gemm_grid  # joins _gemm at the first shape the tables lack (`gemm_table`)
        self._grid_extra: list = []  # its rows of shapes the tables lack, once joined
        self._attn = {(t.heads, t.kv_heads, t.head_dim): t for t in d.tables.attention if t.q_len == 1}
        self._attn_near: dict[tuple[int, int, int], object] = {}
        # verify tables by (heads, kv_heads, head_dim, layout), then q_len (q_len > 1)
        self._attn_q: dict[tuple[int, int, int, str], dict[int, object]] = {}
        for t in d.tables.attention:
            if t.q_len > 1:
                self._attn_q.setdefault((t.heads, t.kv_heads, t.head_dim, t.layout), {})[t.q_len] = t
        self._curves: dict[object, Curve | None] = {
            OpClass.ELEMENTWISE: d.tables.elementwise,
            OpClass.REDUCTION: d.tables.reduction or d.tables.elementwise,
            OpClass.COPY: d.tables.memcopy or d.tables.elementwise,
            OpClass.EMBEDDING: d.tables.embedding or d.tables.memcopy,
            OpClass.SAMPLING: d.tables.reduction,
        }
        # Inductor's own kernels (inductor.py names them `triton_poi:` / `triton_per:` / `triton_red:`): their
        # measured curves where the profile has them, else (key absent) the eager curve of their class
        for tag, c in (("poi", d.tables.triton_pointwise), ("per", d.tables.triton_reduction),
                       ("red", _looped_curve(d.tables.triton_reduction_loop, d.tables.triton_reduction))):
            if c is not None:
                self._curves["triton_" + tag] = c
        self._row_mean = d.tables.row_mean
        self._roll = d.tables.roll  # aten's roll of a KV cache (round w), ops marked ROLL; absent: the copy curve
        self.collective = d.collective  # None: a tensor-parallel collective is refused (parallel.collective_gpu_s)
        self._gpu_cache: dict[Op, float] = {}
        self._host_cache: dict[tuple[Op, float], float] = {}
        self._kernels_cache: dict[tuple[int, int], int] = {}

    @cached_property
    def dynamic_wrapper_s(self) -> float:
        """torch.compile(dynamic=True)'s wrapper: measured extra per launch (inductor.py DYNAMIC_WRAPPER_EXTRA_US,
        H200 round b), added to launches marked `dynamic_wrapper` (engine/setup.StepSetup.build). A property read
        on the first such launch: a process that prices no dynamic compiled step (every `predict` but
        --compile-dynamic) never imports inductor.py (~6 ms of a `predict` process)."""
        from simulator.model.inductor import DYNAMIC_WRAPPER_EXTRA_US

        return DYNAMIC_WRAPPER_EXTRA_US * US

    def curve_key(self, op: Op) -> object:
        """Which byte curve prices `op`: its class's, or for a kernel of Inductor's (a `triton_poi:`, `triton_per:`
        or `triton_red:` op on the compiled path) the profile's measured Triton curve of that kind, when it has one."""
        k = _TRITON_KEYS.get(op.name[:11])
        if k is not None and op.path is LaunchPath.COMPILED and k in self._curves:
            return k
        if op.path is LaunchPath.CUSTOM_OP and op.dim(TRITON_LIKE) and (k := _FUSED_KEYS.get(op.op_class)) in self._curves:
            return k
        return op.op_class

    # -- GPU --------------------------------------------------------------------------------------
    def roofline_s(self, op: Op) -> float:
        return self._roof(op.flops, op.bytes, op.op_class is OpClass.GEMM and op.dim("fp8"),
                          op.op_class in (OpClass.GEMM, OpClass.ATTENTION))

    def _roof(self, flops, nbytes, fp8, flop_bound: bool) -> float:
        """The roofline of a kernel of `flops` and `nbytes` (`flop_bound`: GEMM or attention, whose flops count)."""
        if fp8:  # fp8 tensor cores: twice the bf16 peak (datasheet)
            return max(flops / (2 * self.peak_flops), nbytes / self.bw, self.min_kernel_s)
        return max(flops / self.peak_flops if flop_bound else 0.0, nbytes / self.bw, self.min_kernel_s)

    def table_s(self, op: Op) -> float | None:
        """The measured time for this op, or None where the tables do not cover it."""
        if any(k in _FP8_MOE_KEYS for k, _ in op.shape):
            return _fp8_moe_s(self.profile.device.tables, op)  # simulator/model/dtype.py, moe.py
        if op.op_class is OpClass.GEMM:
            t = self.gemm_table(op.dim("n"), op.dim("k"))
            m = op.dim("m")
            if t is None:
                return self.gemm_fallback_s(op)
            v = _loglog(m, t.m, t.us)  # refuses outside the table's grid (model/tables.py POLICIES)
            return None if v is None else v * US
        if op.op_class is OpClass.ATTENTION:
            if op.dim("verify"):
                return self.verify_attention_s(op)
            if op.dim("q_len", 1) != 1:
                return None
            t = self._attn.get((op.dim("heads"), op.dim("kv_heads"), op.dim("head_dim")))
            if t is None:  # transformers' masked SDPA: the nearest table; other attention: the roofline
                return self.attention_nearest_s(op) if op.dim(SDPA_MASK) else None
            return _bilinear(t.batch, t.ctx, t.us, op.dim("batch"), op.dim("ctx"))
        if self._is_row_mean(op):
            v = self.row_mean_us(op.dim("rows"), op.dim("cols"))
            if v is not None:
                return v * US
        if self._is_roll(op):
            b_lo, b_hi = POLICIES["roll.bytes"]
            v = loglog(op.bytes, self._roll.bytes, self._roll.us, below=b_lo, above=b_hi)
            return None if v is None else v * US
        key = self.curve_key(op)
        curve = self._curves.get(key)
        if curve is None:
            return None
        v = _interp_curve(curve, op.bytes, _BELOW.get(key, REFUSE))
        return None if v is None else v * US

    def _per_op(self, op: Op) -> bool:
        """An op whose table is read per op (`gpu_s`), never in `prime`'s groups: a row mean (row_mean table), a
        cache roll (roll curve)."""
        return self._is_row_mean(op) or self._is_roll(op)

    def _is_roll(self, op: Op) -> bool:
        """A KV cache roll (ops marked ROLL) the profile's roll curve prices."""
        return self._roll is not None and op.dim(ROLL) == 1

    def _is_row_mean(self, op: Op) -> bool:
        """An eager row mean the profile's row_mean table prices (workload._Builder.row_mean's ops)."""
        return (self._row_mean is not None and op.op_class is OpClass.REDUCTION and op.path is LaunchPath.EAGER_REDUCTION
                and any(k == "rows" for k, _ in op.shape))  # by key: a traced template's sizes are symbols

    def row_mean_us(self, rows: int, cols: int) -> float | None:
        """us of aten's row mean over fp32 x[rows, cols] from `device.tables.row_mean` (model/tables.row_mean's
        reading rule); None without the table or outside its row lengths (the reduction curve then)."""
        t = self._row_mean
        if t is None:
            return None
        return row_mean(rows, cols, t.rows, t.cols, t.us, t.breaks, t.step_below_rows)

    def verify_attention_s(self, op: Op) -> float | None:
        """A speculative verify step's attention (q_len = 1 + k queries per sequence) from the profile's measured
        q_len tables (`device.tables.attention[]` rows with `q_len` > 1): bilinear in (batch, ctx) at each measured
        q_len, linear in q_len between the two measured q_lens around it. A profile without a table at or around
        this q_len refuses (CostError): verify attention is never extrapolated from the q_len-1 decode table.
        Outside the measured (batch, ctx) grid the measured kernel is scaled, not replaced by the roofline (which
        prices this split-KV flash kernel several times too fast): above the grid, time = time at the grid's edge x
        (batch / edge batch) x (ctx / edge ctx) (sequences and keys are independent work at these sizes); below it,
        the first grid point (a launch-bound kernel does not get faster)."""
        q = op.dim("q_len")
        hf = op.dim("verify") == 2  # simulator/model/recipes.py: transformers' StaticCache verify attention block
        key = (op.dim("heads"), op.dim("kv_heads"), op.dim("head_dim"), "hf_static" if hf else "reference")
        by_q = self._attn_q.get(key, {})
        qs = sorted(by_q)
        if hf and not self.hf_verify_covered(op):
            return None  # no measured block for this shape / q_len: the op's own pricing (roofline), as before
        if not qs or q < qs[0] or q > qs[-1]:
            have = f"measured q_len {', '.join(map(str, qs))}" if qs else "no q_len > 1 tables"
            raise CostError(f"profile '{self.profile.name}' has no verify-attention table for q_len {q} at heads "
                            f"{key[0]}/{key[1]}, head_dim {key[2]} ({have}; device.tables.attention[].q_len): "
                            "speculative verify steps need it measured, not extrapolated from q_len 1")
        def at(t):
            b, c = op.dim("batch"), op.dim("ctx")
            bc, cc = min(max(b, t.batch[0]), t.batch[-1]), min(max(c, t.ctx[0]), t.ctx[-1])
            v = _bilinear(t.batch, t.ctx, t.us, bc, cc)
            return None if v is None else v * (b / bc if b > bc else 1.0) * (c / cc if c > cc else 1.0)

        if q in by_q:
            return at(by_q[q])
        i = bisect.bisect_left(qs, q)
        lo, hi = by_q[qs[i - 1]], by_q[qs[i]]
        a = at(lo)
        b = at(hi)
        if a is None or b is None:
            return None
        w = (q - qs[i - 1]) / (qs[i] - qs[i - 1])
        return a * (1 - w) + b * w

    def hf_verify_covered(self, op: Op) -> bool:
        """Whether an hf_static verify-attention table covers this op's (heads, kv_heads, head_dim, q_len)."""
        qs = sorted(self._attn_q.get((op.dim("heads"), op.dim("kv_heads"), op.dim("head_dim"), "hf_static"), {}))
        return bool(qs) and qs[0] <= op.dim("q_len") <= qs[-1]

    def gpu_s(self, op: Op) -> float:
        if op.dim("verify_part") and self.hf_verify_covered(op):
            return 0.0  # repeat_kv / SDPA mask kernels of a measured hf_static verify block: inside its table figure
        if op.fixed_gpu_s is not None:
            return op.fixed_gpu_s
        if not op.launches_kernel:
            return 0.0
        v = self._gpu_cache.get(op)
        if v is None and op.op_class is OpClass.COLLECTIVE:
            v = self._gpu_cache[op] = self.collective_s(op)
        if v is None:
            t = self.table_s(op)
            v = self.roofline_s(op) if t is None else max(t, 0.0)
            self._gpu_cache[op] = v
        return v

    def prime(self, ops, alike: bool = False) -> tuple[list[float | None], list[int | None]]:
        """Fill the GPU-time and kernel-count memos of many ops at once (engine/batched.py: the ops of a traced step
        over the batch axis): GEMMs of one (n, k) priced over all their m, byte-curve ops over all their bytes,
        with the numpy operations `gpu_s` / `gemm_kernels` take per op, elementwise, so every figure is bitwise
        theirs (tests/model/test_costs_prime.py). Returns each op's `gpu_s` and `gemm_kernels` where it priced it,
        else None (ops of other kinds: left to `gpu_s` itself). `alike`: the ops share their class, launch path,
        shape keys and fixed times (one position of a traced step): they are sorted by the first one's."""
        gemm: dict[tuple[int, int], list[int]] = {}
        curve: dict[object, list[int]] = {}
        ops = list(ops)
        out: list[float | None] = [None] * len(ops)
        kern: list[int | None] = [None] * len(ops)
        if alike and ops:
            o = ops[0]
            if (o.fixed_gpu_s is not None or o.op_class is OpClass.VIEW or self._per_op(o)
                    or any(k in _FP8_MOE_KEYS or k == "verify_part" for k, _ in o.shape)):
                return out, kern
            if o.op_class is not OpClass.GEMM:
                ck = self.curve_key(o)
                if self._curves.get(ck) is not None:
                    curve[ck] = list(range(len(ops)))
                return self._prime_groups(ops, gemm, curve, out, kern)
        for j, o in enumerate(ops):
            if (o.fixed_gpu_s is not None or o.op_class is OpClass.VIEW or self._per_op(o)
                    or any(k in _FP8_MOE_KEYS or k == "verify_part" for k, _ in o.shape)):
                continue  # a row mean: its table reading is per op (`gpu_s`)
            if o.op_class is OpClass.GEMM:
                gemm.setdefault((o.dim("n"), o.dim("k")), []).append(j)
            elif self._curves.get(ck := self.curve_key(o)) is not None:
                curve.setdefault(ck, []).append(j)
        return self._prime_groups(ops, gemm, curve, out, kern)

    def prime_column(self, tmpl: Op, values, op_at, n: int) -> tuple[list[float | None], list[int | None]]:
        """`prime` of n ops that differ from `tmpl` only in some sizes, read as values, not ops: `values(field)`
        gives the n ops' "m" / "n" / "k" / "bytes" (None: no such shape entry); `op_at(j)` the j-th op itself
        (made only where the roofline or a per-op path needs it). The same operations as `prime`, so each figure
        is bitwise `gpu_s` / `gemm_kernels`'s (tests/model/test_costs_prime.py)."""
        out: list[float | None] = [None] * n
        kern: list[int | None] = [None] * n
        o = tmpl
        if not n or (o.fixed_gpu_s is not None or o.op_class is OpClass.VIEW or self._per_op(o)
                or any(k in _FP8_MOE_KEYS or k == "verify_part" for k, _ in o.shape)):
            return out, kern
        if o.op_class is OpClass.GEMM:
            ns, ks, ms = values("n"), values("k"), values("m")
            ns = ns or [0] * n  # Op.dim's default
            ks = ks or [0] * n
            ms = ms or [0] * n
            groups: dict[tuple[int, int], list[int]] = {}
            if ns.count(ns[0]) == n and ks.count(ks[0]) == n:  # one (n, k): m varies
                groups[(ns[0], ks[0])] = list(range(n))
            else:
                for j, nk in enumerate(zip(ns, ks)):
                    groups.setdefault(nk, []).append(j)
            roof = self._roofline_at(o, values, n)
            for (nn, kk), js in groups.items():
                mj = [ms[j] for j in js]
                t = self.gemm_table(nn, kk)
                if t is None:
                    ts = self.gemm_fallback.time_many(nn, kk, mj)
                    for j, x in zip(js, ts):
                        out[j] = roof(j) if x is None else max(x, 0.0)
                else:  # the table's log-log reading over all m at once (`_loglog_many`'s values)
                    vals, ok = _loglog_arr(mj, t.m, t.us)
                    for j, x, inside in zip(js, _seconds(vals), ok.tolist()):
                        out[j] = x if inside else roof(j)
                self._fill_kernels(t, nn, kk, js, mj, kern)
            return out, kern
        if o.op_class is OpClass.ATTENTION:
            return self._attention_column(o, values, op_at, n, out, kern)
        key = self.curve_key(o)
        c = self._curves.get(key)
        if c is None:
            return out, kern
        bs = values("bytes")
        below = _BELOW.get(key, REFUSE)
        vals, ok = _loglog_arr(bs, c.bytes, c.us)  # `_curve_many`: the grid's reading, the scalar one below it
        roof = self._roofline_at(o, values, n)
        out = _seconds(vals)
        lo = c.bytes[0]
        for j in np.flatnonzero(~ok).tolist():
            v = _interp_curve(c, bs[j], below) if below != REFUSE and bs[j] < lo else None
            out[j] = roof(j) if v is None else max(v * US, 0.0)
        return out, [1] * n  # gemm_kernels of a kernel that is not a GEMM

    def _roofline_at(self, o: Op, values, n: int):
        """j -> `roofline_s` of the j-th op of a column of template `o` (`prime_column`'s `values`), read from its
        flops, bytes and fp8 flag (the same operations as `roofline_s`, no op made)."""
        fl, by = values("flops"), values("bytes")
        fp8 = values("fp8") if o.op_class is OpClass.GEMM else None
        flop_bound = o.op_class in (OpClass.GEMM, OpClass.ATTENTION)
        # (flops are read only where they count: a column of elementwise ops may carry none)
        return lambda j: self._roof(fl[j] if flop_bound else 0.0, by[j], fp8 is not None and fp8[j], flop_bound)

    def nearest_attention_table(self, heads: int, kv_heads: int, head_dim: int):
        """The decode (q_len 1) attention table nearest a shape the profile has no table for: nearest in head_dim,
        then in query heads, then fewest KV heads (None: the profile has no decode attention table)."""
        key = (heads, kv_heads, head_dim)
        if key not in self._attn_near:
            tabs = list(self._attn.values())
            self._attn_near[key] = min(tabs, key=lambda a: (abs(math.log(a.head_dim / head_dim)),
                                                            abs(math.log(a.heads / heads)), a.kv_heads)) \
                if tabs and heads and kv_heads and head_dim else None
        return self._attn_near[key]

    def attention_nearest_s(self, op: Op) -> float | None:
        """Decode attention of a (heads, kv_heads, head_dim) with no table, for transformers' masked SDPA over
        repeated heads (`SDPA_MASK`; other attention ops keep the roofline: on the independent gpt-fast decoder's
        enable_gqa flash kernel at head_dim 64 this reading was further off than the roofline): decode attention
        being bound by reading the KV cache (and by cuDNN's floor at small sizes, which the roofline misses: round z,
        12-31 us a call at batch 1 where the roofline gave 5-12), the nearest table (`nearest_attention_table`) at
        the context that reads the same KV bytes per sequence, ctx x kv_heads x head_dim / (the table's kv_heads x
        head_dim), extrapolated linearly outside its grid (`lerp_table`). None without any table (the roofline)."""
        H, KV, hd = op.dim("heads"), op.dim("kv_heads"), op.dim("head_dim")
        a = self.nearest_attention_table(H, KV, hd)
        if a is None:
            return None
        return lerp_table(a.batch, a.ctx, a.us, op.dim("batch"), op.dim("ctx") * KV * hd / (a.kv_heads * a.head_dim)) \
            * US

    def _attention_column(self, o, values, op_at, n, out, kern):
        """Decode attention (q_len 1) of one (heads, kv_heads, head_dim) over many (batch, ctx): `_bilinear` over
        arrays, the same operations elementwise (bisect_right = searchsorted right; Python's int / int and numpy's
        int64 / int64 are the same correctly rounded quotient below 2**53)."""
        if o.dim("verify") or any(k == "verify" for k, _ in o.shape):
            return out, kern
        hs, kvs, hds = values("heads"), values("kv_heads"), values("head_dim")
        if hs is None or kvs is None or hds is None or len(set(hs)) > 1 or len(set(kvs)) > 1 or len(set(hds)) > 1:
            return out, kern
        t = self._attn.get((hs[0], kvs[0], hds[0]))
        qs = values("q_len") or [1] * n
        bs, cs = values("batch") or [0] * n, values("ctx") or [0] * n
        if t is None:  # no table of this shape: `gpu_s`'s reading op by op (a masked SDPA's nearest table, else roofline)
            for j in range(n):
                x_ = self.table_s(op_at(j))
                out[j], kern[j] = (self.roofline_s(op_at(j)) if x_ is None else max(x_, 0.0)), 1
            return out, kern
        xs, ys = t.batch, t.ctx
        x, y = np.asarray(bs), np.asarray(cs)
        inside = (xs[0] <= x) & (x <= xs[-1]) & (ys[0] <= y) & (y <= ys[-1])

        def bracket(a, v):
            if len(a) == 1:
                z = np.zeros(v.size, dtype=np.int64)
                return z, z, np.zeros(v.size)
            A = np.asarray(a)
            i = np.minimum(np.maximum(np.searchsorted(A, v, side="right") - 1, 0), max(len(a) - 2, 0))
            return i, i + 1, (v - A[i]) / (A[i + 1] - A[i])

        with np.errstate(all="ignore"):
            i0, i1, wx = bracket(xs, x)
            j0, j1, wy = bracket(ys, y)
            Z = np.asarray(t.us, dtype=float)
            top = Z[i0, j0] * (1 - wy) + Z[i0, j1] * wy
            bot = Z[i1, j0] * (1 - wy) + Z[i1, j1] * wy
            v = ((top * (1 - wx) + bot * wx) * US).tolist()
        roof = self._roofline_at(o, values, n)  # `roofline_s` of the j-th op, read from its values (no op made)
        ok = inside.tolist()
        for j in range(n):
            x_ = None if qs[j] != 1 or not ok[j] else v[j]
            out[j] = roof(j) if x_ is None else max(x_, 0.0)
            kern[j] = 1  # gemm_kernels of a kernel that is not a GEMM
        return out, kern

    def _prime_groups(self, ops, gemm, curve, out, kern):
        for (n, k), js in gemm.items():
            ms = [ops[j].dim("m") for j in js]
            t = self.gemm_table(n, k)
            if t is None:
                ts = self.gemm_fallback.time_many(n, k, ms)
            else:
                v = _loglog_many(ms, t.m, t.us)
                ts = [None if x is None else x * US for x in v]
            self._store(ops, js, ts, out)
            self._fill_kernels(t, n, k, js, ms, kern)
        for cls, js in curve.items():
            c = self._curves[cls]
            v = _curve_many(c, [ops[j].bytes for j in js], _BELOW.get(cls, REFUSE))
            self._store(ops, js, [None if x is None else x * US for x in v], out)
            for j in js:
                kern[j] = 1  # gemm_kernels of a kernel that is not a GEMM
        return out, kern

    def _store(self, ops, js, ts, out) -> None:
        cache = self._gpu_cache
        for j, t in zip(js, ts):
            o = ops[j]
            v = out[j] = self.roofline_s(o) if t is None else max(t, 0.0)
            cache[o] = v

    def _fill_kernels(self, t, n: int, k: int, js, ms, kern) -> None:
        """`gemm_kernels` of the GEMMs at positions `js` (all of shape (n, k), sizes `ms`, table `t` or none) into
        `kern`, through the same memos the scalar path fills."""
        if t is None:  # `_fallback_kernels` of each m: the new ones counted together
            kc = self._kernels_cache
            keys = list(zip(repeat("fb"), repeat(n), repeat(k), ms))  # the memo's keys ("fb", n, k, m)
            new = [key[3] for key in dict.fromkeys(filterfalse(kc.__contains__, keys))]
            if new:
                kc.update(zip(zip(repeat("fb"), repeat(n), repeat(k), new), self.gemm_fallback.kernels_many(n, k, new)))
            for j, v in zip(js, map(kc.__getitem__, keys)):
                kern[j] = v
        elif t.kernels is None:
            for j in js:
                kern[j] = 1
        else:
            keys = list(zip(repeat(id(t)), ms))  # the memo's keys (id(t), m)
            self._prime_kernels(t, ms, keys)
            for j, v in zip(js, map(self._kernels_cache.__getitem__, keys)):
                kern[j] = v

    def _prime_kernels(self, t, ms, keys: list | None = None) -> None:
        """`gemm_kernels`' memo for table `t` at each m: argmin over the grid of |log(max(m, 1) / grid m)|.
        `keys`: the memo keys (id(t), m) of `ms`, where the caller has them."""
        kc = self._kernels_cache
        if keys is None:
            keys = list(zip(repeat(id(t)), ms))
        todo = sorted({m for _, m in filterfalse(kc.__contains__, keys)})
        if not todo:
            return
        r = np.abs(np.log(np.maximum(np.asarray(todo), 1)[:, None] / np.asarray(t.m)[None, :]))
        kv = [int(x) for x in t.kernels]
        kc.update(zip(zip(repeat(id(t)), todo), map(kv.__getitem__, np.argmin(r, axis=1).tolist())))

    def collective_s(self, op: Op) -> float:
        """GPU time of a tensor-parallel collective (simulator/model/parallel.py: custom all-reduce / NCCL ring)."""
        from simulator.model.parallel import collective_gpu_s

        kind = "all_gather" if op.dim("gather") else "all_reduce"
        return collective_gpu_s(self.collective, kind, op.bytes, op.dim("ranks", 1))

    # -- host -------------------------------------------------------------------------------------
    def host_s(self, op: Op, quantile: float = 0.5) -> float:
        if op.fixed_host_s is not None:
            return op.fixed_host_s
        key = (op, quantile)
        v = self._host_cache.get(key)
        if v is None:
            launch = self.profile.host.launch_us
            spread = launch.get(op.path.value)
            if spread is None and op.path is LaunchPath.COMPILED_EXTERN:
                spread = launch.get(LaunchPath.COMPILED.value)  # profiles before the extern path was measured
            if spread is None and op.path is LaunchPath.COLLECTIVE:
                from simulator.model.parallel import require_collective

                # unmeasured: reuse a measured path's figure
                spread = launch.get(require_collective(self.collective, op.dim("ranks", 2)).launch_path)
            if spread is None:
                raise CostError(f"profile '{self.profile.name}': field 'host.launch_us' has no host cost for launch "
                                f"path '{op.path.value}' (add it to the profile file)")
            v = spread.q(quantile) * US
            if op.path in (LaunchPath.COMPILED, LaunchPath.COMPILED_EXTERN) and op.launches_kernel:
                v += self.compiled_wrapper_s
                if op.dim("dynamic_wrapper"):
                    v += self.dynamic_wrapper_s
            self._host_cache[key] = v
        return v

    def host_spread_s(self, path: LaunchPath) -> tuple[float, float, float]:
        launch = self.profile.host.launch_us
        if path is LaunchPath.COLLECTIVE and path.value not in launch:
            path = LaunchPath(self.collective.launch_path)
        s = launch.get(path.value) or launch[LaunchPath.COMPILED.value if path is LaunchPath.COMPILED_EXTERN else path.value]
        return s.q(0.1) * US, s.p50 * US, s.q(0.9) * US

    def gemm_kernels(self, op: Op) -> int:
        """GPU kernels a GEMM op launches per the profile's table (2 where cuBLAS picks split-K plus a
        reduce kernel; the table's time already includes both); 1 where the table does not say."""
        if op.op_class is not OpClass.GEMM:
            return 1 if op.launches_kernel else 0
        t = self.gemm_table(op.dim("n"), op.dim("k"))
        if t is None:
            return self.gemm_fallback_kernels(op)
        if t.kernels is None:
            return 1
        m = op.dim("m")
        key = (id(t), m)  # tables live as long as the cost model: their ids are stable keys
        v = self._kernels_cache.get(key)
        if v is None:
            i = int(np.argmin([abs(np.log(max(m, 1) / mm)) for mm in t.m]))
            v = self._kernels_cache[key] = int(t.kernels[i])
        return v

    def gemm_table(self, n: int, k: int):
        """The measured table of GEMM shape (n, k): the profile's `tables.gemm`, else its `tables.gemm_grid` row
        (the grid is unpacked once, at the first shape the tables lack); None where neither holds it."""
        t = self._gemm.get((n, k))
        if t is None and self._grid is not None:
            from simulator.model.gemm_model import grid_tables

            extra = [g for key, g in grid_tables(self._grid).items() if key not in self._gemm]
            self._gemm.update({(g.n, g.k): g for g in extra})  # a shape of both: the table (the fit's own) wins
            self._grid, self._grid_extra = None, extra
            t = self._gemm.get((n, k))
        return t

    # -- GEMM shapes the tables lack (simulator/model/gemm_model.py) ------------------------------------
    @property
    def gemm_fallback(self):
        """The model of unmeasured GEMM shapes, built once from this profile's GEMM tables and grid."""
        fb = self.__dict__.get("_gemm_fb")
        if fb is None:
            from simulator.model.gemm_model import GemmFallback

            self.gemm_table(0, 0)  # the grid joins the tables
            fb = self.__dict__["_gemm_fb"] = GemmFallback(list(self.profile.device.tables.gemm) + self._grid_extra,
                                                          self.peak_flops, self.bw)
        return fb

    def gemm_fallback_s(self, op: Op) -> float | None:
        """Time of a GEMM whose (n, k) no table holds: interpolated from the tables' measured slowdowns over
        the roofline (gemm_model.py); None (the roofline) where the profile has no tables or m is off their grid."""
        return self.gemm_fallback.time_s(op.dim("n"), op.dim("k"), op.dim("m"))

    def gemm_fallback_kernels(self, op: Op) -> int:
        """Kernels of a GEMM whose (n, k) no table holds: the split-K count of the nearest table (gemm_model.py)."""
        return self._fallback_kernels(op.dim("n"), op.dim("k"), op.dim("m"))

    def _fallback_kernels(self, n: int, k: int, m: int) -> int:
        key = ("fb", n, k, m)
        v = self._kernels_cache.get(key)
        if v is None:
            v = self._kernels_cache[key] = self.gemm_fallback.kernels(n, k, m)
        return v

    def step_kernels(self, ops) -> int:
        """GPU kernels a step launches, counting split-K reduce kernels the GEMM tables record."""
        return sum(self.gemm_kernels(o) for o in ops if o.launches_kernel)

    def graph_launch_s(self, nodes: int) -> float:
        return self.graph_launch_fixed_s + self.graph_launch_per_node_s * nodes


def _bracket(a: list[int], v: float) -> tuple[int, int, float]:
    """The grid cell of `a` around v (the first or last cell outside the grid) and v's weight in it."""
    if len(a) == 1:
        return 0, 0, 0.0
    i = min(max(bisect.bisect_right(a, v) - 1, 0), len(a) - 2)
    return i, i + 1, (v - a[i]) / (a[i + 1] - a[i])


def lerp_table(xs: list[int], ys: list[int], z: list[list[float]], x: float, y: float) -> float:
    """Bilinear in (x, y) on the grid, linear extrapolation from the nearest two rows/columns outside it (decode
    attention time is close to linear in batch and context once the KV read dominates), never below 0."""
    i0, i1, wx = _bracket(xs, x)
    j0, j1, wy = _bracket(ys, y)
    top = z[i0][j0] * (1 - wy) + z[i0][j1] * wy
    bot = z[i1][j0] * (1 - wy) + z[i1][j1] * wy
    return max(top * (1 - wx) + bot * wx, 0.0)


def _bilinear(xs: list[int], ys: list[int], z: list[list[float]], x: float, y: float) -> float | None:
    if not (xs[0] <= x <= xs[-1] and ys[0] <= y <= ys[-1]):
        return None
    i0, i1, wx = _bracket(xs, x)
    j0, j1, wy = _bracket(ys, y)
    top = z[i0][j0] * (1 - wy) + z[i0][j1] * wy
    bot = z[i1][j0] * (1 - wy) + z[i1][j1] * wy
    return (top * (1 - wx) + bot * wx) * US


_FP8_MOE_KEYS = frozenset({"fp8", "quant", "grouped", "routing"})


def _fp8_moe_s(tables, op: Op) -> float | None:
    """FP8 GEMM / activation-quant / MoE op time from the profile's tables (None: roofline or byte curves)."""
    from simulator.model import dtype, moe

    if op.dim("fp8"):
        v = dtype.fp8_gemm_us(tables, op.dim("n"), op.dim("k"), op.dim("m"))
    elif op.dim("quant"):
        v = dtype.quant_us(tables, op.dim("quant"), op.dim("m"), op.dim("k"))
    else:
        s = moe.table_s(tables, op)
        return s
    return None if v is None else v * US
