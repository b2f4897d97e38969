"""Step times of many shapes of one setup and plan mode at once: the batch axis vectorised.

`step_seconds(setup, mode, shapes)` is, for every shape, the `step_s` of `StepCostCache.step_time(setup, mode,
shape)` (the fast engine's step time of `tiling.tiled_lower`, i.e. of `plan.lower(setup.build(shape), ...)`),
without a `LaunchPlan`, a `Timeline` or a `StepResult` per shape:

1. Each shape's step is built once (`setup.build`; a decoder's layers 1..L-1 are the same Op objects, so the
   step holds a few dozen distinct ops) and each distinct op is costed once (`CostModel.gpu_s`, `gemm_kernels`,
   `host_s` at the median, as `plan.lower` reads them). Its ops become a row of per-position figures.
2. Shapes whose steps have the same launch structure (which ops launch kernels, which are attention, which
   are trace-timed, compiled paths) share one lowering: the plan-mode rules of `plan.lower` (eager launches
   folding views' host time into the next launch, one graph replay, or graph pieces split at attention) are
   applied to the rows as arrays [shapes x launches] and [shapes x kernels], with the same additions in the same
   order as `lower`, so every plan array is bitwise `lower`'s.
3. The fast path's recurrence (`fastpath.simulate_fast`) runs over all rows at once where its first,
   unconstrained window covers the whole plan and no launch would wait for the queue: the same numpy operations
   along each row, so those step times are bitwise `simulate_fast`'s. Any other row (the queue binds, or more
   than 8 x queue-depth launches) is materialised as a `LaunchPlan` and run by `simulate_fast` itself.

So each step time equals the scalar path's (tests/engine/test_batched.py checks batched == per-shape). What a
shape costs here is its build and its distinct ops' costs (model/workload.py, model/costs.py, per shape); the
lowering and the recurrence are array operations over the shapes.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from simulator.engine.plan import _COMPILED_PATHS, LaunchPlan, PlanError
from simulator.engine.routing import PLAN_MODES
from simulator.model.kernels import HOST_SYNC, OpClass
from simulator.model.workload import StepShape


class _Pattern:
    """Which positions of a step hold the same Op object: `first` (position of each distinct op), `inv` (distinct op
    of each position). Steps of one setup at other batch sizes repeat it (the builder emits the same sequence of
    objects), so it is factorised once from the objects' ids and only checked for the next step (`fits`)."""

    __slots__ = ("n", "first", "inv", "firsts", "runs")

    def __init__(self, ids: np.ndarray):
        _, self.first, self.inv = np.unique(ids, return_index=True, return_inverse=True)
        self.n = ids.size
        self.firsts = self.first.tolist()
        # the repeated positions as runs (p, q, length): positions p.. hold the ops of positions q.. (q < p)
        src = self.first[self.inv]
        rep = np.flatnonzero(src != np.arange(self.n))
        runs: list[list[int]] = []
        for p in rep.tolist():
            q = int(src[p])
            if runs and runs[-1][0] + runs[-1][2] == p and runs[-1][1] + runs[-1][2] == q:
                runs[-1][2] += 1
            else:
                runs.append([p, q, 1])
        self.runs = [(p, q, p + k, q + k) for p, q, k in runs]

    def fits(self, ops: tuple) -> bool:
        """Whether every repeated position of `ops` holds the op of the position it repeats here (the same object,
        or an equal one: equal ops have equal figures), so that this pattern's distinct positions stand for all.
        Slices of the step compared in C (an identical object compares equal without Op.__eq__)."""
        if len(ops) != self.n:
            return False
        return all(ops[p:pe] == ops[q:qe] for p, q, pe, qe in self.runs)


