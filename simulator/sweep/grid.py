"""Sweeps: grid points, their evaluation, the on-disk cache that makes a sweep resumable, and the run loop.

A `Point` is one configuration (model, profile, fusion, graph mode, layout, batch-size distribution,
budget, ...). `evaluate_point` is a pure function of it: graph memory and capture time of the layout
(graph_memory.py), padding waste and expected step time over the distribution, every step routed (routing.py)
and costed by the memoised fast engine (stepcost.py). `run_points` splits pending points into chunks, runs them
on an executor (executors.py: local processes or Ray), and appends each finished chunk's rows to
OUT/cache.jsonl, one JSON line per point keyed by a hash of its configuration. A rerun (or a rerun after
an interruption) loads the cache and only computes the points that are missing.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import time
from dataclasses import asdict, dataclass, field, fields
from operator import itemgetter
from pathlib import Path

import numpy as np

from simulator.common.errors import Interrupted
from simulator.common.memo import memo
from simulator.engine.graph_memory import GraphMemoryModel, kv_cache_bytes, kv_cache_tokens
from simulator.model.models import ModelSpec
from simulator.engine.setup import Capture, StepSetup
from simulator.engine.stepcost import DEFAULT, Expected, load_cached_profile

CACHE_VERSION = 2  # 2: capture_s from simulator/engine/startup.py (warm-ups + capture)
CACHE_FILE = "cache.jsonl"
# the keys of evaluate_point's row, in order: cached rows are put back in this order (a resumed run's CSV
# columns and JSON equal an uninterrupted run's), and a cached line without exactly these keys is recomputed
ROW_KEYS = ("model", "profile", "fusion", "graph", "layout", "sizes", "max_size", "distribution", "budget_bytes",
            "ctx", "mixed_share", "shared_pool", "graphs", "pool_bytes", "static_bytes", "graph_bytes",
            "fits_budget", "kv_cache_bytes", "kv_tokens", "capture_s", "memory_source", "waste", "waste_mean",
            "padded_rows", "overflow_frac", "expected_step_ms", "unpadded_step_ms", "padding_cost_ms",
            "graph_none_step_ms", "speedup_vs_graph_none", "eager_step_ms", "speedup_vs_eager", "tokens_per_s",
            "step_evals") + ("spec_tokens", "acceptance", "tokens_per_step", "ms_per_token", "decode_step_ms")
# rows cached before the speculative axes lack the last five: plain decode, derivable exactly (`_valid_row`)
_SPEC_KEYS = ROW_KEYS[-5:]
_PLAIN_KEYS = frozenset(ROW_KEYS[:-5])


@dataclass(frozen=True)
class Point:
    model: tuple  # ModelSpec fields, in order (hashable, picklable, content-addressed)
    profile: str
    profile_digest: str
    fusion: str
    graph: str
    layout: str
    sizes: tuple[int, ...]
    distribution: str
    dist_sizes: tuple[int, ...]
    dist_weights: tuple[float, ...]
    budget_bytes: int
    ctx: int
    mixed: tuple[float, int, int] | None = None  # (share, prefill_seqs, prefill_len)
    shared_pool: bool = True
    gpu_util: float = 0.9
    workspace_bytes: int = 1 << 30
    # every field from here on is a step knob, in `key` only off its default (_ROUTING_FIELDS): a new knob is one
    # line here, named as the sweep scenario's field (studies/sweep.py reads it by name) and, when the step setup
    # takes it, as StepSetup's field (step_setup passes it by name; kv_cache is StepSetup's `cache`)
    attention_backend: str = "flashinfer"  # routing.route's backend and prefill sizes (None: no prefill graphs);
    prefill_sizes: tuple[int, ...] | None = None  # at these defaults a point's key is what it was before them
    impl: str | None = None  # the implementation recipe and its cache options (config/stepopts.py); likewise
    kv_cache: str = "static"
    max_cache_len: int | None = None
    host_canary_us: float | None = None  # the user's host (config/stepopts.py): the profile's host lane rescaled
    # speculative decoding (engine/spec.py): k draft tokens, a constant acceptance, the draft, whose engine rules
    # route it; `sizes` then count verify tokens and `decode_sizes` are the plain-decode layout compared with
    spec_tokens: int = 0
    acceptance: float | None = None
    draft: str = "eagle"
    spec_engine: str = "vllm"
    decode_sizes: tuple[int, ...] | None = None
    compile_dynamic: bool | None = None  # fusion compiled: torch.compile dynamic=True/False (config/stepopts.py)
    compile_inputs: str | None = None  # with compile_dynamic: weights/cache as arguments or module state
    lora_rank: int = 0  # a LoRA adapter's rank on every layer projection (config/stepopts.py); 0: none

    @classmethod
    def of(cls, *values) -> "Point":
        """Point(*values) without the frozen dataclass's per-field object.__setattr__ (grids build 100k of
        these): every field given, positionally, in declaration order."""
        p = object.__new__(cls)
        p.__dict__.update(zip(_FIELD_NAMES, values, strict=True))
        return p

    @staticmethod
    def values(named: dict) -> tuple:
        """`named` ({field: value}, every field of Point) as the positional tuple `of` and `at_budgets` take."""
        if len(named) != len(_FIELD_NAMES):
            raise TypeError(f"Point fields missing or unknown: {sorted(set(_FIELD_NAMES) ^ set(named))}")
        return tuple(named[f] for f in _FIELD_NAMES)

    @classmethod
    def at_budgets(cls, values: tuple, budgets) -> list["Point"]:
        """[Point.of(*values with budget_bytes = b) for b in budgets]: the fields filled once, each point a copy
        of them with its own budget (a grid's budget axis is its innermost)."""
        d0 = dict(zip(_FIELD_NAMES, values, strict=True))
        new, setattr_ = object.__new__, object.__setattr__
        out = []
        for b in budgets:
            d = d0.copy()
            d["budget_bytes"] = b
            p = new(cls)
            setattr_(p, "__dict__", d)
            out.append(p)
        return out

    @property
    def spec(self) -> ModelSpec:
        return ModelSpec(*self.model)

    def step_setup(self, fusion: str, mode: str, sizes: tuple[int, ...]) -> StepSetup:
        """The `StepSetup` (engine/setup.py) of this point's step at `fusion` under graph mode `mode` with captured
        `sizes` (the point's own, or a baseline's)."""
        prof, costs, digest = load_cached_profile(self.profile)
        if self.host_canary_us is not None:
            from simulator.engine.setup import host_resolved

            _, costs, digest = host_resolved(self.profile, self.host_canary_us)
        graphed = mode != "none"
        cap = Capture(mode, sizes if graphed else (), self.prefill_sizes if graphed else None,
                      self.attention_backend)
        return StepSetup(self.spec, costs, digest, fusion, capture=cap,
                         **{arg: getattr(self, f) for f, arg in _SETUP_ARGS})

    def key(self, texts: "KeyTexts | None" = None) -> str:
        """`base_key`, or with a routing or recipe field off its default, sha256 of it followed by JSON of the
        attention backend and prefill sizes plus the recipe fields off their defaults (so points at the defaults keep
        the keys of caches written before these fields existed, and points with only routing fields keep theirs).
        `texts`: the caller's memo of key texts (`KeyTexts`), for many points at once."""
        k = self.base_key(texts)
        off = {f: getattr(self, f) for f in _ROUTING_FIELDS if getattr(self, f) != _DEFAULTS[f]}
        if not off:
            return k
        extra = json.dumps({"attention_backend": self.attention_backend, "prefill_sizes": self.prefill_sizes,
                            **{f: v for f, v in off.items() if f not in ("attention_backend", "prefill_sizes")}})
        return hashlib.sha256((k + extra).encode()).hexdigest()[:24]

    def key_parts(self, texts: "KeyTexts | None" = None) -> tuple[bytes, str | None]:
        """What `key` hashes besides the budget: (the key text after budget_bytes, the routing JSON or None);
        `key_at(budget, parts)` is then the key of this point at any budget (a family's keys, made once)."""
        off = {f: getattr(self, f) for f in _ROUTING_FIELDS if getattr(self, f) != _DEFAULTS[f]}
        extra = None
        if off:
            extra = json.dumps({"attention_backend": self.attention_backend, "prefill_sizes": self.prefill_sizes,
                                **{f: v for f, v in off.items() if f not in ("attention_backend", "prefill_sizes")}})
        return self._key_text("budget_bytes", texts), extra

    @staticmethod
    def key_at(budget, parts: tuple[bytes, str | None]) -> str:
        """`key` of a point with budget_bytes `budget` and `key_parts` `parts`."""
        bj = int.__repr__(budget) if type(budget) is int else json.dumps(budget)
        k = hashlib.sha256(b'{"budget_bytes": ' + bj.encode() + parts[0]).hexdigest()[:24]
        return k if parts[1] is None else hashlib.sha256((k + parts[1]).encode()).hexdigest()[:24]

    def base_key(self, texts: "KeyTexts | None" = None) -> str:
        """sha256 of json.dumps({**asdict(self), "v": CACHE_VERSION}, sort_keys=True), first 24 hex digits.

        Built in that same text (json.dumps's ", " / ": " separators, keys sorted). `budget_bytes` sorts first
        and is the innermost axis of a grid: with `texts` (`KeyTexts`), the text after it is built once per
        distinct rest of the point."""
        text = texts.rest(self) if texts is not None else self._key_text("budget_bytes")
        b = self.budget_bytes
        bj = int.__repr__(b) if type(b) is int else json.dumps(b)
        return hashlib.sha256(b'{"budget_bytes": ' + bj.encode() + text).hexdigest()[:24]

    def _key_text(self, skip: str, texts: "KeyTexts | None" = None) -> bytes:
        """The key's JSON text after field `skip` (which must sort first), up to the closing brace."""
        parts = []
        for name, head in _KEY_FIELDS:
            if name == skip:
                continue
            v = CACHE_VERSION if name == "v" else getattr(self, name)
            if type(v) is tuple and len(v) > 8:  # shared by many points: serialised once per object (`texts`)
                parts.append(head.encode() + (texts.json(v) if texts is not None else json.dumps(v).encode()))
            else:
                parts.append(head.encode() + json.dumps(v, sort_keys=True).encode())
        return b"".join(parts) + b"}"


class KeyTexts:
    """The key texts of one batch of points, owned by the caller that holds those points (`run_points`,
    `SweepRun.keys`) and dropped with it: the JSON of each long tuple field, made once per tuple object (a grid's
    points share their sizes, distribution and model tuples), and each family's text after its budget. Entries are
    found by the identity of the objects and hold them, so an id is never reused while its entry lives."""

    def __init__(self):
        self._json: dict[int, tuple[tuple, bytes]] = {}  # id(tuple) -> (the tuple, its JSON)
        self._rest: dict[tuple, tuple] = {}  # the point without its budget -> (its tuples; the text after the budget)

    def json(self, v: tuple) -> bytes:
        hit = self._json.get(id(v))
        if hit is None or hit[0] is not v:
            hit = self._json[id(v)] = (v, json.dumps(v).encode())
        return hit[1]

    def rest(self, p: "Point") -> bytes:
        rk = (id(p.model), id(p.sizes), id(p.dist_sizes), id(p.dist_weights), id(p.mixed),
              p.profile, p.profile_digest, p.fusion, p.graph, p.layout, p.distribution,
              type(p.ctx), p.ctx, type(p.gpu_util), p.gpu_util, type(p.shared_pool), p.shared_pool,
              type(p.workspace_bytes), p.workspace_bytes)
        hit = self._rest.get(rk)
        if hit is None or not (hit[0] is p.model and hit[1] is p.sizes and hit[2] is p.dist_sizes
                               and hit[3] is p.dist_weights and hit[4] is p.mixed):
            hit = self._rest[rk] = (p.model, p.sizes, p.dist_sizes, p.dist_weights, p.mixed,
                                    p._key_text("budget_bytes", self))
        return hit[5]


_FIELD_NAMES = tuple(f.name for f in fields(Point))
_FAMILY_FIELDS = itemgetter(*[f for f in _FIELD_NAMES if f != "budget_bytes"])  # a point's fields but its budget
# fields a step setup (`Point.step_setup`) and the decode steps priced for it do not read, besides the fusion, graph
# mode and sizes it is given
_NOT_SETUP = ("fusion", "graph", "layout", "sizes", "distribution", "dist_sizes", "dist_weights", "budget_bytes",
              "mixed", "shared_pool", "gpu_util", "workspace_bytes")
_SETUP_FIELDS = itemgetter(*[f for f in _FIELD_NAMES if f not in _NOT_SETUP])
# the fields in base_key (a point's key before the routing and recipe fields existed); every later field is a step
# knob, outside base_key (in `key` only off its default)
_BASE_FIELDS = ("model", "profile", "profile_digest", "fusion", "graph", "layout", "sizes", "distribution",
                "dist_sizes", "dist_weights", "budget_bytes", "ctx", "mixed", "shared_pool", "gpu_util",
                "workspace_bytes")
_ROUTING_FIELDS = _FIELD_NAMES[len(_BASE_FIELDS):]
assert _FIELD_NAMES[:len(_BASE_FIELDS)] == _BASE_FIELDS
# the speculative fields (spec.py prices the verify and draft steps); the other knobs decide a plain decode step
SPEC_FIELDS = ("spec_tokens", "acceptance", "draft", "spec_engine", "decode_sizes")
STEP_KNOBS = tuple(f for f in _ROUTING_FIELDS if f not in SPEC_FIELDS)
_STEP_KNOBS = itemgetter(*STEP_KNOBS)
# (Point field, StepSetup argument) of the knobs a step setup takes by name (the capture's come through Capture)
_AS_SETUP = {"kv_cache": "cache"}
_SETUP_ARGS = tuple((f, _AS_SETUP.get(f, f)) for f in STEP_KNOBS
                    if _AS_SETUP.get(f, f) in {g.name for g in fields(StepSetup) if g.init})
_DEFAULTS = {f.name: f.default for f in fields(Point) if f.name in _ROUTING_FIELDS}
_KEY_FIELDS = tuple((k, ("" if i == 0 else ", ") + json.dumps(k) + ": ")
                    for i, k in enumerate(sorted([f.name for f in fields(Point) if f.name not in _ROUTING_FIELDS]
                                                 + ["v"])))
assert _KEY_FIELDS[0][0] == "budget_bytes"


def model_tuple(m: ModelSpec) -> tuple:
    """tuple(asdict(m).values()) (ModelSpec's fields are plain scalars), one shared tuple per model."""
    t = _MODEL_TUPLES.get(m)
    if t is None:
        t = _MODEL_TUPLES.put(m, tuple(asdict(m).values()))
    return t


_MODEL_TUPLES = memo("sweep.grid._MODEL_TUPLES", "a ModelSpec's fields as one shared tuple, by the (frozen) spec",
                     1024)


def point_for(model: ModelSpec, profile: str, **kw) -> Point:
    return Point(model=model_tuple(model), profile=profile, profile_digest=load_cached_profile(profile)[2], **kw)


_MEM = memo("sweep.grid._MEM", "a sweep worker's (layout memory, KV-cache bytes, KV tokens) by the layout's "
            "point fields (values): points that differ only in budget or distribution share it", 100_000)
_EXPECT = memo("sweep.grid._EXPECT", "a sweep worker's expectations (stepcost Expected) by the point fields they "
               "read (values): points that differ only in layout or budget share the baselines", 100_000)


def _expectation(p: Point, fusion: str, mode: str, sizes: tuple[int, ...]) -> Expected:
    """Expected figures over the distribution (and the mixed share) for one fusion level and graph mode
    (`stepcost.expected_step`: the optimizer reports the same figures from the same function)."""
    key = (p.model, p.profile_digest, fusion, mode, sizes if mode != "none" else (), p.dist_sizes,
           p.dist_weights, p.ctx, p.mixed) + _STEP_KNOBS(p.__dict__)
    hit = _EXPECT.get(key)
    if hit is None:
        hit = _EXPECT.put(key, DEFAULT.expected(p.step_setup(fusion, mode, sizes), p.dist_sizes, p.dist_weights,
                                                p.ctx, p.mixed))
    return hit


def evaluate_point(p: Point) -> dict:
    """All figures of one grid point (pure: the same point always gives the same row).

    `step_evals` counts the step times the point's expected step time sums over (one per batch size and
    step kind in its own mode; the eager baselines and any memoised sums are not counted). Points that differ
    only in their budget share one row but for `budget_bytes` and `fits_budget` (memoised per process)."""
    bkey = _FAMILY_FIELDS(p.__dict__) + (type(p.ctx), type(p.shared_pool), type(p.gpu_util),  # 1 == 1.0 == True
                                         type(p.workspace_bytes))
    base = _ROWS.get(bkey)
    if base is None:
        base = _ROWS.put(bkey, _evaluate(p))
    row = base.copy()
    row["budget_bytes"] = p.budget_bytes
    row["fits_budget"] = bool(row["graph_bytes"] <= p.budget_bytes)
    return row


_ROWS = memo("sweep.grid._ROWS", "a sweep worker's rows without their budget, by the point's other fields "
             "(values, with the types JSON tells apart): a grid's budget axis shares one row", 20_000)


def _evaluate(p: Point) -> dict:
    if p.spec_tokens:
        return _evaluate_spec(p)
    row = _evaluate_plain(p)
    ms = row["expected_step_ms"]
    row.update(spec_tokens=0, acceptance=None, tokens_per_step=1.0, ms_per_token=ms, decode_step_ms=ms)
    return row


def _evaluate_spec(p: Point) -> dict:
    """A speculative point: per batch size b of the distribution, one verify step of b(1 + k) tokens over the
    point's token sizes plus the draft loop (engine/spec.py predict_spec_setup: its routing, graph modes and
    per-token arithmetic); expectations weight each batch size by its share of steps. tokens_per_step is the
    acceptance model's (constant a: (1 - a^(k+1)) / (1 - a)); ms_per_token = expected step / tokens_per_step;
    decode_step_ms = the plain decode step expected over the same distribution at `decode_sizes`. Memory: the
    target's graphs at the token sizes in the mode verify steps run in (the draft's own graphs are not counted:
    `launchsim graph-memory --spec-tokens` has them). The eager and graph-none baselines are not computed (None)."""
    from dataclasses import replace as dc_replace

    from simulator.engine.setup import SpecSetup
    from simulator.engine.spec import predict_spec_setup, verify_graph_mode
    from simulator.model.spec import Acceptance

    m = p.spec
    prof, costs, _ = load_cached_profile(p.profile)
    sizes = tuple(p.sizes)
    k = p.spec_tokens
    vgraph, _ = verify_graph_mode(p.spec_engine, p.graph, p.attention_backend, k)
    mkey = (p.model, p.profile_digest, p.fusion, vgraph, sizes, p.shared_pool, p.workspace_bytes, p.gpu_util, None)
    hit = _MEM.get(mkey)
    if hit is None:
        mem = GraphMemoryModel(m, costs, p.fusion, vgraph).layout(sizes, p.shared_pool) if vgraph != "none" else \
            GraphMemoryModel(m, costs, p.fusion, "none").layout((), p.shared_pool)
        kv = kv_cache_bytes(m, prof, mem, p.workspace_bytes, p.gpu_util)
        hit = _MEM.put(mkey, (mem, kv, kv_cache_tokens(m, kv)))
    mem, kv, kv_tokens = hit
    acc = Acceptance.constant(p.acceptance, k)
    setup = dc_replace(p.step_setup(p.fusion, p.graph, sizes),
                       spec=SpecSetup(k, acc, p.draft, engine=p.spec_engine))
    if p.graph == "none":
        setup = dc_replace(setup, capture=dc_replace(setup.capture, sizes=()))
    step = pad = exe = wmean = over = seqs = 0.0
    for b, w in zip(p.dist_sizes, p.dist_weights):
        sp = predict_spec_setup(setup, int(b), p.ctx, baseline=False)
        r = sp.verify_route
        step += w * sp.step_ms
        pad += w * r.padding
        exe += w * r.executed
        wmean += w * r.padding / r.executed
        over += w * float(r.overflow)
        seqs += w * b
    t = acc.tokens_per_step
    dsizes = tuple(p.decode_sizes) if p.decode_sizes is not None else sizes
    dec = _expectation(dc_replace(p, spec_tokens=0, acceptance=None, decode_sizes=None), p.fusion, p.graph,
                       dsizes).step_s * 1e3
    return {
        "model": m.name, "profile": p.profile, "fusion": p.fusion, "graph": p.graph, "layout": p.layout,
        "sizes": len(sizes), "max_size": max(sizes) if sizes else 0, "distribution": p.distribution,
        "budget_bytes": p.budget_bytes, "ctx": p.ctx, "mixed_share": 0.0, "shared_pool": p.shared_pool,
        "graphs": mem.graphs, "pool_bytes": mem.pool_bytes, "static_bytes": mem.static_buffer_bytes,
        "graph_bytes": mem.total_bytes, "fits_budget": bool(mem.total_bytes <= p.budget_bytes),
        "kv_cache_bytes": kv, "kv_tokens": kv_tokens, "capture_s": mem.capture_s, "memory_source": mem.source,
        "waste": pad / exe if exe else 0.0, "waste_mean": wmean, "padded_rows": pad, "overflow_frac": over,
        "expected_step_ms": step, "unpadded_step_ms": None, "padding_cost_ms": None,
        "graph_none_step_ms": None, "speedup_vs_graph_none": None, "eager_step_ms": None, "speedup_vs_eager": None,
        "tokens_per_s": seqs * t / (step / 1e3), "step_evals": len(p.dist_sizes),
        "spec_tokens": k, "acceptance": p.acceptance, "tokens_per_step": t, "ms_per_token": step / t,
        "decode_step_ms": dec,
    }


def _evaluate_plain(p: Point) -> dict:
    m = p.spec
    prof, costs, _ = load_cached_profile(p.profile)
    sizes = tuple(p.sizes)
    mkey = (p.model, p.profile_digest, p.fusion, p.graph, sizes, p.shared_pool, p.workspace_bytes, p.gpu_util,
            p.prefill_sizes)
    hit = _MEM.get(mkey)  # points that differ only in budget or distribution share the layout's memory
    if hit is None:
        mem = GraphMemoryModel(m, costs, p.fusion, p.graph).layout(sizes, p.shared_pool,
                                                                   prefill_sizes=p.prefill_sizes)
        kv = kv_cache_bytes(m, prof, mem, p.workspace_bytes, p.gpu_util)
        hit = _MEM.put(mkey, (mem, kv, kv_cache_tokens(m, kv)))
    mem, kv, kv_tokens = hit
    acc = _expectation(p, p.fusion, p.graph, sizes)
    gnone = _expectation(p, p.fusion, "none", sizes).step_s
    eager = _expectation(p, "none", "none", sizes).step_s
    ms = 1e3
    return {
        "model": m.name, "profile": p.profile, "fusion": p.fusion, "graph": p.graph, "layout": p.layout,
        "sizes": len(sizes), "max_size": max(sizes), "distribution": p.distribution,
        "budget_bytes": p.budget_bytes, "ctx": p.ctx, "mixed_share": p.mixed[0] if p.mixed else 0.0,
        "shared_pool": p.shared_pool,
        "graphs": mem.graphs, "pool_bytes": mem.pool_bytes, "static_bytes": mem.static_buffer_bytes,
        "graph_bytes": mem.total_bytes, "fits_budget": bool(mem.total_bytes <= p.budget_bytes),
        "kv_cache_bytes": kv, "kv_tokens": kv_tokens, "capture_s": mem.capture_s,
        "memory_source": mem.source,
        "waste": acc.waste, "waste_mean": acc.waste_mean, "padded_rows": acc.padded_rows,
        "overflow_frac": acc.overflow_share,
        "expected_step_ms": acc.step_s * ms, "unpadded_step_ms": acc.unpadded_s * ms,
        "padding_cost_ms": (acc.step_s - acc.unpadded_s) * ms,
        "graph_none_step_ms": gnone * ms, "speedup_vs_graph_none": gnone / acc.step_s,
        "eager_step_ms": eager * ms, "speedup_vs_eager": eager / acc.step_s,
        "tokens_per_s": acc.tokens / acc.step_s,
        "step_evals": acc.evals,
    }


def evaluate_chunk(points: list[Point]) -> tuple[list[dict], dict]:
    """A worker's task: rows of `points`, plus the statistics of this process's step-cost memo for the chunk."""
    st = DEFAULT.stats
    s0, l0 = st["simulated"], st["lookups"]
    _prebuild(points)
    rows = [evaluate_point(p) for p in points]
    return rows, {"simulated": st["simulated"] - s0, "lookups": st["lookups"] - l0,
                  "evals": sum(r["step_evals"] for r in rows)}


def _prebuild(points: list[Point]) -> None:
    """Tell the step-cost memo which decode steps the plain points' expectations will price
    (`StepCostCache.prebuild`: their steps built over the batch axis at once, a task's batch sizes together instead
    of one distribution at a time; the same figures). Points are grouped by every field but those a step setup does
    not read (`_NOT_SETUP`), so a setup is made once per group."""
    items: dict[tuple, list] = {}
    for p in points:
        if p.spec_tokens:
            continue
        rest = _SETUP_FIELDS(p.__dict__)
        for fusion, mode in ((p.fusion, p.graph), (p.fusion, "none"), ("none", "none")):
            k = (fusion, mode, p.sizes if mode != "none" else (), rest)
            e = items.get(k)
            if e is None:
                e = items[k] = [p, fusion, mode, {}]
            e[3].update(dict.fromkeys(p.dist_sizes))
    DEFAULT.prebuild([(q.step_setup(fusion, mode, tuple(q.sizes)), list(bs), q.ctx)
                      for q, fusion, mode, bs in items.values()])


# -- the cache ------------------------------------------------------------------------------------
def _valid_row(row) -> dict | None:
    """A cached row with exactly ROW_KEYS and plain JSON scalars, in ROW_KEYS order; None otherwise."""
    if isinstance(row, dict) and set(row) == _PLAIN_KEYS and isinstance(row.get("expected_step_ms"), (int, float)):
        # a row cached before the speculative axes: a plain decode point
        ms = row["expected_step_ms"]
        row = {**row, "spec_tokens": 0, "acceptance": None, "tokens_per_step": 1.0, "ms_per_token": ms,
               "decode_step_ms": ms}
    if not isinstance(row, dict) or set(row) != set(ROW_KEYS):
        return None
    if not all(v is None or isinstance(v, (str, int, float, bool)) for v in row.values()):
        return None
    return {k: row[k] for k in ROW_KEYS}


def load_cache(out: Path) -> dict[str, dict]:
    """Rows by point key from OUT/cache.jsonl. Lines that are torn (an interrupted write), not JSON, not UTF-8,
    or hold a row of the wrong shape are ignored: those points are computed again."""
    path = Path(out) / CACHE_FILE
    if not path.is_file():
        return {}
    done = {}
    for raw in path.read_bytes().splitlines():
        try:
            rec = json.loads(raw.decode("utf-8"))
            row = _valid_row(rec["row"])
            if row is not None and isinstance(rec["key"], str):
                done[rec["key"]] = row
        except (UnicodeDecodeError, ValueError, KeyError, TypeError, RecursionError):
            continue
    return done


def cache_line(key: str, row: dict) -> str:
    """One cache record: `json.dumps({"key": key, "row": row})` and a line break."""
    return json.dumps({"key": key, "row": row}) + "\n"


_SENT_B, _SENT_F = "\x00budget_bytes\x00", "\x00fits_budget\x00"  # stand-ins no row value can hold


def budget_template(row: dict, encode) -> list[str] | None:
    """`encode(row)` split around its budget_bytes and fits_budget values: [before, between, after] (the same
    text for every row that differs from `row` only in those two; `fill_budget` puts them back), or None where
    the text cannot be split so (a NaN the encoder refuses, the stand-ins not found exactly once)."""
    t = dict(row)
    t["budget_bytes"], t["fits_budget"] = _SENT_B, _SENT_F
    try:
        text = encode(t)
    except ValueError:
        return None
    b, f = json.dumps(_SENT_B), json.dumps(_SENT_F)
    if text.count(b) != 1 or text.count(f) != 1 or text.index(b) > text.index(f):
        return None
    head, rest = text.split(b)
    mid, tail = rest.split(f)
    return [head, mid, tail]


def fill_budget(tpl: list[str], row: dict) -> str | None:
    """The text of `row` from its family's template (JSON of an int budget and a bool); None for another type."""
    b, f = row["budget_bytes"], row["fits_budget"]
    if type(b) is not int or type(f) is not bool:
        return None
    return tpl[0] + int.__repr__(b) + tpl[1] + ("true" if f else "false") + tpl[2]


def append_cache(out: Path, rows: list[tuple[str, dict]], text: str | None = None) -> None:
    """Append one line per point in a single write to an O_APPEND file, then fsync (`text`: those lines made
    already, `cache_line` of each)."""
    path = Path(out) / CACHE_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    if text is None:
        text = "".join(cache_line(k, r) for k, r in rows)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        if os.fstat(fd).st_size and _last_byte(path) != b"\n":
            text = "\n" + text  # close a torn line so the new records stay parseable
        os.write(fd, text.encode())
        os.fsync(fd)
    finally:
        os.close(fd)


def _last_byte(path: Path) -> bytes:
    with open(path, "rb") as f:
        f.seek(-1, os.SEEK_END)
        return f.read(1)


# -- the run loop ---------------------------------------------------------------------------------
@dataclass
class SweepRun:
    rows: list[dict]  # in point order
    computed: int  # points evaluated in this run
    cached: int  # points taken from the cache
    simulated_steps: int  # unique step simulations (memo misses) in this run
    step_lookups: int  # step-time memo lookups in this run
    step_evals: int = 0  # step times the computed points' expectations sum over
    wall_s: float = 0.0
    points: list[Point] = field(default_factory=list, repr=False)
    # per row: the family of points it was computed in (rows of one family differ only in budget_bytes and
    # fits_budget; -1: a row read from the cache), so writers encode a family's text once
    family: list[int] = field(default_factory=list, repr=False)

    @property
    def keys(self) -> list[str]:
        """The cache key of every point, in point order (computed when asked: a run without a cache needs none)."""
        texts = KeyTexts()
        return [p.key(texts) for p in self.points]


def _chunks(items: list, n: int) -> list[list]:
    return [items[i:i + n] for i in range(0, len(items), n)]


def run_points(points: list[Point], out: Path | None = None, executor: str = "local", workers: int = 2,
               chunk: int = 64, progress: bool = True, max_points: int | None = None) -> SweepRun:
    """Evaluate `points` (resuming from OUT/cache.jsonl when `out` is given). `max_points` stops after that
    many newly computed points (used to test resumption)."""
    from simulator.sweep.executors import run_chunks

    t0 = time.perf_counter()
    # points that differ only in their budget form one family (its rows differ only in budget_bytes and
    # fits_budget): found by the identity of every other field's value (the points are alive for the run, so
    # equal ids are the same values; equal values in distinct objects only make two families of the same row)
    fam_get = _FAMILY_FIELDS
    fam_of: dict[tuple, int] = {}
    fam = [fam_of.setdefault(tuple(map(id, fam_get(p.__dict__))), len(fam_of)) for p in points]
    # only the cache needs the keys: each family's key text is made once; every key up front where a cache was
    # read (they pick the pending points), else each finished task's own, in on_done (while the workers run)
    done = load_cache(out) if out is not None else {}
    keys: list[str | None] = [None] * len(points)
    parts: dict[int, tuple] = {}
    texts = KeyTexts()  # this run's key texts (its points are alive for the run)

    def key_of(i: int) -> str:
        k = keys[i]
        if k is None:
            p = points[i]
            kp = parts.get(fam[i])
            if kp is None:
                kp = parts[fam[i]] = p.key_parts(texts)
            k = keys[i] = Point.key_at(p.budget_bytes, kp)
        return k

    pending = [i for i in range(len(points)) if key_of(i) not in done] if done else list(range(len(points)))
    cached = len(points) - len(pending)
    if max_points is not None:
        pending = pending[:max_points]
    # tasks never straddle a (model, profile, fusion, ctx) group: its points share step evaluations,
    # so one worker's memo serves the whole task
    def group(i: int) -> tuple:
        q = points[i]
        return (q.model, q.profile, q.fusion, q.ctx)

    # points that differ only in their budget form one family: its first point is evaluated (by a worker), the
    # others are its row with their own budget_bytes and fits_budget (evaluate_point's rule, here in the parent)
    slot: dict[int, int] = {}
    members: list[list[int]] = []
    for i in pending:
        if fam[i] not in slot:
            slot[fam[i]] = len(members)
            members.append([])
        members[slot[fam[i]]].append(i)
    reps = [m[0] for m in members]
    fam_at = {m[0]: f for f, m in enumerate(members)}
    reps.sort(key=lambda i: (group(i), points[i].graph, i))
    # `chunk` points are sent per task; fewer where that would leave fewer than 4 tasks per worker (a family
    # stands for many points, so a grid of few families would otherwise run on one worker)
    size = max(1, min(chunk, -(-len(reps) // (4 * workers))))
    tasks = [c for _, g in itertools.groupby(reps, key=group) for c in _chunks(list(g), size)]
    weight = [sum(len(members[fam_at[i]]) for i in t) for t in tasks]  # points per task
    # each local worker takes a contiguous run of tasks (balanced by points): a group's steps are then simulated
    # by one worker, not by every worker that happens to pick up one of its chunks
    starts = np.cumsum([0] + weight[:-1])
    affinity = [min(workers - 1, int(s0 * workers // max(len(pending), 1))) for s0 in starts]
    fresh: dict[int, dict] = {}
    family: dict[int, int] = {}
    stats = {"simulated": 0, "lookups": 0, "evals": 0}

    def on_done(task_idx: int, rows: list[dict], st: dict) -> None:
        lines = []
        for rep, r in zip(tasks[task_idx], rows):
            f = fam_at[rep]
            tpl = budget_template(r, json.dumps) if out is not None else None
            for i in members[f]:
                if i == rep:
                    row = r
                else:
                    row = r.copy()
                    b = points[i].budget_bytes
                    row["budget_bytes"] = b
                    row["fits_budget"] = bool(row["graph_bytes"] <= b)
                fresh[i] = row
                family[i] = f
                if out is not None:
                    t = fill_budget(tpl, row) if tpl is not None else None
                    k = key_of(i)
                    lines.append(cache_line(k, row) if t is None else '{"key": "' + k + '", "row": ' + t + "}\n")
            stats["evals"] += r["step_evals"] * len(members[f])
        if out is not None:
            append_cache(out, [], "".join(lines))
        stats["simulated"] += st["simulated"]
        stats["lookups"] += st["lookups"]

    try:
        run_chunks(evaluate_chunk, [[points[i] for i in t] for t in tasks], on_done, executor, workers, progress,
                   total_points=len(pending), cached_points=cached, affinity=affinity, weights=weight)
    except (KeyboardInterrupt, Interrupted) as e:
        if out is None:
            raise
        raise Interrupted(
            f"{str(e) or 'interrupted'}: {cached + len(fresh)} of {len(points)} points are saved in "
            f"{Path(out) / CACHE_FILE}; rerun the same command to resume from there",
            getattr(e, "code", 130)) from None
    rows, fams = [], []
    for i in range(len(points)):
        r = fresh.get(i)
        f = family.get(i, -1)
        if r is None and done:
            r = done.get(key_of(i))
        if r is not None:
            rows.append(r)
            fams.append(f)
    return SweepRun(rows, computed=len(fresh), cached=cached, simulated_steps=stats["simulated"],
                    step_lookups=stats["lookups"], step_evals=stats["evals"], wall_s=time.perf_counter() - t0,
                    points=points, family=fams)
