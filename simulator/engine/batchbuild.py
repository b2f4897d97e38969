"""Many steps of one setup built at once over the batch axis: one traced build, evaluated with numpy.

`build_rows(setup, shapes, ...)` gives, for decode shapes that differ only in `decode_seqs` and `padding`, the
op figures batched.py's `_Row` would give from `setup.build(shape)` of each, without running the builder per
shape:

1. The builder runs once on a shape whose `decode_seqs` and `padding` are symbols (`Sym`): every size it derives
   from them (tokens, flops, bytes, GEMM m, attention batch) is an expression recorded with the Python operation
   that made it (+, -, *, /, //, unary -, and float(x), int(x), int(round(x)) where the code asks the size for
   them: `kernels.Traced`). Each symbol carries its value at a probe shape, so every comparison the builder makes
   (a validity check, `max(1, seqs)`, `attn_tokens == seqs`) is answered as the probe answers it and recorded as a
   guard. Anything else a size meets (bool(), a bare int(), a math function, hashing by value) makes the trace give
   up: those shapes are built one by one as before. A compiled step's trace runs through Inductor's pass
   (model/inductor.py): the plan that fits the probe's list, its fit and its kernels' sizes recorded the same way.
2. The recorded expressions are evaluated over the shapes' arrays with the matching numpy operations (int64 for
   Python ints, float64 for floats: the same IEEE operations elementwise, so each value is the one the scalar
   build computes; ints stay far below 2**53). Shapes whose guards all come out as at the probe took the probe's
   path through the builder; the others are traced again from one of them (a few rounds), and what is left is
   built one by one.
3. Each distinct op of the step (a template position, batched.py's `_Pattern`) gets its per-shape field values;
   equal values give one `Op`, costed once through batched.py's figures memo.

Exactness is checked, not assumed: the probe shape is also built by the real builder, and its traced op list must
equal it value for value (else the trace is dropped); tests/engine/test_batchbuild.py checks traced rows == built
rows over random shapes.
"""

from __future__ import annotations

import operator

import numpy as np

from simulator.model import workload as W
from simulator.model.kernels import Op
from simulator.model.workload import StepShape

_PY = {"add": operator.add, "sub": operator.sub, "mul": operator.mul, "div": operator.truediv,
       "floordiv": operator.floordiv, "neg": operator.neg, "float": float,
       "lt": operator.lt, "le": operator.le, "gt": operator.gt, "ge": operator.ge, "eq": operator.eq,
       "ne": operator.ne, "trunc": int, "rint": lambda v: int(round(v))}
_NP = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.true_divide, "floordiv": np.floor_divide,
       "neg": np.negative, "float": lambda a: np.asarray(a, dtype=np.float64),
       "lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal, "eq": np.equal,
       "ne": np.not_equal, "trunc": lambda a: _as_int64(a, np.trunc), "rint": lambda a: _as_int64(a, np.rint)}
_MARK = "\x00sym\x00"  # what a symbol formats as: an op name holding it cannot be traced


def _as_int64(a, to_int):
    """int(x) (`to_int` np.trunc) or int(round(x)) (np.rint: ties to even, as round) of each value, as int64."""
    a = np.asarray(a)
    return a if a.dtype.kind in "iu" else to_int(a).astype(np.int64)


class Untraceable(Exception):
    """The builder did something with a size that the trace cannot replay."""


class _Trace:
    def __init__(self):
        self.guards: list[tuple[Sym, bool]] = []


_ACTIVE: list[_Trace | None] = [None]
STATS = {"traced": 0}  # rows made from a trace (tests read it: the traced path is taken where it should be)


