"""Capture sizes under speculative decoding, per engine: what each engine captures when the target model verifies
k draft tokens per sequence (a decode batch of B sequences is B·(1+k) tokens), and which sizes an optimizer may
propose for it.

Facts, read in the engines' sources (public repositories; nothing copied):

vLLM (tokens). `VllmConfig._set_cudagraph_sizes` (vllm/config/vllm.py): when no maximum is given,
    max_cudagraph_capture_size = min(max_num_seqs * decode_query_len * 2, 512), decode_query_len = 1 + k,
    then min(max_num_batched_tokens, that); the default list is [1, 2, 4] + range(8, min(max+1, 256), 8) +
    range(256, max+1, 16) (simulator/layouts/buckets.py). `CompilationConfig.adjust_cudagraph_sizes_for_spec_decode`
    (vllm/config/compilation.py), called from `resolve_cudagraph_mode_and_sizes` only when
    `cudagraph_mode.decode_mode() == FULL and uniform_decode_query_len > 1`: multiple_of = 1 + k (under sequence
    parallelism at tp > 1: max(1 + k, tp), which must be a multiple of both, else a ValueError); every size is
    rounded up to a multiple (`round_up`), those above max_cudagraph_capture_size dropped, duplicates merged;
    if none is left and multiple_of <= max the list is [multiple_of]; if still none, a ValueError; the maximum
    becomes the largest size left. Sizes count tokens; the dispatcher pads a uniform verify batch of B·(1+k)
    tokens to the smallest captured size >= it. Under PIECEWISE decode graphs the source read does not round
    (a later PR, #46324 per ../shared/ANCHORS.md, extends the rounding to PIECEWISE: `round_piecewise=True`).

SGLang (requests). `ServerArgs._generate_cuda_graph_batch_sizes` (python/sglang/srt/server_args.py): with a
    speculative algorithm the default list is range(1, 9) + range(10, 33, 2) + range(40, 65, 4) +
    range(72, 257, 8) + range(272, max+1, 16) ("less padding for smaller batch sizes"), filtered to
    <= cuda_graph_max_bs (256 at tp < 4, 512 at tp >= 4 on 90-160 GB GPUs such as the H200, same function's
    caller); `disable_cuda_graph_padding`: 1..max. The target's `CudaGraphRunner` (model_executor/
    cuda_graph_runner.py) captures each batch size in TARGET_VERIFY mode with `num_tokens_per_bs =
    speculative_num_draft_tokens` (k + 1 for a chain, topk 1): a graph of bs requests runs bs·(k+1) tokens.
    The EAGLE draft runner (speculative/eagle_draft_cuda_graph_runner.py, `EAGLEDraftCudaGraphRunner`) captures
    the same batch sizes with `num_tokens_per_bs = topk`, one graph per size holding the whole multi-step
    `draft_forward`; the draft-extend runner (`EAGLEDraftExtendCudaGraphRunner`) captures them again at width
    `num_draft_tokens` per request. All share the global graph pool.

TensorRT-LLM (requests). `DecodingCUDAGraphRunner.__init__` (tensorrt_llm/_torch/pyexecutor/cuda_graph_runner.py)
    sizes each graph's inputs at batch_size · (max_draft_len + 1) tokens ("[CUDA graph spec decode padding]");
    batch sizes come from `CudaGraphConfig` (simulator/layouts/buckets.py's trtllm preset). Graphs are captured
    per draft length (PR #8344, ../shared/ANCHORS.md): `draft_lens` names the lengths captured (default: k).

So in tokens every engine captures multiples of 1 + k; they differ in the list and in its maximum.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

from simulator.common.errors import UserError
from simulator.common.limits import MAX_BATCH
from simulator.layouts.buckets import BucketError, preset_sizes

SPEC_ENGINES = ("vllm", "sglang", "trtllm")
MAX_SPEC_TOKENS = 64  # draft tokens per step; far above any engine default (vLLM, SGLang use 1-8)


class SpecLayoutError(UserError):
    pass


def check_k(k: int) -> int:
    if isinstance(k, bool) or not isinstance(k, int) or k < 0:
        raise SpecLayoutError(f"spec_tokens must be a non-negative integer, got {k!r}")
    if k > MAX_SPEC_TOKENS:
        raise SpecLayoutError(f"spec_tokens {k} is above the limit of {MAX_SPEC_TOKENS}")
    return k


def _round_up(x: int, m: int) -> int:
    return -(-x // m) * m


def vllm_multiple_of(k: int, tp: int = 1, sequence_parallel: bool = False) -> int:
    """The multiple vLLM rounds capture sizes to (adjust_cudagraph_sizes_for_spec_decode)."""
    q = 1 + check_k(k)
    if tp > 1 and sequence_parallel:
        m = max(q, tp)
        if m % q or m % tp:
            raise SpecLayoutError(f"no capture size is a multiple of both {q} (spec_tokens + 1) and {tp} (tp) under "
                                  "sequence parallelism, as vLLM requires: change spec_tokens or tp")
        return m
    return q


def vllm_round_for_spec(sizes: list[int], k: int, max_size: int, tp: int = 1,
                        sequence_parallel: bool = False) -> list[int]:
    """vLLM's `adjust_cudagraph_sizes_for_spec_decode` applied to `sizes` (tokens) with maximum `max_size`."""
    m = vllm_multiple_of(k, tp, sequence_parallel)
    if not sizes or m <= 1:
        return sorted(set(sizes))
    out = sorted({_round_up(s, m) for s in sizes if _round_up(s, m) <= max_size})
    if not out and m <= max_size:
        out = [m]
    if not out:
        raise SpecLayoutError(f"no capture size is left after rounding to a multiple of {m} (spec_tokens + 1) at a "
                              f"largest size of {max_size} tokens: raise max_size or lower spec_tokens")
    return out


