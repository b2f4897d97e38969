"""Prefill (token-count) capture sizes: the second size list of a layout, for mixed/prefill steps.

SGLang captures decode graphs by batch size (`cuda_graph_bs`) and, separately, piecewise CUDA graphs for
extend/prefill by token count ("PCG": `--piecewise-cuda-graph-tokens`, `--piecewise-cuda-graph-max-tokens`; on by
default in recent SGLang, max 8192; older versions max 2048). Its default token list for max tokens M is
4..32 step 4, 48..256 step 16, 288..512 step 32, 576..1024 step 64, 1280..4096 step 256, 4608..8192 step 512,
capped at M (source: docs.sglang.io/advanced_features/piecewise_cuda_graph and SGLang's server_args).

A prefill layout is `sglang_pcg` (max 8192), `sglang_pcg:M` (max M tokens), `none`, or an explicit list in any
syntax a decode layout takes (comma list, `[4, 8]`, `--piecewise-cuda-graph-tokens 4 8 16`: buckets.parse_layout).
Routing (simulator/engine/routing.py) pads a mixed step whose plan mode is piecewise to these sizes.
"""

from __future__ import annotations

from simulator.common.limits import MAX_BATCH

# layouts/buckets.py (BucketError, parse_layout) is imported where a layout is parsed: a step without prefill
# graphs (`none`, the default) never loads it

PCG_PRESET = "sglang_pcg"
PCG_MAX_TOKENS = 8192
PCG_FLAG = "--piecewise-cuda-graph-tokens"
_PCG_RANGES = ((4, 32, 4), (48, 256, 16), (288, 512, 32), (576, 1024, 64), (1280, 4096, 256), (4608, 8192, 512))


def sglang_pcg_sizes(max_tokens: int = PCG_MAX_TOKENS) -> list[int]:
    """SGLang's default piecewise-CUDA-graph token list, capped at `max_tokens`. The list as documented ends at
    8192; launchsim does not extend it past that (a larger max gives the 8192 list: give an explicit list)."""
    from simulator.layouts.buckets import BucketError

    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens <= 0:
        raise BucketError(f"prefill max tokens must be a positive integer, got {max_tokens!r}")
    if max_tokens > MAX_BATCH:
        raise BucketError(f"prefill max tokens {max_tokens:,} is above the limit of {MAX_BATCH:,}")
    sizes = [s for a, b, st in _PCG_RANGES for s in range(a, b + 1, st)]
    out = [s for s in sizes if s <= max_tokens]
    if not out:
        raise BucketError(f"prefill max tokens {max_tokens} is below SGLang's smallest prefill size 4")
    return out


def parse_prefill_layout(spec: str | list[int] | None) -> list[int] | None:
    """A prefill layout -> sorted token counts, or None (`none`/None: no prefill graphs)."""
    if spec is None or spec == "none":
        return None
    from simulator.layouts.buckets import BucketError, parse_layout

    if isinstance(spec, str) and spec.split(":", 1)[0] == PCG_PRESET:
        _, _, mx = spec.partition(":")
        if not mx:
            return sglang_pcg_sizes()
        try:
            n = int(mx)
        except ValueError:
            raise BucketError(f"prefill layout '{spec}': the max tokens after '{PCG_PRESET}:' must be an "
                              "integer") from None
        return sglang_pcg_sizes(n)
    if isinstance(spec, str) and spec.strip().startswith(PCG_FLAG):  # SGLang's own flag text
        spec = ",".join(spec.strip()[len(PCG_FLAG):].split()) or ","
    try:
        return parse_layout(spec)
    except BucketError as e:
        raise BucketError(f"prefill layout: {e} (or '{PCG_PRESET}[:max_tokens]', 'none')") from None
