"""The KV cache of one replica: how many paged blocks fit, and block bookkeeping for decoding requests.

Capacity: `gpu_util * GPU memory - weights - graph memory (pools + static buffers of the capture layout,
from simulator.graph_memory) - workspace`, divided into blocks of `block_size` tokens (16, as vLLM).
A request holding `t` tokens holds `ceil(t / block_size)` blocks; a block is taken when a token starts
one and all of a request's blocks are freed when it finishes or is preempted.

Decoding requests are tracked as a cohort against a global decode-step counter G: a request that joined
holding `kv0` tokens when the counter read G0 holds `base + G` tokens after step G, with `base = kv0 - G0`.
It needs a new block at step G exactly when `(base + G) % block_size == 1`, so counting members per
residue `base % block_size` gives each step's block demand in O(1) and a run of k steps in O(block_size),
without touching the requests one by one.

Speculative decoding (`rate` = k + 1): each verify step reserves k + 1 slots per sequence (vLLM allocates slots for
the 1 + k verified tokens each step; simulator/model/spec.py `kv_slots_per_step`), so a member holds
`base + rate * G` slots. A member of residue x = (base + rate * G) % block_size takes
`ceil(x'/bs) - ceil((x' - rate)/bs)` blocks at step G (x' = x plus any multiple of bs), and the demand is periodic
in G with period bs / gcd(rate, bs): the same closed forms over that period. This is an upper bound on what vLLM
holds: it reuses a rejected draft's slots the next step, here they stay held until the request finishes.
"""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass

from simulator.common.errors import UserError
from simulator.engine.graph_memory import DEFAULT_WORKSPACE_BYTES, GraphMemoryModel, kv_cache_bytes
from simulator.model.models import ModelSpec
from simulator.model.profile import Profile

BLOCK_SIZE = 16
GiB = float(1 << 30)


class KVError(UserError):
    """A configuration whose weights and graphs leave no room for a KV cache."""


@dataclass(frozen=True)
class KVCapacity:
    blocks: int
    block_size: int
    kv_bytes: float
    graph_bytes: float
    capture_s: float
    graphs: int

    @property
    def tokens(self) -> int:
        return self.blocks * self.block_size

    def as_dict(self) -> dict:
        return {"kv_blocks": self.blocks, "kv_tokens": self.tokens, "kv_gib": self.kv_bytes / GiB,
                "graph_gib": self.graph_bytes / GiB, "capture_s": self.capture_s, "graphs": self.graphs}


