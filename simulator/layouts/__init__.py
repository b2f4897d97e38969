"""Capture-size layouts: bucket presets and rules, padding to a captured size, batch-size distributions, graph memory, and the engines' flag syntax for a layout."""