def _figure(o, costs, figs: dict, ids: dict) -> list:
    """An op's figures [gpu s, extra kernels, structure flags, host s at the median (read when needed)], memoised
    by object id first (the builder shares unchanged ops across shapes: no hashing), then by value (equal ops
    recur across shapes: the same figures). Views launch nothing (lower reads no GPU figure of them)."""
    e = ids.get(id(o))
    if e is not None and e[0] is o:
        return e[1]
    v = figs.get(o)
    if v is None:
        lk = o.op_class is not OpClass.VIEW  # Op.launches_kernel
        v = figs[o] = [costs.gpu_s(o) if lk else 0.0, (costs.gemm_kernels(o) - 1) if lk else 0,
                       (lk, lk and o.in_attention, lk and o.fixed_gpu_s is not None,
                        o.path in _COMPILED_PATHS), None]
    ids[id(o)] = (o, v)  # the entry holds o: its id stays its own
    return v


def _column_figures(col, costs) -> tuple[np.ndarray, np.ndarray, tuple, "_Entries"]:
    """A traced column's distinct ops (engine/batchbuild.py Column), not memoised by value: (GPU s, extra kernels
    as floats, the structure flags, `_figure`'s entries made on demand). GPU times and kernel counts from
    `CostModel.prime_column` where it prices them (bitwise `gpu_s` / `gemm_kernels`), else from `gpu_s` /
    `gemm_kernels` of the op itself. The structure flags are the template's (class, path and fixed GPU time are not
    symbolic)."""
    o = col.tmpl
    n = col.n
    lk = o.op_class is not OpClass.VIEW
    if not lk:
        flags = (False, False, False, o.path in _COMPILED_PATHS)
        return np.zeros(n), np.zeros(n), flags, _Entries([0.0] * n, [0] * n, flags)
    flags = (True, o.in_attention, o.fixed_gpu_s is not None, o.path in _COMPILED_PATHS)
    pg, pk = costs.prime_column(o, col.values, col.op, n)
    if None in pg:
        pg = [costs.gpu_s(col.op(j)) if g is None else g for j, g in enumerate(pg)]
    if None in pk:
        pk = [costs.gemm_kernels(col.op(j)) if k is None else k for j, k in enumerate(pk)]
    xk = [k - 1 for k in pk]
    return np.array(pg), np.array(xk, dtype=float), flags, _Entries(pg, xk, flags)


class _Entries:
    """`_figure`'s entries [gpu s, extra kernels, flags, host s (None until read)] of a traced column's distinct
    ops, each made at its first read (a row's ops are materialised only where its launch structure or host
    figures need them) and kept: later reads share it, as `_figure`'s memo does."""

    __slots__ = ("_g", "_x", "_flags", "_made")

    def __init__(self, g: list, x: list, flags: tuple):
        self._g, self._x, self._flags = g, x, flags
        self._made: dict[int, list] = {}

    def __getitem__(self, j: int) -> list:
        e = self._made.get(j)
        if e is None:
            e = self._made[j] = [self._g[j], self._x[j], self._flags, None]
        return e

    def __len__(self) -> int:
        return len(self._g)


