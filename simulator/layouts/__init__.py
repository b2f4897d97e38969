"""Capture-size layouts: bucket presets and rules, batch-size distributions, and the engines' flag syntax for a layout (below the engine: nothing here imports it)."""
