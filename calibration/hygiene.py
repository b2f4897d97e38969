"""Measurement hygiene for timing processes: no profiler, and a canary checked at both ends.

A finished torch.profiler session leaves CUPTI attached (pytorch/pytorch#144455), and every later
launch in that process pays for tracing (on the H200: a tiny eager op 6.5 -> 8.4 µs, a graph-replay
step +10%). So a *timing* process must never start a profiler:

- `forbid_profiler()` makes every torch profiler entry point raise in this process, so a timing run
  that reaches profiling code fails at once instead of silently measuring a traced process.
- `canary()` times the cheapest thing the host does per launch (a tiny elementwise op, median of
  many calls, device synchronised every 100 calls) and one eager queue-full kernel's device cost.
  `check_canary(start, end)` compares the figures taken at the start and at the end of a run: if
  the host figure moved by more than `CANARY_TOLERANCE` (the host was faster or slower at one end,
  or something attached to the process), the run's figures are not from one steady machine and
  the run fails loudly (the caller exits non-zero and marks its output).

Kernel counts, kernel names and traces come from separate child processes (calibration/round.py).
torch is imported inside functions only.
"""

from __future__ import annotations

import sys
import time

from .microbench import _pct

CANARY_TOLERANCE = 0.20  # |end/start - 1| of the host canary above which a run is rejected


class ProfilerForbidden(RuntimeError):
    """Raised when code in a timing process tries to start a profiler."""


def forbid_profiler() -> None:
    """Make torch.profiler / torch.autograd.profiler unusable in this process."""
    import torch
    import torch.autograd.profiler as ap
    import torch.profiler as tp

    def refuse(*_a, **_k):
        raise ProfilerForbidden("this is a timing process: a profiler here would leave CUPTI attached and "
                                "inflate every later launch; count kernels in a separate process")

    for mod, name in ((tp, "profile"), (ap, "profile"), (ap, "emit_nvtx"), (tp, "_KinetoProfile")):
        if hasattr(mod, name):
            setattr(mod, name, refuse)
    torch._C._autograd._enable_profiler = refuse  # the C entry every python profiler ends in


def queued_device_us(fn, count: int, reps: int = 5, hold_cycles: int = 5_000_000) -> list[float]:
    """Device µs per call of `fn` issued `count` times behind a sleep kernel that holds the stream, so the
    launches queue up and the GPU runs them back to back (CUDA events around the run), `reps` times."""
    import torch

    st, en = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    out = []
    for _ in range(reps):
        torch.cuda._sleep(hold_cycles)
        st.record()
        for _ in range(count):
            fn()
        en.record()
        en.synchronize()
        out.append(st.elapsed_time(en) * 1e3 / count)
    return out


def queued_with_host(fn, count: int, reps: int, hold_cycles: int) -> tuple[list, list, list]:
    """`queued_device_us`'s measurement with the host's side recorded (rounds l, m, n), each repetition after a
    synchronize: device µs per call, host µs to issue the `count` calls, and the sleep kernel's device µs (the
    host stayed ahead of the GPU when every issue time is below every hold)."""
    import torch

    st, en, h0 = (torch.cuda.Event(enable_timing=True) for _ in range(3))
    dev, host, hold = [], [], []
    for _ in range(reps):
        torch.cuda.synchronize()
        h0.record()
        torch.cuda._sleep(hold_cycles)
        st.record()
        t0 = time.perf_counter()
        for _ in range(count):
            fn()
        t1 = time.perf_counter()
        en.record()
        en.synchronize()
        dev.append(st.elapsed_time(en) * 1e3 / count)
        host.append((t1 - t0) * 1e6)
        hold.append(h0.elapsed_time(st) * 1e3)
    return dev, host, hold


def canary(n: int = 3000) -> dict:
    """Host µs of a tiny eager op (a*b on 1 KB) and device µs per queued tiny kernel."""
    import torch

    a = torch.randn(256, device="cuda")
    b = torch.randn(256, device="cuda")
    pc = time.perf_counter_ns
    for _ in range(300):
        a * b
    torch.cuda.synchronize()
    xs = []
    for i in range(n):
        t0 = pc()
        a * b
        xs.append((pc() - t0) / 1e3)
        if i % 100 == 99:
            torch.cuda.synchronize()
    torch.cuda.synchronize()
    dev = queued_device_us(lambda: a.mul_(1.0), 200)
    return {"host_tiny_op_us": _pct(xs), "device_queued_kernel_us": _pct(dev), "time": time.time()}


def check_canary(start: dict, end: dict, tol: float = CANARY_TOLERANCE) -> dict:
    """Compare start and end canaries; returns {'ok', 'ratio', 'tolerance', ...}."""
    a, b = start["host_tiny_op_us"]["p50"], end["host_tiny_op_us"]["p50"]
    ratio = b / a if a > 0 else float("inf")
    return {"ok": abs(ratio - 1.0) <= tol, "host_start_us": a, "host_end_us": b, "ratio": ratio, "tolerance": tol,
            "device_start_us": start["device_queued_kernel_us"]["p50"],
            "device_end_us": end["device_queued_kernel_us"]["p50"]}


def exit_code(c: dict) -> int:
    """0 when the canary held; else say so on stderr and return 3 (the run's figures are not from one steady host)."""
    if c["ok"]:
        return 0
    print("CANARY FAILED: the host drifted during this run; its figures are not from one steady machine",
          file=sys.stderr, flush=True)
    return 3


def require_gpu(what: str, error: type[Exception] = RuntimeError) -> None:
    """Raise `error` (one line) unless torch is installed and sees a CUDA GPU."""
    try:
        import torch  # noqa: PLC0415
    except ImportError:
        raise error(f"{what} needs torch and a CUDA GPU: pip install 'launchsim[calibrate]' on a GPU machine") from None
    if not torch.cuda.is_available():
        raise error(f"{what} needs a CUDA GPU, and torch sees none on this machine")
