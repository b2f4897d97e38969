"""Scenario kind `predict`: one step (decode, or mixed decode + prefill), optionally inside N steps of the engine
loop, optionally padded to a capture layout. `launchsim predict`'s flags are generated from these fields
(simulator/cli/generated.py), so every flag has this YAML twin and one description; the study is
`studies/predict.run_predict`."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field, model_validator

from simulator.common import limits as L
from simulator.common import vocab as V
from .base import Batch, Seed, Tokens, seed_needs_replicates
from .specs import LayoutSizes
from .stepopts import ShardedStepOptions

FusionName = V.literal(V.Fusion)
DES_MAX_STEPS = 500  # steps under engine des: 10,000 eager steps took ~100 s and 6.8 GiB (issue 22)
GraphName = V.literal(V.GraphMode)


class PredictScenario(ShardedStepOptions):
    kind: Literal["predict"] = Field("predict", description="scenario type")
    name: str = Field("predict", description="scenario name, used in reports")
    description: str = Field("", description="free text shown in the report")
    model: str = Field(description="model preset or config.json path")
    profile: str | None = Field(None, description="profile name or path (default: h200)")
    fusion: FusionName = Field(V.DEFAULT_FUSION.value, description="fusion level (model/workload.py); default: "
                                                                   "vLLM V1's")
    graph: GraphName = Field(V.DEFAULT_GRAPH.value, description="CUDA-graph mode (engine/routing.py says what each "
                                                                "runs); default: vLLM V1's")
    batch: Batch = Field(1, description="decode batch size: sequences adding one token each")
    ctx: Tokens = Field(1024, description="context length, tokens (past tokens; the step attends its own too)")
    prefill_seqs: int = Field(0, ge=0, le=L.MAX_BATCH, description="mixed step: sequences also prefilling")
    prefill_len: int = Field(0, ge=0, le=L.MAX_CTX, description="mixed step: tokens each prefilling sequence adds")
    layout: LayoutSizes | None = Field(None, description="captured sizes (a preset name or a list, e.g. 1,2,4,8): the "
                                                         "step pads to one, or runs eager above the largest "
                                                         "(default: every size captured, no padding)")
    engine: V.literal(V.Engine) = Field("fast", description="step engine (des: the SimPy reference)")
    replicates: int = Field(0, ge=0, le=L.MAX_REPLICATES, description="host-noise replicates for a p10/p50/p90 "
                                                                      "band (0: off)")
    seed: Seed = Field(0, description="seed of the host-noise generator")
    steps: int = Field(0, ge=0, le=10_000, description="simulate N consecutive steps of the engine loop (host work "
                                                       "around each forward: schedule, input copies, sampling, "
                                                       ".tolist(), detokenise); 0 = one forward alone")
    scheduling: Literal[V.values(V.LOOP_SCHEDULING)] = Field(  # type: ignore[valid-type]
        "sync", description="with steps: the engine loop's scheduling")
    sampling: V.literal(V.Sampling) = Field("greedy", description="with steps: the sampling each step runs")
    report: str | None = Field(None, description="with steps: write an HTML page (.html) with the loop's two-lane "
                                                 "CPU/GPU timeline across its steps")

    spec_ok: ClassVar[bool] = True  # studies/predict.run_predict prices the verify step and the draft loop

    @model_validator(mode="after")
    def _consistent(self):
        if self.steps > DES_MAX_STEPS and self.engine == "des":
            raise ValueError(f"steps {self.steps} with engine des: the SimPy reference engine keeps every event of "
                             f"the loop in memory (about 0.7 MB per step of an eager 0.6B model); at most "
                             f"{DES_MAX_STEPS} steps with it. engine fast gives the same figures for any count")
        if self.spec_tokens and (self.steps or self.prefill_seqs):
            raise ValueError("spec_tokens prices one verify step and its draft loop: it needs steps 0 and no "
                             "prefill rows (the engine loop and mixed verify steps are not modelled)")
        seed_needs_replicates(self)
        if (self.prefill_seqs > 0) != (self.prefill_len > 0):
            raise ValueError("prefill_seqs and prefill_len must both be positive (a mixed step) or both 0")
        if not self.steps and not self.prefill_seqs:
            # a decode-only forward: the prefill sizes route mixed forwards only (routing.route; speculative verify
            # and draft passes route as decode), the backend too (routing.plan_mode) except where it picks vLLM's
            # verify graph mode (engine/spec.py verify_graph_mode)
            if self.prefill_layout is not None:
                raise ValueError("prefill_layout routes mixed (prefill + decode) forwards only; this forward decodes "
                                 "only (speculative verify and draft passes too): give prefill_seqs and prefill_len, "
                                 "or leave it out")
            if self.attention_backend != "flashinfer" and not self.spec_tokens:
                raise ValueError("attention_backend routes mixed (prefill + decode) forwards only; this forward "
                                 "decodes only: give prefill_seqs and prefill_len, or leave it out")
        if not self.steps:
            if self.report is not None:
                raise ValueError("report draws the engine loop: it needs steps > 0")
            for f, default in (("scheduling", "sync"), ("sampling", "greedy")):
                if getattr(self, f) != default:
                    raise ValueError(f"{f} applies to the engine loop: it needs steps > 0 (one forward alone "
                                     f"has no {f})")
        else:
            if self.layout is not None:
                raise ValueError("layout and steps together are not supported yet: the engine loop runs unpadded")
            if self.attention_backend != "flashinfer" or self.prefill_layout is not None:
                raise ValueError("attention_backend and prefill_layout need a single forward (steps 0)")
        if self.report is not None and not self.report.lower().endswith((".html", ".htm")):
            raise ValueError(f"report {self.report}: the report is an HTML file (name it .html)")
        return self
