"""Hugging Face transformers' own decoders (code we did not write) for the cross-implementation check.

`HFRunner(model, batch, ctx, cache="static"|"dynamic")` builds `Qwen3ForCausalLM` / `LlamaForCausalLM`
with random bf16 weights from the published config fields of a launchsim preset, fills a StaticCache (or
transformers' default DynamicCache, which grows by one slot per decode call) with a prefill of `ctx`
tokens and then runs single-token decode steps (`step()`), eagerly or as a captured CUDA graph
(`capture()` / `replay()`). Notes on transformers 5: the static cache spans `max_cache_len` slots and
attention reads all of them under a mask, and the cache advances its own write position on every
call, so the cache is sized with room for every decode call and replay a measurement makes
(`room`). torch and transformers are imported inside functions only.
"""

from __future__ import annotations

from simulator.model.models import PRESETS


def hf_config(name: str):
    import transformers

    m = PRESETS[name]
    common = dict(vocab_size=m.vocab_size, hidden_size=m.hidden_size, intermediate_size=m.intermediate_size,
                  num_hidden_layers=m.num_hidden_layers, num_attention_heads=m.num_attention_heads,
                  num_key_value_heads=m.num_key_value_heads, max_position_embeddings=m.max_position_embeddings,
                  tie_word_embeddings=m.tie_word_embeddings, rms_norm_eps=1e-6)
    if name.startswith("qwen3"):
        return transformers.Qwen3Config(head_dim=m.head_dim, **common), transformers.Qwen3ForCausalLM
    return transformers.LlamaConfig(head_dim=m.head_dim, **common), transformers.LlamaForCausalLM


class HFRunner:
    def __init__(self, name: str, batch: int, ctx: int, room: int = 512, seed: int = 0, cache: str = "static"):
        import torch

        torch.manual_seed(seed)
        cfg, cls = hf_config(name)
        cfg._attn_implementation = "sdpa"
        with torch.device("cuda"):
            self.model = cls(cfg).to(torch.bfloat16).eval()
        self.name, self.batch, self.ctx = name, batch, ctx
        self.max_len = ctx + room
        self.cache_kind = cache
        if cache == "dynamic":
            from transformers import DynamicCache

            self.cache = DynamicCache()
        else:
            self.cache = self._cache(cfg, batch, self.max_len)
        g = torch.Generator(device="cuda").manual_seed(batch * 31 + ctx)
        prompt = torch.randint(0, cfg.vocab_size, (batch, ctx), device="cuda", generator=g)
        with torch.no_grad():
            self.model(input_ids=prompt, past_key_values=self.cache, use_cache=True,
                       cache_position=torch.arange(ctx, device="cuda"))
        self.ids = torch.randint(0, cfg.vocab_size, (batch, 1), device="cuda", generator=g)
        self.pos = torch.full((batch, 1), ctx, device="cuda", dtype=torch.long)
        self.cpos = torch.tensor([ctx], device="cuda", dtype=torch.long)
        self.graph = None
        self.out = None

    @staticmethod
    def _cache(cfg, batch, max_len):
        import torch
        from transformers import StaticCache

        try:
            return StaticCache(config=cfg, max_batch_size=batch, max_cache_len=max_len, device="cuda",
                               dtype=torch.bfloat16)
        except TypeError:
            return StaticCache(config=cfg, max_cache_len=max_len)

    def step(self):
        import torch

        with torch.no_grad():
            return self.model(input_ids=self.ids, position_ids=self.pos, past_key_values=self.cache,
                              use_cache=True, cache_position=self.cpos).logits

    def capture(self, warmup: int = 2):
        from .reference_decoder import warm_then_capture

        self.graph, self.out = warm_then_capture(self.step, warmup)
        return self.graph

    def replay(self):
        self.graph.replay()

    def release(self):
        self.graph = self.out = None