def kv_capacity(model: ModelSpec, profile: Profile, fusion: str, graph: str, sizes: list[int],
                gpu_util: float = 0.9, workspace_bytes: float = DEFAULT_WORKSPACE_BYTES,
                block_size: int = BLOCK_SIZE, blocks_override: int | None = None, *,
                prefill_sizes: list[int] | None = None, draft=None) -> KVCapacity:
    """KV blocks left after weights, the capture layout's graph memory (prefill graphs included) and workspace.
    `draft` (speculative decoding, model/spec.py Draft): its weights come off the pool and each block also holds
    the draft's own KV for its tokens (the draft's graph pools are not counted: studies/capture.py prices them)."""
    lm = GraphMemoryModel(model, profile, fusion, graph).layout(sizes or [1], prefill_sizes=prefill_sizes)
    extra = 0.0 if draft is None else float(draft.weight_bytes)
    kvb = kv_cache_bytes(model, profile, lm, workspace_bytes=workspace_bytes + extra, gpu_util=gpu_util)
    per_block = (model.kv_bytes_per_token() + (0 if draft is None else draft.kv_bytes_per_token())) * block_size
    blocks = int(kvb // per_block) if kvb > 0 else 0
    if blocks_override is not None:
        blocks = blocks_override
    if blocks <= 0:
        raise KVError(
            f"{model.name} on {profile.name}: no memory left for the KV cache ({kvb / GiB:.2f} GiB after "
            f"weights {model.weight_bytes / GiB:.2f} GiB, graphs {lm.total_bytes / GiB:.2f} GiB and workspace "
            f"{workspace_bytes / GiB:.2f} GiB at gpu_util {gpu_util})")
    return KVCapacity(blocks, block_size, float(kvb), float(lm.total_bytes), float(lm.capture_s), lm.graphs)


def blocks_for(tokens: int, block_size: int = BLOCK_SIZE) -> int:
    return -(-tokens // block_size)


class Cohort:
    """Block demand of the decoding requests, by residue class of `base` modulo the block size."""

    def __init__(self, block_size: int = BLOCK_SIZE, rate: int = 1):
        self.bs = block_size
        self.count = [0] * block_size
        self.n = 0
        self.base_sum = 0  # sum of base over members: their total slots after step G is base_sum + n * rate * G
        self.rate = int(rate)
        if self.rate < 1:
            raise ValueError(f"cohort rate must be a positive integer, got {rate!r}")
        bs, r = block_size, self.rate
        # cross[x]: blocks a member takes at a step that leaves it holding x (mod bs) slots, after growing by r
        self.cross = [-(-(x + bs * (r // bs + 1)) // bs) - -(-(x + bs * (r // bs + 1) - r) // bs) for x in range(bs)]
        self.period = bs // math.gcd(r, bs)

    def add(self, base: int) -> None:
        self.count[base % self.bs] += 1
        self.n += 1
        self.base_sum += base

    def remove(self, base: int) -> None:
        self.count[base % self.bs] -= 1
        self.n -= 1
        self.base_sum -= base

    def need(self, g: int) -> int:
        """New blocks the members take at decode step number g."""
        if self.rate == 1:
            return self.count[(1 - g) % self.bs]
        bs, rg, cross = self.bs, self.rate * g, self.cross
        return sum(c * cross[(rho + rg) % bs] for rho, c in enumerate(self.count) if c)

    def _period_needs(self, g_first: int) -> list[int]:
        """a[i] = blocks taken at step g_first + i, over one period of the demand."""
        if self.rate == 1:
            return self._rotated(g_first)
        return [self.need(g_first + i) for i in range(self.period)]

    def _rotated(self, g_first: int) -> list[int]:
        """a[i] = members needing a block at step g_first + i (period block_size)."""
        o, c = (1 - g_first) % self.bs, self.count
        return c[o::-1] + c[:o:-1]

    def needs_over(self, g_first: int, k: int) -> tuple[int, int]:
        """Blocks taken over steps g_first .. g_first+k-1: (total, sum of need_i * (steps left incl. i)).
        The second figure integrates held blocks over the run (KV utilisation). Closed form over the
        periodic demand: q full cycles of block_size steps plus a partial one of `rem` steps."""
        if self.rate == 1:  # a[i] = count[(o - i) % bs]: one period is block_size steps, each member one block
            bs, n, c, o = self.bs, self.n, self.count, (1 - g_first) % self.bs
            q, rem = divmod(k, bs)
            if not q:  # a run shorter than a period (the usual one): its first `rem` entries of the rotation
                head = c[o:o - rem:-1] if rem <= o else c[o::-1] + c[:o - rem:-1]
                w_rem = sum(head)
                return w_rem, k * w_rem - sum(map(operator.mul, head, range(rem)))
            a = c[o::-1] + c[:o:-1]
        else:
            a = self._period_needs(g_first)
            bs, n = len(a), sum(a)  # the period and the blocks one period takes
            q, rem = divmod(k, bs)
        head = a[:rem]
        w_rem = sum(head)
        i_rem = sum(map(operator.mul, head, range(rem)))
        total = q * n + w_rem
        if q:
            a1 = sum(map(operator.mul, a, range(bs)))
            weighted = q * k * n - q * a1 - bs * (q * (q - 1) // 2) * n + (k - q * bs) * w_rem - i_rem
        else:
            weighted = k * w_rem - i_rem
        return total, weighted

    def steps_affordable(self, g_first: int, free: int) -> int:
        """Largest k such that steps g_first .. g_first+k-1 take at most `free` blocks."""
        if self.n == 0:
            return 1 << 62
        if self.rate == 1:
            bs, per = self.bs, self.n  # each block_size steps every member takes exactly one block
        else:
            bs = self.period
            per = sum(self._period_needs(g_first))  # blocks of one period, the same from any start
        cycles = free // per
        left = free - cycles * per
        k = cycles * bs
        g = g_first + k
        for _ in range(bs):
            c = self.need(g)
            if c > left:
                break
            left -= c
            k += 1
            g += 1
        return k
