"""What one simulated step produced: per-launch CPU times, per-kernel GPU times, and the summary."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from simulator.engine.plan import LaunchPlan


@dataclass
class Timeline:
    """Raw engine output. Times in seconds from the start of the step.

    cpu_start[j]..submit[j] minus stall[j] is host work on launch j; stall[j] is time the host sat
    blocked on a full launch queue; wait[j] (plans with syncs) is time it sat before cpu_start[j] waiting
    for a kernel to end; gpu_start[i]..gpu_end[i] is kernel i on the stream.
    """

    plan: LaunchPlan
    submit: np.ndarray
    stall: np.ndarray
    gpu_start: np.ndarray
    gpu_end: np.ndarray
    wait: np.ndarray | None = None  # host time blocked on a sync before launch j (plans with wait_kernel)

    @property
    def cpu_start(self) -> np.ndarray:
        return self.submit - self.stall - self.plan.host_s


@dataclass(frozen=True)
class StepResult:
    step_s: float
    cpu_busy_s: float
    cpu_stall_s: float
    gpu_busy_s: float
    gpu_gap_s: float
    gpu_bubble_s: float
    gpu_idle_frac: float
    kernels: int
    launches: int
    host_calls: int
    bound: str
    graph_mode: str

    def as_dict(self, ms: bool = True) -> dict:
        f = 1e3 if ms else 1.0
        return {
            "step_ms": self.step_s * f,
            "cpu_ms": self.cpu_busy_s * f,
            "gpu_ms": self.gpu_busy_s * f,
            # rounded to 1 ns: the stall is a sum of differences of submit times, whose float noise (5.8e-13 ms)
            # would print as a stall where there is none
            "cpu_stall_ms": round(self.cpu_stall_s * f, 6 if ms else 9),
            "gpu_gap_ms": self.gpu_gap_s * f,
            "gpu_bubble_ms": self.gpu_bubble_s * f,
            "gpu_idle_frac": self.gpu_idle_frac,
            "kernels": self.kernels,
            "launches": self.launches,
            "host_calls": self.host_calls,
            "bound": self.bound,
            "graph": self.graph_mode,
        }


def step_s(t: Timeline) -> float:
    """Step time: the later of the host's end (last submit plus its tail work) and the GPU's."""
    return max(float(t.submit[-1]) + t.plan.host_tail_s, float(t.gpu_end[-1]))


def summarize(t: Timeline) -> StepResult:
    """Summary figures of a timeline. A step is CPU-bound when the host lane's total work is at
    least the GPU lane's (kernel time + gaps); otherwise GPU-bound."""
    p = t.plan
    end_prev = np.concatenate(([0.0], t.gpu_end[:-1]))
    ready = np.repeat(t.submit, p.kernels_per_launch)
    bubble = float(np.maximum(ready - end_prev, 0.0).sum())
    step = step_s(t)
    cpu_busy = float(p.host_s.sum()) + p.host_tail_s
    gpu_busy = float(p.gpu_s.sum())
    gaps = float(p.gap_s.sum())
    return StepResult(
        step_s=step,
        cpu_busy_s=cpu_busy,
        cpu_stall_s=float(t.stall.sum()),
        gpu_busy_s=gpu_busy,
        gpu_gap_s=gaps,
        gpu_bubble_s=bubble,
        gpu_idle_frac=1.0 - gpu_busy / step if step > 0 else 0.0,
        kernels=p.gpu_kernels,
        launches=p.launches,
        host_calls=p.host_calls,
        bound="cpu" if cpu_busy >= gpu_busy + gaps else "gpu",
        graph_mode=p.graph_mode,
    )
