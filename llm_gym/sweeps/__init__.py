"""Sweeps: a grid of config values x seeds, one normal training run each, results as mean ± CI per cell."""
