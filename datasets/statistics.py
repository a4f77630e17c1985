"""Area-weighted statistics of a split's trajectory files (the folder's ``stats.yaml``)."""

from __future__ import annotations

import math
import os
from typing import Iterable, Mapping

import numpy as np

from dandelion.sphere import SphereGrid

from .storage import file_levels, is_surface, open_trajectory, read_field, read_mask

__all__ = ["compute_stats"]


class _Moments:
    """Streaming weighted mean and variance in float64 (Chan et al. 1979 pairwise update)."""

    def __init__(self):
        self.w = 0.0
        self.mean = 0.0
        self.m2 = 0.0

    def add(self, x: np.ndarray, w: np.ndarray) -> None:
        x = np.asarray(x, dtype=np.float64)
        wb = np.broadcast_to(w, x.shape)
        wn = float(wb.sum())
        if wn == 0.0:
            return
        mn = float((wb * x).sum() / wn)
        m2n = float((wb * (x - mn) ** 2).sum())
        tot = self.w + wn
        d = mn - self.mean
        self.mean += d * wn / tot
        self.m2 += m2n + d * d * self.w * wn / tot
        self.w = tot

    @property
    def std(self) -> float:
        return math.sqrt(self.m2 / self.w) if self.w > 0 else float("nan")


def _weight_sum(w: np.ndarray, x: np.ndarray) -> float:
    """Total weight of one vector frame x (nlat, nlon, 2): per-row weights (nlat, 1) or a masked (nlat, nlon) array."""
    return float(w.sum()) * x.shape[1] if w.shape[1] == 1 else float(w.sum())


def compute_stats(files: Iterable[str | os.PathLike], fields: Mapping[str, Mapping]) -> dict:
    """Area-weighted statistics over all frames of the given trajectory files (float64, streaming).

    Each frame's grid points are weighted with the grid's quadrature weights (SphereGrid.weights), so
    means are area means; deltas are differences of consecutive frames of one trajectory. Scalar
    fields: ``mean``, ``std`` (population, area-weighted) and ``delta_mean``, ``delta_std``. Vector
    fields (u, v): ``rms = sqrt(mean(u^2 + v^2))`` and ``delta_rms`` of the one-step difference.
    Moments are combined with the pairwise update of Chan, Golub & LeVeque (1979). In a masked
    dataset (files with ``mask/wet``) the weights are zero on land: statistics cover wet points only.

    Fields with a level axis (leveled files, module docstring) get one value PER LEVEL: each entry
    is then a list of length L, in the file's level order (docs/datasets/README.md: per-level
    normalisation before the levels are folded into channels). Surface fields of a leveled file and
    every field of a 2-D file keep single numbers.

    Parameters
    ----------
    files : iterable of paths
        The train split's trajectory files (all on the same grid).
    fields : mapping name -> dict(kind=...)
        The fields to summarise (``dataset.yaml``'s ``fields``).

    Raises
    ------
    ValueError
        If ``files`` is empty, or the files use different grids or levels.
    """
    files = list(files)
    if not files:
        raise ValueError("no files to compute statistics from: the train split is empty; generate more trajectories")
    n_lev: dict[str, int | None] = {}  # None: no level axis
    acc: dict[str, tuple[list, list]] = {}
    sq: dict[str, list] = {}  # per level [sum w|x|^2, sum w, same for deltas]
    grid_key = None
    for path in files:
        with open_trajectory(path) as f:
            key = (int(f.attrs["nlat"]), int(f.attrs["nlon"]), str(f.attrs["grid"]))
            levels = file_levels(f)
            lkey = None if levels is None else tuple(levels.tolist())
            if grid_key is None:
                grid_key, level_key = key, lkey
                w = SphereGrid(*key).weights.numpy()  # (nlat, 1)
                wet = read_mask(f)
                if wet is not None:  # masked dataset: statistics over wet points only
                    w = w * wet
            elif key != grid_key:
                raise ValueError(f"{path} is on grid {key}, other files on {grid_key}: one dataset has one grid")
            elif lkey != level_key:
                raise ValueError(f"{path} has levels {lkey}, other files {level_key}: one dataset has one set of levels")
            T = f["dimensions"]["time"].shape[0]
            for name, spec in fields.items():
                vec = spec["kind"] == "vector"
                d = f["t1_fields" if vec else "t0_fields"][name]
                L = None if levels is None or is_surface(d) else d.shape[2]
                if name not in n_lev:
                    n_lev[name] = L
                    n = 1 if L is None else L
                    if vec:
                        sq[name] = [[0.0, 0.0, 0.0, 0.0] for _ in range(n)]
                    else:
                        acc[name] = ([_Moments() for _ in range(n)], [_Moments() for _ in range(n)])
                prev = None
                for k in range(T):
                    x = read_field(d, k, k + 1)[0].astype(np.float64)
                    xs = [x] if L is None else list(x)
                    ps = None if prev is None else ([prev] if L is None else list(prev))
                    if vec:
                        for lev, xl in enumerate(xs):
                            s = sq[name][lev]
                            s[0] += float((w * (xl ** 2).sum(-1)).sum())
                            s[1] += _weight_sum(w, xl)
                            if ps is not None:
                                s[2] += float((w * ((xl - ps[lev]) ** 2).sum(-1)).sum())
                                s[3] += _weight_sum(w, xl)
                    else:
                        m, dm = acc[name]
                        for lev, xl in enumerate(xs):
                            m[lev].add(xl, w)
                            if ps is not None:
                                dm[lev].add(xl - ps[lev], w)
                    prev = x
    out = {}
    for name, spec in fields.items():
        if spec["kind"] == "scalar":
            m, dm = acc[name]
            vals = {"mean": [a.mean for a in m], "std": [a.std for a in m],
                    "delta_mean": [a.mean if a.w else float("nan") for a in dm], "delta_std": [a.std for a in dm]}
            entry = {"kind": "scalar"}
        else:
            vals = {"rms": [math.sqrt(s[0] / s[1]) for s in sq[name]],
                    "delta_rms": [math.sqrt(s[2] / s[3]) if s[3] else float("nan") for s in sq[name]]}
            entry = {"kind": "vector"}
        for k, v in vals.items():
            entry[k] = float(v[0]) if n_lev[name] is None else [float(x) for x in v]
        out[name] = entry
    return out
