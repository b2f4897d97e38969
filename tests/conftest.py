import os

from hypothesis import settings

# the suite is deterministic: hypothesis draws from a fixed seed (derandomize) unless a run asks for exploration
# (HYPOTHESIS_PROFILE=explore draws fresh examples each run, as a bug hunt)
settings.register_profile("deterministic", derandomize=True, database=None)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "deterministic"))

import numpy as np
import pytest

from simulator.engine.plan import LaunchPlan


def make_plan(host_us, gpu_us, gap_us=0.0, counts=None, queue_depth=1024):
    host = np.asarray(host_us, dtype=float) * 1e-6
    counts = np.ones(host.size, dtype=np.int64) if counts is None else np.asarray(counts, dtype=np.int64)
    gpu = np.asarray(gpu_us, dtype=float) * 1e-6
    gap = np.broadcast_to(np.asarray(gap_us, dtype=float) * 1e-6, gpu.shape).copy()
    return LaunchPlan(host, counts, gpu, gap, queue_depth,
                      launch_labels=[f"l{i}" for i in range(host.size)],
                      kernel_names=[f"k{i}" for i in range(gpu.size)], host_calls=host.size)


def cli_error(capsys, argv) -> str:
    """Run the CLI on argv; assert exit code 2 and exactly one stderr line (no traceback); return it."""
    from simulator.cli import main

    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    return err


@pytest.fixture
def plan_factory():
    return make_plan