class Sym(W.Traced):
    """A size of the traced build: an operation `op` on `a`, `b` (symbols or Python numbers), with its value `v`
    at the probe shape."""

    __slots__ = ("op", "a", "b", "v")

    def __init__(self, op, a, b, v):
        self.op, self.a, self.b, self.v = op, a, b, v

    @staticmethod
    def _val(x):
        return x.v if isinstance(x, Sym) else x

    def _bin(self, op, a, b):
        if not isinstance(a, (Sym, int, float)) or not isinstance(b, (Sym, int, float)) or isinstance(
                a, bool) or isinstance(b, bool):
            raise Untraceable(op)
        return Sym(op, a, b, _PY[op](self._val(a), self._val(b)))

    def __add__(self, o): return self._bin("add", self, o)
    def __radd__(self, o): return self._bin("add", o, self)
    def __sub__(self, o): return self._bin("sub", self, o)
    def __rsub__(self, o): return self._bin("sub", o, self)
    def __mul__(self, o): return self._bin("mul", self, o)
    def __rmul__(self, o): return self._bin("mul", o, self)
    def __truediv__(self, o): return self._bin("div", self, o)
    def __rtruediv__(self, o): return self._bin("div", o, self)
    def __floordiv__(self, o): return self._bin("floordiv", self, o)
    def __rfloordiv__(self, o): return self._bin("floordiv", o, self)

    def __neg__(self):
        return Sym("neg", self, None, -self.v)

    def as_float(self):
        return Sym("float", self, None, float(self.v))

    def as_int(self):
        return Sym("trunc", self, None, int(self.v))

    def round_int(self):
        return Sym("rint", self, None, int(round(self.v)))

    def _cmp(self, op, o):
        tr = _ACTIVE[0]
        if tr is None or not isinstance(o, (Sym, int, float)) or isinstance(o, bool):
            raise Untraceable(op)
        g = Sym(op, self, o, _PY[op](self.v, self._val(o)))
        tr.guards.append((g, g.v))
        return g.v

    def __lt__(self, o): return self._cmp("lt", o)
    def __le__(self, o): return self._cmp("le", o)
    def __gt__(self, o): return self._cmp("gt", o)
    def __ge__(self, o): return self._cmp("ge", o)
    def __eq__(self, o): return self._cmp("eq", o)
    def __ne__(self, o): return self._cmp("ne", o)

    __hash__ = object.__hash__  # by identity (the builder never keys a dict on a size)

    def __bool__(self):
        raise Untraceable("bool")

    def __index__(self):
        raise Untraceable("index")

    def __int__(self):
        raise Untraceable("int")

    def __float__(self):
        raise Untraceable("float")

    def __format__(self, spec):
        return _MARK

    __str__ = __repr__ = lambda self: _MARK


def _eval(x, leaves: dict, memo: dict):
    """The values of `x` over the shapes (an array, or the Python number itself)."""
    if not isinstance(x, Sym):
        return x
    k = id(x)
    r = memo.get(k)
    if r is None:
        if x.op == "leaf":
            r = leaves[x.a]
        elif x.b is None:
            r = _NP[x.op](_eval(x.a, leaves, memo))
        else:
            r = _NP[x.op](_eval(x.a, leaves, memo), _eval(x.b, leaves, memo))
        memo[k] = r
    return r


_FIELDS = ("flops", "bytes", "fixed_gpu_s", "fixed_host_s")
_new = object.__new__
assert not hasattr(Op, "__post_init__") and not hasattr(Op, "__slots__")  # distinct_ops makes Ops field by field


def _trace(setup, probe: StepShape):
    """The probe's step built with symbolic decode_seqs and padding: (ops, guards)."""
    ds = Sym("leaf", "decode_seqs", None, probe.decode_seqs)
    pad = Sym("leaf", "padding", None, probe.padding)
    shape = StepShape(ds, probe.ctx, probe.prefill_seqs, probe.prefill_len, pad, probe.q_len)
    tr = _Trace()
    _ACTIVE[0], W.TRACING[0] = tr, True
    try:
        step = setup.build(shape)
    except Untraceable:
        return None
    except Exception:  # noqa: BLE001 — anything the symbols trip over: build the shapes one by one
        return None
    finally:
        _ACTIVE[0], W.TRACING[0] = None, False
    for o in step.ops:
        if _MARK in o.name or isinstance(o.fixed_host_s, Sym) or isinstance(o.fixed_gpu_s, Sym) or any(
                isinstance(k, Sym) for k, _ in o.shape):
            return None
    return step.ops, tr.guards


def traceable(setup, shape: StepShape) -> bool:
    """Whether `shape`'s builds can be traced: pure decode of the reference (its compiled level included: Inductor's
    pass, model/inductor.py, prices a traced op list with its plan for the probe's list) or fused recipe."""
    return (shape.prefill_seqs == 0 and setup.recipe in ("reference", "fused")
            and type(shape.decode_seqs) is int and type(shape.padding) is int)


