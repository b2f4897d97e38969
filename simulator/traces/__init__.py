"""torch.profiler traces in and out: read, classify, split into steps, build a workload, what-ifs, host-time policies and Chrome-trace export."""
