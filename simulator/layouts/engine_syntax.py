"""Capture-size layouts in the engines' own terms, both ways.

Out: `engine_syntax(sizes)` gives one paste-ready line per engine (vLLM's `--compilation-config` JSON, SGLang's
per-phase decode flags of 0.5.20, which the seed describes, SGLang's older single-phase flags, TensorRT-LLM's
`cuda_graph_config` as one line of YAML); `engine_lines(sizes)` adds a `#` label line before each.

In: `parse_engine_layout(text)` reads what a user has in an engine config: a JSON list `[1, 2, 8]`, a vLLM
`compilation_config` JSON (`{"cudagraph_capture_sizes": [...]}`, with or without `--compilation-config '...'`),
an SGLang flag list (`--cuda-graph-bs 1 2 4`, `--cuda-graph-bs-decode 1 2 4`) or TensorRT-LLM's
`batch_sizes: [...]`. It returns None when the text looks like none of these (a preset name, "1,2,4").
"""

from __future__ import annotations

import json
import re

LABELS = {
    "vllm": "vLLM (vllm serve flag; compilation_config.cudagraph_capture_sizes)",
    "sglang": "SGLang before 0.5.20 (single-phase flags)",
    "sglang_decode": "SGLang 0.5.20+ (per-phase decode flags)",
    "trtllm": "TensorRT-LLM (extra_llm_api_options YAML: cuda_graph_config)",
}


def engine_syntax(sizes: list[int]) -> dict[str, str]:
    """One line per engine, keyed as LABELS."""
    sizes = [int(s) for s in sizes]
    bs = " ".join(map(str, sizes))
    return {
        "vllm": "--compilation-config '" + json.dumps({"cudagraph_capture_sizes": sizes}) + "'",
        "sglang": f"--cuda-graph-max-bs {sizes[-1]} --cuda-graph-bs {bs}",
        "sglang_decode": f"--cuda-graph-max-bs-decode {sizes[-1]} --cuda-graph-bs-decode {bs}",
        "trtllm": "cuda_graph_config: {enable_padding: true, batch_sizes: [" + ", ".join(map(str, sizes)) + "]}",
    }


def engine_lines(sizes: list[int]) -> list[str]:
    """`# label` then the line, for each engine: safe to paste into a shell or a YAML file."""
    out = []
    for key, line in engine_syntax(sizes).items():
        out += [f"# {LABELS[key]}", line]
    return out


class EngineLayoutError(ValueError):
    pass


def _ints(items, what: str) -> list[int]:
    vals = []
    for x in items:
        if isinstance(x, bool) or not isinstance(x, (int, str)):
            raise EngineLayoutError(f"{what}: capture sizes must be integers, got {x!r}")
        try:
            vals.append(int(x))
        except ValueError:
            raise EngineLayoutError(f"{what}: capture sizes must be integers, got {x!r}") from None
    if not vals:
        raise EngineLayoutError(f"{what}: no capture sizes")
    return vals


_SGLANG_LIST = ("--cuda-graph-bs", "--cuda-graph-bs-decode")
_SGLANG_MAX = ("--cuda-graph-max-bs", "--cuda-graph-max-bs-decode")


