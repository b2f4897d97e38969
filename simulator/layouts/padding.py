"""Padding waste of a capture layout, per step and in expectation over a batch-size distribution, and the
null KV block that padded (dummy) rows write to.

Owns (which mode and size a step runs at is routing.py's `route`):
- `step_padding` / `expected_padding`: padded rows over all rows of the padded batch, and the seconds the
  padded rows cost (time at the padded size minus time at the real size, same mode), per step and as an
  expectation. The distribution-level waste is a ratio of expectations: E[padded - b] / E[padded]
  (padded rows over all rows executed); the mean of per-step fractions is reported as `waste_mean`.
- `NullBlockAllocator`: a tiny paged KV block table. Block 0 is reserved (vLLM's null block) and never
  handed to a request; the slot mapping of a padded batch sends every dummy row's KV write to block 0.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from simulator.layouts.distribution import BatchDistribution
from simulator.common.errors import UserError
from simulator.engine.routing import check_mode, route

NULL_BLOCK = 0


class PaddingError(UserError):
    pass


@dataclass(frozen=True)
class StepPadding:
    batch: int
    padded: int | None
    mode: str  # plan mode the step runs in
    waste_rows: int
    waste: float  # padded rows / all rows of the padded batch
    step_s: float  # time of the step as run (at the padded size)
    unpadded_s: float  # time of the same mode at the real batch size
    cost_s: float  # step_s - unpadded_s: what the padded rows cost
    overflow: bool = False  # above the largest captured size (runs eager)


def step_padding(batch: int, sizes: list[int], mode: str, time_fn: Callable[[int, str], float],
                 pure_decode: bool = True) -> StepPadding:
    """Padding figures of one step. `time_fn(rows, mode)` returns the step time in seconds."""
    r = route(mode, sizes, batch, pure_decode)
    t = time_fn(r.executed, r.mode)
    t0 = time_fn(batch, r.mode) if r.padding else t
    return StepPadding(batch, r.padded, r.mode, r.padding, r.padding / r.executed, t, t0, t - t0, r.overflow)


@dataclass(frozen=True)
class ExpectedPadding:
    waste: float  # E[padded rows] / E[rows executed]
    waste_mean: float  # E[per-step waste fraction]
    padded_rows: float  # E[padded rows per step]
    overflow_frac: float  # share of steps with no captured size (run without a layout graph)
    step_s: float  # E[step time as run]
    unpadded_s: float  # E[step time at the real batch, same modes]
    cost_s: float  # E[time the padded rows cost]


def expected_padding(dist: BatchDistribution, sizes: list[int], mode: str,
                     time_fn: Callable[[int, str], float] | None = None, pure_decode: bool = True) -> ExpectedPadding:
    """Expectations over `dist`; without `time_fn` the time figures are 0."""
    check_mode(mode)
    tf = time_fn or (lambda rows, m: 0.0)
    per = [(w, step_padding(b, sizes, mode, tf, pure_decode)) for b, w in zip(dist.sizes, dist.weights)]
    rows = sum(w * (s.batch + s.waste_rows) for w, s in per)
    wr = sum(w * s.waste_rows for w, s in per)
    return ExpectedPadding(
        waste=wr / rows if rows else 0.0,
        waste_mean=sum(w * s.waste for w, s in per),
        padded_rows=wr,
        overflow_frac=sum(w for w, s in per if s.overflow),
        step_s=sum(w * s.step_s for w, s in per),
        unpadded_s=sum(w * s.unpadded_s for w, s in per),
        cost_s=sum(w * s.cost_s for w, s in per),
    )


class NullBlockAllocator:
    """A paged KV block table with block 0 reserved as the null (scratch) block.

    `allocate(req, tokens)` grows request `req` to hold `tokens` tokens; `free(req)` returns its
    blocks. `slot_mapping(reqs, padded)` gives the KV slot each row of a padded decode batch writes
    its new token to: real rows write at their next position, dummy rows at slot 0 of block 0."""

    def __init__(self, num_blocks: int, block_size: int = 16):
        if num_blocks < 2:
            raise PaddingError(f"num_blocks must be >= 2 (block {NULL_BLOCK} is reserved), got {num_blocks}")
        if block_size <= 0:
            raise PaddingError(f"block_size must be positive, got {block_size}")
        self.block_size = block_size
        self.free_blocks = list(range(num_blocks - 1, NULL_BLOCK, -1))  # pop() hands out 1, 2, ...
        self.tables: dict[object, list[int]] = {}
        self.lengths: dict[object, int] = {}

    def allocate(self, req, tokens: int) -> list[int]:
        table = self.tables.setdefault(req, [])
        need = -(-tokens // self.block_size) - len(table)
        if need > len(self.free_blocks):
            raise PaddingError(f"out of KV blocks: request {req!r} needs {need} more, {len(self.free_blocks)} free")
        for _ in range(max(0, need)):
            table.append(self.free_blocks.pop())
        self.lengths[req] = max(tokens, self.lengths.get(req, 0))
        return table

    def free(self, req) -> None:
        self.free_blocks.extend(reversed(self.tables.pop(req, [])))
        self.lengths.pop(req, None)

    def slot_mapping(self, reqs: list, padded: int) -> list[int]:
        """Slots for one decode step: each real request appends one token; rows past len(reqs) are
        dummies and write to the null block."""
        if padded < len(reqs):
            raise PaddingError(f"padded size {padded} is smaller than the batch {len(reqs)}")
        out = []
        for r in reqs:
            pos = self.lengths.get(r, 0)
            table = self.allocate(r, pos + 1)
            out.append(table[pos // self.block_size] * self.block_size + pos % self.block_size)
        out += [NULL_BLOCK * self.block_size] * (padded - len(reqs))
        return out

    def owner(self, slot: int):
        """The request whose block holds `slot`, or None for the null block / a free block."""
        blk = slot // self.block_size
        for r, t in self.tables.items():
            if blk in t:
                return r
        return None
