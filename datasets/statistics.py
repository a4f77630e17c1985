"""Area-weighted statistics of a split's trajectory files (the folder's ``stats.yaml``).

One streaming accumulator, :class:`FieldMoments`, gives both kinds of entry of ``stats.yaml`` from a single read
of the frames: our per-field entries (per level, :func:`compute_stats`) and the Well's keys
(:data:`WELL_STATS_KEYS`, per vector component with a field's levels pooled; ``compute_stats(..., well=True)``,
:mod:`dandelion.datasets.well_format`). It also serves folders in the Well's layout
(:func:`dandelion.datasets.well_format.area_weighted_stats`) through :func:`stream_trajectory`.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterable, Mapping

import numpy as np

from dandelion.sphere import SphereGrid

from .storage import file_levels, is_surface, open_trajectory, read_field, read_mask, reading

__all__ = ["WELL_STATS_KEYS", "FieldMoments", "stream_trajectory", "first_non_finite", "compute_stats"]

#: Top-level keys of the Well's ``stats.yaml`` (the Well's ``ZScoreNormalization`` / ``RMSNormalization``).
WELL_STATS_KEYS = ("mean", "std", "mean_delta", "std_delta", "rms", "rms_delta")
_BLOCK = 32  # frames read at once when streaming statistics


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


def _mean_sq(m: _Moments) -> float:
    """Weighted mean of x^2 from the moments: mean^2 + variance."""
    return m.mean**2 + (m.std**2 if m.w else float("nan"))


def _weight_sum(w: np.ndarray, x: np.ndarray) -> float:
    """Total weight of one vector frame x (nlat, nlon, 2): per-row weights (nlat, 1) or a masked (nlat, nlon) array."""
    return float(w.sum()) * x.shape[1] if w.shape[1] == 1 else float(w.sum())


class FieldMoments:
    """Streaming area-weighted statistics of one stored field over trajectories (float64).

    Per level (a field without a level axis has one): for a scalar field the weighted mean and variance of its
    values and of its one-step differences, for a vector field the weighted sums of ``|x|^2`` and ``|dx|^2``
    (:meth:`entry`, our ``stats.yaml`` entry). With ``well=True`` also, per vector component and with the levels
    pooled, the weighted mean and variance of the values and of the differences (:meth:`well`, the Well's keys).
    Differences are taken between consecutive frames of one trajectory: call :meth:`new_trajectory` before the
    first frames of each. Moments are combined with the pairwise update of Chan, Golub & LeVeque (1979).

    Parameters
    ----------
    vector : bool
        A vector field: frames end in a component axis of size 2 (u, v).
    n_levels : int or None
        Size of the frames' level axis, or None for frames without one.
    well : bool
        Also accumulate the Well's per-component statistics.
    """

    def __init__(self, vector: bool, n_levels: int | None = None, well: bool = False):
        self.vector, self.n_levels = vector, n_levels
        n = 1 if n_levels is None else n_levels
        self.sq = [[0.0, 0.0, 0.0, 0.0] for _ in range(n)]  # vectors: sum w|x|^2, sum w, the same for the deltas
        self.x, self.dx = [_Moments() for _ in range(n)], [_Moments() for _ in range(n)]  # scalars
        nc = 2 if vector else 1
        self.components = ([_Moments() for _ in range(nc)], [_Moments() for _ in range(nc)]) if well else None
        self.prev = None

    def new_trajectory(self) -> None:
        """The next frames start another trajectory (no difference with the frames before)."""
        self.prev = None

    def add(self, frames: np.ndarray, w: np.ndarray) -> None:
        """Add consecutive frames ``(T, [L,] nlat, nlon[, 2])`` of the current trajectory, weighted with ``w``
        (``(nlat, 1)`` quadrature weights, or ``(nlat, nlon)`` with zeros on masked points)."""
        a = np.asarray(frames, dtype=np.float64)
        prev = self.prev
        for x in a:
            xs = [x] if self.n_levels is None else list(x)
            ps = None if prev is None else ([prev] if self.n_levels is None else list(prev))
            for lev, xl in enumerate(xs):
                if self.vector:
                    s = self.sq[lev]
                    s[0] += float((w * (xl**2).sum(-1)).sum())
                    s[1] += _weight_sum(w, xl)
                    if ps is not None:
                        s[2] += float((w * ((xl - ps[lev]) ** 2).sum(-1)).sum())
                        s[3] += _weight_sum(w, xl)
                else:
                    self.x[lev].add(xl, w)
                    if ps is not None:
                        self.dx[lev].add(xl - ps[lev], w)
            prev = x
        if self.components is not None:  # the Well's: one update per block, levels pooled
            d = np.diff(a if self.prev is None else np.concatenate([self.prev[None], a]), axis=0)
            for c, (mx, mdx) in enumerate(zip(*self.components)):
                pick = (lambda z, c=c: z[..., c]) if self.vector else (lambda z: z)
                mx.add(pick(a), w)
                if d.shape[0]:
                    mdx.add(pick(d), w)
        if len(a):
            self.prev = a[-1]

    def entry(self) -> dict:
        """Our ``stats.yaml`` entry: scalars ``{kind, mean, std, delta_mean, delta_std}``, vectors
        ``{kind, rms, delta_rms}``; each value a number, or a list with one per level for frames with a level axis.
        ``delta_*`` are NaN when no trajectory had two frames."""
        if self.vector:
            vals = {
                "rms": [math.sqrt(s[0] / s[1]) for s in self.sq],
                "delta_rms": [math.sqrt(s[2] / s[3]) if s[3] else float("nan") for s in self.sq],
            }
        else:
            vals = {
                "mean": [a.mean for a in self.x],
                "std": [a.std for a in self.x],
                "delta_mean": [a.mean if a.w else float("nan") for a in self.dx],
                "delta_std": [a.std for a in self.dx],
            }
        entry = {"kind": "vector" if self.vector else "scalar"}
        for k, v in vals.items():
            entry[k] = float(v[0]) if self.n_levels is None else [float(x) for x in v]
        return entry

    def well(self) -> dict:
        """The Well's statistics ``{key: value}`` for :data:`WELL_STATS_KEYS`: a number for a scalar field, a list
        with one number per component for a vector field. Raises RuntimeError unless made with ``well=True``."""
        if self.components is None:
            raise RuntimeError("FieldMoments(well=False) keeps no per-component moments: make it with well=True")
        mx, mdx = self.components
        vals = {
            "mean": [m.mean for m in mx],
            "std": [m.std for m in mx],
            "mean_delta": [m.mean for m in mdx],
            "std_delta": [m.std for m in mdx],
            "rms": [math.sqrt(_mean_sq(m)) for m in mx],
            "rms_delta": [math.sqrt(_mean_sq(m)) for m in mdx],
        }
        return {k: [float(x) for x in v] if self.vector else float(v[0]) for k, v in vals.items()}


def stream_trajectory(
    read: Callable[[int, int], Mapping[str, np.ndarray]],
    n_frames: int,
    acc: Mapping[str, FieldMoments],
    w: np.ndarray,
    where: str = "a trajectory",
) -> None:
    """Feed one trajectory to the accumulators, a block of frames at a time.

    ``read(start, stop)`` gives ``{field: frames start:stop}`` for at least the fields of ``acc``; ``where`` names
    the trajectory (its file) in the error.

    Raises
    ------
    ValueError
        If a frame holds a NaN or Inf where the weights are not zero (:func:`first_non_finite`): the statistics would
        be NaN; the message names ``where``, the field and the frame.
    """
    for m in acc.values():
        m.new_trajectory()
    for start in range(0, n_frames, _BLOCK):
        block = read(start, min(n_frames, start + _BLOCK))
        for name, m in acc.items():
            bad = first_non_finite(block[name], w)
            if bad is not None:
                raise ValueError(
                    f"{where}: field {name!r} is not finite at frame {start + bad}: the statistics would be NaN; "
                    "regenerate (or download again) that file, or move it out of the split"
                )
            m.add(block[name], w)


def first_non_finite(frames: np.ndarray, w: np.ndarray | None = None) -> int | None:
    """Index of the first frame of ``frames`` ``(T, [L,] nlat, nlon[, 2])`` holding a NaN or Inf, or None.

    With weights ``w`` of shape ``(nlat, nlon)`` (a masked dataset), points of weight zero (land) are not looked at;
    ``(nlat, 1)`` quadrature weights look at every point."""
    a = np.asarray(frames)
    bad = ~np.isfinite(a)
    if w is not None and np.ndim(w) == 2 and np.shape(w)[1] > 1:
        keep = np.asarray(w) != 0
        bad &= keep if a.shape[-2:] == keep.shape else keep[..., None]  # vectors: a trailing component axis
    rows = bad.reshape(bad.shape[0], -1).any(1)
    return int(np.argmax(rows)) if rows.any() else None


def compute_stats(files: Iterable[str | os.PathLike], fields: Mapping[str, Mapping], *, well: bool = False) -> dict:
    """Area-weighted statistics over all frames of the given trajectory files (float64, streaming, one read).

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
    well : bool
        Also return the Well's keys (:data:`WELL_STATS_KEYS`, each ``{field: number or [one per component]}``,
        a level field's levels pooled; :mod:`dandelion.datasets.well_format`) after the per-field entries,
        computed in the same pass.

    Raises
    ------
    ValueError
        If ``files`` is empty, the files use different grids or levels, or (``well=True``) a field is named
        like one of the Well's keys.
    """
    files = list(files)
    if not files:
        raise ValueError("no files to compute statistics from: the train split is empty; generate more trajectories")
    clash = sorted(set(fields) & set(WELL_STATS_KEYS)) if well else []
    if clash:
        raise ValueError(
            f"fields {clash} are named like the Well's statistics keys {WELL_STATS_KEYS}: rename the fields"
        )
    acc: dict[str, FieldMoments] = {}
    grid_key = None
    for path in files:
        with open_trajectory(path) as f, reading(path):
            key = (int(f.attrs["nlat"]), int(f.attrs["nlon"]), str(f.attrs["grid"]))
            levels = file_levels(f)
            lkey = None if levels is None else tuple(levels.tolist())
            if grid_key is None:
                grid_key, level_key = key, lkey
                weights = SphereGrid(*key).weights.numpy()  # (nlat, 1)
            elif key != grid_key:
                raise ValueError(f"{path} is on grid {key}, other files on {grid_key}: one dataset has one grid")
            elif lkey != level_key:
                raise ValueError(
                    f"{path} has levels {lkey}, other files {level_key}: one dataset has one set of levels"
                )
            wet = read_mask(f)
            w = weights if wet is None else weights * wet  # masked dataset: statistics over wet points only
            ds = {
                name: f["t1_fields" if spec["kind"] == "vector" else "t0_fields"][name] for name, spec in fields.items()
            }
            for name, d in ds.items():
                if name not in acc:
                    n_levels = None if levels is None or is_surface(d) else d.shape[2]
                    acc[name] = FieldMoments(fields[name]["kind"] == "vector", n_levels, well=well)
            stream_trajectory(
                lambda a, b, ds=ds: {n: read_field(d, a, b) for n, d in ds.items()},
                int(f["dimensions"]["time"].shape[0]),
                acc,
                w,
                where=str(path),
            )
    out = {name: acc[name].entry() for name in fields}
    if well:
        per_field = {name: acc[name].well() for name in fields}
        out.update({k: {name: v[k] for name, v in per_field.items()} for k in WELL_STATS_KEYS})
    return out
