"""Field types more than one scenario kind shares: a batch-size distribution (`buckets`, `sweep`) and a capture
layout (`serve`, `capacity` as sizes alone; `sweep` as a named layout with a preset's caps). Defined once here so
that a distribution or a layout is written, validated and built the same way in every kind."""

from __future__ import annotations

import re
from typing import Annotated, Union

from pydantic import AfterValidator, Field, model_validator

from simulator.common import limits as L
from simulator.common import vocab as V
from simulator.common.errors import UserError

from .base import Batch, Strict

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


class DistributionSpec(Strict):
    """A batch-size distribution: exactly one of an inline histogram, inline samples or a CSV file."""

    histogram: dict[Batch, Annotated[float, Field(ge=0)]] | None = Field(
        None, description="{batch: count} of observed steps")
    samples: list[Batch] | None = Field(None, min_length=1, description="observed batch sizes, one per step")
    csv: str | None = Field(None, description="CSV path (relative to the scenario file, else to the working directory) "
                                              "with a header and a `batch` column or `batch,count` columns, such as "
                                              "the batch_log.csv a `serve` run writes")

    @model_validator(mode="after")
    def _one_source(self):
        sources = [k for k in SOURCES if k in type(self).model_fields]
        if len([k for k in sources if getattr(self, k) is not None]) != 1:
            raise ValueError(f"give exactly one of {', '.join(sources[:-1])} or {sources[-1]}")
        uni = getattr(self, "uniform", None)
        if uni is not None and uni[0] > uni[1]:
            raise ValueError("uniform: lo must be <= hi")
        return self

    @property
    def source(self) -> str:
        """The field that gives the distribution (for error locations)."""
        return next(k for k in SOURCES if getattr(self, k, None) is not None)

    def build(self, label: str | None = None):
        """The `BatchDistribution` (simulator/layouts/distribution.py); `label` names it (default: its source's)."""
        from simulator.layouts.distribution import BatchDistribution, from_csv, from_histogram, from_samples, uniform

        if self.histogram is not None:
            d = from_histogram(dict(self.histogram), label or "histogram")
        elif self.samples is not None:
            d = from_samples(self.samples, label or "samples")
        elif self.csv is not None:
            d = from_csv(self.csv)
        else:
            d = uniform(*getattr(self, "uniform"))
        return d if label is None else BatchDistribution(d.sizes, d.weights, label)


class _Named(Strict):
    name: str = Field(description="label of the batch-size distribution")


class NamedDistribution(DistributionSpec, _Named):
    """A sweep's distribution: a DistributionSpec with a label for results and charts, or a uniform range."""

    uniform: tuple[Batch, Batch] | None = Field(None, description="[lo, hi]: every batch lo..hi equally likely")


class LayoutSpec(Strict):
    """A sweep's capture layout: named sizes, with a preset's caps."""

    name: str = Field(description="label of the layout in results and charts")
    sizes: LayoutSizes = Field(
        description="a preset (vllm, sglang, trtllm, seed, pow2, all), 'a,b,c' or a list of capture sizes")
    max_size: Batch | None = Field(None, description="cap on a preset's largest size (preset default if unset)")
    max_num_seqs: Batch | None = Field(None, description="vllm preset: max = min(2 x max_num_seqs, 512)")


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
