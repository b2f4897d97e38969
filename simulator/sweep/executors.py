"""Where sweep chunks run: in this process (workers = 1), local worker processes (ProcessPoolExecutor), or
Ray (optional extra `launchsim[ray]`, imported only when asked for). Every executor calls
`sweep.evaluate_chunk` on the same chunks, so results are identical; only the order in which chunks
finish differs, and the caller files rows by chunk index. A rich progress bar counts finished points.
"""

from __future__ import annotations

from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from contextlib import contextmanager
from typing import Callable

from simulator.common.errors import UserError
from simulator.common import vocab as V

EXECUTORS = V.values(V.Executor)


class ExecutorError(UserError):
    pass


def _die_with_parent() -> None:
    """Worker initializer: exit when the parent dies (kill -9, SIGTERM), instead of computing on as an orphan."""
    import os
    import signal
    import threading
    import time

    parent = os.getppid()
    try:  # Linux: the kernel sends SIGKILL when the parent exits
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # not the parent's handler: terminate() must just end us

    def watch():
        while True:
            time.sleep(1.0)
            if os.getppid() != parent:
                os._exit(1)
    threading.Thread(target=watch, daemon=True).start()


@contextmanager
def _progress(enabled: bool, total: int, cached: int):
    from simulator.report.progress import enabled as progress_enabled

    if not enabled or total == 0 or not progress_enabled():
        yield lambda n, sims: None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    cols = (TextColumn("[bold]sweep"), BarColumn(), MofNCompleteColumn(), TextColumn("points"),
            TextColumn("{task.fields[sims]} steps simulated, {task.fields[cached]} points cached"),
            TimeElapsedColumn())
    with Progress(*cols, console=Console(stderr=True), transient=False) as prog:
        task = prog.add_task("sweep", total=total, sims=0, cached=cached)
        state = {"sims": 0}

        def advance(n: int, sims: int) -> None:
            state["sims"] += sims
            prog.update(task, advance=n, sims=state["sims"])

        yield advance


def run_chunks(evaluate: Callable[[list], tuple[list, dict]], chunks: list[list],
               on_done: Callable[[int, list, dict], None], executor: str = "local",
               workers: int = 2, progress: bool = True, total_points: int = 0, cached_points: int = 0,
               affinity: list[int] | None = None, weights: list[int] | None = None) -> None:
    """Evaluate every chunk with `evaluate(chunk) -> (rows, stats)` (a module-level function: worker processes
    and Ray pickle it); call on_done(chunk_index, rows, stats) in the parent as each one finishes.

    `affinity[i]` (local processes only): the worker (0..workers-1) that runs chunk i, in chunk order, so
    chunks that share step simulations share one worker's memo; without it any free worker takes the next.
    `weights[i]`: the points chunk i stands for on the progress bar (default: the rows it returns)."""
    if executor not in EXECUTORS:
        raise ExecutorError(f"unknown executor '{executor}': use local or ray")
    if workers <= 0:
        raise ExecutorError(f"workers must be a positive integer, got {workers}")
    if not chunks:
        return
    def size(i: int, rows: list) -> int:
        return weights[i] if weights is not None else len(rows)

    if executor == "ray":
        return _run_ray(evaluate, chunks, on_done, workers, progress, total_points, cached_points, size)
    if workers == 1 or len(chunks) == 1:
        with _progress(progress, total_points, cached_points) as adv:
            for i, c in enumerate(chunks):
                rows, st = evaluate(c)
                on_done(i, rows, st)
                adv(size(i, rows), st["simulated"])
        return
    if affinity is None:
        pools = [ProcessPoolExecutor(max_workers=min(workers, len(chunks)), initializer=_die_with_parent)]
        slot = [0] * len(chunks)
    else:  # one single-process pool per worker: chunk i runs on worker affinity[i]
        used = sorted(set(affinity))
        pools = [ProcessPoolExecutor(max_workers=1, initializer=_die_with_parent) for _ in used]
        slot = [used.index(a) for a in affinity]
    try:
        futs = {pools[slot[i]].submit(evaluate, c): i for i, c in enumerate(chunks)}  # fork before the bar's thread
        with _progress(progress, total_points, cached_points) as adv:
            pending = set(futs)
            while pending:
                finished, pending = wait(pending, return_when=FIRST_COMPLETED)
                for f in sorted(finished, key=futs.get):
                    rows, st = f.result()
                    on_done(futs[f], rows, st)
                    adv(size(futs[f], rows), st["simulated"])
    except BaseException:
        # the workers first: shutdown() forgets them (pool._processes = None), and a worker left running keeps
        # the manager thread, and so interpreter exit, waiting for its chunk
        procs = [proc for pool in pools for proc in (getattr(pool, "_processes", None) or {}).values()]
        for proc in procs:
            proc.terminate()
        for pool in pools:
            pool.shutdown(wait=False, cancel_futures=True)
        for proc in procs:
            proc.join(timeout=5)
        raise
    for pool in pools:
        pool.shutdown(wait=True)


def _run_ray(evaluate, chunks, on_done, workers, progress, total_points, cached_points, size) -> None:
    try:
        import ray
    except ImportError:
        raise ExecutorError("executor 'ray' needs Ray: pip install 'launchsim[ray]'") from None
    started = False
    if not ray.is_initialized():
        ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False)
        started = True
    try:
        remote = ray.remote(evaluate)
        refs = {remote.remote(c): i for i, c in enumerate(chunks)}
        with _progress(progress, total_points, cached_points) as adv:
            pending = list(refs)
            while pending:
                ready, pending = ray.wait(pending, num_returns=1)
                for r in ready:
                    rows, st = ray.get(r)
                    on_done(refs[r], rows, st)
                    adv(size(refs[r], rows), st["simulated"])
    finally:
        if started:
            ray.shutdown()
