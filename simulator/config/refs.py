"""Second stage of loading a scenario: everything a validated scenario names must exist and fit, checked before
any run starts, so that each problem is still one line `FILE:LINE: field 'path': message`.

Checks models (preset or config.json), profiles, capture layouts, batch-size distributions (histograms, samples,
CSV files), arrival traces, workload files, contexts against each model's limit, byte budgets and, for `serve`,
that weights and graphs leave memory for the KV cache. The loaders do the real checking; this module only maps
each loader's `UserError` to the scenario field that named the input.
"""

from __future__ import annotations

from typing import Callable, Iterator

from simulator.common import vocab as V
from simulator.common.errors import UserError
from .base import ConfigError, format_loc

Check = tuple[tuple, Callable[[], object]]


def _line(lines: dict, loc: tuple) -> int | None:
    for n in range(len(loc), -1, -1):
        if loc[:n] in lines:
            return lines[loc[:n]]
    return None


def _ctx_fits(model: Callable[[], object], model_name: str, ctx: int, extra: int = 1) -> Callable[[], None]:
    """`ctx` (+`extra`) fits the model that `model`, the model's own check (`_model`), resolved: it runs after that
    check, which has passed (a bad model is reported at its own field), so it reuses the spec, not a second load."""
    return lambda: spec_ctx_fits(model(), model_name, ctx, extra)


def spec_ctx_fits(m, model_name: str, ctx: int, extra: int = 1) -> None:
    """UserError unless `ctx` keys plus `extra` new tokens fit model `m` (resolved from `model_name`, which names it
    in the error)."""
    if ctx + extra > m.max_position_embeddings:
        who = model_name if str(model_name).endswith(".json") else m.name  # a config file is named by its path
        raise UserError(f"context {ctx} (+{extra} new) exceeds {who}'s max_position_embeddings "
                        f"{m.max_position_embeddings}")


def _model(name: str, assume_family: str | None = None) -> Callable[[], object]:
    """The check that resolves model `name` (models.load_model). Called again it returns the spec it resolved: the
    checks of the model's context and memory reuse it, so a config.json is read once per check_references call."""
    got: list = []

    def check():
        if not got:
            from simulator.model.models import load_model

            got.append(load_model(name, assume_family))
        return got[0]
    return check


def _profile(name):
    # the run loads the same profile through this cache: the check's load is the run's, not a second one
    from simulator.engine.setup import load_cached_costs

    def check():
        if name is not None and not str(name).strip():
            raise UserError("empty profile name")
        return load_cached_costs(name)[0]
    return check


def _step(sc) -> Iterator[Check]:
    model = _model(sc.model, getattr(sc, "assume_family", None))
    yield ("model",), model
    yield ("profile",), _profile(sc.profile)
    yield ("ctx",), _ctx_fits(model, sc.model, sc.ctx, 1)
    if sc.kind == "predict" and sc.layout is not None:  # the sizes the step pads to
        from simulator.layouts.buckets import parse_layout

        yield ("layout",), lambda: parse_layout(sc.layout)


def _sweep(sc) -> Iterator[Check]:
    from simulator.layouts.buckets import parse_layout

    for i, m in enumerate(sc.models):
        model = _model(m, sc.assume_family)
        yield ("models", i), model
        yield ("ctx",), _ctx_fits(model, m, sc.ctx, 1 + (sc.mixed.prefill_len if sc.mixed and sc.mixed.share else 0))
    for i, p in enumerate(sc.profiles):
        yield ("profiles", i), _profile(p)
    for i, lay in enumerate(sc.layouts):
        yield ("layouts", i, "sizes"), (lambda lay=lay: parse_layout(lay.sizes, lay.max_size, lay.max_num_seqs))
    for i, d in enumerate(sc.distributions):
        yield ("distributions", i, d.source), (lambda d=d: d.build(d.name))


def _workload(sc) -> Iterator[Check]:
    from simulator.model.workload_file import load_workload

    yield ("workload",), lambda: load_workload(sc.workload)
    yield ("profile",), _profile(sc.profile)


def _serving(sc, models, profiles, layouts) -> Iterator[Check]:
    """`models`: (field path, name, its `_model` check)."""
    from simulator.layouts.buckets import parse_layout
    from ..serving.arrivals import load_trace

    for loc, _, model in models:
        yield loc, model
    for loc, p in profiles:
        yield loc, _profile(p)
    for loc, lay in layouts:
        yield loc, (lambda lay=lay: parse_layout(lay, max_num_seqs=sc.engine.max_num_seqs))
    if sc.arrivals.process == "trace":
        yield ("arrivals", "trace"), lambda: load_trace(sc.arrivals.trace)
    for name in ("prompt", "output"):
        lm = getattr(sc, name)
        if lm.kind == "csv":
            yield (name, "file"), lm.to_spec
    for loc, m, model in models:
        if sc.engine.max_model_len is not None:
            yield ("engine", "max_model_len"), _ctx_fits(model, m, sc.engine.max_model_len, 0)


def _serve(sc) -> Iterator[Check]:
    model = _model(sc.model, sc.assume_family)
    yield from _serving(sc, [(("model",), sc.model, model)], [(("profile",), sc.profile)],
                        [(("layout",), sc.layout)] if sc.graph != "none" else [])

    def kv_fits():
        from ..serving.kv import kv_capacity
        from ..serving.setup import build_config

        cfg = build_config(sc, model(), sc.profile, sc.fusion, sc.graph, sc.layout)
        kv_capacity(cfg.model, cfg.profile, cfg.fusion, cfg.graph, list(cfg.sizes), cfg.gpu_util,
                    cfg.workspace_bytes, cfg.block_size, cfg.kv_blocks, prefill_sizes=cfg.prefill_sizes)
    yield ("engine",), kv_fits