class _Row:
    """One shape's step: its pattern, its distinct ops and their figures."""

    __slots__ = ("pat", "ops", "gpu", "extra", "key", "_figs", "_host")

    def __init__(self, step, costs, patterns: list, figs: dict):
        ops = step.ops
        pat = next((p for p in patterns if p.fits(ops)), None)
        if pat is None:
            pat = _Pattern(np.fromiter(map(id, ops), dtype=np.int64, count=len(ops)))
            patterns.append(pat)
        ids = figs.get(_IDS)
        if ids is None:
            ids = figs[_IDS] = {}
        uniq = [ops[i] for i in pat.firsts]
        self._set(pat, uniq, [_figure(o, costs, figs, ids) for o in uniq])

    def _set(self, pat, uniq: list, entries: list) -> None:
        self.pat, self.ops, self._figs = pat, uniq, entries
        self.gpu = [v[0] for v in entries]
        self.extra = [v[1] for v in entries]
        # what decides the launch structure: the pattern and which distinct ops launch kernels, are attention,
        # are trace-timed, take a compiled path
        self.key = (id(pat), tuple([v[2] for v in entries]))
        self._host: list[float] | None = None

    def _materialise(self) -> None:
        """A traced row's distinct ops and figure entries (`_figs` holds (columns, entries, its index) until
        then: engine/batchbuild.py distinct_ops)."""
        cols, ecols, i, _ = self._figs
        pick = [0 if c.inv is None else int(c.inv[i]) for c in cols]
        self.ops = [c.op(j) for c, j in zip(cols, pick)]
        self._figs = [e[j] for e, j in zip(ecols, pick)]

    def host(self, costs) -> list[float]:
        """The distinct ops' host times at the median (`CostModel.host_s`), read only where a plan mode uses them
        (as `lower` does: a graph replay reads none of its ops' host figures)."""
        if self._host is None:
            if self.ops is None:
                cols, ecols, i, hcol = self._figs
                if hcol is not None:  # a traced row: each column's host figure is its ops' (one for all)
                    for c, h in enumerate(hcol):
                        if h is None:
                            hcol[c] = costs.host_s(cols[c].op(0), 0.5)
                    self._host = hcol  # the trace's rows share the list (complete now, never changed again)
                    return self._host
                self._materialise()
            h: list[float] = []
            for o, v in zip(self.ops, self._figs):
                if v[3] is None:
                    v[3] = costs.host_s(o, 0.5)
                h.append(v[3])
            self._host = h
        return self._host


_PATTERNS = "patterns"  # the key of a rows memo's list of patterns (shapes are StepShape keys)
_TRACES = "traces"  # the key of a rows memo's traces by group key (engine/batchbuild.rows_of: one serves many calls)
_IDS = "ids"  # the key, in a figs memo, of its entries by object id: id(op) -> (op, figures)


class _Lowering:
    """What `plan.lower` does with a launch structure under a plan mode, as index arrays (the same for every row of
    the structure): which distinct op each kernel is, the launches' constant host times and which launches take
    an op's host time, the gap of each kernel as A + extra kernels x B."""

    __slots__ = ("ki", "counts", "host_const", "host_cols", "host_ops", "layers", "tail_ops", "gap_a", "gap_b")

    def __init__(self, r0: "_Row", costs, mode: str):
        inv = r0.pat.inv
        flags = np.asarray(r0.key[1], dtype=bool).reshape(-1, 4)[inv]  # per position
        lk = flags[:, 0]
        kpos = np.flatnonzero(lk)
        if kpos.size == 0:
            raise PlanError("step has no kernels")
        nK = kpos.size
        self.ki = inv[kpos]  # distinct op of each kernel
        self.layers, self.tail_ops, self.host_cols, self.host_ops = [], [], None, None
        if mode == "none":
            n = lk.size
            seg = np.cumsum(lk) - lk  # the launch each op's host work goes to (ops after the last: the tail)
            entry = costs.compiled_entry_s if flags[:, 3].any() else 0.0
            self.host_const = np.zeros(nK)
            if entry:
                self.host_const[0] = entry
            # the k-th op of each launch, k = 0, 1, ...: pending += host(op) in the loop's order
            starts = np.concatenate(([0], kpos + 1))  # first op of each launch; [nK]: of the tail
            pos = np.arange(n) - starts[seg]
            in_launch = seg < nK
            for k in range(int(pos.max()) + 1):
                at_k = pos == k
                sel = np.flatnonzero(at_k & in_launch)
                if sel.size:
                    self.layers.append((seg[sel], inv[sel]))
                tsel = np.flatnonzero(at_k & ~in_launch)
                if tsel.size:
                    self.tail_ops.append(int(inv[tsel[0]]))
            eg = costs.eager_gap_s
            self.gap_a = self.gap_b = np.full(nK, eg)
            self.counts = np.ones(nK, dtype=np.int64)
            return
        node, node_tr, lat = costs.graph_node_s, costs.graph_node_trace_s, costs.graph_launch_latency_s
        nodes = np.where(flags[kpos, 2], node_tr, node)  # per kernel: the node cost a replayed kernel pays
        if mode == "full":
            first = np.zeros(nK, dtype=bool)
            first[0] = True
            self.host_const = np.array([costs.graph_launch_s(nK)])
            self.counts = np.array([nK], dtype=np.int64)
            self.gap_a, self.gap_b = np.where(first, lat, nodes), nodes
            return
        # piecewise: graph pieces split at attention kernels, each attention kernel one eager launch
        at = flags[kpos, 1]
        eg = costs.eager_gap_s
        consts, counts, first, cols, ops = [], [], np.zeros(nK, dtype=bool), [], []
        run = 0
        for i, a in enumerate(at.tolist()):
            if a:
                if run:
                    consts.append(costs.graph_launch_s(run))
                    counts.append(run)
                    first[i - run] = True
                    run = 0
                cols.append(len(consts))
                ops.append(int(self.ki[i]))
                consts.append(0.0)
                counts.append(1)
            else:
                run += 1
        if run:
            consts.append(costs.graph_launch_s(run))
            counts.append(run)
            first[nK - run] = True
        self.host_const = np.asarray(consts)
        self.counts = np.asarray(counts, dtype=np.int64)
        if cols:  # only attention kernels launch eagerly: only their host figures are read
            self.host_cols, self.host_ops = np.asarray(cols), np.asarray(ops)
        self.gap_a = np.where(at, eg, np.where(first, lat, nodes))
        self.gap_b = np.where(at, eg, nodes)


