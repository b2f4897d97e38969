"""Scenario kinds `import_trace` (a torch.profiler trace -> a workload file) and `export_trace` (one simulated step ->
a Chrome trace for Perfetto). `launchsim import-trace` and `launchsim export-trace` generate their flags from these
fields (simulator/cli/generated.py), so every flag has its YAML twin; the studies are studies/trace.py."""

from __future__ import annotations

from typing import Annotated, Literal, Optional, Union

from pydantic import BeforeValidator, Field, PositiveInt, field_validator

from simulator.common import vocab as V
from .base import Batch, Strict, Tokens
from .step import FusionName, GraphName


def _steps(v):
    from simulator.traces.steps import parse_steps  # its TraceError is a ValueError: the field's own error

    return parse_steps(v)


StepsSpec = Annotated[Union[Literal["auto"], PositiveInt], BeforeValidator(_steps)]


class ImportTraceScenario(Strict):
    kind: Literal["import_trace"] = Field("import_trace", description="scenario type")
    name: str = Field("import_trace", description="scenario name, used in reports")
    description: str = Field("", description="free text shown in the report")
    trace: str = Field(description="Chrome trace from torch.profiler's export_chrome_trace (.json or .json.gz)")
    out: str = Field(description="workload file to write (JSON)")
    steps: StepsSpec = Field("auto", description="auto (markers, annotations, repetition) or N equal steps")
    batch: Optional[Batch] = Field(None, description="batch size the trace was recorded at (default: read from "
                                                     "recorded shapes)")
    host_time: V.literal(V.HostTime) = Field(  # type: ignore[valid-type]
        V.HostTime.CALIBRATED.value, description="host-time policy: calibrated (profile's launch paths + host-only "
        "ops + traced interpreter gaps), trace (traced host durations, inflated by the profiler) or deflate (traced "
        "/ the profile's host.profiler_overhead.factor: refused unless the profile has one; no shipped profile does)")
    profile: Optional[str] = Field(None, description="profile name or path (default h200)")
    top_ops: int = Field(10, ge=0, description="how many aten ops the launch histogram lists (0: all)")
    model: Optional[str] = Field(None, description="model preset or config.json the trace ran: its shapes size "
                                                   "kernels the trace recorded none for, so a workload prediction "
                                                   "at another batch or context can re-price them")
    ctx: Optional[Tokens] = Field(None, description="context (attended KV length) the trace was recorded at "
                                                    "(default: read from recorded attention shapes)")


class ExportTraceScenario(Strict):
    kind: Literal["export_trace"] = Field("export_trace", description="scenario type")
    name: str = Field("export_trace", description="scenario name, used in reports")
    description: str = Field("", description="free text shown in the report")
    out: str = Field(description="Chrome trace to write (JSON, opens in Perfetto)")
    model: Optional[str] = Field(None, description="model preset or config.json path")
    workload: Optional[str] = Field(None, validate_default=True,
                                    description="imported workload file instead of a model")
    batch: Optional[Batch] = Field(None, description="decode batch size (default 1, or the workload's)")
    ctx: Optional[Tokens] = Field(None, description="context length (default 1024, or the workload's)")
    fusion: FusionName = Field("none", description="fusion level (workload: none or compiled)")
    graph: GraphName = Field("none", description="CUDA-graph mode")
    profile: Optional[str] = Field(None, description="profile name or path (default h200)")

    @field_validator("fusion")
    @classmethod
    def _workload_fusion(cls, v, info):
        if info.data.get("workload") is not None:
            from simulator.traces.whatif import check_workload_fusion  # its WhatIfError is a ValueError

            check_workload_fusion(v)
        return v

    @field_validator("workload")
    @classmethod
    def _one_source(cls, v, info):
        if (info.data.get("model") is None) == (v is None):
            raise ValueError("give exactly one of model or workload")
        return v
