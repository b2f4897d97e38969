"""Profile tables for FP8 and Mixture-of-Experts kernels (`device.tables.gemm_fp8`, `fp8_quant`, `grouped_gemm`,
`moe_routing`), built by calibration/build_moe_fp8.py from calibration/measured/h200-round-d/moe_fp8.json.
All optional: a profile without them times those kernels by the roofline and says so."""

from pydantic import BaseModel, ConfigDict, Field, model_validator


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)


class Fp8QuantTable(_Strict):
    """Dynamic per-tensor activation quant of an m x k bf16 input: abs-max reduction and scale + cast, µs each."""

    k: int = Field(gt=0)
    m: list[int] = Field(min_length=1)
    absmax_us: list[float] = Field(min_length=1)
    scale_cast_us: list[float] = Field(min_length=1)

    @model_validator(mode="after")
    def _same_len(self):
        if not (len(self.m) == len(self.absmax_us) == len(self.scale_cast_us)):
            raise ValueError("m, absmax_us and scale_cast_us must have equal length")
        return self


class GroupedGemmTable(_Strict):
    """One expert GEMM (k -> n per expert) as a grouped GEMM: us[i][j] with experts[i] active experts receiving
    tokens_per_expert[j] tokens each."""

    name: str
    n: int = Field(gt=0)
    k: int = Field(gt=0)
    experts: list[int] = Field(min_length=1)
    tokens_per_expert: list[int] = Field(min_length=1)
    us: list[list[float]]
    source: str = ""

    @model_validator(mode="after")
    def _shape(self):
        if len(self.us) != len(self.experts) or any(len(r) != len(self.tokens_per_expert) for r in self.us):
            raise ValueError("us must be len(experts) rows of len(tokens_per_expert) values")
        for a in (self.experts, self.tokens_per_expert):
            if any(y <= x for x, y in zip(a, a[1:])) or a[0] <= 0:
                raise ValueError("experts and tokens_per_expert must be positive and strictly increasing")
        return self


class RoutingTable(_Strict):
    """Router kernels per decode batch (µs each, torch ops as transformers runs them)."""

    batch: list[int] = Field(min_length=1)
    softmax_us: list[float]
    topk_us: list[float]
    argsort_us: list[float]
    gather_us: list[float]
    scatter_add_us: list[float]
    renorm_us: list[float]
    source: str = ""