def _lower_rows(rows: list[_Row], costs, mode: str, memo: dict):
    """`plan.lower`'s arrays for rows of one launch structure: (host [S, nL], counts [nL], gpu [S, nK],
    gap [S, nK], tail [S]), the same floating-point operations in the same order as `lower`. `memo`: the
    structure's `_Lowering` per plan mode."""
    r0 = rows[0]
    S = len(rows)
    key = ("lowering", r0.key, mode)
    lw = memo.get(key)
    if lw is None:
        lw = memo[key] = _Lowering(r0, costs, mode)
    G = np.asarray([r.gpu for r in rows], dtype=float)[:, lw.ki]
    X = np.asarray([r.extra for r in rows], dtype=float)[:, lw.ki]
    gap = np.add(lw.gap_a, np.multiply(X, lw.gap_b, out=X), out=X)  # gap_a + X * gap_b, in X's buffer
    host = np.empty((S, lw.host_const.size))
    host[:] = lw.host_const
    tail = np.zeros(S)
    if mode == "none":
        hs = [r.host(costs) for r in rows]
        # the rows of one trace share one list of host figures (`_Row.host`): each distinct list summed once, the
        # same additions, and its sums given to each of its rows
        lists: dict[int, int] = {}
        pick = [lists.setdefault(id(h), len(lists)) for h in hs]
        uniq = hs if len(lists) == S else list({id(h): h for h in hs}.values())
        Hu = np.asarray(uniq, dtype=float)  # [distinct lists, distinct ops]
        hu = host if len(lists) == S else np.empty((len(uniq), lw.host_const.size))
        hu[:] = lw.host_const
        tu = tail if len(lists) == S else np.zeros(len(uniq))
        for launch, op in lw.layers:
            hu[:, launch] += Hu[:, op]
        for op in lw.tail_ops:
            tu += Hu[:, op]
        if len(lists) < S:
            host, tail = hu[pick], tu[pick]
    elif lw.host_cols is not None:
        host[:, lw.host_cols] = np.asarray([r.host(costs) for r in rows], dtype=float)[:, lw.host_ops]
    return host, lw.counts, G, gap, tail