def _capacity(sc) -> Iterator[Check]:
    yield from _serving(sc, [(("models", i), m, _model(m, sc.assume_family)) for i, m in enumerate(sc.models)],
                        [(("profiles", i), p) for i, p in enumerate(sc.profiles)],
                        [(("layouts", i, "sizes"), lay.sizes) for i, lay in enumerate(sc.layouts)
                         if lay.sizes is not None])


def _buckets(sc) -> Iterator[Check]:
    from simulator.config.specs import parse_memory_budget

    model = _model(sc.model, sc.assume_family)
    yield ("model",), model
    yield ("profile",), _profile(sc.profile)
    yield ("ctx",), _ctx_fits(model, sc.model, sc.ctx, 1)

    def dist():
        from simulator.common.limits import MAX_OPTIMIZE_SIZE

        d = sc.distribution.build()
        if sc.max_size is None and d.max_batch > MAX_OPTIMIZE_SIZE:
            raise UserError(f"{d.label}: the largest batch, {d.max_batch:,}, is above the optimizer's limit of "
                            f"{MAX_OPTIMIZE_SIZE:,} candidate sizes: set max_size <= "
                            f"{MAX_OPTIMIZE_SIZE:,}; larger batches then run without a graph")
    yield ("distribution", sc.distribution.source), dist
    yield ("memory_budget",), lambda: parse_memory_budget(sc.memory_budget)
    if sc.graph == "none":
        yield ("graph",), lambda: (_ for _ in ()).throw(UserError(f"graph none captures no graphs: pick "
                                                                   f"{V.one_of(V.CAPTURING_MODES)}"))


def read_files(sc) -> list:
    """The files a trace kind reads (its trace or workload, a model's config.json, its profile), which its output
    may not overwrite."""
    from pathlib import Path

    from simulator.model.profile import DEFAULT_PROFILE, profile_path

    files: list = [getattr(sc, "trace", None), getattr(sc, "workload", None), profile_path(sc.profile or DEFAULT_PROFILE)]
    if sc.model is not None and str(sc.model).strip():
        files += [sc.model, Path(sc.model) / "config.json"]
    return files


def out_file(path, inputs=()) -> Callable[[], None]:
    """An output file the scenario writes (common/outpaths.check_out_file), its error naming only the path;
    `inputs`: the files the scenario reads (`read_files`), which it may not overwrite."""
    def check():
        from simulator.common.outpaths import check_out_file

        try:
            check_out_file(path, "out", inputs=inputs)
        except UserError as e:
            raise UserError(str(e).removeprefix("out").lstrip(": ")) from None
    return check


def input_file(path, what: str) -> Callable[[], None]:
    """An input file the study reads itself (a trace: its contents are its errors): it exists and is a file."""
    def check():
        from pathlib import Path

        p = Path(path)
        if p.is_dir():
            raise UserError(f"{p}: is a directory, not a {what} file")
        if not p.is_file():
            raise UserError(f"{p}: no such {what} file")
    return check


def load_profile_field(name):
    """The profile a study runs under (the cached load the checks use), an empty name refused."""
    return _profile(name)()


def _import_trace(sc) -> Iterator[Check]:
    from simulator.traces.host import deflate_factor

    yield ("out",), out_file(sc.out, read_files(sc))
    yield ("profile",), _profile(sc.profile)
    if sc.host_time == "deflate":
        yield ("host_time",), lambda: deflate_factor(_profile(sc.profile)())
    if sc.model is not None:
        yield ("model",), _model(sc.model)
    yield ("trace",), input_file(sc.trace, "trace")


def _export_trace(sc) -> Iterator[Check]:
    yield ("out",), out_file(sc.out, read_files(sc))
    yield ("profile",), _profile(sc.profile)
    if sc.model is not None:
        model = _model(sc.model)
        yield ("model",), model
        yield ("ctx",), _ctx_fits(model, sc.model, sc.ctx or 1024)
    if sc.workload is not None:
        from simulator.model.workload_file import load_workload

        yield ("workload",), lambda: load_workload(sc.workload)


def _capture(sc) -> Iterator[Check]:
    yield ("model",), _model(sc.model, sc.assume_family)
    yield ("profile",), _profile(sc.profile)


def _checks(sc) -> Iterator[Check]:
    by_kind = {"step": _step, "predict": _step, "startup": _step, "graph_memory": _capture, "sweep": _sweep, "workload": _workload, "serve": _serve, "capacity": _capacity,
               "buckets": _buckets, "import_trace": _import_trace, "export_trace": _export_trace}
    check = by_kind.get(sc.kind)
    if check is not None:
        yield from check(sc)


def check_references(sc, where: str, lines: dict | None = None) -> None:
    """Run every check of the scenario; the first failure is one ConfigError line naming the field."""
    lines = lines or {}
    for loc, check in _checks(sc):
        try:
            check()
        except UserError as e:
            line = _line(lines, loc)
            at = f"{where}:{line}" if line else where
            raise ConfigError(f"{at}: field '{format_loc(loc)}': {e}") from None
