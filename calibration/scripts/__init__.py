"""One-off GPU rounds (run on the device machine, torch inside): the engine loop and start-up round
(engine_loop.py), the FP8/MoE tables (moe_fp8.py), the trace-import validation capture
(trace_import_capture.py) and the shell drivers of rounds c and d. The reusable calibration pipeline
(`launchsim calibrate`: round, child_*, depth_sweep, microbench, tables) stays in calibration/."""