def _recurrence(host, counts, gpu, gap, tail, Q: int) -> np.ndarray:
    """Step time of each row: `simulate_fast`'s first window over every row at once where it covers the plan and
    no launch waits for the queue (bitwise its values); the other rows run `simulate_fast` alone."""
    from simulator.engine.fastpath import simulate_fast
    from simulator.engine.timeline import step_s

    S, n_l = host.shape
    out = np.empty(S)
    alone = np.ones(S, dtype=bool)
    single = gpu.shape[1] == n_l
    if n_l == 1 and Q >= 1:  # one launch (a full-graph replay): only the last kernel's finish is read
        c = gap + gpu
        C = np.cumsum(c, axis=1)
        D = np.subtract(C, c, out=c)  # C - c, in c's buffer (c is not read again)
        sub = host[:, 0] + (0.0 - 0.0)
        # the general path's e at the last kernel: C + max(max_k (sub - D_k), 0 - D_0); sub - D_k is exactly
        # non-increasing in D_k, so its running maximum at the end is sub - min_k D_k
        e = C[:, -1] + np.maximum(sub - D.min(axis=1), 0.0 - D[:, 0])
        return np.maximum(sub + tail, e)
    if n_l <= 8 * Q:
        c = gap + gpu
        C = np.cumsum(c, axis=1)
        D = C - c
        sub = np.cumsum(host, axis=1)
        np.add(sub, 0.0 - 0.0, out=sub)  # run_block(0, n, None, 0.0, 0.0)
        e = np.subtract(sub if single else np.repeat(sub, counts, axis=1), D)
        np.maximum.accumulate(e, axis=1, out=e)
        np.maximum(e, (0.0 - D[:, 0])[:, None], out=e)
        np.add(C, e, out=e)
        alone[:] = False
        if Q < n_l:  # the stall check: leave times of launches j - Q against the host-only chain
            last_k = np.arange(n_l) if single else np.cumsum(counts) - 1
            lk = last_k[:n_l - Q]
            alone = (e[:, lk] - gpu[:, lk] > sub[:, Q - 1:n_l - 1] + host[:, Q:n_l]).any(axis=1)
        ok = ~alone
        out[ok] = np.maximum(sub[ok, -1] + tail[ok], e[ok, -1])
    for r in np.flatnonzero(alone):
        plan = LaunchPlan(host_s=host[r].copy(), kernels_per_launch=counts, gpu_s=gpu[r].copy(),
                          gap_s=gap[r].copy(), queue_depth=Q, host_tail_s=float(tail[r]))
        out[r] = step_s(simulate_fast(plan))
    return out


def step_seconds(setup, mode: str, shapes: Sequence[StepShape], rows: dict | None = None,
                 figs: dict | None = None) -> np.ndarray:
    """Step time (s) of `setup`'s step of each shape in plan mode `mode` (routed already, no padding added):
    `StepCostCache.step_time(setup, mode, shape).step_s` for each. The caller's memos (a run's StepCostCache owns
    them): `rows`, shape -> the built and costed step of `setup.cost_key` (shared by the plan modes); `figs`, Op ->
    its figures under `setup.costs` (ops are compared by value)."""
    return _priced(setup, mode, shapes, rows, figs, False)[0]


