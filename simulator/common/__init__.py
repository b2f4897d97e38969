"""Plumbing shared by every room: user errors, limits, atomic JSON files, output folders and locks."""
