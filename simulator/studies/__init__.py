"""Studies: each scenario kind's run (step, sweep, optimize, capacity, trace) and the runner that dispatches on `kind`."""
