"""Decoder-only transformer descriptions: built-in presets and Hugging Face `config.json` files."""

from __future__ import annotations

from .errors import UserError

import json
from dataclasses import dataclass
from pathlib import Path


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
    dtype_bytes: int = 2  # bf16

    @property
    def q_dim(self) -> int:
        return self.num_attention_heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        return self.num_key_value_heads * self.head_dim

    @property
    def params(self) -> int:
        """Parameter count (norm weights included; tied embeddings counted once)."""
        h, i, L = self.hidden_size, self.intermediate_size, self.num_hidden_layers
        per_layer = h * (self.q_dim + 2 * self.kv_dim) + self.q_dim * h + 3 * h * i + 2 * h
        if self.qk_norm:
            per_layer += 2 * self.head_dim
        emb = self.vocab_size * h
        return L * per_layer + emb * (1 if self.tie_word_embeddings else 2) + h

    @property
    def weight_bytes(self) -> int:
        return self.params * self.dtype_bytes

    def kv_bytes_per_token(self) -> int:
        """KV-cache bytes one token occupies across all layers (K and V)."""
        return 2 * self.num_hidden_layers * self.kv_dim * self.dtype_bytes


# Published configs (Hugging Face `config.json` of each model).
PRESETS: dict[str, ModelSpec] = {
    "qwen3-0.6b": ModelSpec("qwen3-0.6b", 1024, 28, 16, 8, 128, 3072, 151936, True, True, 40960),
    "qwen3-8b": ModelSpec("qwen3-8b", 4096, 36, 32, 8, 128, 12288, 151936, False, True, 40960),
    "llama3-8b": ModelSpec("llama3-8b", 4096, 32, 32, 8, 128, 14336, 128256, False, False, 8192),
    "llama3-70b": ModelSpec("llama3-70b", 8192, 80, 64, 8, 128, 28672, 128256, False, False, 8192),
}

_REQUIRED = (
    "hidden_size",
    "num_hidden_layers",
    "num_attention_heads",
    "intermediate_size",
    "vocab_size",
)


def load_model(name_or_path: str) -> ModelSpec:
    """A preset name, or a path to a Hugging Face `config.json`."""
    if name_or_path in PRESETS:
        return PRESETS[name_or_path]
    path = Path(name_or_path)
    if not path.suffix == ".json" and not path.exists():
        raise ModelError(
            f"unknown model '{name_or_path}': use one of {', '.join(sorted(PRESETS))} or a config.json path"
        )
    try:
        cfg = json.loads(path.read_text())
    except FileNotFoundError:
        raise ModelError(f"{path}: no such model config file") from None
    except json.JSONDecodeError as e:
        raise ModelError(f"{path}:{e.lineno}: not valid JSON ({e.msg})") from None
    if not isinstance(cfg, dict):
        raise ModelError(f"{path}: a config.json must hold a JSON object")
    missing = [k for k in _REQUIRED if k not in cfg]
    if missing:
        raise ModelError(f"{path}: missing field(s) {', '.join(missing)}")
    for k in _REQUIRED + ("num_key_value_heads", "head_dim"):
        if k in cfg and (not isinstance(cfg[k], int) or cfg[k] <= 0):
            raise ModelError(f"{path}: field '{k}' must be a positive integer, got {cfg[k]!r}")
    heads = cfg["num_attention_heads"]
    arch = " ".join(cfg.get("architectures", []) or []) + " " + str(cfg.get("model_type", ""))
    return ModelSpec(
        name=path.stem if path.stem != "config" else path.parent.name or "custom",
        hidden_size=cfg["hidden_size"],
        num_hidden_layers=cfg["num_hidden_layers"],
        num_attention_heads=heads,
        num_key_value_heads=cfg.get("num_key_value_heads", heads),
        head_dim=cfg.get("head_dim") or cfg["hidden_size"] // heads,
        intermediate_size=cfg["intermediate_size"],
        vocab_size=cfg["vocab_size"],
        tie_word_embeddings=bool(cfg.get("tie_word_embeddings", False)),
        qk_norm="qwen3" in arch.lower(),
        max_position_embeddings=int(cfg.get("max_position_embeddings", 131072)),
    )
