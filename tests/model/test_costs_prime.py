"""CostModel.prime (model/costs.py): GPU times and kernel counts of many ops filled at once, over the batch axis,
bitwise equal to `gpu_s` / `gemm_kernels` op by op on a fresh cost model (measured GEMM tables, the fallback for
unmeasured (n, k), byte curves; in and outside the grids, where the roofline takes over)."""

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as hs

from simulator.model.costs import CostModel
from simulator.model.kernels import LaunchPath as P
from simulator.model.kernels import Op, OpClass
from simulator.model.profile import load_profile

PROF = load_profile("h200")
NK = sorted({(t.n, t.k) for t in PROF.device.tables.gemm})


def gemm(m, n, k):
    return Op("g", OpClass.GEMM, P.EAGER_GEMM, 2.0 * m * n * k, 2.0 * (m * k + n * k + m * n),
              (("k", k), ("m", m), ("n", n)))


def curve(cls, nbytes):
    return Op("c", cls, P.CUSTOM_OP, nbytes / 4, float(nbytes))


nk_st = hs.one_of(hs.sampled_from(NK), hs.tuples(hs.sampled_from([8, 100, 1024, 4096, 6144, 151936]),
                                                 hs.sampled_from([8, 512, 4096, 12288])))
op_st = hs.one_of(
    hs.builds(lambda m, nk: gemm(m, *nk), hs.integers(1, 70000), nk_st),
    hs.builds(curve, hs.sampled_from([OpClass.ELEMENTWISE, OpClass.REDUCTION, OpClass.COPY, OpClass.EMBEDDING]),
              hs.one_of(hs.integers(1, 10 ** 10), hs.floats(1.0, 1e10))),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=hs.lists(op_st, min_size=1, max_size=60))
def test_prime_equals_per_op(ops):
    batch, single = CostModel(PROF), CostModel(PROF)
    g, k = batch.prime(ops)
    for o, go, ko in zip(ops, g, k):
        assert batch.gpu_s(o) == single.gpu_s(o)
        assert batch.gemm_kernels(o) == single.gemm_kernels(o)
        assert go is None or go == single.gpu_s(o)  # what prime returns: the same figures
        assert ko is None or ko == single.gemm_kernels(o)


def test_prime_dense_m_sweep_exact():
    # every m of a decode batch axis, one measured and two unmeasured (n, k): the optimizer's workload
    for n, k in (NK[0], (24576, 4096), (151936, 4096)):
        ops = [gemm(m, n, k) for m in range(1, 1100)]
        batch, single = CostModel(PROF), CostModel(PROF)
        g, kern = batch.prime(ops)
        assert all(o in batch._gpu_cache for o in ops)  # priced by prime, not left to gpu_s
        assert g == [single.gpu_s(o) for o in ops] and kern == [single.gemm_kernels(o) for o in ops]
        assert [batch.gpu_s(o) for o in ops] == g and [batch.gemm_kernels(o) for o in ops] == kern
        assert CostModel(PROF).prime(ops, alike=True) == (g, kern)  # one position's ops, sorted by the first
    curves = [curve(OpClass.REDUCTION, b) for b in range(1000, 10 ** 9, 999_983)]
    assert CostModel(PROF).prime(curves, alike=True) == CostModel(PROF).prime(curves)
    assert CostModel(PROF).prime(curves)[0] == [CostModel(PROF).gpu_s(o) for o in curves]


def test_prime_column_equals_per_op():
    # one traced position's ops read as values (engine/batchbuild.py Column): a GEMM whose m varies and a byte
    # curve whose bytes vary, against gpu_s / gemm_kernels of each op
    from simulator.engine.batchbuild import Column

    for n, k in (NK[0], (24576, 4096)):
        ms = list(range(1, 1100, 7)) + [70000]  # the last one off every grid: the roofline
        tmpl = gemm(1, n, k)
        ops = [gemm(m, n, k) for m in ms]
        col = Column(tmpl, ["flops", "bytes"], [1], [[o.flops for o in ops], [o.bytes for o in ops], ms])
        assert [col.op(j) for j in range(col.n)] == ops
        g, kern = CostModel(PROF).prime_column(tmpl, col.values, col.op, col.n)
        single = CostModel(PROF)
        assert g == [single.gpu_s(o) for o in ops] and kern == [single.gemm_kernels(o) for o in ops]
    bs = [float(b) for b in range(1, 10 ** 10, 77_777_777)]
    ops = [curve(OpClass.COPY, b) for b in bs]
    col = Column(ops[0], ["flops", "bytes"], [], [[o.flops for o in ops], bs])
    g, kern = CostModel(PROF).prime_column(ops[0], col.values, col.op, col.n)
    assert g == [CostModel(PROF).gpu_s(o) for o in ops] and kern == [1] * len(ops)


def test_prime_column_attention_equals_per_op():
    # decode attention of one head layout over a grid of (batch, ctx), inside and outside the measured table
    from simulator.engine.batchbuild import Column

    t = PROF.device.tables.attention[0]
    pairs = [(b, c) for b in (1, 2, 3, 7, 64, 100, 513, 5000) for c in (1, 17, 1025, 4097, 33000, 10 ** 6)]

    def att(b, c):
        return Op("attention", OpClass.ATTENTION, P.EAGER_ATTENTION, 4.0 * b * c, 2.0 * b * c,
                  (("batch", b), ("ctx", c), ("head_dim", t.head_dim), ("heads", t.heads), ("kv_heads", t.kv_heads),
                   ("q_len", 1)))

    ops = [att(b, c) for b, c in pairs]
    col = Column(ops[0], ["flops", "bytes"], [0, 1], [[o.flops for o in ops], [o.bytes for o in ops],
                                                      [b for b, _ in pairs], [c for _, c in pairs]])
    assert [col.op(j) for j in range(col.n)] == ops
    g, kern = CostModel(PROF).prime_column(ops[0], col.values, col.op, col.n)
    single = CostModel(PROF)
    assert g == [single.gpu_s(o) for o in ops] and kern == [1] * len(ops)
