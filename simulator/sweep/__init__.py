"""Sweeps: the grid of points, its exact per-point evaluation with a tiled memo, and where chunks run."""
