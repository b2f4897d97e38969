"""Architecture families: what a Hugging Face `config.json` names (`model_type` / `architectures`) and what each
family's decode step does differently, as ModelSpec fields.

Supported: llama, mistral, qwen2, qwen3, phi3, gemma2, gemma3 (text), qwen3_moe, mixtral. Anything else is refused
with one line naming these, unless the caller passes `assume_family` (then the config is read as that family and
the ModelSpec records `family_assumed=True`).

The differences each family makes (from transformers 5.17's modeling code; the ones a measured trace has checked
are marked in simulator/model/recipes.py):
- qwen2: q/k/v projections carry a bias (`Qwen2Attention`: bias=True on q/k/v, none on o); sliding window only
  when `use_sliding_window` (layers from `max_window_layers` on).
- qwen3 / qwen3_moe: RMSNorm over each head of q and k (qk-norm); `attention_bias` as the config says.
- llama / mistral / mixtral: `attention_bias` on q/k/v/o and `mlp_bias` as the config says; mistral / mixtral
  apply `sliding_window` (null in Mistral v0.3, 4096 in v0.1) to every layer; mixtral always renormalises top-k.
- phi3: transformers' own code keeps `qkv_proj` and `gate_up_proj` packed (one GEMM each, views to split), its
  rotary embedding concatenates the rotated part with the pass-through part (one more cat per q and k), and
  `sliding_window` applies to every layer.
- gemma2: Gemma RMSNorm (x * (1 + w) in fp32: 10 kernels), four norms per layer (pre and post each sublayer),
  GELU-tanh MLP, embeddings scaled by sqrt(hidden_size), final logit soft-capping (3 elementwise kernels over the
  logits), attention soft-capping (no kernel under SDPA: transformers passes `softcap` to SDPA's interface, which
  does not apply it; listed in ignored fields), sliding window on every other layer (even layers).
- gemma3 (text): as gemma2 plus qk-norm (Gemma norm), no soft-capping by default, a local and a global rotary
  embedding (two rotary preambles), sliding window on five of every six layers (`layer_types` or
  `sliding_window_pattern`), embedding scale one mul (round g's gemma-3-1b trace: no cast kernel); transformers
  projects q, k, v before the q/k norms; with one kv head repeat_kv is a view (no copy).

`consumed_fields` lists the config fields that change a step or the model's size; every other field present in a
config is returned by `ignored_config_fields` (for predict's JSON `ignored_config_fields`).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Family:
    name: str
    model_types: tuple[str, ...]
    architectures: tuple[str, ...]
    qkv_bias: bool | None = None  # None: from attention_bias
    qk_norm: bool = False
    packed_qkv: bool = False  # transformers' own code (hf recipe)
    packed_gate_up: bool = False
    norm_kind: str = "rms"  # "rms" (w * x) or "gemma" (x * (1 + w) in fp32)
    sandwich_norms: bool = False  # pre + post norm around each sublayer (4 a layer)
    default_act: str = "silu"
    embed_scale_kernels: int = 0  # kernels of the sqrt(hidden) embedding scale
    rope_sets: int = 1  # rotary embeddings computed per step (gemma3: local + global)
    rope_pass_cat: bool = False  # phi3: cat(rotated, pass-through)
    sliding: str = "none"  # "none" | "all" | "qwen2" (use_sliding_window) | "alternate" | "layer_types"
    default_window: int | None = None  # the config class's sliding_window default (transformers 5.17)
    moe: bool = False
    norm_topk_prob: bool | None = None  # None: from the config


FAMILIES: dict[str, Family] = {f.name: f for f in (
    Family("llama", ("llama",), ("LlamaForCausalLM",)),
    Family("mistral", ("mistral",), ("MistralForCausalLM",), sliding="all"),
    Family("qwen2", ("qwen2",), ("Qwen2ForCausalLM",), qkv_bias=True, sliding="qwen2", default_window=4096),
    Family("qwen3", ("qwen3",), ("Qwen3ForCausalLM",), qk_norm=True, sliding="qwen2", default_window=4096),
    Family("phi3", ("phi3",), ("Phi3ForCausalLM",), packed_qkv=True, packed_gate_up=True, rope_pass_cat=True,
           sliding="all"),
    Family("gemma2", ("gemma2",), ("Gemma2ForCausalLM",), norm_kind="gemma", sandwich_norms=True,
           default_act="gelu_pytorch_tanh", embed_scale_kernels=1, sliding="alternate", default_window=4096),
    Family("gemma3", ("gemma3_text",), ("Gemma3ForCausalLM",), qk_norm=True, norm_kind="gemma",
           sandwich_norms=True, default_act="gelu_pytorch_tanh", embed_scale_kernels=1, rope_sets=2,
           sliding="layer_types", default_window=4096),
    Family("qwen3_moe", ("qwen3_moe",), ("Qwen3MoeForCausalLM",), qk_norm=True, sliding="qwen2", moe=True,
           default_window=4096),
    Family("mixtral", ("mixtral",), ("MixtralForCausalLM",), sliding="all", moe=True, norm_topk_prob=True),
)}
SUPPORTED = tuple(FAMILIES)
ACTIVATIONS = ("silu", "gelu_pytorch_tanh", "gelu", "gelu_new")

# Fields that change a step (or the model's size / limits) and are read.
_CONSUMED = {
    "hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "head_dim",
    "intermediate_size", "vocab_size", "max_position_embeddings", "tie_word_embeddings", "model_type",
    "architectures", "attention_bias", "mlp_bias", "hidden_act", "hidden_activation", "final_logit_softcapping",
    "sliding_window", "use_sliding_window", "max_window_layers", "layer_types", "sliding_window_pattern",
    "partial_rotary_factor", "num_experts", "num_local_experts", "num_experts_per_tok", "moe_intermediate_size",
    "shared_expert_intermediate_size", "norm_topk_prob", "decoder_sparse_step", "mlp_only_layers",
}


class FamilyUnknown(Exception):
    """Raised by `recognise` with the one-line reason (models.load_model turns it into a ModelError)."""


def recognise(cfg: dict, assume_family: str | None = None) -> tuple[Family, bool]:
    """(family, assumed) of a config: by `model_type`, else by `architectures`; unknown -> FamilyUnknown unless
    `assume_family` names a supported family."""
    if assume_family is not None and assume_family not in FAMILIES:
        raise FamilyUnknown(f"assume_family '{assume_family}' is not a supported family: use one of "
                            f"{', '.join(SUPPORTED)}")
    mtype = cfg.get("model_type")
    arch = cfg.get("architectures") or []
    for f in FAMILIES.values():
        if isinstance(mtype, str) and mtype in f.model_types:
            return f, False
    for f in FAMILIES.values():
        if any(a in f.architectures for a in arch):
            return f, False
    if assume_family is not None:
        return FAMILIES[assume_family], True
    named = f"model_type {mtype!r}" if mtype else "no model_type"
    if arch:
        named += f", architectures {arch!r}"
    raise FamilyUnknown(f"unknown architecture family ({named}): supported families are {', '.join(SUPPORTED)}; "
                        "set assume_family: llama to model it as a Llama decoder")


def sliding_pattern(f: Family, cfg: dict, layers: int) -> tuple[bool, ...]:
    """Per-layer "this layer uses the sliding window" (empty: no layer does). transformers 5: layer_types when
    the config has it; otherwise gemma2 alternates (even layers slide), gemma3 slides except every
    `sliding_window_pattern`-th layer (default 6), qwen2/qwen3 slide from `max_window_layers` on when
    `use_sliding_window`, mistral/mixtral/phi3 slide everywhere when `sliding_window` is set."""
    lt = cfg.get("layer_types")
    if isinstance(lt, list) and lt:
        return tuple(x == "sliding_attention" for x in lt)
    if f.sliding == "alternate":
        return tuple(i % 2 == 0 for i in range(layers))
    if f.sliding == "layer_types":
        p = cfg.get("sliding_window_pattern") or 6
        return tuple((i + 1) % p != 0 for i in range(layers))
    if f.sliding == "qwen2":
        if cfg.get("use_sliding_window") is not True:
            return ()
        start = cfg.get("max_window_layers")
        start = 28 if start is None else start  # Qwen2Config's default
        return tuple(i >= start for i in range(layers))
    if f.sliding == "all":
        return (True,) * layers
    return ()


def window_used(f: Family, cfg: dict, layers: int) -> bool:
    return any(sliding_pattern(f, cfg, layers)) and bool(cfg.get("sliding_window"))


def ignored_config_fields(cfg: dict, family: Family | None = None) -> list[str]:
    """Fields present in `cfg` that do not change a decode step in launchsim: the ones read but without effect
    (rms_norm_eps, rope_theta, rope_scaling's frequencies, attention dropout, token ids, attention soft-capping
    under SDPA, a sliding window no layer uses, a float32 checkpoint dtype: launchsim runs bf16) and every field
    it does not read. Sorted."""
    out = []
    for k in cfg:
        if k in _CONSUMED:
            continue
        out.append(k)
    if family is not None and "sliding_window" in cfg and cfg.get("sliding_window") is not None \
            and not any(sliding_pattern(family, cfg, int(cfg.get("num_hidden_layers") or 1))):
        out.append("sliding_window")
    for k in ("use_sliding_window", "max_window_layers"):
        if k in cfg and family is not None and not window_used(family, cfg, int(cfg.get("num_hidden_layers") or 1)):
            out.append(k)
    return sorted(set(out))


__all__ = [
    "ACTIVATIONS",
    "FAMILIES",
    "SUPPORTED",
    "Family",
    "FamilyUnknown",
    "ignored_config_fields",
    "recognise",
    "sliding_pattern",
]
