"""Ablations of the models of the benchmark grid (docs/model.md)."""
