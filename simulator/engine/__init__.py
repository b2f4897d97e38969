"""The step engine: a step's launch plan, the SimPy DES and the max-plus fast path that run it, the timeline summary, the multi-step engine loop, routing and the step-cost service."""
