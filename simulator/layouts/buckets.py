"""CUDA-graph capture-size layouts ("buckets") as engines build them, and padding a batch to one.

Presets follow each engine's source (see ../shared/ANCHORS.md):
- vllm:   [1, 2, 4] + range(8, 256, 8) + range(256, max+1, 16), max = min(2 * max_num_seqs, 512)
- sglang: [1, 2, 4, 8, 12] + range(16, 257, 8) + range(272, 512, 16) + range(512, max+1, 32), max 256
  (512 at tensor parallelism >= 4, `tp=`: SGLang's cuda_graph_max_bs on 80-160 GB GPUs)
- trtllm: [1, 2, 4] + multiples of 8 up to max (padding on), max 128
- seed:   [1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 192, 256]
- pow2:   1, 2, 4, ... up to max;  all: 1..max
A batch pads to the smallest captured size >= it; above the largest it runs without a graph.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

from simulator.common.errors import UserError
from simulator.common import vocab as V
from simulator.common.limits import MAX_BATCH

LAYOUT_PRESETS = V.values(V.LayoutPreset)
SEED_SIZES = (1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 192, 256)


class BucketError(UserError):
    pass


def vllm_max_size(max_num_seqs: int = 256) -> int:
    return min(2 * max_num_seqs, 512)


def preset_sizes(name: str, max_size: int | None = None, max_num_seqs: int | None = None, tp: int = 1) -> list[int]:
    """The capture sizes of a preset. `max_size` caps the list (each preset has its own default; sglang's depends
    on the tensor-parallel size `tp`)."""
    if max_size is not None and max_size <= 0:
        raise BucketError(f"max_size must be a positive integer, got {max_size}")
    if max_num_seqs is not None and max_num_seqs <= 0:
        raise BucketError(f"max_num_seqs must be a positive integer, got {max_num_seqs}")
    for what, v in (("max_size", max_size), ("max_num_seqs", max_num_seqs)):
        if v is not None and v > MAX_BATCH:
            raise BucketError(f"{what} {v:,} is above the limit of {MAX_BATCH:,} (the largest batch launchsim models)")
    if name == "vllm":
        mx = max_size if max_size is not None else vllm_max_size(max_num_seqs or 256)
        sizes = [1, 2, 4] + list(range(8, min(mx + 1, 256), 8)) + list(range(256, mx + 1, 16))
    elif name == "sglang":
        mx = max_size if max_size is not None else (512 if tp >= 4 else 256)
        sizes = [1, 2, 4, 8, 12] + list(range(16, 257, 8)) + list(range(272, 512, 16)) + list(range(512, mx + 1, 32))
    elif name == "trtllm":
        mx = max_size if max_size is not None else 128
        sizes = [1, 2, 4] + list(range(8, mx + 1, 8))
    elif name == "seed":
        mx = max_size if max_size is not None else 256
        sizes = list(SEED_SIZES)
    elif name == "pow2":
        mx = max_size if max_size is not None else 512
        sizes, s = [], 1
        while s <= mx:
            sizes.append(s)
            s *= 2
    elif name == "all":
        mx = max_size if max_size is not None else 512
        sizes = list(range(1, mx + 1))
    else:
        raise BucketError(f"unknown layout '{name}': use one of {', '.join(LAYOUT_PRESETS)} or a list of sizes")
    return sorted({s for s in sizes if s <= mx})


def parse_layout(spec: str | list[int], max_size: int | None = None, max_num_seqs: int | None = None,
                 tp: int = 1) -> list[int]:
    """A preset name, a comma-separated list ("1,2,4,8"), an engine's own text (`[1, 2, 8]`, a vLLM
    compilation_config JSON, SGLang's `--cuda-graph-bs 1 2 4`: engine_syntax.py) or a list of ints -> sorted
    unique sizes."""
    if isinstance(spec, str) and spec in LAYOUT_PRESETS:
        return preset_sizes(spec, max_size, max_num_seqs, tp)
    if isinstance(spec, str):
        from simulator.layouts.engine_syntax import EngineLayoutError, parse_engine_layout

        try:
            engine = parse_engine_layout(spec)
        except EngineLayoutError as e:
            raise BucketError(f"layout {spec[:60]!r}: {e}") from None
        if engine is not None:
            spec = engine
    if isinstance(spec, str):
        try:
            items = [int(x) for x in spec.replace(" ", "").split(",") if x]
        except ValueError:
            raise BucketError(
                f"layout '{spec}' is neither a preset ({', '.join(LAYOUT_PRESETS)}) nor a list of integers"
            ) from None
    else:
        items = list(spec)
    if not items:
        raise BucketError("a layout needs at least one size")
    bad = [s for s in items if isinstance(s, bool) or not isinstance(s, int) or s <= 0]
    if bad:
        raise BucketError(f"capture sizes must be positive integers, got {bad[0]!r}")
    big = [s for s in items if s > MAX_BATCH]
    if big:
        raise BucketError(f"capture size {big[0]:,} is above the limit of {MAX_BATCH:,}")
    return sorted(set(items))


@dataclass(frozen=True)
class Padded:
    batch: int
    padded: int | None  # None: no captured size fits, the step runs without a graph

    @property
    def waste_rows(self) -> int:
        return 0 if self.padded is None else self.padded - self.batch

    @property
    def waste(self) -> float:
        """Padded rows over all rows of the padded batch (0 when no graph runs)."""
        return 0.0 if self.padded is None else (self.padded - self.batch) / self.padded


def pad(batch: int, sizes: list[int]) -> Padded:
    """Pad `batch` up to the smallest captured size >= batch (bisect_left, as SGLang and vLLM do)."""
    if batch <= 0:
        raise BucketError(f"batch must be a positive integer, got {batch}")
    i = bisect.bisect_left(sizes, batch)
    return Padded(batch, sizes[i] if i < len(sizes) else None)
