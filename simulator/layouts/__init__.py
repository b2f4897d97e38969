"""Capture-size layouts: bucket presets and rules, batch-size distributions, graph memory, and the engines' flag syntax for a layout."""
