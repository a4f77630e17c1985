"""Synthetic per-grid aggregates of one model, as the leaderboard's trend code reads them (tests of trend.py and
qualify.py)."""


def trend_entry(nlat, mean, std=0.001, n=3, cells=None):
    """One model's aggregate at one grid: ``n`` seeds with VRMSE ``mean`` +- ``std`` at both lead summaries."""
    s = {"vrmse": {"mean": {"mean": mean, "std": std, "n": n}}}
    return {
        "nlat": nlat,
        "nlon": 2 * nlat,
        "dataset": "fam",
        "seeds": list(range(n)),
        "next_step": s,
        "rollout_mean": s,
        "cells": cells or [],
    }