def group_key(shape: StepShape) -> tuple:
    return (shape.ctx, shape.q_len, shape.prefill_seqs, shape.prefill_len)


def rows_of(setup, shapes: list[StepShape], make_row, make_traced, rounds: int = 6,
            traces: list | None = None) -> dict:
    """shape -> row for `shapes` (one group_key, all traceable): traced where the trace replays, else
    `make_row(shape)` (the scalar build). `make_traced(template_ops, probe_row, shapes, values, checked)` turns a
    trace into rows of `shapes` (None: it does not match the probe's build; `checked`: this trace matched before,
    skip the check); `values(sym)`: sym's value per shape. `traces`: the caller's list of this group's traces that
    matched (probe, probe row, template, guards), tried first and extended here (a sweep asks for the same step
    at other batch sizes many times: one trace serves them all)."""
    out: dict = {}
    left = list(shapes)
    traces = [] if traces is None else traces

    def replay(tops, prow, guards, shs, checked):
        """Rows of the shapes of `shs` whose guards come out as the probe's; the others (None: no match)."""
        leaves = {"decode_seqs": np.fromiter((s.decode_seqs for s in shs), np.int64, len(shs)),
                  "padding": np.fromiter((s.padding for s in shs), np.int64, len(shs))}
        memo: dict = {}
        ok = np.ones(len(shs), dtype=bool)
        with np.errstate(all="ignore"):  # shapes off the probe's path may divide by zero: their guards fail
            for g, want in guards:
                ok &= np.asarray(_eval(g, leaves, memo)) == want
            sel = np.flatnonzero(ok)
            made = make_traced(tops, prow, [shs[i] for i in sel.tolist()],
                               lambda x: np.broadcast_to(_eval(x, leaves, memo), ok.shape)[sel], checked)
        if made is None:
            return None, shs
        return made, [shs[i] for i in np.flatnonzero(~ok).tolist()]

    for probe, prow, tops, guards in traces:
        if not left:
            break
        made, rest = replay(tops, prow, guards, left, True)
        if made is not None:
            out.update(made)
            STATS["traced"] += len(made)
            left = rest
    for _ in range(rounds):
        if len(left) < 2:
            break
        probe = left[0]
        prow = out[probe] = make_row(probe)
        t = _trace(setup, probe)
        if t is None:
            left = left[1:]
            break
        tops, guards = t
        made, rest = replay(tops, prow, guards, left[1:], False)
        if made is None:
            left = left[1:]
            break
        traces.append((probe, prow, tops, guards))
        out.update(made)
        STATS["traced"] += len(made)
        left = rest
    for s in left:
        if s not in out:
            out[s] = make_row(s)
    return out


def probe_values(x):
    """A symbol's value at the probe, as `values` gives them (an array of one)."""
    return np.asarray([x.v])


class Column:
    """One distinct position of a traced step over the shapes: the template op `tmpl`, the distinct values of its
    symbolic fields (`reps`, one list per field: `dyn` op fields, then the `sdyn` shape entries) and, per shape,
    which distinct op it holds (`inv`; None: the template itself, no symbolic field). The real ops are made on
    demand (`op(j)`): pricing reads the values (`values`), not Op objects."""

    __slots__ = ("tmpl", "dyn", "sdyn", "reps", "inv", "n", "_ops")

    def __init__(self, tmpl, dyn=(), sdyn=(), reps=(), inv=None):
        self.tmpl, self.dyn, self.sdyn, self.reps, self.inv = tmpl, list(dyn), list(sdyn), list(reps), inv
        self.n = len(self.reps[0]) if self.reps else 1
        self._ops: list | None = None if self.reps else [tmpl]

    def values(self, field: str) -> list | None:
        """The distinct ops' values of an op field ("flops", "bytes") or shape entry ("m", "batch"...): a list
        (one per distinct op), or None where the template has no such shape entry."""
        o = self.tmpl
        if field in _FIELDS:
            if field in self.dyn:
                return self.reps[self.dyn.index(field)]
            return [getattr(o, field)] * self.n
        for i, (k, v) in enumerate(o.shape):
            if k == field:
                if i in self.sdyn:
                    return self.reps[len(self.dyn) + self.sdyn.index(i)]
                return [v] * self.n
        return None

    def op(self, j: int) -> Op:
        if self._ops is None:
            self._ops = [None] * self.n
        op = self._ops[j]
        if op is None:
            o = self.tmpl
            d = {"name": o.name, "op_class": o.op_class, "path": o.path, "flops": o.flops, "bytes": o.bytes,
                 "shape": o.shape, "fixed_gpu_s": o.fixed_gpu_s, "fixed_host_s": o.fixed_host_s}
            for f, r in zip(self.dyn, self.reps):
                d[f] = r[j]
            if self.sdyn:
                shp = list(o.shape)
                for q, i in enumerate(self.sdyn):
                    shp[i] = (shp[i][0], self.reps[len(self.dyn) + q][j])
                d["shape"] = tuple(shp)
            op = _new(Op)  # Op(**d) without the frozen dataclass's per-field __setattr__ (it has no post-init)
            op.__dict__.update(d)
            self._ops[j] = op
        return op


