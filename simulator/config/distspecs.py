"""The batch-size distribution (`buckets`, `sweep`) and a sweep's named capture layout as scenario models: shared by
the kinds that have them, apart from config/specs.py so that a kind without them (`predict`, `serve`) does not
build them."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, model_validator

from .base import Batch, Strict
from .specs import SOURCES, LayoutSizes


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
