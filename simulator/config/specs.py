"""Field types more than one scenario kind shares: a capture layout (`serve`, `capacity`, `predict` as sizes alone),
the prefill layout and byte counts; the models of a batch-size distribution (`buckets`, `sweep`) and of a sweep's
named layout are in config/distspecs.py (a kind without them, such as `predict`, does not build them). Defined once
so that a distribution or a layout is written, validated and built the same way in every kind."""

from __future__ import annotations

import re
from typing import Annotated, Union

from pydantic import AfterValidator

from simulator.common import limits as L
from simulator.common import vocab as V
from simulator.common.errors import UserError

from .base import Batch

SOURCES = ("histogram", "samples", "csv", "uniform")

# capture sizes: a preset name (vllm, sglang, trtllm, seed, pow2, all; simulator/layouts/buckets.py), "a,b,c" or
# a list of sizes
LayoutSizes = Union[str, list[Batch]]


def _prefill_layout(v):
    from simulator.layouts.prefill import parse_prefill_layout

    parse_prefill_layout(v)  # a BucketError (UserError) names the problem; pydantic reports it on the field
    return v


# prefill (token-count) capture sizes for mixed steps run piecewise: `sglang_pcg`, `sglang_pcg:M`, `none`, a list
# or engine text (simulator/layouts/prefill.py); None: no prefill graphs
PrefillLayout = Annotated[Union[str, list[Batch], None], AfterValidator(_prefill_layout)]
PREFILL_LAYOUT_HELP = ("prefill (token-count) capture sizes for mixed steps that run piecewise (SGLang's piecewise "
                       "CUDA graphs): 'sglang_pcg' (SGLang's default list, max 8192 tokens), 'sglang_pcg:M' (max M), "
                       "a list of token counts, or none (default: mixed steps pad to the decode sizes)")
ATTENTION_BACKEND_HELP = ("attention backend: fa3 captures mixed prefill+decode steps in graph mode full (vLLM "
                          "AttentionCGSupport.ALWAYS); flashinfer, fa2, triton capture decode-only steps "
                          "(simulator/engine/routing.py)")


_UNITS = {"": 1, "b": 1, "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "kb": 10**3, "mb": 10**6, "gb": 10**9}


def parse_bytes(v) -> int:
    """An int of bytes or a string such as '256MiB', '1 GiB', '2e9'."""
    if isinstance(v, bool):
        raise ValueError("a byte count must be a number or a string like '256MiB'")
    if isinstance(v, (int, float)):
        return _checked_bytes(v, v)
    m = re.fullmatch(r"\s*([0-9.eE+]+)\s*([A-Za-z]*)\s*", str(v))
    if not m or m.group(2).lower() not in _UNITS:
        raise ValueError(f"cannot read {v!r} as bytes (use e.g. 268435456, '256MiB', '1GiB')")
    try:
        n = float(m.group(1)) * _UNITS[m.group(2).lower()]
    except ValueError:
        raise ValueError(f"cannot read {v!r} as bytes") from None
    return _checked_bytes(n, v)


def _checked_bytes(n, v) -> int:
    if n != n or n in (float("inf"), float("-inf")):
        raise ValueError(f"a byte count must be a finite number, got {v!r}")
    if n <= 0:
        raise ValueError(f"a byte count must be positive, got {v!r}")
    if n > L.MAX_BYTES:
        raise ValueError(f"{v!r} is more than {L.MAX_BYTES:,} bytes (1 EiB)")
    return int(n)


class MemoryBudgetError(UserError):
    """A memory budget that is neither bytes nor a preset name."""


def parse_memory_budget(v) -> float | str | None:
    """Bytes as an int, '512MiB' / '1GiB', or a preset name (that preset's memory)."""
    if v is None:
        return None
    if isinstance(v, str) and v.strip() in V.values(V.COMPARED_PRESETS) + (V.LayoutPreset.POW2.value,):
        return v.strip()
    try:
        return float(parse_bytes(int(v) if isinstance(v, str) and v.strip().isdigit() else v))
    except ValueError as e:
        raise MemoryBudgetError(f"memory budget: {e} (or a preset name: vllm, sglang, trtllm, seed)") from None
