"""GPU microbenchmarks, the reference decoder and the measured profiles they produce.

torch is imported lazily inside the functions that need it, never at package import time.
"""
