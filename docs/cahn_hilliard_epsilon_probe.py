"""Cahn-Hilliard regimes per interface width (docs/datasets/cahn_hilliard.md, "Benchmark sizes"; outside CI).

Reads a Cahn-Hilliard dataset folder made by ``dandelion-generate`` and prints, per (epsilon, radius) cell of the
sweep, the area-weighted standard deviation of ``phi`` over the sphere at the first and the last frame (0.5 when
fully separated into the phases 0 and 1), and the area-weighted RMS of the one-step increment ``phi(t+1) - phi(t)``
averaged over the first five and the last five frame pairs. It shows when each interface width separates within
the stored window, which is why the benchmark's reduced Cahn-Hilliard keys keep one width.

Usage (the run behind the card's numbers: the whole 144-cell sweep, one noise seed, 32x64, band limit 42)::

    dandelion-generate dataset=cahn_hilliard dataset.path=data/probe/ch_alleps dataset.nlat=32 dataset.nlon=64 \\
        dataset.lmax=42 dataset.n_seeds=1 dataset.n_frames=40
    python docs/cahn_hilliard_epsilon_probe.py data/probe/ch_alleps --out docs/cahn_hilliard_epsilon_probe.json
"""

from __future__ import annotations

import argparse
import collections
import json
from pathlib import Path

import h5py
import numpy as np
import torch
import yaml

from dandelion.datasets.folder import SPLITS
from dandelion.sphere import SphereGrid


def _grid(root: Path) -> SphereGrid:
    """The dataset's grid, from its ``dataset.yaml``."""
    meta = yaml.safe_load((root / "dataset.yaml").read_text())
    return SphereGrid(int(meta["nlat"]), int(meta["nlon"]), str(meta["grid"]))


def summarise(root: Path) -> list[dict]:
    """One row per (epsilon, radius): the means over its trajectories of the four measures (module docstring)."""
    cells = collections.defaultdict(list)
    grid = _grid(root)
    for split in SPLITS:
        for f in sorted((root / split).glob("traj_*.h5")):
            with h5py.File(f, "r") as h:
                phi = torch.as_tensor(h["t0_fields/phi"][0], dtype=torch.float64)  # (T, nlat, nlon)
                eps, radius = (float(h["scalars"][k][()]) for k in ("epsilon", "radius"))
            std = [float(grid.mean((p - grid.mean(p)) ** 2).sqrt()) for p in (phi[0], phi[-1])]
            inc = grid.mean(torch.diff(phi, dim=0) ** 2).sqrt()  # (T-1,)
            cells[(eps, radius)].append([*std, float(inc[:5].mean()), float(inc[-5:].mean())])
    names = ("std_phi_first", "std_phi_last", "rms_increment_first5", "rms_increment_last5")
    return [
        {"epsilon": e, "radius": r, "n": len(v), **dict(zip(names, np.mean(v, axis=0).round(5).tolist()))}
        for (e, r), v in sorted(cells.items())
    ]


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dataset", type=Path)
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args(argv)
    rows = summarise(a.dataset)
    print("epsilon radius  n  std(phi) first  last   RMS increment first 5  last 5")
    for r in rows:
        print(
            f"{r['epsilon']:7} {r['radius']:6} {r['n']:2d}  {r['std_phi_first']:.4f}  {r['std_phi_last']:.4f}  "
            f"{r['rms_increment_first5']:.2e}  {r['rms_increment_last5']:.2e}"
        )
    if a.out is not None:
        a.out.write_text(json.dumps({"dataset": str(a.dataset), "cells": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
