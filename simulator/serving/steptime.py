"""Step times for the serving model, from the step engine, memoised.

Which plan a step runs (`graph` is the replica's graph mode, `sizes` its capture layout, padded with
`buckets.pad`: the smallest captured size >= the batch, none above the largest):
- decode-only step of n sequences:
    none                      -> eager, batch n
    full, full_and_piecewise  -> full graph replay at pad(n); eager at n above the largest size
    piecewise                 -> piecewise replay at pad(n); eager above the largest size
- mixed step (prefill chunks, with or without decodes), T = decode rows + prefill tokens:
    none, full                -> eager (a full graph is captured for uniform decode batches only,
                                 as vLLM's FULL_DECODE_ONLY; mixed steps run without a graph)
    piecewise, full_and_piecewise -> piecewise replay with the token count padded to pad(T) (the padding
                                 becomes dummy decode rows); eager above the largest size, as vLLM does.
Buckets of the memo key (stated here because they are approximations):
- context: the mean context of the step's sequences, rounded UP to a multiple of `ctx_bucket` (256 tokens),
  clamped to the model's position limit; a step's sequences all run at that context;
- prefill: a mixed step's prefill chunks are modelled as `p` equal chunks whose length is the mean chunk
  length rounded UP to a multiple of `prefill_bucket` (16 tokens), all at the step's context bucket.
Key: (plan mode, decode rows incl. padding, prefill chunks, chunk length bucket, context bucket).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..buckets import pad
from ..costs import CostModel
from ..models import ModelSpec
from ..predict import simulate
from ..workload import StepShape, build_step

CTX_BUCKET = 256
PREFILL_BUCKET = 16


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
                 ctx_bucket: int = CTX_BUCKET, prefill_bucket: int = PREFILL_BUCKET, engine: str = "fast"):
        self.model, self.costs, self.fusion, self.graph = model, costs, fusion, graph
        self.sizes = list(sizes) if graph != "none" else []
        self.ctx_bucket, self.prefill_bucket, self.engine = ctx_bucket, prefill_bucket, engine
        self.max_pos = model.max_position_embeddings
        self._cache: dict[tuple, StepCost] = {}
        self._decode: dict[tuple[int, int], StepCost] = {}
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
        mode, rows = "none", n
        if self.graph != "none":
            p = pad(n, self.sizes).padded
            if p is not None:
                mode, rows = ("piecewise" if self.graph == "piecewise" else "full"), p
        key = (mode, rows, 0, 0, cb)
        c = self._cache.get(key)
        if c is None:
            c = self._run(key, StepShape(rows, cb), mode, n, rows)
        elif c.rows != n:
            c = StepCost(c.step_s, c.gpu_busy_s, c.cpu_bound, c.mode, n, rows)
        self._decode[k] = c
        return c

    def mixed(self, d: int, p: int, prefill_tokens: int, ctx: int) -> StepCost:
        """A step with `d` decode rows and `p` prefill chunks holding `prefill_tokens` tokens in all."""
        pb = self.prefill_bucket
        L = max(pb, -(-prefill_tokens // (p * pb)) * pb)
        cb = max(0, min(self.ctx_of(ctx), self.max_pos - L - 1))
        T = d + prefill_tokens
        mode, dr, padded = "none", d, T
        if self.graph in ("piecewise", "full_and_piecewise"):
            pp = pad(T, self.sizes).padded
            if pp is not None:
                mode, dr, padded = "piecewise", d + (pp - T), pp
        key = (mode, dr, p, L, cb)
        c = self._cache.get(key)
        if c is None:
            c = self._run(key, StepShape(dr, cb, p, L), mode, T, padded)
        return StepCost(c.step_s, c.gpu_busy_s, c.cpu_bound, c.mode, T, padded)
