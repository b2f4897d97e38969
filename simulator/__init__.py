"""launchsim: a discrete-event simulator of the CPU launch lane and the GPU stream of an LLM step.

Data flows one way: workload (models, fusion levels -> kernels) -> cost model (profile -> seconds)
-> plan (graph mode -> host launches) -> engine (DES or fast path) -> results -> sweep/report/CLI.
"""

__version__ = "0.1.0"
