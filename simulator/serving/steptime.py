"""Step times for the serving model, from the step engine, memoised.

Which plan a step runs (`graph` is the replica's graph mode, `sizes` its capture layout, padded with
`buckets.pad`: the smallest captured size >= the batch, none above the largest):
- decode-only step of n sequences:
    none                      -> eager, batch n
    full, full_and_piecewise  -> full graph replay at pad(n); eager at n above the largest size
    piecewise                 -> piecewise replay at pad(n); eager above the largest size
  The pad(n) - n padding rows run the GEMMs and elementwise kernels but attend to no context (as an
  engine's dummy rows with zero sequence length): the padded step runs at mean context ctx * n / pad(n),
  which keeps the attention's KV reads those of the n real rows.
- mixed step (prefill chunks, with or without decodes), T = decode rows + prefill tokens:
    none, full                -> eager (a full graph is captured for uniform decode batches only,
                                 as vLLM's FULL_DECODE_ONLY; mixed steps run without a graph)
    piecewise, full_and_piecewise -> piecewise replay with the token count padded to pad(T) (the padding
                                 becomes dummy decode rows); eager above the largest size, as vLLM does.
Buckets of the memo key (stated here because they are approximations):
- context: the mean context of the step's sequences, rounded UP to a multiple of `ctx_bucket` (256 tokens),
  clamped to the model's position limit; a step's sequences all run at that context;
- mixed steps: the prefill chunks are modelled as `p` equal chunks of the mean length L (padding tokens of a
  piecewise replay counted in L), all at the step's context bucket; the step time is interpolated
  bilinearly in (decode rows d, L) between points of two grids: d in 0, 1, 2, 4, 8, 12, 16, 24, 32, 48 ...
  (x1.5 / x1.33 steps) and L in 16, 32, 48, 64 then four points per octave (multiples of 16).
Keys: decode (plan mode, padded batch, context bucket scaled by n / padded); mixed (plan mode, d grid point, p, L grid point,
context bucket).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

from ..buckets import pad
from ..costs import CostModel
from ..models import ModelSpec
from ..predict import simulate
from ..workload import StepShape, build_step

CTX_BUCKET = 256


@dataclass(frozen=True)
class StepCost:
    step_s: float
    gpu_busy_s: float
    cpu_bound: bool
    mode: str  # plan that ran: none | full | piecewise
    rows: int  # real rows (sequences for decode steps, tokens for mixed steps)
    padded: int  # rows after padding (== rows when eager)


class StepTimer:
    def __init__(self, model: ModelSpec, costs: CostModel, fusion: str, graph: str, sizes: list[int],
                 ctx_bucket: int = CTX_BUCKET, engine: str = "fast"):
        self.model, self.costs, self.fusion, self.graph = model, costs, fusion, graph
        self.sizes = list(sizes) if graph != "none" else []
        self.ctx_bucket, self.engine = ctx_bucket, engine
        self.max_pos = model.max_position_embeddings
        self._cache: dict[tuple, StepCost] = {}
        self._decode: dict[tuple[int, int], StepCost] = {}
        self._mixed: dict[tuple[int, int, int, int], StepCost] = {}
        self.misses = 0

    def ctx_of(self, ctx: int) -> int:
        """The context bucket a mean context `ctx` falls in (rounded up to a multiple of ctx_bucket)."""
        b = self.ctx_bucket
        return max(b, -(-ctx // b) * b)

    def _run(self, key: tuple, shape: StepShape, mode: str, rows: int, padded: int) -> StepCost:
        step = build_step(self.model, shape, self.fusion)
        res, _ = simulate(step, self.costs, mode, self.engine, pure_decode=shape.is_pure_decode)
        self.misses += 1
        c = StepCost(res.step_s, res.gpu_busy_s, res.bound == "cpu", res.graph_mode, rows, padded)
        self._cache[key] = c
        return c

    def decode(self, n: int, ctx: int) -> StepCost:
        """A decode-only step of n sequences at mean context ctx."""
        cb = min(self.ctx_of(ctx), self.max_pos - 1)
        k = (n, cb)
        c = self._decode.get(k)
        if c is not None:
            return c
        mode, rows, cx = "none", n, cb
        if self.graph != "none":
            p = pad(n, self.sizes).padded
            if p is not None:
                mode, rows = ("piecewise" if self.graph == "piecewise" else "full"), p
                cx = -(-cb * n // p)  # padding rows run the GEMMs but attend to no context
        key = (mode, rows, 0, 0, cx)
        c = self._cache.get(key)
        if c is None:
            c = self._run(key, StepShape(rows, cx), mode, n, rows)
        if c.rows != n:
            c = StepCost(c.step_s, c.gpu_busy_s, c.cpu_bound, c.mode, n, rows)
        self._decode[k] = c
        return c

    def _mixed_at(self, mode: str, d: int, p: int, L: int, cb: int) -> StepCost:
        cb = max(0, min(cb, self.max_pos - L - 1))
        key = (mode, d, p, L, cb)
        c = self._cache.get(key)
        if c is None:
            c = self._run(key, StepShape(d, cb, p, L), mode, d + p * L, d + p * L)
        return c

    def mixed(self, d: int, p: int, prefill_tokens: int, ctx: int) -> StepCost:
        """A step with `d` decode rows and `p` prefill chunks holding `prefill_tokens` tokens in all."""
        cb = self.ctx_of(ctx)
        key = (d, p, prefill_tokens, cb)
        c = self._mixed.get(key)
        if c is None:
            if len(self._mixed) >= 200_000:  # bound the memory of exact-argument memo
                self._mixed.clear()
            c = self._mixed[key] = self._mixed_cost(d, p, prefill_tokens, cb)
        return c

    def _mixed_cost(self, d: int, p: int, prefill_tokens: int, cb: int) -> StepCost:
        T = d + prefill_tokens
        mode, padded = "none", T
        if self.graph in ("piecewise", "full_and_piecewise"):
            pp = pad(T, self.sizes).padded
            if pp is not None:
                mode, padded = "piecewise", pp
        L = (padded - d) / p  # padding rows counted as prefill tokens
        d0, d1, wd = bracket(d, D_GRID)
        l0, l1, wl = bracket(L, L_GRID)
        c00 = self._mixed_at(mode, d0, p, l0, cb)
        if wd == 0.0 and wl == 0.0:
            return StepCost(c00.step_s, c00.gpu_busy_s, c00.cpu_bound, c00.mode, T, padded)
        c01 = self._mixed_at(mode, d0, p, l1, cb)
        c10 = self._mixed_at(mode, d1, p, l0, cb)
        c11 = self._mixed_at(mode, d1, p, l1, cb)
        w = ((1 - wd) * (1 - wl), (1 - wd) * wl, wd * (1 - wl), wd * wl)
        cs = (c00, c01, c10, c11)
        step = sum(wi * c.step_s for wi, c in zip(w, cs))
        gpu = sum(wi * c.gpu_busy_s for wi, c in zip(w, cs))
        cpu = cs[max(range(4), key=w.__getitem__)].cpu_bound  # the nearest grid point decides
        return StepCost(step, gpu, cpu, c00.mode, T, padded)


def _grid_d() -> list[int]:
    g, x = [0, 1, 2, 4], 8
    while x <= 1 << 20:
        g += [x, x * 3 // 2]
        x *= 2
    return g


def _grid_l() -> list[int]:
    g, i = [16, 32, 48, 64], 1
    while g[-1] < 1 << 20:
        v = int(-(-64 * 2 ** (i / 4) // 16) * 16)
        if v > g[-1]:
            g.append(v)
        i += 1
    return g


D_GRID = _grid_d()  # decode rows of a mixed step: 0, 1, 2, 4, 8, 12, 16, 24, 32, 48, ...
L_GRID = _grid_l()  # prefill chunk length: 16, 32, 48, 64, then 4 points per octave (multiples of 16)


def bracket(x: float, grid: list[int]) -> tuple[int, int, float]:
    """Grid points lo <= x <= hi and the weight of hi (x below the grid clamps to its first point)."""
    i = bisect.bisect_left(grid, x)
    if i < len(grid) and grid[i] == x:
        return grid[i], grid[i], 0.0
    if i == 0:
        return grid[0], grid[0], 0.0
    lo, hi = grid[i - 1], grid[min(i, len(grid) - 1)]
    return lo, hi, (x - lo) / (hi - lo) if hi > lo else 0.0
