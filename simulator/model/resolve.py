"""The one way a model reference becomes the per-GPU `ModelSpec` a step runs: load (preset or config.json), set the
weight / KV dtypes, shard for tensor parallelism. Every study resolves its models here (errors name the scenario
fields `dtype`, `kv_dtype`, `tensor_parallel_size`; the CLI maps fields to its flags)."""

from __future__ import annotations

from simulator.model.dtype import with_dtype
from simulator.model.models import ModelSpec, load_model
from simulator.model.parallel import shard


def resolve_model(model: str | ModelSpec, dtype: str = "bf16", kv_dtype: str = "bf16", tp: int = 1,
                  assume_family: str | None = None) -> ModelSpec:
    """`model` (a preset name, a config.json path or a ModelSpec) with dtypes set and sharded to `tp` GPUs;
    `assume_family`: the family an unrecognised config.json is read as (models.load_model)."""
    m = load_model(model, assume_family) if isinstance(model, str) else model
    return shard(with_dtype(m, str(dtype), str(kv_dtype), "dtype"), int(tp), "tensor_parallel_size")