def distinct_ops(tops, firsts: list[int], n: int, values) -> list[Column]:
    """The columns of `n` shapes at the template's distinct positions `firsts` (`Column`). `values(sym)`: sym's
    per-shape values (an array over the shapes)."""
    out = []
    for p in firsts:
        o = tops[p]
        dyn = [f for f in _FIELDS if isinstance(getattr(o, f), Sym)]
        sdyn = [i for i, (_, v) in enumerate(o.shape) if isinstance(v, Sym)]
        if not dyn and not sdyn:
            out.append(Column(o))
            continue
        arrs = [np.asarray(values(getattr(o, f))) for f in dyn] + [np.asarray(values(o.shape[i][1])) for i in sdyn]
        # one distinct op per distinct combination of the fields' values, numbered in order of first appearance
        inv_first = _distinct_rows(arrs, n)
        if inv_first is None:  # a dict over the shapes' value tuples: Python numbers, as the ops hold them
            seen: dict[tuple, int] = {}
            inv = np.fromiter((seen.setdefault(c, len(seen)) for c in zip(*[a.tolist() for a in arrs])), np.int64, n)
            out.append(Column(o, dyn, sdyn, [list(col) for col in zip(*seen)], inv))
            continue
        inv, first = inv_first
        out.append(Column(o, dyn, sdyn, [a[first].tolist() for a in arrs], inv))
    return out


def _distinct_rows(arrs: list[np.ndarray], n: int) -> tuple[np.ndarray, np.ndarray] | None:
    """(inverse, first) of the distinct value tuples of `arrs` (n values each) numbered in order of first
    appearance, as the dict of tuples numbers them: `first` the index of each one's first shape, `inverse` each
    shape's number. Values compare as the tuples' numbers do (==: 0.0 equals -0.0, the first one kept); None where
    a value is not an int or float array of n values, or a NaN (equal to itself only as the same object), for the
    dict."""
    codes = None
    for a in arrs:
        if a.shape != (n,) or a.dtype.kind not in "iuf" or (a.dtype.kind == "f" and np.isnan(a).any()):
            return None
    for a in arrs:
        if n > 1 and bool(np.all(a[1:] > a[:-1])):  # strictly increasing (a batch or token axis): all distinct
            every = np.arange(n)
            return every, every
    for a in arrs:
        if n > 1 and bool(np.all(a[1:] == a[0])):  # one value for all shapes: no part in the numbering
            continue
        u, c = np.unique(a, return_inverse=True)  # equal values (by ==) one code
        c = c.reshape(-1).astype(np.int64)
        if codes is None:
            codes = c
            continue
        if int(codes.max()) >= (1 << 62) // max(u.size, 1):  # keep the combined codes in int64
            codes = np.unique(codes, return_inverse=True)[1].reshape(-1).astype(np.int64)
        codes = codes * u.size + c
    if codes is None:  # every field constant: one distinct op
        return np.zeros(n, dtype=np.int64), np.zeros(1, dtype=np.int64)
    _, first, inv = np.unique(codes, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")  # the distinct tuples by first appearance
    rank = np.empty(order.size, dtype=np.int64)
    rank[order] = np.arange(order.size)
    return rank[inv.reshape(-1)], first[order]
