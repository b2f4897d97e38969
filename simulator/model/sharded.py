"""`ShardedModel`: one GPU's view of a model under tensor parallelism (simulator/model/parallel.py makes it, in
`shard`, and describes it). Apart from parallel.py so that a one-GPU step does not build the dataclass (~45 fields:
its generated methods cost ~2 ms of every process start-up here)."""

from __future__ import annotations

from dataclasses import dataclass

from simulator.model.models import ModelSpec


@dataclass(frozen=True)
class ShardedModel(ModelSpec):
    """One GPU's view of a model under tensor parallelism (see simulator/model/parallel.py)."""

    tp: int = 1
    full_vocab_size: int = 0  # the unsharded vocabulary (the logits all-gather's output width)
    base_name: str = ""
