"""The cyclic garbage collector paused while a trace is read and imported (`no_gc`): reading, linking and the
workload built from them make hundreds of thousands of long-lived objects and no garbage cycles."""

from __future__ import annotations

import gc
from contextlib import contextmanager


@contextmanager
def no_gc():
    """The cyclic garbage collector paused while a trace is parsed and linked: a trace is millions of fresh objects
    and none of them cycles, so the collector's repeated full passes only cost time (2x on 250k events).

    On the way out the objects made meanwhile (the events, their args, the kernels: ~200k containers a trace) are
    moved to the oldest generation the process collects, as surviving two collections would have moved them, but
    without traversing them twice (~40 ms each per trace on this machine). Where the process keeps a permanent
    generation (`gc.freeze`: the launchsim entry process freezes what start-up made, simulator/cli/__init__.py)
    they join it; otherwise they go to the oldest collected generation (`gc.freeze` then `gc.unfreeze`), where
    the next full collection still finds any cyclic garbage among them."""
    was = gc.isenabled()
    frozen = gc.get_freeze_count() > 0
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.freeze()
            if not frozen:
                gc.unfreeze()
            gc.enable()
