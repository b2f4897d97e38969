"""Which graph mode a step runs in, and at which padded size: the one owner of that rule.

Pure functions only (no costs): `route(graph, sizes, rows, pure_decode)` takes the configured graph mode, the
layout of captured sizes and the step's rows (sequences of a decode-only step; decode rows + prefill tokens of
a mixed step) and returns a `Route`: the captured size the step pads to and the *plan mode* it then runs in,
`full` (one graph replay), `piecewise` (graph pieces with attention eager between them) or `none` (eager).
`plan_mode(graph, pure_decode)` is the same rule without a layout (every size captured: no padding, no limit).
`padded_shape(shape, route)` is the step the GPU runs: the padding rows run every token-wise kernel but attend
to nothing (seq_len 0, as vLLM's padded slots). Every caller (predict, the sweep, the optimizer, serving, `plan.build_plan`) asks here.

Graph modes (configured) -> plan mode of a step, for a step whose rows fit the largest captured size:

    mode                 decode-only step      mixed step (flashinfer, fa2, triton)   mixed step (fa3)
    none                 none (eager)          none (eager)                           none (eager)
    full                 full                  none (eager)                           full
    full_decode_only     full                  none (eager)                           none (eager)
    piecewise            piecewise             piecewise                              piecewise
    full_and_piecewise   full                  piecewise                              piecewise

The attention backend (`backend`, common/vocab.py AttentionBackend, default flashinfer) only changes the mixed
step under `full`. A mixed step routed to `full` pads its token count to the captured sizes, as vLLM's dispatcher
pads a mixed batch by its num_tokens.

- A step pads to the smallest captured size >= its rows (`buckets.pad`, bisect_left as vLLM and SGLang do).
- Above the largest captured size a step runs eager (`none`) in every mode, unpadded. vLLM's dispatcher runs a
  batch above max_cudagraph_capture_size without cudagraphs (CUDAGraphMode.NONE; under piecewise the
  torch.compile'd pieces then run without graphs, which launchsim models as eager launches of the same fusion
  level). Source: docs.vllm.ai/en/latest/design/cuda_graphs/ and vllm/v1/cudagraph_dispatcher.py.
- `full` on a mixed step: vLLM captures mixed batches in a full graph only where the attention backend supports
  it (FlashAttention 3: AttentionCGSupport.ALWAYS); the other backends (FlashInfer, FA2, Triton) capture uniform
  decode batches only. launchsim models the latter: a mixed step under `full` runs eager, as under
  `full_decode_only` (vLLM FULL_DECODE_ONLY), because no piecewise graphs are captured in either mode.
  `full_and_piecewise` (vLLM's default in recent versions) runs mixed steps as piecewise graphs.
  With `backend='fa3'` (AttentionCGSupport.ALWAYS) `full` captures mixed batches too: a mixed step runs one
  full-graph replay; `full_decode_only` still runs it eager and `full_and_piecewise` still runs it piecewise
  (vLLM: FULL_AND_PIECEWISE uses the piecewise graphs for mixed batches).
- Prefill sizes (`prefill_sizes`, token counts; SGLang's piecewise CUDA graphs for extend/prefill, "PCG",
  simulator/layouts/prefill.py): a mixed step whose plan mode is `piecewise` pads its token count to the smallest
  prefill size >= it instead of the decode sizes; above the largest prefill size it runs eager. Decode-only
  steps and mixed steps in other plan modes keep the decode sizes. None (the default): no second list.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Sequence

from simulator.common.errors import UserError
from simulator.common import vocab as V

if TYPE_CHECKING:
    from simulator.layouts.buckets import Padded  # imported on the first padded step (`_pad`)

GRAPH_MODES = V.values(V.GraphMode)
ATTENTION_BACKENDS = V.values(V.AttentionBackend)
DEFAULT_BACKEND = V.AttentionBackend.FLASHINFER
_MIXED_FULL = frozenset({V.AttentionBackend.FA3})  # backends whose `full` captures mixed batches
PLAN_MODES = V.values(V.PlanMode)
# plan mode per configured mode: (decode-only step, mixed step), for a step that fits a captured size
_MODES = {"none": ("none", "none"), "full": ("full", "none"), "full_decode_only": ("full", "none"),
          "piecewise": ("piecewise", "piecewise"), "full_and_piecewise": ("full", "piecewise")}
assert tuple(_MODES) == GRAPH_MODES, "every graph mode of common/vocab.py routes"


class RoutingError(UserError):
    """An unknown graph mode or attention backend, or a step with no rows."""


def check_mode(graph: str) -> str:
    if graph not in _MODES:
        raise RoutingError(f"unknown graph mode '{graph}': use one of {', '.join(GRAPH_MODES)}")
    return graph


def check_backend(backend: str) -> str:
    if backend not in ATTENTION_BACKENDS:
        raise RoutingError(f"unknown attention backend '{backend}': use one of {', '.join(ATTENTION_BACKENDS)}")
    return backend


def plan_mode(graph: str, pure_decode: bool = True, backend: str = DEFAULT_BACKEND) -> str:
    """The plan mode a step runs in when its size is captured (no layout limit)."""
    if not pure_decode and graph == "full" and check_backend(backend) in _MIXED_FULL:
        return "full"
    return _MODES[check_mode(graph)][0 if pure_decode else 1]


def lowered_pure(mode: str, pure_decode: bool) -> bool:
    """The `pure_decode` flag under which `plan.build_plan` lowers an already routed plan mode `mode` as itself:
    a mixed step routed to `full` (fa3) is one full-graph replay, which `plan_mode('full', mixed)` (flashinfer)
    would turn eager. Identity for every route the default backend gives."""
    return pure_decode or mode == "full"


def graph_kinds(graph: str) -> tuple[str, ...]:
    """The kinds of graph a mode captures per size: () for none, ('full',), ('piecewise',) or both."""
    return tuple(dict.fromkeys(m for m in _MODES[check_mode(graph)] if m != "none"))


@dataclass(frozen=True)
class Route:
    rows: int  # real rows: sequences of a decode-only step, tokens of a mixed step
    padded: int | None  # captured size the step pads to; None: it runs without a captured graph
    mode: str  # plan mode it runs in: none | full | piecewise
    overflow: bool = False  # the mode would capture this step, but its rows exceed the largest captured size

    @property
    def executed(self) -> int:
        """Rows the GPU executes: the padded size, or the rows themselves without a captured size."""
        return self.padded if self.padded is not None else self.rows

    @property
    def padding(self) -> int:
        return self.executed - self.rows


def _pad(batch: int, sizes: list[int]) -> Padded:
    """`buckets.pad`, imported on the first padded step (a step routed without captured sizes never loads
    layouts/buckets.py); then this name is buckets.pad itself."""
    global _pad
    from simulator.layouts.buckets import pad

    _pad = pad
    return pad(batch, sizes)


def route(graph: str, sizes: Sequence[int] | None, rows: int, pure_decode: bool = True, *,
          backend: str = DEFAULT_BACKEND, prefill_sizes: Sequence[int] | None = None) -> Route:
    """Where a step of `rows` rows goes under graph mode `graph` and the captured sizes `sizes` (ascending).

    `sizes=None` means every size is captured (predict without a layout): the step runs at its own size.
    `backend`: the attention backend (fa3: `full` captures mixed steps). `prefill_sizes`: the token counts of the
    prefill (piecewise) graphs a mixed piecewise step pads to in place of `sizes` (None: no such list)."""
    if isinstance(rows, bool) or not isinstance(rows, int) or rows <= 0:
        raise RoutingError(f"a step needs a positive number of rows, got {rows!r}")
    mode = plan_mode(graph, pure_decode, backend)
    if mode == "none":
        return Route(rows, None, "none")
    if not pure_decode and mode == "piecewise" and prefill_sizes is not None:
        sizes = prefill_sizes
    if sizes is None:
        return Route(rows, rows, mode)
    p = _pad(rows, list(sizes)) if sizes else None
    if p is None or p.padded is None:
        return Route(rows, None, "none", overflow=True)  # above the largest captured size: eager (no cudagraph)
    return Route(rows, p.padded, mode)


def step_rows(shape) -> int:
    """The rows a step pads by: sequences of a decode-only step, all tokens of a mixed step or of a speculative
    verify step (q_len = 1 + k tokens per sequence: engines count verify capture sizes in tokens,
    simulator/layouts/spec.py)."""
    return shape.tokens if not shape.is_pure_decode or getattr(shape, "q_len", 1) > 1 else shape.decode_seqs


def route_shape(graph: str, sizes: Sequence[int] | None, shape, *, backend: str = DEFAULT_BACKEND,
                prefill_sizes: Sequence[int] | None = None) -> Route:
    """`route` for a `workload.StepShape`."""
    return route(graph, sizes, step_rows(shape), shape.is_pure_decode, backend=backend, prefill_sizes=prefill_sizes)


def padded_shape(shape, r: Route):
    """The step the GPU runs: `r.padding` padding rows (`StepShape.padding`) that run every token-wise kernel
    but attend to nothing (vLLM gives padded slots seq_len 0). The one rule of predict, the sweep, the optimizer
    and serving."""
    if not r.padding:
        return shape
    return with_padding(shape, r.padding)


def with_padding(shape, n: int):
    """`shape` with `n` more padding rows (`padded_shape` of a route padding it by n)."""
    cls = type(shape)
    if cls in (_PLAIN or _plain_shapes()):  # `replace` without re-running the dataclass __init__ (no __post_init__: the same value)
        out = object.__new__(cls)
        d = out.__dict__
        d.update(shape.__dict__)
        d["padding"] = shape.padding + n
        d.pop("_hash", None)  # StepShape.__hash__'s kept value: the copy's fields differ
        return out
    return replace(shape, padding=shape.padding + n)


def route_decode(graph: str, sizes: Sequence[int] | None, rows, *, backend: str = DEFAULT_BACKEND, each=None):
    """`route` of many decode-only steps (no prefill: `prefill_sizes` never applies) as arrays: `rows` their rows
    (ints > 0), under the captured `sizes` (ascending; None: every size captured), or each step i under its own
    ascending sizes `each[i]` (then `sizes` is not read). Returns (the plan mode of a step that fits a captured
    size, the size each step pads to (0: none fits, the step runs eager in mode none), overflow per step), the same
    rule as `route`: the smallest size >= rows (bisect_left), none above the largest, `sizes=None` no padding."""
    import numpy as np

    r = np.asarray(rows, dtype=np.int64)
    bad = np.flatnonzero(r <= 0)
    if bad.size:
        raise RoutingError(f"a step needs a positive number of rows, got {int(r[bad[0]])!r}")
    mode = plan_mode(graph, True, backend)
    none = np.zeros(r.size, dtype=bool)
    if mode == "none":
        return mode, np.zeros(r.size, dtype=np.int64), none
    if each is not None:
        if all(len(x) <= 1 for x in each):  # one size or none per step (the optimizer's per-size steps)
            top = np.fromiter((x[0] if x else 0 for x in each), np.int64, r.size)
            padded = np.where(r <= top, top, 0)
        else:
            import bisect

            padded = np.fromiter((x[j] if (j := bisect.bisect_left(x, v)) < len(x) else 0
                                  for x, v in zip(each, r.tolist())), np.int64, r.size)
        return mode, padded, padded == 0
    if sizes is None:
        return mode, r.copy(), none
    if not len(sizes):
        return mode, np.zeros(r.size, dtype=np.int64), ~none
    sz = np.asarray(sizes, dtype=np.int64)
    i = np.searchsorted(sz, r, side="left")
    padded = np.where(i < sz.size, sz[np.minimum(i, sz.size - 1)], 0)
    return mode, padded, padded == 0


def _plain_shapes() -> frozenset:
    """Shape classes `padded_shape` copies field by field: frozen dataclasses with a __dict__ and no __post_init__
    (workload.StepShape), whose `replace` is exactly a copy with one field changed."""
    global _PLAIN
    from simulator.model.workload import StepShape  # imported on the first padded step (as `_pad`'s buckets)

    ok = not hasattr(StepShape, "__post_init__") and not hasattr(StepShape, "__slots__")
    _PLAIN = frozenset({StepShape}) if ok else frozenset({None})
    return _PLAIN


_PLAIN: frozenset | None = None
