"""The continuous-batching scheduler of one replica, after vLLM V1, and the per-request state it keeps.

Each scheduling point (the end of a step) builds the next step:
1. decoding requests each take one token; their new KV blocks are reserved first. If the pool cannot hold
   them, running requests are preempted from the most recently admitted end (recompute: their blocks are
   freed, they go back to the head of the waiting queue and later prefill prompt + tokens generated so far);
2. running requests still in prefill take chunks of what is left of the token budget
   (`max_num_batched_tokens`), in admission order; if their blocks do not fit, the newest running requests
   are preempted (a request that would preempt itself waits instead);
3. unless this scheduling point had to preempt, waiting requests are admitted first-come-first-served while
   `max_num_seqs` and the token budget allow and their first chunk's blocks fit; the first that cannot be
   admitted stops admission (no skipping). With
   chunked prefill off a prompt is admitted only when it fits the budget whole.
A step holding prefill chunks is a mixed step. The prefill step that completes a prompt yields the first
output token; each decode step one more; a request holds prompt + output - 1 tokens when it finishes.
A request whose prompt + output cannot fit the KV pool or `max_model_len` (or, with chunked prefill off, the
token budget, which a recompute after preemption would need) is rejected on arrival.

Decoding requests are a `kv.Cohort` on the global decode-step counter G (finish steps in a heap), so a step
costs O(1) whatever the batch, and `extend` can merge a run of identical decode-only steps into one event:
it stops at the first finish, at a context-bucket change, or before the pool would run short, and does not
start after a scheduling point that preempted (the next one may admit); the caller also stops it at the next
arrival when one could be admitted, and at measurement-window boundaries. Admission blocked by max_num_seqs,
the token budget or the pool stays blocked through such a run (the room left only shrinks), so waiting
requests cannot be admitted before it ends.

Speculative decoding (`spec`: k draft tokens, the acceptance model, a seeded numpy Generator): every step a decoding
request takes part in (decode-only or the decode rows of a mixed step, as vLLM drafts for those too) is a verify
step that emits a random number of tokens (accepted + 1). When a request joins the decoding cohort its number of
verify steps to finish, `steps_to_finish(output left)` (simulator/model/spec.py), is drawn from the Generator, so its
finish step is fixed at admission and the cohort design holds. Decode rows take 1 + k tokens of the token budget.
KV: k + 1 slots per sequence per step (kv.Cohort's rate; an upper bound, see kv.py). Context for step pricing:
each request's context grows by the acceptance model's expected tokens per step (a request's own draws decide only
when it finishes). Tokens produced by a run of steps: decode rows x steps x expected tokens per step; a request
preempted after j of its s steps had produced floor(left * j / s) tokens (at most left - 1), and so has one
censored at the end of the run. Measured tokens per step: the decode tokens of the requests that finished over
the verify steps they took (the last step of each emits at most what is left, so it reads slightly below the
closed form, by at most k / steps per request).
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from dataclasses import dataclass, field

from .kv import Cohort, blocks_for

WAITING, PREFILL, DECODE, DONE, REJECTED = range(5)


@dataclass(frozen=True)
class Limits:
    max_num_seqs: int = 256
    max_num_batched_tokens: int = 8192
    chunked_prefill: bool = True
    max_model_len: int = 1 << 30


@dataclass(slots=True)
class Plan:
    """What the next step (or run of `steps` identical decode-only steps) holds."""

    decode: int  # decoding sequences (one token each)
    decode_ctx_sum: int  # their summed context at the first step
    chunks: list = field(default_factory=list)  # (request id, prefill tokens) for a mixed step
    prefill_tokens: int = 0
    prefill_ctx_sum: int = 0  # tokens the chunked requests already hold
    steps: int = 1
    peak_used: int = 0  # blocks held during the last step (the most: blocks only grow within a plan)
    block_steps: int = 0  # blocks held, summed over the steps

    @property
    def seqs(self) -> int:
        return self.decode + len(self.chunks)

    @property
    def ctx(self) -> int:
        """Mean context of the step's sequences, rounded up."""
        return -(-(self.decode_ctx_sum + self.prefill_ctx_sum) // max(1, self.seqs))


class Scheduler:
    def __init__(self, limits: Limits, kv_blocks: int, block_size: int, prompt: list[int], output: list[int],
                 spec: "SpecDecode | None" = None):
        self.lim, self.bs, self.total = limits, block_size, kv_blocks
        self.spec = spec
        self.rate = 1 if spec is None else spec.k + 1  # KV slots per sequence per step, and budget tokens per row
        self.tps = 1.0 if spec is None else spec.acceptance.tokens_per_step
        self.ctx_base = 0.0  # spec: sum over decoding members of (context at join - tps * step counter at join)
        self.sp_left = [0] * len(prompt)  # spec: tokens left when the request joined the cohort
        self.sp_steps = [0] * len(prompt)  # spec: verify steps it was drawn to need for them
        self.spec_emitted = 0  # spec: decode tokens of finished requests, and the verify steps they took
        self.spec_steps = 0
        self.P, self.O = prompt, output
        n = len(prompt)
        self.state = [WAITING] * n
        self.gen = [0] * n  # output tokens produced so far
        self.comp = [0] * n  # prefill tokens computed (PREFILL)
        self.target = [0] * n  # prefill target: prompt + tokens generated before a preemption
        self.held = [0] * n  # blocks held while in PREFILL
        self.base = [0] * n  # cohort base while in DECODE
        self.epoch = [0] * n
        self.join = [0] * n  # step counter when the request last joined the decoding cohort
        self.first_t = [math.nan] * n
        self.finish_t = [math.nan] * n
        self.preempted = [0] * n
        self.waiting: deque[int] = deque()
        self.running: dict[int, None] = {}  # admission order
        self.prefilling: dict[int, None] = {}
        self.cohort = Cohort(block_size, self.rate)
        self.heap: list[tuple[int, int, int]] = []  # (finish step, id, epoch)
        self.G = 0  # decode steps run so far
        self.used = 0
        self.preemptions = 0
        self.admission_skipped = False  # the last scheduling point preempted and so admitted nobody

    # -- arrivals and bookkeeping -----------------------------------------------------------------
    def arrive(self, rid: int) -> bool:
        need = self.P[rid] + self.O[rid]
        kv_need = need - 1 if self.spec is None else self.P[rid] + self.rate * max(0, self.O[rid] - 1)
        too_long_unchunked = not self.lim.chunked_prefill and need - 1 > self.lim.max_num_batched_tokens
        if blocks_for(kv_need, self.bs) > self.total or need > self.lim.max_model_len or too_long_unchunked:
            self.state[rid] = REJECTED
            return False
        self.target[rid] = self.P[rid]
        self.waiting.append(rid)
        return True

    @property
    def in_system(self) -> int:
        return len(self.waiting) + len(self.running)

    def admission_open(self) -> bool:
        """Could a request arriving now be admitted at the next scheduling point?"""
        return not self.waiting and len(self.running) < self.lim.max_num_seqs

    def _preempt_last(self) -> int:
        rid, _ = self.running.popitem()
        if self.state[rid] == DECODE:
            b = self.base[rid]
            self.cohort.remove(b)
            self.used -= blocks_for(b + self.rate * self.G, self.bs)
            self.gen[rid] += self._emitted(rid)
            if self.spec is not None:
                self.ctx_base -= self.target[rid] - self.tps * self.join[rid]
            self.epoch[rid] += 1
        else:
            self.used -= self.held[rid]
            del self.prefilling[rid]
        self.state[rid] = WAITING
        self.comp[rid] = self.held[rid] = 0
        self.target[rid] = self.P[rid] + self.gen[rid]
        self.waiting.appendleft(rid)
        self.preempted[rid] += 1
        self.preemptions += 1
        return rid

    def _room(self, g1: int) -> int:
        """Blocks free once the decoding requests' blocks for step g1 are set aside."""
        return self.total - self.used - self.cohort.need(g1)

    # -- one scheduling point ---------------------------------------------------------------------
    def schedule(self) -> Plan | None:
        g1, co, bs = self.G + 1, self.cohort, self.bs
        self.admission_skipped = False
        if not self.prefilling and not self.waiting:  # fast path: decodes only, nothing to admit
            need = co.count[(1 - g1) % bs] if self.rate == 1 else co.need(g1)
            if co.n and need <= self.total - self.used:
                self.used += need
                return Plan(co.n, self._ctx_sum(g1), [], 0, 0, 1, self.used, self.used)
        preempted_before = self.preemptions
        while co.need(g1) > self.total - self.used and self.running:
            self._preempt_last()
        chunks, ptok, pctx = [], 0, 0
        budget = self.lim.max_num_batched_tokens
        for rid in (list(self.prefilling) if self.prefilling else ()):
            if rid not in self.running:
                continue
            left = budget - co.n * self.rate - ptok
            if left <= 0:
                break
            c = self.comp[rid]
            chunk = min(self.target[rid] - c, left)
            nb = blocks_for(c + chunk, bs) - self.held[rid]
            ok = True
            while nb > self._room(g1):
                if self._preempt_last() == rid:
                    ok = False
                    break
            if ok:
                self.used += nb
                self.held[rid] += nb
                chunks.append((rid, chunk))
                ptok += chunk
                pctx += c
        lim = self.lim
        admit = self.preemptions == preempted_before  # no admissions in a step that had to preempt (vLLM V1)
        self.admission_skipped = not admit and bool(self.waiting)
        while admit and self.waiting and len(self.running) < lim.max_num_seqs:
            left = budget - co.n * self.rate - ptok
            if left <= 0:
                break
            rid = self.waiting[0]
            rem = self.target[rid]
            if not lim.chunked_prefill and rem > left:
                break
            chunk = min(rem, left)
            nb = blocks_for(chunk, bs)
            if nb > self._room(g1):
                break
            self.waiting.popleft()
            self.running[rid] = None
            self.prefilling[rid] = None
            self.state[rid] = PREFILL
            self.comp[rid], self.held[rid] = 0, nb
            self.used += nb
            chunks.append((rid, chunk))
            ptok += chunk
        if co.n == 0 and not chunks:
            return None
        self.used += co.need(g1)
        return Plan(co.n, self._ctx_sum(g1), chunks, ptok, pctx, 1, self.used, self.used)

    def _ctx_sum(self, g: int) -> int:
        """Summed context of the decoding requests at step g (spec: grown by the expected tokens per step)."""
        co = self.cohort
        if self.spec is None:
            return co.base_sum + co.n * g
        return math.ceil(self.ctx_base + co.n * self.tps * g) if co.n else 0

    def _emitted(self, rid: int) -> int:
        """Tokens a decoding request has produced since it joined the cohort (see the module docstring)."""
        j = self.G - self.join[rid]
        if self.spec is None:
            return j
        s, left = self.sp_steps[rid], self.sp_left[rid]
        return min(left - 1, left * j // s) if s else 0

    def extend(self, plan: Plan, cap: int, ctx_bucket: int) -> int:
        """Merge up to `cap` identical decode-only steps into `plan` (see module docstring)."""
        co = self.cohort
        if cap <= 1 or plan.chunks or self.admission_skipped:  # the next point may admit: no merging
            return 1
        g1 = self.G + 1
        heap, ep, st = self.heap, self.epoch, self.state
        while heap[0][2] != ep[heap[0][1]] or st[heap[0][1]] != DECODE:
            heapq.heappop(heap)
        k = heap[0][0] - self.G
        if cap < k:
            k = cap
        if self.spec is None:
            c1 = -(-co.base_sum // co.n) + g1
            kc = -(-c1 // ctx_bucket) * ctx_bucket - c1 + 1
        else:  # the mean context grows by tps a step: the steps before it leaves its bucket
            c1 = -(-self._ctx_sum(g1) // co.n)
            kc = int((-(-c1 // ctx_bucket) * ctx_bucket - c1) // self.tps) + 1
        if kc < k:
            k = kc
        if k <= 1:
            return 1
        free = self.total - self.used
        if self.rate > 1 or free < co.n * (-(-(k - 1) // self.bs)):  # the pool might run short: find where
            k = min(k, 1 + co.steps_affordable(g1 + 1, free))
            if k <= 1:
                return 1
        taken, weighted = co.needs_over(g1 + 1, k - 1)
        plan.block_steps = k * self.used + weighted
        self.used += taken
        plan.peak_used = self.used
        plan.steps = k
        return k

    def complete(self, plan: Plan, t_end: float) -> tuple[int, list[int]]:
        """Apply a finished plan at time t_end; return (output tokens produced, requests finished)."""
        tokens, done = 0, []
        bs, co = self.bs, self.cohort
        if plan.decode:
            self.G += plan.steps
            tokens += plan.decode * plan.steps * self.tps if self.spec is not None else plan.decode * plan.steps
            heap, G = self.heap, self.G
            while heap and heap[0][0] <= G:
                _, rid, e = heapq.heappop(heap)
                if e != self.epoch[rid] or self.state[rid] != DECODE:
                    continue
                b = self.base[rid]
                co.remove(b)
                self.used -= blocks_for(b + self.rate * G, bs)
                if self.spec is not None:
                    self.ctx_base -= self.target[rid] - self.tps * self.join[rid]
                    self.spec_emitted += self.sp_left[rid]
                    self.spec_steps += self.sp_steps[rid]
                self.gen[rid] = self.O[rid]
                self._finish(rid, t_end, done)
        for rid, chunk in plan.chunks:
            self.comp[rid] += chunk
            if self.comp[rid] < self.target[rid]:
                continue
            del self.prefilling[rid]
            self.gen[rid] += 1
            tokens += 1
            if self.first_t[rid] != self.first_t[rid]:  # nan: first token
                self.first_t[rid] = t_end
            if self.gen[rid] >= self.O[rid]:
                self.used -= self.held[rid]
                self.held[rid] = 0
                self._finish(rid, t_end, done)
                continue
            self.held[rid] = 0
            self.state[rid] = DECODE
            b = self.target[rid] - self.rate * self.G
            self.base[rid] = b
            self.join[rid] = self.G
            co.add(b)
            left = self.O[rid] - self.gen[rid]
            if self.spec is not None:
                steps = int(self.spec.steps(left))
                self.sp_left[rid], self.sp_steps[rid] = left, steps
                self.ctx_base += self.target[rid] - self.tps * self.G
                left = steps
            heapq.heappush(self.heap, (self.G + left, rid, self.epoch[rid]))
        return tokens, done

    def _finish(self, rid: int, t: float, done: list) -> None:
        self.state[rid] = DONE
        self.finish_t[rid] = t
        del self.running[rid]
        done.append(rid)

    def generated_now(self, rid: int) -> int:
        """Output tokens a request has produced so far (decoding ones counted from the step counter)."""
        if self.state[rid] == DECODE:
            return self.gen[rid] + self._emitted(rid)
        return self.gen[rid]


@dataclass
class SpecDecode:
    """Speculative decoding in a serving run: k draft tokens, the acceptance model (simulator/model/spec.py
    Acceptance) and the Generator the requests' verify-step counts are drawn from (the replication's own stream)."""

    k: int
    acceptance: object
    rng: object  # numpy.random.Generator

    def steps(self, left: int) -> int:
        """Verify steps a request needs to emit `left` more tokens (one seeded draw per step)."""
        from simulator.model.spec import steps_to_finish

        return int(steps_to_finish([left], self.acceptance, self.rng, chunk=max(1, min(64, left)))[0])
