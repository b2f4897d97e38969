"""Speculative decoding: the acceptance model (how many tokens a verify step emits) and the draft (what a draft
step launches).

Acceptance. A step proposes k draft tokens per sequence; the target verifies them in one forward of 1 + k query
tokens (simulator/model/workload.py, `StepShape.q_len`) and keeps the longest accepted prefix plus one token of
its own (the correction or bonus token). With `a_i` the probability that draft token i is accepted given that
tokens 1..i-1 were (a chain draft; position i needs every earlier one accepted),
    tokens_per_step = E[accepted] + 1 = 1 + sum_{i=1..k} prod_{j<=i} a_j,
and for a constant a this is sum_{i=0..k} a^i = (1 - a^(k+1)) / (1 - a)  (k + 1 at a = 1). The per-position
list holds these conditional a_i; engines report the marginal per-position rates prod_{j<=i} a_j (vLLM's
spec-decode metrics count accepted tokens per position over drafts): `Acceptance.from_marginal` converts.
Draws: per sequence, k uniforms from a numpy Generator; the accepted count is the number of leading positions
whose uniform is below a_i (so a seeded run is reproducible).

Draft. `eagle` and `mtp`: a one-decoder-layer head with the target's hidden size, heads and vocabulary
(EAGLE: vLLM model_executor/models/llama_eagle.py `fc` = Linear(2·hidden, hidden) over the concatenated token
embedding and target hidden state, then one decoder layer and the shared lm_head; MTP: DeepSeek's
model_executor/models/deepseek_mtp.py `enorm`, `hnorm`, `eh_proj` = Linear(2·hidden, hidden), one layer,
`shared_head`). `MODEL`: a preset or config.json of a small draft model, run as its own decoder. The draft loop of
one verify step (vLLM's EAGLE proposer `propose`, SGLang's draft + draft-extend runners) is one pass over the
verified tokens (B sequences x (1 + k) rows, `q_len` = 1 + k) that yields the first draft token, then k - 1
single-token passes (B rows); a standalone draft model runs the same k passes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from simulator.common.errors import UserError
from simulator.model.kernels import LaunchPath as P
from simulator.model.kernels import Op, OpClass, Step
from simulator.model.models import ModelSpec

DRAFT_KINDS = ("eagle", "mtp")  # anything else names a draft model (a preset or a config.json path)
MAX_SPEC_TOKENS = 64


class SpecError(UserError):
    """Speculative-decoding settings that cannot be modelled (bad acceptance, k, draft)."""


def _prob(x, what: str) -> float:
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x) or not 0.0 <= x <= 1.0:
        raise SpecError(f"{what} must be a probability in [0, 1], got {x!r}")
    return float(x)


@dataclass(frozen=True)
class Acceptance:
    """Per-position conditional acceptance probabilities a_1..a_k (see the module docstring)."""

    probs: tuple[float, ...]

    @classmethod
    def constant(cls, a: float, k: int) -> "Acceptance":
        check_k(k)
        return cls(tuple([_prob(a, "acceptance")] * k))

    @classmethod
    def per_position(cls, probs, k: int | None = None) -> "Acceptance":
        ps = tuple(_prob(p, f"acceptance[{i}]") for i, p in enumerate(probs))
        if k is not None and len(ps) != check_k(k):
            raise SpecError(f"acceptance lists {len(ps)} per-position probabilities for spec_tokens {k}: give one "
                            "per draft token")
        if not ps:
            raise SpecError("acceptance needs at least one per-position probability")
        return cls(ps)

    @classmethod
    def from_marginal(cls, rates, k: int | None = None) -> "Acceptance":
        """From marginal per-position acceptance rates r_i = P(positions 1..i all accepted), non-increasing."""
        rs = [_prob(r, f"acceptance rate[{i}]") for i, r in enumerate(rates)]
        if any(b > a + 1e-12 for a, b in zip(rs, rs[1:])):
            raise SpecError("marginal per-position acceptance rates must be non-increasing (position i needs "
                            "every earlier position accepted)")
        cond, prev = [], 1.0
        for r in rs:
            cond.append(0.0 if prev == 0.0 else min(1.0, r / prev))
            prev = r
        return cls.per_position(cond, k)

    @classmethod
    def parse(cls, value, k: int) -> "Acceptance":
        """A number (constant) or a list / comma-separated string of k per-position probabilities."""
        if isinstance(value, str):
            parts = [p for p in value.replace(" ", "").split(",") if p]
            try:
                nums = [float(p) for p in parts]
            except ValueError:
                raise SpecError(f"acceptance '{value}' is neither a probability nor a comma-separated list") from None
            value = nums[0] if len(nums) == 1 else nums
        if isinstance(value, (list, tuple)):
            if len(value) == 1:
                return cls.constant(value[0], k)
            return cls.per_position(value, k)
        return cls.constant(value, k)

    @property
    def k(self) -> int:
        return len(self.probs)

    @property
    def marginal(self) -> tuple[float, ...]:
        """P(positions 1..i all accepted), i = 1..k."""
        return tuple(float(x) for x in np.cumprod(self.probs)) if self.probs else ()

    @property
    def tokens_per_step(self) -> float:
        """Expected tokens a verify step emits per sequence: E[accepted] + 1."""
        return 1.0 + float(sum(self.marginal))

    def draw(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """Tokens emitted by each of `n` sequences in one step (accepted + 1), drawn from `rng`."""
        if n < 0:
            raise SpecError(f"draw count must be non-negative, got {n}")
        if self.k == 0:
            return np.ones(n, dtype=np.int64)
        u = rng.random((n, self.k))
        ok = u < np.asarray(self.probs)[None, :]
        accepted = np.cumprod(ok, axis=1).sum(axis=1)
        return accepted.astype(np.int64) + 1


def check_k(k: int) -> int:
    if isinstance(k, bool) or not isinstance(k, int) or k < 0:
        raise SpecError(f"spec_tokens must be a non-negative integer, got {k!r}")
    if k > MAX_SPEC_TOKENS:
        raise SpecError(f"spec_tokens {k} is above the limit of {MAX_SPEC_TOKENS}")
    return k


def closed_form(a: float, k: int) -> float:
    """(1 - a^(k+1)) / (1 - a): expected tokens per step at constant acceptance a (k + 1 at a = 1)."""
    a, k = _prob(a, "acceptance"), check_k(k)
    return float(k + 1) if a == 1.0 else (1.0 - a ** (k + 1)) / (1.0 - a)


def kv_slots_per_step(k: int) -> int:
    """KV slots a sequence reserves per verify step: its token plus k drafts (vLLM reserves k + 1; BLIS #1627)."""
    return 1 + check_k(k)


# -- the draft --------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Draft:
    """The draft: `kind` eagle | mtp (a head on the target) or model (a separate small model), and its ModelSpec."""

    kind: str
    model: ModelSpec

    @property
    def is_head(self) -> bool:
        return self.kind in DRAFT_KINDS

    @property
    def weight_bytes(self) -> int:
        """Weights the draft adds: a head's one decoder layer, its 2·hidden -> hidden projection and norms (the
        token embedding and lm_head are the target's, shared as vLLM's EAGLE / MTP loaders do when the checkpoint
        has none of its own); a draft model's own weights."""
        m = self.model
        if not self.is_head:
            return m.weight_bytes
        w = 1 if m.weight_dtype == "fp8" else m.dtype_bytes
        H = m.hidden_size
        norms = (2 * H + (2 * m.head_dim if m.qk_norm else 0) + H + (2 * H if self.kind == "mtp" else 0))
        return m.linear_params * w + 2 * H * H * m.dtype_bytes + norms * m.dtype_bytes

    def kv_bytes_per_token(self) -> int:
        """KV bytes per token of the draft's own cache (a head: one layer)."""
        return self.model.kv_bytes_per_token()


def draft_for(target: ModelSpec, draft: str, loader=None) -> Draft:
    """The draft of `target`: 'eagle' / 'mtp' build a one-layer head with the target's dimensions; any other value
    is a model preset or config.json path (`loader`, default simulator.model.models.load_model)."""
    if not isinstance(draft, str) or not draft.strip():
        raise SpecError("draft must be eagle, mtp or a draft model (preset or config.json)")
    d = draft.strip()
    if d in DRAFT_KINDS:
        head = replace(target, name=f"{target.name}-{d}-head", num_hidden_layers=1)
        if d == "eagle" and target.is_moe:
            # EAGLE heads are one dense decoder layer (llama_eagle.py's LlamaDecoderLayer) even on MoE targets, with
            # the target's intermediate_size; an MTP layer is one of the target's own layers (MoE in DeepSeek)
            head = replace(head, num_experts=0, num_experts_per_tok=0, moe_intermediate_size=0,
                           shared_expert_intermediate_size=0, norm_topk_prob=False)
        return Draft(d, head)
    if loader is None:
        from simulator.model.models import load_model as loader
    from simulator.model.parallel import logits_vocab, shard, tp_of

    m = loader(d)
    if m.vocab_size != logits_vocab(target):
        raise SpecError(f"draft model {m.name} has vocab_size {m.vocab_size}, the target {target.name} "
                        f"{logits_vocab(target)}: a draft must share the target's vocabulary")
    tp = tp_of(target)  # a sharded target (tensor parallelism): the draft model runs sharded the same way
    return Draft("model", shard(m, tp) if tp > 1 else m)


def _head_input_ops(d: Draft, rows: int, fusion: str) -> list[Op]:
    """The ops an EAGLE / MTP head runs before its decoder layer: concatenating the token embedding with the
    target's hidden state and projecting 2·hidden -> hidden (MTP first normalises both halves)."""
    m, e = d.model, d.model.dtype_bytes
    H = m.hidden_size
    eager = fusion in ("none", "packed")
    ops = []
    if d.kind == "mtp":
        path = P.EAGER_REDUCTION if eager else P.CUSTOM_OP
        for name in ("enorm", "hnorm"):
            ops.append(Op(f"draft.{name}", OpClass.REDUCTION, path, float(rows * H), float(rows * H * 2 * e)))
    ops.append(Op("draft.cat", OpClass.COPY, P.EAGER_COPY, float(rows * 2 * H), float(rows * 2 * H * 2 * e)))
    ops.append(Op("draft.fc", OpClass.GEMM, P.EAGER_GEMM, 2.0 * rows * H * 2 * H,
                  float(e * (rows * 2 * H + 2 * H * H + rows * H)), (("k", 2 * H), ("m", rows), ("n", H))))
    return ops


def draft_step(d: Draft, batch: int, ctx: int, fusion: str, q_len: int = 1, padding: int = 0) -> Step:
    """One forward of the draft over `batch` sequences x `q_len` new tokens at context `ctx` (the workload
    builder's step for the draft ModelSpec, with the head's input projection in front for eagle / mtp). A pass over
    q_len > 1 tokens takes logits at each sequence's last accepted token only (vLLM's EAGLE proposer samples
    `hidden_states[last_token_indices]`), so its lm_head runs `batch` rows, not batch·q_len. `padding`: dummy rows
    up to a captured size (StepShape.padding)."""
    from simulator.model.workload import StepShape, _Builder, build_step

    shape = StepShape(decode_seqs=batch, ctx=ctx, q_len=q_len, padding=padding)
    st = build_step(d.model, shape, fusion)
    ops = list(st.ops)
    if q_len > 1:
        b = _Builder(d.model, shape)
        for i, o in enumerate(ops):
            if o.name == "lm_head":
                b.gemm("lm_head", batch + padding, d.model.vocab_size, d.model.hidden_size, path=o.path)
                ops[i] = b.ops.pop()
    if d.is_head:
        ops = _head_input_ops(d, batch * q_len + padding, fusion) + ops
    return Step(tuple(ops), label=f"{st.label} draft={d.kind}", layers=st.layers, tokens=st.tokens)


def draft_loop(d: Draft, k: int, batch: int, ctx: int, fusion: str) -> list[tuple[Step, int]]:
    """The draft passes of one verify step as (step, count): one pass over the 1 + k verified tokens per sequence
    that yields the first draft token, then k - 1 single-token passes (at ctx + k + 1, where the drafts end).
    vLLM's EAGLE and draft-model proposers and SGLang's draft-extend + draft runners share this shape."""
    check_k(k)
    if k == 0:
        return []
    first = (draft_step(d, batch, ctx, fusion, q_len=1 + k), 1)
    return [first] + ([(draft_step(d, batch, ctx + k + 1, fusion), k - 1)] if k > 1 else [])


def breakeven_acceptance(k: int, cost_ratio: float) -> float | None:
    """The constant acceptance a at which speculation breaks even: tokens_per_step(a, k) = cost_ratio, where
    cost_ratio = (verify + draft step time) / plain decode step time. tokens_per_step rises monotonically from 1
    (a = 0) to k + 1 (a = 1), so: 0.0 when cost_ratio <= 1 (speculation pays at any acceptance), None when
    cost_ratio > k + 1 (it never pays), else the root by bisection (to 1e-12)."""
    check_k(k)
    if not math.isfinite(cost_ratio) or cost_ratio <= 0:
        raise SpecError(f"cost ratio must be a positive number, got {cost_ratio!r}")
    if cost_ratio <= 1.0:
        return 0.0
    if k == 0 or cost_ratio > k + 1:
        return None
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        if closed_form(mid, k) < cost_ratio:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def steps_to_finish(outputs, acc: Acceptance, rng: np.random.Generator, chunk: int = 64) -> np.ndarray:
    """Verify steps each request needs to emit its `outputs[i]` tokens when every step emits a fresh draw of
    `acc.draw` (accepted + 1, at most 1 + k) tokens: the first step count whose running sum reaches the output.
    Drawn per sequence from `rng` (seeded: reproducible), in chunks of `chunk` steps per request; what a serving
    simulation needs to keep a request's finish step fixed at admission (serving/scheduler.py's cohort design)."""
    out = np.asarray(outputs, dtype=np.int64)
    if out.ndim != 1 or (out.size and out.min() < 0):
        raise SpecError("outputs must be a 1-D array of non-negative token counts")
    n = out.size
    steps = np.zeros(n, dtype=np.int64)
    left = out.copy()
    active = np.nonzero(left > 0)[0]
    while active.size:
        d = acc.draw(active.size * chunk, rng).reshape(active.size, chunk)
        c = np.cumsum(d, axis=1)
        reach = c >= left[active, None]
        hit = reach.any(axis=1)
        first = np.where(hit, reach.argmax(axis=1) + 1, chunk)
        steps[active] += first
        left[active] = np.where(hit, 0, left[active] - c[:, -1])
        active = active[~hit]
    return steps
