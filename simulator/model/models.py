"""Decoder-only transformer descriptions: built-in presets and Hugging Face `config.json` files."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from simulator.common import limits as L
from simulator.common.errors import UserError
from simulator.common.jsonfile import field_error, read_json


class ModelError(UserError):
    """An unknown preset or an unreadable / incomplete config.json."""


@dataclass(frozen=True)
class ModelSpec:
    name: str
    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    intermediate_size: int
    vocab_size: int
    tie_word_embeddings: bool = False
    qk_norm: bool = False
    max_position_embeddings: int = 131072
    dtype_bytes: int = 2  # bf16 activations (and weights / KV unless weight_dtype / kv_dtype say fp8)
    # Mixture-of-Experts (simulator/model/moe.py); num_experts = 0 is a dense model
    num_experts: int = 0
    num_experts_per_tok: int = 0
    moe_intermediate_size: int = 0
    shared_expert_intermediate_size: int = 0  # all shared experts together (0: none)
    norm_topk_prob: bool = False
    # storage dtypes (simulator/model/dtype.py): "bf16" or "fp8" (e4m3, per-tensor scales)
    weight_dtype: str = "bf16"
    kv_dtype: str = "bf16"
    # architecture family (simulator/model/families.py); the defaults are a Llama
    family: str = "llama"
    family_assumed: bool = False  # an unknown family read as `family` because the caller said so
    qkv_bias: bool = False  # q/k/v projections add a bias (qwen2; attention_bias)
    o_bias: bool = False  # o_proj adds a bias (llama-style attention_bias)
    mlp_bias: bool = False
    packed_qkv: bool = False  # transformers' own code keeps qkv_proj / gate_up_proj packed (phi3)
    packed_gate_up: bool = False
    norm_kind: str = "rms"  # "rms": w * x; "gemma": x * (1 + w) in fp32
    sandwich_norms: bool = False  # gemma2/3: pre and post norm around each sublayer (4 a layer)
    activation: str = "silu"
    final_logit_softcap: float = 0.0  # gemma2: tanh soft-capping of the logits (0: none)
    attn_logit_softcap: float = 0.0  # gemma2: read; SDPA does not apply it (no kernel)
    sliding_window: int = 0  # 0: none
    layer_sliding: tuple[bool, ...] = ()  # per layer: uses the sliding window (empty: none does)
    embed_scale_kernels: int = 0  # gemma: embeddings * sqrt(hidden)
    rope_sets: int = 1  # rotary embeddings per step (gemma3: local + global)
    rope_pass_cat: bool = False  # phi3: cat(rotated, pass-through) per q and k
    rotary_dim: int = 0  # 0: head_dim (partial_rotary_factor < 1 rotates fewer)
    ignored_fields: tuple[str, ...] = ()  # config fields present that change nothing (families.ignored_config_fields)
    config_model_type: str = ""  # what the config.json named (model_type, else its first architecture)

    def sliding_at(self, layer: int) -> bool:
        """Layer `layer` attends through the sliding window (the pattern repeats past its end: a model cut to
        fewer layers keeps its first layers' pattern)."""
        if not self.sliding_window or not self.layer_sliding:
            return False
        return self.layer_sliding[layer % len(self.layer_sliding)]

    @property
    def rope_dim(self) -> int:
        return self.rotary_dim or self.head_dim

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0

    @property
    def q_dim(self) -> int:
        return self.num_attention_heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        return self.num_key_value_heads * self.head_dim

    @property
    def linear_params(self) -> int:
        """Parameters of the projection GEMMs (attention, MLP or every expert): the ones `--dtype fp8` stores in
        one byte. The MoE router, embeddings, lm_head and norms are not among them."""
        h, L = self.hidden_size, self.num_hidden_layers
        attn = h * (self.q_dim + 2 * self.kv_dim) + self.q_dim * h
        if self.is_moe:
            mlp = 3 * h * self.moe_intermediate_size * self.num_experts + 3 * h * self.shared_expert_intermediate_size
        else:
            mlp = 3 * h * self.intermediate_size
        return L * (attn + mlp)

    @property
    def other_params(self) -> int:
        """Parameters kept in bf16 at any dtype: norms, the MoE router (and shared-expert gate), embeddings, lm_head."""
        h, L = self.hidden_size, self.num_hidden_layers
        per_layer = (4 if self.sandwich_norms else 2) * h + (2 * self.head_dim if self.qk_norm else 0)
        if self.is_moe:
            per_layer += h * self.num_experts + (h if self.shared_expert_intermediate_size else 0)
        emb = self.vocab_size * h
        return L * per_layer + emb * (1 if self.tie_word_embeddings else 2) + h

    @property
    def params(self) -> int:
        """Parameter count (norm weights included; tied embeddings counted once; every expert counted)."""
        return self.linear_params + self.other_params

    @property
    def weight_bytes(self) -> int:
        """Weight bytes: projections at the weight dtype (fp8: 1 byte + one fp32 scale per weight matrix, ignored
        here), the rest at bf16."""
        w = 1 if self.weight_dtype == "fp8" else self.dtype_bytes
        return self.linear_params * w + self.other_params * self.dtype_bytes

    def kv_bytes_per_token(self) -> int:
        """KV-cache bytes one token occupies across all layers (K and V)."""
        kv = 1 if self.kv_dtype == "fp8" else self.dtype_bytes
        return 2 * self.num_hidden_layers * self.kv_dim * kv


# Published configs (Hugging Face `config.json` of each model).
PRESETS: dict[str, ModelSpec] = {
    "qwen3-0.6b": ModelSpec("qwen3-0.6b", 1024, 28, 16, 8, 128, 3072, 151936, True, True, 40960, family="qwen3"),
    "qwen3-8b": ModelSpec("qwen3-8b", 4096, 36, 32, 8, 128, 12288, 151936, False, True, 40960, family="qwen3"),
    "llama3-8b": ModelSpec("llama3-8b", 4096, 32, 32, 8, 128, 14336, 128256, False, False, 8192),
    "llama3-70b": ModelSpec("llama3-70b", 8192, 80, 64, 8, 128, 28672, 128256, False, False, 8192),
    # Qwen/Qwen3-30B-A3B: 48 layers, 128 experts, top-8, moe_intermediate 768, no shared experts, norm_topk_prob
    # true (intermediate_size 6144 is unused: every layer is sparse, decoder_sparse_step 1, mlp_only_layers [])
    "qwen3-30b-a3b": ModelSpec("qwen3-30b-a3b", 2048, 48, 32, 4, 128, 6144, 151936, False, True, 40960,
                               num_experts=128, num_experts_per_tok=8, moe_intermediate_size=768,
                               norm_topk_prob=True, family="qwen3_moe"),
}

_REQUIRED = (
    "hidden_size",
    "num_hidden_layers",
    "num_attention_heads",
    "intermediate_size",
    "vocab_size",
)


_LIMITS = {"hidden_size": L.MAX_DIM, "num_hidden_layers": L.MAX_LAYERS, "num_attention_heads": 1 << 14,
           "intermediate_size": L.MAX_DIM * 4, "vocab_size": 1 << 24, "num_key_value_heads": 1 << 14,
           "head_dim": 1 << 14, "max_position_embeddings": 1 << 31}


# MoE fields launchsim reads (simulator/model/moe.py): num_experts / num_local_experts, num_experts_per_tok,
# moe_intermediate_size, shared_expert_intermediate_size, norm_topk_prob. Expert layouts it does not model:
_EXPERT_KEYS = ("n_routed_experts", "n_shared_experts", "num_shared_experts", "moe_num_experts", "expert_interval",
                "first_k_dense_replace", "moe_layer_freq", "mlp_only_layers")
# float32: a checkpoint stored in fp32 (gemma-2-2b's published config); launchsim runs it in bf16 and lists the field
# in ignored_config_fields
_DTYPES_OK = ("bfloat16", "float16", "bf16", "fp16", "half", "auto", "float32")


def unmodelled_field(cfg: dict) -> tuple[str, str] | None:
    """(field, what) for the first config.json field describing something launchsim does not model (experts,
    quantization, MLA, sliding-window or non-attention layers, multimodal towers, encoder-decoder, other dtypes)."""
    def on(k):
        v = cfg.get(k)
        return v not in (None, False, 0, "", [], {})

    for k in _EXPERT_KEYS:
        if on(k):
            return k, "this Mixture-of-Experts layout (only every-layer-sparse Qwen/Mixtral-style MoE is)"
    if cfg.get("decoder_sparse_step") not in (None, 1):
        return "decoder_sparse_step", "dense layers between MoE layers"
    for k in ("quantization_config", "quantization", "compression_config"):
        if on(k):
            return k, "quantization"
    for k in ("kv_lora_rank", "q_lora_rank"):
        if on(k):
            return k, "multi-head latent attention (MLA)"
    lt = cfg.get("layer_types")
    if lt is not None and (not isinstance(lt, list) or not all(isinstance(x, str) for x in lt)):
        return "layer_types", f"layer_types {lt!r} (a list of layer-type names is expected)"
    if isinstance(lt, list) and any(x not in ("full_attention", "sliding_attention") for x in lt):
        return "layer_types", "layers other than full or sliding-window attention"
    rs = cfg.get("rope_scaling")
    if isinstance(rs, dict):
        kind = rs.get("rope_type", rs.get("type"))
        if kind not in (None, "default", "linear", "llama3", "yarn"):
            return "rope_scaling", f"rope_scaling type {kind!r} (recomputes frequencies during decode)"
    for k in ("vision_config", "audio_config", "text_config"):
        if on(k):
            return k, "a multimodal or nested model config"
    if cfg.get("is_encoder_decoder") is True:
        return "is_encoder_decoder", "an encoder-decoder model"
    for k in ("torch_dtype", "dtype"):
        v = cfg.get(k)
        if isinstance(v, str) and v not in _DTYPES_OK:
            return k, f"dtype {v!r} (only bfloat16/float16 weights are modelled)"
    return None


def load_model(name_or_path: str, assume_family: str | None = None) -> ModelSpec:
    """A preset name, or a path to a Hugging Face `config.json`. Every problem is one line
    `FILE:LINE: field 'name': message` (or names the file). A config whose family (model_type / architectures)
    is not one of families.SUPPORTED is refused unless `assume_family` names the family to read it as (recorded
    in ModelSpec.family_assumed)."""
    from simulator.model import families as F

    if name_or_path in PRESETS:
        return PRESETS[name_or_path]
    if not str(name_or_path).strip():
        raise ModelError(f"empty model name: use one of {', '.join(sorted(PRESETS))} or a config.json path")
    path = Path(name_or_path)
    if not path.suffix == ".json" and not path.exists():
        raise ModelError(
            f"unknown model '{name_or_path}': use one of {', '.join(sorted(PRESETS))} or a config.json path"
        )
    if path.is_dir() and (path / "config.json").is_file():
        path = path / "config.json"  # a model folder, as Hugging Face downloads it
    cfg, text = read_json(path, "model config", ModelError, limit=64 << 20)
    where = str(path)
    if not isinstance(cfg, dict):
        raise ModelError(f"{where}:1: a config.json must hold a JSON object")

    def bad(key, msg):
        return field_error(where, text, (key,), msg, ModelError)

    missing = [k for k in _REQUIRED if k not in cfg]
    if missing:
        raise ModelError(f"{where}:1: field '{missing[0]}': missing field (required)"
                         + (f" (also {', '.join(missing[1:])})" if missing[1:] else ""))
    unmodelled = unmodelled_field(cfg)
    if unmodelled:
        key, what = unmodelled
        raise bad(key, f"{what} is not modelled by launchsim yet: refusing to simulate this model as a dense "
                       f"bf16/fp16 decoder")
    for k, cap in _LIMITS.items():
        if k not in cfg or (cfg[k] is None and k in ("num_key_value_heads", "head_dim")):
            continue
        v = cfg[k]
        if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
            raise bad(k, f"must be a positive integer, got {v!r}")
        if v > cap:
            raise bad(k, f"{v:,} is above the limit of {cap:,}")
    heads = cfg["num_attention_heads"]
    kv = cfg.get("num_key_value_heads")
    kv = heads if kv is None else kv
    if heads % kv:
        raise bad("num_key_value_heads", f"num_attention_heads ({heads}) must be a multiple of it ({kv})")
    head_dim = cfg.get("head_dim")
    if head_dim is None:
        if cfg["hidden_size"] < heads:
            raise bad("num_attention_heads", f"more heads ({heads}) than hidden_size ({cfg['hidden_size']}) allows")
        if cfg["hidden_size"] % heads:
            raise bad("num_attention_heads", f"hidden_size ({cfg['hidden_size']}) is not divisible by it ({heads}) "
                                             "and no head_dim is given")
        head_dim = cfg["hidden_size"] // heads
    arch = cfg.get("architectures", [])
    if arch is not None and (not isinstance(arch, list) or not all(isinstance(x, str) for x in arch)):
        raise bad("architectures", f"must be a list of strings, got {arch!r}")
    mtype = cfg.get("model_type", "")
    if mtype is not None and not isinstance(mtype, str):
        raise bad("model_type", f"must be a string, got {mtype!r}")
    tie = cfg.get("tie_word_embeddings", False)
    if tie is not None and not isinstance(tie, bool):
        raise bad("tie_word_embeddings", f"must be true or false, got {tie!r}")
    from simulator.model.moe import moe_fields

    moe = moe_fields(cfg, bad)
    try:
        fam, assumed = F.recognise(cfg, assume_family)
    except F.FamilyUnknown as e:
        raise bad("model_type" if "model_type" in cfg or "architectures" not in cfg else "architectures", str(e))
    if fam.moe and not moe:
        raise bad("num_experts", f"family {fam.name} is a Mixture-of-Experts model: num_experts (or "
                                 "num_local_experts) must be a positive integer")
    if moe and not fam.moe:
        raise bad("num_experts", f"family {fam.name} has no experts; this config gives {moe['num_experts']}")
    if fam.norm_topk_prob is not None and moe:
        moe["norm_topk_prob"] = fam.norm_topk_prob
    return ModelSpec(
        name=path.stem if path.stem != "config" else path.parent.name or "custom",
        hidden_size=cfg["hidden_size"],
        num_hidden_layers=cfg["num_hidden_layers"],
        num_attention_heads=heads,
        num_key_value_heads=kv,
        head_dim=head_dim,
        intermediate_size=cfg["intermediate_size"],
        vocab_size=cfg["vocab_size"],
        tie_word_embeddings=bool(tie),
        qk_norm=fam.qk_norm,
        max_position_embeddings=int(cfg.get("max_position_embeddings") or 131072),
        **moe,
        **_family_fields(cfg, fam, assumed, head_dim, bad),
    )


def _flag(cfg, key, bad, default=False) -> bool:
    v = cfg.get(key, default)
    if v is None:
        return default
    if not isinstance(v, bool):
        raise bad(key, f"must be true or false, got {v!r}")
    return v


def _family_fields(cfg: dict, fam, assumed: bool, head_dim: int, bad) -> dict:
    """ModelSpec fields of the family's differences (simulator/model/families.py), each config field checked."""
    from simulator.model import families as F

    L = cfg["num_hidden_layers"]
    attn_bias = _flag(cfg, "attention_bias", bad)
    out = {"family": fam.name, "family_assumed": assumed,
           "qkv_bias": attn_bias if fam.qkv_bias is None else fam.qkv_bias,
           "o_bias": attn_bias if fam.qkv_bias is None else False,
           "mlp_bias": _flag(cfg, "mlp_bias", bad),
           "packed_qkv": fam.packed_qkv, "packed_gate_up": fam.packed_gate_up, "norm_kind": fam.norm_kind,
           "sandwich_norms": fam.sandwich_norms, "embed_scale_kernels": fam.embed_scale_kernels,
           "rope_sets": fam.rope_sets, "rope_pass_cat": fam.rope_pass_cat}
    key = "hidden_activation" if cfg.get("hidden_activation") is not None else "hidden_act"
    act = cfg.get(key, fam.default_act)
    act = fam.default_act if act is None else act
    if act not in F.ACTIVATIONS:
        raise bad(key, f"activation {act!r} is not modelled: use one of {', '.join(F.ACTIVATIONS)}")
    out["activation"] = act
    for k, dst in (("final_logit_softcapping", "final_logit_softcap"), ("attn_logit_softcapping",
                                                                         "attn_logit_softcap")):
        v = cfg.get(k)
        if v is None:
            continue
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
            raise bad(k, f"must be a positive number or null, got {v!r}")
        out[dst] = float(v)
    for k in ("use_sliding_window",):
        if k in cfg:
            _flag(cfg, k, bad)
    for k in ("max_window_layers", "sliding_window_pattern"):
        v = cfg.get(k)
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 0 or
                              (k == "sliding_window_pattern" and v == 0)):
            raise bad(k, f"must be a non-negative integer, got {v!r}" if k == "max_window_layers"
                      else f"must be a positive integer, got {v!r}")
    lt = cfg.get("layer_types")
    if isinstance(lt, list) and lt and len(lt) != L:
        raise bad("layer_types", f"{len(lt)} entries for {L} layers")
    pattern = F.sliding_pattern(fam, cfg, L)
    w = cfg.get("sliding_window")
    if w is None and "sliding_window" not in cfg:
        w = fam.default_window
    if any(pattern):
        if w is None and fam.sliding in ("all",):
            pattern = ()
        elif isinstance(w, bool) or not isinstance(w, int) or w <= 0:
            raise bad("sliding_window", f"must be a positive integer with sliding-window layers, got {w!r}")
        else:
            out["sliding_window"] = w
            out["layer_sliding"] = pattern
    prf = cfg.get("partial_rotary_factor")
    if prf is not None:
        if isinstance(prf, bool) or not isinstance(prf, (int, float)) or not 0 < prf <= 1:
            raise bad("partial_rotary_factor", f"must be a number in (0, 1], got {prf!r}")
        rd = int(head_dim * prf)
        if rd % 2 or rd <= 0:
            raise bad("partial_rotary_factor", f"gives an odd or empty rotary dimension ({rd}) of head_dim {head_dim}")
        if rd != head_dim:
            out["rotary_dim"] = rd
    out["ignored_fields"] = tuple(F.ignored_config_fields(cfg, fam))
    arch = cfg.get("architectures") or []
    out["config_model_type"] = cfg.get("model_type") or (arch[0] if arch else "")
    return out


def family_info(model: ModelSpec) -> dict:
    """What predict's JSON and text say about the architecture: the family modelled, whether the caller assumed it
    (and what the config named), and the config fields without effect on a step."""
    out = {"family": model.family, "family_assumed": model.family_assumed,
           "ignored_config_fields": list(model.ignored_fields)}
    if model.family_assumed:
        out["config_model_type"] = model.config_model_type
        out["note"] = (f"config names {model.config_model_type or 'no family'!r}: modelled as a {model.family} "
                       "decoder because assume_family says so")
    return out


def ignored_config_fields(model: ModelSpec) -> list[str]:
    """The config.json fields of `model` that launchsim read past without effect on a step (predict's JSON
    `ignored_config_fields`); presets have none."""
    return list(model.ignored_fields)
