"""Scenario kinds `startup` and `graph_memory`: what capturing a layout costs (start-up seconds: torch.compile,
warm-up runs, captures; pinned graph memory and the KV cache left). `launchsim startup` and `launchsim graph-memory`
generate their flags from these fields (simulator/cli/generated.py); the studies are studies/capture.py."""

from __future__ import annotations

from typing import ClassVar, Annotated, Literal, Optional, Union

from pydantic import AfterValidator, Field, model_validator

from simulator.common import limits as L
from simulator.common import vocab as V
from .base import Batch, Tokens
from .specs import parse_bytes
from .stepopts import ShardedStepOptions

LAYOUT_HELP = ("capture sizes: a preset name, 1,2,4,8, '[1, 2, 8]', a vLLM compilation_config JSON "
               "(cudagraph_capture_sizes) or an SGLang flag list '--cuda-graph-bs 1 2 4'")


def _bytes(v):
    return parse_bytes(int(v) if isinstance(v, str) and v.strip().isdigit() else v)


ByteSize = Annotated[Union[int, str], AfterValidator(_bytes)]  # parsed once: the model holds an int of bytes


class CaptureScenario(ShardedStepOptions):
    """A model and a capture layout."""

    spec_ok: ClassVar[bool] = True  # studies/capture.py: layout vllm|sglang|trtllm at spec_tokens + the draft's graphs
    spec_needs_acceptance: ClassVar[bool] = False

    name: str = Field("capture", description="scenario name, used in reports")
    description: str = Field("", description="free text shown in the report")
    model: str = Field(description="model preset or config.json path")
    profile: Optional[str] = Field(None, description="profile name or path (default: h200)")
    layout: str = Field("vllm", description=LAYOUT_HELP)
    max_size: Optional[Annotated[int, Field(gt=0, le=L.MAX_OPTIMIZE_SIZE)]] = Field(
        None, description="largest capture size of a preset")
    max_num_seqs: Optional[Batch] = Field(None, description="vllm preset: max = min(2 x this, 512)")
    fusion: V.literal(V.Fusion) = Field(  # type: ignore[valid-type]
        V.DEFAULT_FUSION.value, description="fusion level; default: vLLM V1's")
    graph: V.literal(V.GraphMode) = Field(  # type: ignore[valid-type]
        V.DEFAULT_GRAPH.value, description="CUDA-graph mode; default: vLLM V1's")

    @model_validator(mode="after")
    def _backend(self):
        if self.attention_backend != "flashinfer":
            raise ValueError("attention_backend does not change what a layout captures or pins (the capture "
                             "sizes, passes and pools are the same): leave it at flashinfer")
        return self


class StartupScenario(CaptureScenario):
    kind: Literal["startup"] = Field("startup", description="scenario type")
    compile: V.literal(V.CompileMode) = Field(  # type: ignore[valid-type]
        "static", description="torch.compile mode for fusion compiled: static (dynamic=False) or dynamic "
                              "(dynamic=True; its line is not validated: the output says so); the same knob as "
                              "compile_dynamic (either sets the other: the compile time and the step's kernels follow)")
    compile_cache: V.literal(V.CompileCache) = Field(  # type: ignore[valid-type]
        "cold", description="torch.compile cache: cold (first start) or warm (restart)")
    warmups: Optional[Annotated[int, Field(ge=0, le=100)]] = Field(
        None, description="eager warm-up runs before each capture (default: the profile's, 2)")
    ctx: Tokens = Field(512, description="context length of the warm-up runs (512 as measured)")

    @model_validator(mode="after")
    def _compile(self):
        if (self.compile != "static" or self.compile_cache != "cold") and self.fusion != "compiled":
            raise ValueError(f"compile and compile_cache apply to fusion compiled (torch.compile); fusion "
                             f"{self.fusion} compiles nothing")
        if self.compile_dynamic is not None:
            if "compile" in self.model_fields_set and (self.compile == "dynamic") != self.compile_dynamic:
                raise ValueError(f"compile {self.compile} and compile_dynamic {str(self.compile_dynamic).lower()} "
                                 "disagree: give one of them")
            object.__setattr__(self, "compile", "dynamic" if self.compile_dynamic else "static")  # frozen model
        elif self.compile == "dynamic":  # the step's kernels are the dynamic compile's too
            object.__setattr__(self, "compile_dynamic", True)
        return self


class GraphMemoryScenario(CaptureScenario):
    kind: Literal["graph_memory"] = Field("graph_memory", description="scenario type")
    memory_budget: Optional[ByteSize] = Field(None, description="pinned graph-memory budget: bytes or 256MiB / 1GiB "
                                                                "(over it: exit 1)")
    private: bool = Field(False, description="a private pool per graph instead of one shared pool")
    retention: V.literal(V.Retention) = Field(  # type: ignore[valid-type]
        "auto", description="graph outputs in the shared pool: keep (SGLang), drop (vLLM) or auto (keep for "
                            "layout sglang, else drop)")
    workspace: ByteSize = Field("1GiB", validate_default=True, description="workspace + eager activation memory")
    gpu_memory_utilization: float = Field(0.9, gt=0, le=1, description="fraction of GPU memory the engine may use")