def vllm_spec_max_size(k: int, max_num_seqs: int = 256, max_num_batched_tokens: int | None = None) -> int:
    """vLLM's default max_cudagraph_capture_size under k draft tokens (tokens)."""
    mx = min(max_num_seqs * (1 + check_k(k)) * 2, 512)
    return mx if max_num_batched_tokens is None else min(mx, max_num_batched_tokens)


SGLANG_SPEC_DEFAULT_MAX = {False: 256, True: 512}  # cuda_graph_max_bs on 90-160 GB GPUs: tp < 4, tp >= 4


def sglang_spec_batch_sizes(max_bs: int | None = None, tp: int = 1, disable_padding: bool = False) -> list[int]:
    """SGLang's default capture batch sizes (requests) when a speculative algorithm is set."""
    mx = max_bs if max_bs is not None else SGLANG_SPEC_DEFAULT_MAX[tp >= 4]
    if disable_padding:
        return list(range(1, mx + 1))
    bs = (list(range(1, 9)) + list(range(10, 33, 2)) + list(range(40, 65, 4)) + list(range(72, 257, 8))
          + list(range(272, mx + 1, 16)))
    return sorted({b for b in bs if b <= mx})


@dataclass(frozen=True)
class SpecLayout:
    """What an engine captures for verify steps at k draft tokens.

    `tokens`: the target's captured sizes in tokens (each a multiple of 1+k for the three engines).
    `requests`: whole sequences each graph holds (tokens // (1+k)); a verify batch of B sequences pads to the
    smallest captured token size >= B·(1+k) (`padded_tokens`). `draft`: the draft model's own graph families, name -> token sizes per graph.
    """

    engine: str
    k: int
    tokens: tuple[int, ...]
    draft: dict = field(default_factory=dict)
    note: str = ""

    @property
    def query_len(self) -> int:
        return 1 + self.k

    @property
    def requests(self) -> tuple[int, ...]:
        return tuple(t // self.query_len for t in self.tokens)

    @property
    def graphs(self) -> int:
        """Target graphs plus draft graphs."""
        return len(self.tokens) + sum(len(v) for v in self.draft.values())

    def padded_tokens(self, batch: int) -> int | None:
        """Captured size (tokens) a verify batch of `batch` sequences, batch·(1+k) tokens, pads to: the smallest
        captured size >= it (bisect_left, as the dispatchers do); None above the largest (no graph)."""
        if isinstance(batch, bool) or not isinstance(batch, int) or batch <= 0:
            raise SpecLayoutError(f"batch must be a positive integer, got {batch!r}")
        i = bisect.bisect_left(self.tokens, batch * self.query_len)
        return self.tokens[i] if i < len(self.tokens) else None

    def pad_tokens(self, batch: int) -> int:
        """Padding rows (tokens) a verify batch of `batch` sequences runs (0 when no graph fits)."""
        p = self.padded_tokens(batch)
        return 0 if p is None else p - batch * self.query_len

    def as_dict(self) -> dict:
        return {"engine": self.engine, "spec_tokens": self.k, "query_len": self.query_len, "unit": "tokens",
                "sizes": list(self.tokens), "requests": list(self.requests), "graphs": self.graphs,
                "draft_sizes": {k: list(v) for k, v in self.draft.items()}, "note": self.note}


def spec_layout(engine: str, k: int, max_size: int | None = None, max_num_seqs: int | None = None, tp: int = 1,
                graph: str = "full", sequence_parallel: bool = False, round_piecewise: bool = False,
                max_num_batched_tokens: int | None = None, draft_lens: tuple[int, ...] | None = None,
                draft: str = "eagle") -> SpecLayout:
    """The capture sizes of `engine` for verify steps at `k` draft tokens.

    `max_size` is in the engine's own unit: tokens for vLLM (its max_cudagraph_capture_size), requests for SGLang
    (cuda_graph_max_bs) and TensorRT-LLM (max_batch_size). `graph` is the target's decode graph mode
    ("full" or "piecewise"): vLLM rounds only under full decode graphs unless `round_piecewise`. `draft`
    ("eagle", "mtp" or "model") says which draft graph families the engine captures."""
    check_k(k)
    if engine not in SPEC_ENGINES:
        raise SpecLayoutError(f"speculative capture sizes are modelled for {', '.join(SPEC_ENGINES)}, not '{engine}'")
    if graph not in ("full", "piecewise"):
        raise SpecLayoutError(f"graph must be full or piecewise for speculative capture sizes, got '{graph}'")
    for what, v in (("max_size", max_size), ("max_num_seqs", max_num_seqs),
                    ("max_num_batched_tokens", max_num_batched_tokens)):
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v <= 0):
            raise SpecLayoutError(f"{what} must be a positive integer, got {v!r}")
        if v is not None and v > MAX_BATCH:
            raise SpecLayoutError(f"{what} {v:,} is above the limit of {MAX_BATCH:,}")
    q = 1 + k
    if engine == "vllm":
        mx = max_size if max_size is not None else vllm_spec_max_size(k, max_num_seqs or 256, max_num_batched_tokens)
        try:
            base = preset_sizes("vllm", mx)
        except BucketError as e:
            raise SpecLayoutError(str(e)) from None
        rounds = k > 0 and (graph == "full" or round_piecewise)
        tokens = vllm_round_for_spec(base, k, mx, tp, sequence_parallel) if rounds else base
        if not rounds and k > 0:
            # not rounded: the dispatcher pads the B(1+k)-token batch to any size >= it; keep every size, a verify
            # batch uses the smallest >= B(1+k) (requests then counts whole sequences that fit)
            note = (f"piecewise decode graphs: sizes not rounded to multiples of {q} (vLLM rounds under FULL decode "
                    "graphs only; round_piecewise follows PR #46324)")
            return SpecLayout(engine, k, tuple(tokens), _draft_families(engine, k, tuple(tokens), draft, q), note)
        # drafters run piecewise graphs over the same token sizes (vLLM PRs #17211, #25109)
        return SpecLayout(engine, k, tuple(tokens), _draft_families(engine, k, tuple(tokens), draft, q),
                          f"sizes in tokens, multiples of {vllm_multiple_of(k, tp, sequence_parallel)}" if k else "")
    if engine == "sglang":
        bs = sglang_spec_batch_sizes(max_size, tp) if k > 0 else preset_sizes("sglang", max_size, tp=tp)
        tokens = tuple(b * q for b in bs)
        return SpecLayout(engine, k, tokens, _draft_families(engine, k, tuple(bs), draft, q),
                          "capture batch sizes x speculative_num_draft_tokens (k + 1, topk 1)" if k else "")
    bs = preset_sizes("trtllm", max_size)
    lens = tuple(draft_lens) if draft_lens is not None else (k,)
    if not lens or any(d < 0 or d > k for d in lens):
        raise SpecLayoutError(f"draft_lens must be draft lengths in 0..{k}, got {list(lens)}")
    tokens = tuple(b * q for b in bs)
    fam = {f"target_draft_len_{d}": tuple(b * (d + 1) for b in bs) for d in sorted(set(lens)) if d != k}
    return SpecLayout(engine, k, tokens, {**fam, **_draft_families(engine, k, tuple(bs), draft, q)},
                      "batch sizes x (max_draft_len + 1); one graph set per draft length" if k else "")