def step_figures(setup, mode: str, shapes: Sequence[StepShape], rows: dict | None = None,
                 figs: dict | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(step s, GPU busy s, CPU busy s, GPU gap s) of each shape, as `step_seconds` (the same memos): the
    `step_s`, `gpu_busy_s`, `cpu_busy_s` and `gpu_gap_s` of `StepCostCache.step_time(setup, mode, shape)`, bitwise
    (each a sum of one plan array's row, contiguous as the plan's own array, as `timeline.summarize` sums it; the CPU
    figure plus the host tail). What serving's step timer reads of a step (serving/steptime.py)."""
    out, gpu, cpu, gaps = _priced(setup, mode, shapes, rows, figs, True)
    return out, gpu, cpu, gaps  # type: ignore[return-value]


def _priced(setup, mode: str, shapes: Sequence[StepShape], rows: dict | None, figs: dict | None,
            sums: bool) -> tuple:
    """`step_seconds`' step times and, with `sums`, `step_figures`' sums (else None)."""
    if mode not in PLAN_MODES:
        raise PlanError(f"unknown plan mode '{mode}': use one of {', '.join(PLAN_MODES)}")
    if _may_sync(setup):
        return _priced_syncing(setup, mode, shapes, rows, figs, sums)
    return _priced_plain(setup, mode, shapes, rows, figs, sums)


def _priced_plain(setup, mode: str, shapes: Sequence[StepShape], rows: dict | None, figs: dict | None,
                  sums: bool) -> tuple:
    """`_priced` of steps without host syncs: built, lowered and run over the batch axis at once."""
    costs = setup.costs
    memo = {} if rows is None else rows
    figs = {} if figs is None else figs
    patterns: list[_Pattern] = memo.setdefault(_PATTERNS, [])
    ids = figs.get(_IDS)
    if ids is not None and len(ids) > 1 << 17:  # a bound on memory: the by-id entries hold their ops
        ids.clear()
    _build_many(setup, shapes, memo, patterns, figs)
    built: list[_Row] = []
    for s in shapes:
        r = memo.get(s)
        if r is None:
            r = memo[s] = _Row(setup.build(s), costs, patterns, figs)
        built.append(r)
    out = np.empty(len(built))
    g_s = c_s = x_s = None
    if sums:
        g_s, c_s, x_s = np.empty(len(built)), np.empty(len(built)), np.empty(len(built))
    groups: dict[tuple, list[int]] = {}
    for i, r in enumerate(built):
        groups.setdefault(r.key, []).append(i)
    for idx in groups.values():
        host, counts, gpu, gap, tail = _lower_rows([built[i] for i in idx], costs, mode, memo)
        out[idx] = _recurrence(host, counts, gpu, gap, tail, costs.queue_depth)
        if sums:  # row by row: each row a contiguous 1-D array, summed as summarize sums the plan's
            for j, i in enumerate(idx):
                g_s[i] = float(gpu[j].sum())
                c_s[i] = float(host[j].sum()) + float(tail[j])
                x_s[i] = float(gap[j].sum())
    return out, g_s, c_s, x_s


def _may_sync(setup) -> bool:
    """A setup some of whose steps hold a host sync (`HOST_SYNC`: transformers' sliding-window cache once its
    window is full, recipes.py): those steps are run one by one (`_priced_syncing`)."""
    return setup.recipe == "hf" and bool(setup.model.sliding_window)


def _priced_syncing(setup, mode: str, shapes: Sequence[StepShape], rows: dict | None, figs: dict | None,
                    sums: bool) -> tuple:
    """`_priced` where steps may hold host syncs: those shapes' steps lowered (`plan.lower`, which refuses them in a
    graph mode) and run by `simulate_fast` one by one (its waits), the others batched as `_priced` does."""
    from simulator.engine.fastpath import simulate_fast
    from simulator.engine.plan import lower
    from simulator.engine.timeline import summarize

    n = len(shapes)
    out = np.empty(n)
    g_s = c_s = x_s = None
    if sums:
        g_s, c_s, x_s = np.empty(n), np.empty(n), np.empty(n)
    plain = []
    for i, s in enumerate(shapes):
        st = setup.build(s)
        if not any(o.dim(HOST_SYNC) for o in st.ops):
            plain.append(i)
            continue
        r = summarize(simulate_fast(lower(st, setup.costs, mode)))
        out[i] = r.step_s
        if sums:
            g_s[i], c_s[i], x_s[i] = r.gpu_busy_s, r.cpu_busy_s, r.gpu_gap_s
    if plain:
        res = _priced_plain(setup, mode, [shapes[i] for i in plain], rows, figs, sums)
        out[plain] = res[0]
        if sums:
            g_s[plain], c_s[plain], x_s[plain] = res[1], res[2], res[3]
    return out, g_s, c_s, x_s


def build_rows(setup, shapes: Sequence[StepShape], rows: dict, figs: dict) -> None:
    """Build ahead the rows of `shapes` that can be built over the batch axis (traced: `_build_many`) into the
    memo `rows` (with `figs`) that a later `step_seconds(setup, mode, ..., rows, figs)` reads: the same rows it
    would build, so the same step times."""
    if _may_sync(setup):
        return
    _build_many(setup, shapes, rows, rows.setdefault(_PATTERNS, []), figs)


_MIN_TRACE = 8  # fewer missing shapes of one group than this: built one by one (a trace costs a few builds)


def _build_many(setup, shapes, memo: dict, patterns: list, figs: dict) -> None:
    """Rows of the shapes `memo` lacks, many at once where their builds can be traced over the batch axis
    (engine/batchbuild.py: one symbolic build per group of decode shapes differing in batch and padding)."""
    from simulator.engine import batchbuild as BB

    missing = [s for s in dict.fromkeys(shapes) if s not in memo]
    if len(missing) < _MIN_TRACE:
        return
    groups: dict[tuple, list] = {}
    for s in missing:
        if BB.traceable(setup, s):
            groups.setdefault(BB.group_key(s), []).append(s)
    costs = setup.costs
    ids = figs.get(_IDS)
    if ids is None:
        ids = figs[_IDS] = {}

    def make_row(s):
        return _Row(setup.build(s), costs, patterns, figs)

    def make_traced(tops, prow: _Row, shs: list, values, checked: bool = False):
        # the probe's check: the template repeats its positions as the probe's build does (each position's first
        # occurrence; np.unique orders the distinct ops by id, so compare sources, not order), and the traced ops
        # at the probe's values are the ops its real build made (done once per trace: `checked`)
        pat = prow.pat
        if not checked:
            tp = _Pattern(np.fromiter(map(id, tops), dtype=np.int64, count=len(tops)))
            if tp.n != pat.n or not np.array_equal(tp.first[tp.inv], pat.first[pat.inv]):
                return None
            if [c.op(0) for c in BB.distinct_ops(tops, pat.firsts, 1, BB.probe_values)] != prow.ops:
                return None
        S = len(shs)
        if not S:
            return {}
        cols = BB.distinct_ops(tops, pat.firsts, S, values)
        G, X = np.empty((S, len(cols))), np.empty((S, len(cols)))
        ecols, flags = [], []
        for c, col in enumerate(cols):
            inv = col.inv
            if inv is None:  # the template's own op (no symbolic field): memoised as any op
                e = _figure(col.tmpl, costs, figs, ids)
                ecols.append([e])
                G[:, c], X[:, c] = e[0], float(e[1])
                flags.append(e[2])
            else:  # distinct ops of the shapes: figures as _figure computes them, the GPU time and kernels priced
                g, x, fl, ents = _column_figures(col, costs)  # over the batch axis at once where they can be
                ecols.append(ents)
                G[:, c], X[:, c] = g[inv], x[inv]
                flags.append(fl)  # one template: every distinct op has its flags
        const = None if None in flags else (id(pat), tuple(flags))
        # host figures (CostModel.host_s) read an op's fixed host time, launch path, class and, for a collective,
        # its ranks: where none of these is symbolic, every op of a column has its first op's host figure
        hcol = [None] * len(cols) if all(
            not isinstance(tops[p].fixed_host_s, BB.Sym) and not isinstance(tops[p].dim("ranks"), BB.Sym)
            for p in pat.firsts) else None
        out = {}
        for i, s in enumerate(shs):
            r = _Row.__new__(_Row)
            r.pat, r.gpu, r.extra, r._host, r.ops, r._figs = pat, G[i], X[i], None, None, (cols, ecols, i, hcol)
            r.key = const
            if const is None:  # some op's structure flags differ across the shapes: this shape's own
                r._materialise()
                r.key = (id(pat), tuple([v[2] for v in r._figs]))
            out[s] = r
        return out

    traces: dict = memo.setdefault(_TRACES, {})  # group key -> the traces that matched (BB.rows_of)
    for key, g in groups.items():
        if len(g) >= _MIN_TRACE:
            memo.update(BB.rows_of(setup, g, make_row, make_traced, traces=traces.setdefault(key, [])))
