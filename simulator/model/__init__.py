"""The step model: model presets and configs, the workload builder (ops per layer per fusion level), kernels and launch paths, the calibrated profile and the cost model that prices each op."""