def _draft_families(engine: str, k: int, sizes: tuple[int, ...], draft: str, q: int) -> dict:
    """Draft graph families, name -> token sizes (sizes: vLLM tokens, SGLang/TRT-LLM requests)."""
    if k == 0:
        return {}
    if draft not in ("eagle", "mtp", "model"):
        raise SpecLayoutError(f"draft must be eagle, mtp or model, got '{draft}'")
    if engine == "sglang":
        # EAGLEDraftCudaGraphRunner: topk (1) tokens per request, the k-step loop in one graph;
        # EAGLEDraftExtendCudaGraphRunner: num_draft_tokens (k + 1) per request
        return {"draft": tuple(sizes), "draft_extend": tuple(b * q for b in sizes)}
    if engine == "vllm":
        # the drafter's piecewise graphs reuse the target's token sizes (vLLM eagle proposer)
        return {"draft_piecewise": tuple(sizes)}
    return {}  # TRT-LLM: one-model EAGLE3 / MTP run inside the target's graph (not separately captured here)


def allowed_sizes(engine: str, k: int, max_size: int, tp: int = 1, sequence_parallel: bool = False) -> list[int]:
    """Token sizes the engine accepts as a capture list at k draft tokens, up to `max_size` tokens: multiples of
    1 + k (vLLM rounds any other size up to one; SGLang and TensorRT-LLM capture request counts, each bs·(1+k)
    tokens). Under vLLM sequence parallelism, multiples of max(1 + k, tp). The optimizer's candidate filter."""
    check_k(k)
    if engine not in SPEC_ENGINES:
        raise SpecLayoutError(f"speculative capture sizes are modelled for {', '.join(SPEC_ENGINES)}, not '{engine}'")
    if isinstance(max_size, bool) or not isinstance(max_size, int) or max_size <= 0:
        raise SpecLayoutError(f"max_size must be a positive integer, got {max_size!r}")
    m = vllm_multiple_of(k, tp, sequence_parallel) if engine == "vllm" else 1 + k
    return list(range(m, max_size + 1, m))


def accepts(engine: str, k: int, size: int, tp: int = 1, sequence_parallel: bool = False) -> bool:
    """Does `engine` capture a graph of exactly `size` tokens at k draft tokens? (predicate form of allowed_sizes)"""
    m = vllm_multiple_of(k, tp, sequence_parallel) if engine == "vllm" else 1 + check_k(k)
    if engine not in SPEC_ENGINES:
        raise SpecLayoutError(f"speculative capture sizes are modelled for {', '.join(SPEC_ENGINES)}, not '{engine}'")
    return size > 0 and size % m == 0