def _sglang_flags(text: str) -> list[int]:
    """SGLang's flags as its argument parser reads them: `--cuda-graph-bs` (or -decode) once, followed by one or
    more integers separated by spaces (nargs='+'); optionally `--cuda-graph-max-bs N`, which the sizes must not
    exceed. Anything else (a stray value, a comma list, a repeated flag, another flag) is refused."""
    toks = text.replace("=", " ").split()
    sizes, top, i = None, None, 0
    while i < len(toks):
        tok = toks[i]
        if not tok.startswith("--"):
            raise EngineLayoutError(f"--cuda-graph-bs: {tok!r} is not after a flag (SGLang reads "
                                    f"--cuda-graph-bs 1 2 4 8)")
        j = i + 1
        while j < len(toks) and not toks[j].startswith("--"):
            j += 1
        vals = toks[i + 1:j]
        if tok in _SGLANG_LIST:
            if sizes is not None:
                raise EngineLayoutError(f"{tok}: given twice")
            if not vals:
                raise EngineLayoutError(f"{tok} needs a list of sizes, e.g. {tok} 1 2 4 8")
            bad = [v for v in vals if not re.fullmatch(r"\d+", v)]
            if bad:
                raise EngineLayoutError(f"{tok}: capture sizes are integers separated by spaces, got {bad[0]!r}")
            sizes = [int(v) for v in vals]
        elif tok in _SGLANG_MAX:
            if len(vals) != 1 or not re.fullmatch(r"\d+", vals[0]):
                raise EngineLayoutError(f"{tok} takes one integer, got {' '.join(vals) or 'none'}")
            top = int(vals[0])
        else:
            raise EngineLayoutError(f"{tok}: not a capture-size flag (use --cuda-graph-bs and --cuda-graph-max-bs)")
        i = j
    if sizes is None:
        raise EngineLayoutError("--cuda-graph-bs needs a list of sizes, e.g. --cuda-graph-bs 1 2 4 8")
    if top is not None and max(sizes) > top:
        raise EngineLayoutError(f"--cuda-graph-bs: size {max(sizes)} is above --cuda-graph-max-bs {top}")
    return _ints(sizes, "--cuda-graph-bs")


def _unique_keys(pairs: list) -> dict:
    """A JSON object's pairs as a dict, a key given twice refused (json.loads would keep the last silently)."""
    d: dict = {}
    for k, v in pairs:
        if k in d:
            raise EngineLayoutError(f"JSON key '{k}' given twice")
        d[k] = v
    return d


def _only(obj: dict, key: str) -> None:
    """Refuse the keys of a vLLM config object beside `key`: launchsim reads only the capture sizes, and a key such as
    cudagraph_mode or max_cudagraph_capture_size would change what vLLM captures."""
    other = sorted(k for k in obj if k != key)
    if other:
        raise EngineLayoutError(f"JSON key '{other[0]}' is not read (only {key} is): leave it out")


def parse_engine_layout(text: str) -> list[int] | None:
    """Sizes from an engine's configuration text (see the module docstring), or None if it is none of them."""
    t = text.strip()
    m = re.match(r"^(?:--compilation-config|-O)(?:=|\s+)(.*)$", t, flags=re.S)
    if m:
        t = m.group(1).strip().strip("'\"")
    if t.startswith("[") or t.startswith("{"):
        try:
            v = json.loads(t, object_pairs_hook=_unique_keys)
        except json.JSONDecodeError as e:
            raise EngineLayoutError(f"not valid JSON ({e.msg} at character {e.pos})") from None
        if isinstance(v, dict):
            if "compilation_config" in v and isinstance(v["compilation_config"], dict):
                _only(v, "compilation_config")
                v = v["compilation_config"]
            if "cudagraph_capture_sizes" not in v:
                raise EngineLayoutError("a JSON object needs the vLLM key 'cudagraph_capture_sizes'")
            _only(v, "cudagraph_capture_sizes")
            v = v["cudagraph_capture_sizes"]
        if not isinstance(v, list):
            raise EngineLayoutError("cudagraph_capture_sizes must be a list of integers")
        return _ints(v, "JSON list")
    if "--cuda-graph-bs" in t:
        return _sglang_flags(t)
    m = re.search(r"batch_sizes\s*:\s*\[([^\]]*)\]", t)
    if m and len(re.findall(r"batch_sizes\s*:", t)) > 1:
        raise EngineLayoutError("batch_sizes: given twice")
    if m:
        return _ints([x for x in re.split(r"[\s,]+", m.group(1).strip()) if x], "batch_sizes")
    return None
