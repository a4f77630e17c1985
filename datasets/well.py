"""Datasets in the Well's layout (Ohana et al. 2024, "The Well", NeurIPS Datasets and Benchmarks, App. B):
read them with Dandelion's jobs.

A folder in the Well's layout::

    DIR/data/train/*.hdf5 (or *.h5)   each file: one or more trajectories (root attr n_trajectories)
    DIR/data/valid/...
    DIR/data/test/...
    DIR/stats.yaml                    the Well's statistics (keys mean, std, mean_delta, std_delta, rms, rms_delta)

Inside a file: ``dimensions/`` (``time`` and the spatial coordinates listed in its ``spatial_dims``
attribute), ``t0_fields/`` (scalars ``(n_traj, T, *spatial)``), ``t1_fields/`` (vectors
``(n_traj, T, *spatial, D)``), ``scalars/`` and ``boundary_conditions/``. The spherical PlanetSWE set
uses ``spatial_dims = ["theta", "phi"]`` (colatitude and longitude in radians), ``height`` and
``velocity`` fields and an hourly time step (its ``datasets/planetswe`` card in the Well's repository).

:class:`WellFolder` maps such a folder onto Dandelion's conventions, which every job then uses:

* grid: the latitude coordinate (``lat``/``latitude`` in degrees, or ``theta``/``colatitude``,
  radians unless its ``units`` say degrees) must be the rows of a grid Dandelion supports
  (:data:`dandelion.sphere.GRIDS`: equiangular with poles, or Legendre-Gauss), in either order, and the
  longitudes ``2*pi*j/nlon``; rows are flipped to north-first when stored south-first. Any other grid
  raises :class:`UnsupportedGridError`, whose message names the remedy
  (:func:`dandelion.datasets.well_resample.resample_well_folder`, CLI ``dandelion-well-resample``);
* vectors: an explicit ``component_names`` attribute (``["u", "v"]``, as our files carry) wins;
  otherwise the Well's convention, component ``k`` along ``spatial_dims[k]``: a longitude component is
  ``u`` (eastward) and a latitude component ``v`` (northward); a colatitude (``theta``) component
  points south, so ``v = -u_theta``;
* time: ``dt_frame`` is the (uniform) spacing of ``dimensions/time``; ``time_units`` is the root
  attribute ``time_units`` when it is ``"s"``, otherwise ``"nondimensional"`` (the Well's files carry
  no unit; PlanetSWE's frames are one model hour apart, so its ``dt_frame`` is 1);
* statistics: Dandelion normalises with area-weighted statistics (scalars: mean, std; vectors: RMS
  magnitude; the same of one-step differences), which the Well's ``stats.yaml`` lacks (its averages
  are plain grid-point means, per vector component). They are computed once from the train split
  with the grid's quadrature weights (:func:`dandelion.datasets.well_format.area_weighted_stats`) and
  cached in ``DIR/dandelion_stats.yaml`` (written atomically when the folder is writable).

Constant fields (``time_varying = False``) and ``t2_fields`` are not used by the models and are
skipped with a warning.
"""

from __future__ import annotations

import logging
import math
import os
from pathlib import Path

import h5py
import numpy as np
import yaml

from dandelion.runtime import write_yaml_atomic
from dandelion.sphere import GRIDS, SphereGrid, analysis_lmax

from .folder import completeness_problem
from .storage import CorruptFileError, open_hdf5
from .well_format import area_weighted_stats

__all__ = [
    "UnsupportedGridError",
    "WellFolder",
    "is_well_folder",
    "well_split_files",
    "latitude_grid",
    "to_radians",
    "STATS_CACHE",
    "LATITUDE_NAMES",
]

log = logging.getLogger(__name__)

#: Where the area-weighted statistics of a Well folder are cached (inside the folder).
STATS_CACHE = "dandelion_stats.yaml"
_SPLITS = ("train", "valid", "test")
#: Latitude-like spatial dimension names of Well files and whether they hold latitude or colatitude.
LATITUDE_NAMES = {"lat": "lat", "latitude": "lat", "theta": "colat", "colatitude": "colat"}
_LON_NAMES = ("lon", "longitude", "phi")
_GRID_ATOL = 1e-5  # radians (float32 coordinates hold about 1e-7 relative)
#: What to do about a Well-layout file HDF5 cannot open.
WELL_FIX = "download it again (or rerun the dandelion-well-resample that wrote it), or move it out of the folder"


def open_well_file(path) -> h5py.File:
    """A file of a Well-layout folder opened read-only; one HDF5 cannot open raises
    :class:`dandelion.datasets.storage.CorruptFileError` naming it and :data:`WELL_FIX`."""
    return open_hdf5(path, WELL_FIX)


class UnsupportedGridError(ValueError):
    """The latitudes or longitudes of a Well-layout dataset are not those of a grid Dandelion supports."""


def well_split_files(path, split: str) -> list[Path]:
    """The HDF5 files of ``DIR/data/<split>`` sorted by name (as the Well's loader orders them)."""
    split = "valid" if split == "val" else str(split)
    folder = Path(path) / "data" / split
    return sorted(list(folder.glob("*.hdf5")) + list(folder.glob("*.h5")))


def is_well_folder(path) -> bool:
    """True when ``path`` is in the Well's layout (``data/train`` holds HDF5 files) and is not a folder made by
    ``dandelion-generate`` (which has a ``dataset.yaml``)."""
    path = Path(path)
    return not (path / "dataset.yaml").is_file() and bool(well_split_files(path, "train"))


def to_radians(values: np.ndarray, units: str, limit: float) -> np.ndarray:
    """Angles in radians: ``units`` naming degrees or radians decide; without units, values within ``limit``
    (radians: pi for colatitude, pi/2 for latitude, 2 pi for longitude) are taken as radians, others as degrees."""
    units = units.lower()
    if "deg" in units:
        return np.deg2rad(values)
    if "rad" in units or np.abs(values).max() <= limit + 1e-6:
        return values
    return np.deg2rad(values)


def latitude_grid(colat: np.ndarray, nlon: int | None = None) -> str | None:
    """The name of the Dandelion grid (:data:`dandelion.sphere.GRIDS`) whose rows are ``colat`` (radians, ascending),
    or None when no grid matches within 1e-5 rad."""
    for grid in GRIDS:
        try:
            ref = SphereGrid(len(colat), nlon or 1, grid).colat.numpy()
        except ValueError:
            continue
        if np.allclose(colat, ref, rtol=0.0, atol=_GRID_ATOL):
            return grid
    return None


def _describe(colat_deg: np.ndarray) -> str:
    d = np.diff(colat_deg)
    spacing = (
        f"uniform spacing {d.mean():.4f} deg"
        if np.allclose(d, d.mean(), rtol=1e-4)
        else f"spacing {d.min():.4f}..{d.max():.4f} deg"
    )
    poles = (
        "poles included"
        if np.isclose(colat_deg[0], 0.0, atol=1e-4) and np.isclose(colat_deg[-1], 180.0, atol=1e-4)
        else "poles excluded"
    )
    return f"{len(colat_deg)} rows at colatitudes {colat_deg[0]:.4f}..{colat_deg[-1]:.4f} deg ({spacing}, {poles})"


class WellFolder:
    """A dataset folder in the Well's layout, seen with Dandelion's conventions (module docstring).

    Parameters
    ----------
    path : folder with ``data/train``, ``data/valid``, ``data/test``.
    compute_stats : compute (and cache) the area-weighted statistics when they are not cached yet
        (default True); False leaves :attr:`stats` None when there is no cache.

    Attributes
    ----------
    path : Path; grid : :class:`SphereGrid`; metadata : dict in the schema of our ``dataset.yaml``
    (``name``, ``grid``, ``nlat``, ``nlon``, ``lmax``, ``dt_frame``, ``time_units``, ``fields``,
    ``parameters``, ``source``); stats : our ``stats.yaml`` mapping (area-weighted, train split).

    Raises
    ------
    FileNotFoundError
        If ``data/train`` holds no HDF5 file.
    CorruptFileError
        For a file HDF5 cannot open, or a damaged statistics cache (the message names the file and the fix).
    ValueError
        For an unfinished ``dandelion-well-resample`` output (:func:`dandelion.datasets.folder.completeness_problem`).
    UnsupportedGridError
        If the latitudes are not one of our grids or the longitudes are not ``2*pi*j/nlon`` (the
        message describes the grid found and names the resampling remedy).
    ValueError
        For a file that lacks the layout's groups, non-uniform frame times, a vector field whose
        components cannot be mapped onto (u, v), or files that disagree with the first one.
    """

    def __init__(self, path, compute_stats: bool = True):
        self.path = Path(path)
        first = well_split_files(self.path, "train")
        if not first:
            raise FileNotFoundError(
                f"{self.path / 'data' / 'train'} holds no .hdf5/.h5 file: not a dataset folder in the Well's layout "
                "(expected DIR/data/{train,valid,test}/*.hdf5)"
            )
        problem = completeness_problem(self.path)  # an unfinished resample: nothing is read, no statistics cached
        if problem:
            raise ValueError(problem)
        self.first_file = first[0]
        with open_well_file(self.first_file) as f:
            self._inspect(f)
        self.metadata = self._metadata()
        self.stats = self._load_or_compute_stats() if compute_stats else self._cached_stats()

    # ------------------------------------------------------------------ layout
    def _inspect(self, f: h5py.File) -> None:
        src = self.first_file
        for group in ("dimensions", "t0_fields", "t1_fields"):
            if group not in f:
                raise ValueError(f"{src} has no {group!r} group: not a file in the Well's layout")
        spatial = [str(d) for d in f["dimensions"].attrs.get("spatial_dims", [])]
        lat_dims = [d for d in spatial if d.lower() in LATITUDE_NAMES]
        lon_dims = [d for d in spatial if d.lower() in _LON_NAMES]
        if len(spatial) != 2 or len(lat_dims) != 1 or len(lon_dims) != 1:
            raise ValueError(
                f"{src}: spatial_dims={spatial}; Dandelion reads 2-D sphere data with one latitude dimension "
                f"(one of {sorted(LATITUDE_NAMES)}) and one longitude dimension (one of {list(_LON_NAMES)})"
            )
        self.spatial_dims = spatial
        self.lat_dim, self.lon_dim = lat_dims[0], lon_dims[0]
        self.lat_axis = spatial.index(self.lat_dim)  # 0: arrays are (..., lat, lon); 1: (..., lon, lat)
        d_lat, d_lon = f["dimensions"][self.lat_dim], f["dimensions"][self.lon_dim]
        raw = np.asarray(d_lat[()], dtype=np.float64).reshape(-1)
        units = str(d_lat.attrs.get("units", ""))
        if LATITUDE_NAMES[self.lat_dim.lower()] == "colat":
            colat = to_radians(raw, units, math.pi)
        else:
            colat = 0.5 * math.pi - to_radians(raw, units, 0.5 * math.pi)
        lon = np.mod(
            to_radians(
                np.asarray(d_lon[()], dtype=np.float64).reshape(-1), str(d_lon.attrs.get("units", "")), 2 * math.pi
            ),
            2 * math.pi,
        )
        self.source_colat = colat  # in the file's row order, radians
        self.flip = bool(colat[0] > colat[-1])
        order = colat[::-1] if self.flip else colat
        if np.any(np.diff(order) <= 0):
            raise UnsupportedGridError(
                f"{src}: latitudes of {self.lat_dim!r} are not monotonic: Dandelion needs a latitude-longitude grid"
            )
        nlat, nlon = len(colat), len(lon)
        grid = latitude_grid(order, nlon)
        if grid is None:
            raise UnsupportedGridError(
                f"{src}: the latitudes ({self.lat_dim!r}: {_describe(np.rad2deg(order))}) are not the rows of a grid "
                f"Dandelion supports ({', '.join(GRIDS)}; torch-harmonics nodes). Resample the folder onto one first: "
                f"`dandelion-well-resample src={self.path} dst=NEW_DIR grid=legendre-gauss` (or "
                f"dandelion.datasets.well_resample.resample_well_folder(src, dst)), then train on NEW_DIR"
            )
        ref_lon = 2 * math.pi * np.arange(nlon) / nlon
        if not np.allclose(lon, ref_lon, rtol=0.0, atol=_GRID_ATOL):
            raise UnsupportedGridError(
                f"{src}: the longitudes ({self.lon_dim!r}, {nlon} values from {np.rad2deg(lon[0]):.4f} deg) are not "
                f"2*pi*j/nlon: resample with `dandelion-well-resample src={self.path} dst=NEW_DIR`"
            )
        self.grid = SphereGrid(nlat, nlon, grid)
        self.fields, self.components = {}, {}
        for group, kind in (("t0_fields", "scalar"), ("t1_fields", "vector")):
            for name in [str(n) for n in f[group].attrs.get("field_names", list(f[group].keys()))]:
                d = f[group][name]
                if not bool(d.attrs.get("time_varying", True)):
                    log.warning(
                        "%s: constant field %s/%s is not used by Dandelion's models (skipped)", src, group, name
                    )
                    continue
                units = str(d.attrs.get("units", "1"))
                spec = {"kind": kind, "units": units, "long_name": str(d.attrs.get("long_name", name))}
                if kind == "vector":
                    self.components[name] = self._component_map(d, name)
                    spec["components"] = ["u", "v"]
                self.fields[name] = spec
        if "t2_fields" in f and len(f["t2_fields"].attrs.get("field_names", [])):
            log.warning(
                "%s: tensor fields %s are not used by Dandelion's models (skipped)",
                src,
                list(f["t2_fields"].attrs["field_names"]),
            )
        if not self.fields:
            raise ValueError(f"{src} has no time-varying t0/t1 field: nothing to learn")
        time = f["dimensions"]["time"]
        self.time_sample_varying = bool(time.attrs.get("sample_varying", False))
        t = np.asarray(time[0] if self.time_sample_varying else time[()], dtype=np.float64)
        steps = np.diff(t)
        if len(t) < 2 or not np.allclose(steps, steps.mean(), rtol=1e-3, atol=0.0) or steps.mean() <= 0:
            raise ValueError(
                f"{src}: dimensions/time is not uniformly increasing (steps {steps.min() if len(steps) else None}.."
                f"{steps.max() if len(steps) else None}): Dandelion needs frames at a fixed time step"
            )
        self.dt_frame = float(steps.mean())
        self.time_units = "s" if str(f.attrs.get("time_units", "")) == "s" else "nondimensional"
        self.dataset_name = str(f.attrs.get("dataset_name", self.path.name))
        scalars = f["scalars"].attrs.get("field_names", []) if "scalars" in f else []
        self.parameters = [str(s) for s in scalars]

    def _component_map(self, d: h5py.Dataset, name: str) -> tuple[tuple[int, float], tuple[int, float]]:
        """``((index, sign) of u, (index, sign) of v)`` in the trailing component axis of a t1 field."""
        n = d.shape[-1]
        names = [str(c).lower() for c in d.attrs.get("component_names", [])]
        if names:
            if "u" in names and "v" in names:
                return (names.index("u"), 1.0), (names.index("v"), 1.0)
            raise ValueError(
                f"{self.first_file}: t1_fields/{name} has component_names {names}; expected 'u' (eastward) and 'v' "
                "(northward)"
            )
        if n != len(self.spatial_dims):
            raise ValueError(
                f"{self.first_file}: t1_fields/{name} has {n} components for spatial_dims {self.spatial_dims}: "
                "add a component_names attribute ['u', 'v'] to say which is which"
            )
        east = self.spatial_dims.index(self.lon_dim)
        north = self.spatial_dims.index(self.lat_dim)
        sign = -1.0 if LATITUDE_NAMES[self.lat_dim.lower()] == "colat" else 1.0  # theta points south
        return (east, 1.0), (north, sign)

    def _metadata(self) -> dict:
        items = {s: self.trajectories(s) for s in _SPLITS}
        n_frames = [self.n_frames(p) for s in _SPLITS for p, _ in items[s][:1]]
        return {
            "name": self.dataset_name,
            "grid": self.grid.grid,
            "nlat": self.grid.nlat,
            "nlon": self.grid.nlon,
            "lmax": analysis_lmax(self.grid.nlat, self.grid.grid),
            "dt_frame": self.dt_frame,
            "time_units": self.time_units,
            "n_frames": min(n_frames) if n_frames else None,
            "n_trajectories": sum(len(v) for v in items.values()),
            "fields": self.fields,
            "parameters": self.parameters,
            "source": {
                "layout": "the_well",
                "path": str(self.path),
                "spatial_dims": self.spatial_dims,
                "rows_flipped": self.flip,
                "components": {k: {"u": list(u), "v": list(v)} for k, (u, v) in self.components.items()},
            },
        }

    # ------------------------------------------------------------------ trajectories
    def trajectories(self, split: str) -> list[tuple[Path, int]]:
        """``(file, sample index)`` of every trajectory of a split, in file order."""
        out = []
        for p in well_split_files(self.path, split):
            with open_well_file(p) as f:
                out += [(p, k) for k in range(int(f.attrs.get("n_trajectories", 1)))]
        return out

    def trajectory_ids(self, split: str) -> list[int]:
        """Ids numbering the trajectories of train, then valid, then test (unique in the folder)."""
        start = sum(len(self.trajectories(s)) for s in _SPLITS[: _SPLITS.index("valid" if split == "val" else split)])
        return list(range(start, start + len(self.trajectories(split))))

    @staticmethod
    def n_frames(path) -> int:
        with open_well_file(path) as f:
            return int(f["dimensions"]["time"].shape[-1])

    def times(self, f: h5py.File, sample: int = 0) -> np.ndarray:
        """Frame times (float64, in the file's time unit) of one trajectory of an open file."""
        t = f["dimensions"]["time"]
        return np.asarray(t[sample] if self.time_sample_varying else t[()], dtype=np.float64)

    def check_file(self, f: h5py.File, path) -> None:
        """Raise ValueError when an open file's grid or fields differ from the first file's."""
        spatial = [str(d) for d in f["dimensions"].attrs.get("spatial_dims", [])]
        colat = f["dimensions"][self.lat_dim][()] if self.lat_dim in f["dimensions"] else None
        if spatial != self.spatial_dims or colat is None or len(colat) != len(self.source_colat):
            raise ValueError(
                f"{path}: spatial layout {spatial} differs from {self.first_file} ({self.spatial_dims}): one folder, "
                "one grid"
            )
        for name, spec in self.fields.items():
            group = "t1_fields" if spec["kind"] == "vector" else "t0_fields"
            if name not in f[group]:
                raise ValueError(f"{path}: field {group}/{name} (present in {self.first_file}) is missing")

    def read(
        self, f: h5py.File, sample: int, start: int | None = None, stop: int | None = None
    ) -> dict[str, np.ndarray]:
        """Frames ``start:stop`` of one trajectory of an open file, in our convention: scalars ``(T, nlat, nlon)``,
        vectors ``(T, nlat, nlon, 2)`` (u eastward, v northward), rows north first, float32."""
        out = {}
        for name, spec in self.fields.items():
            d = f["t1_fields" if spec["kind"] == "vector" else "t0_fields"][name]
            a = np.asarray(
                d[sample, start:stop] if bool(d.attrs.get("sample_varying", True)) else d[start:stop], dtype=np.float32
            )
            if self.lat_axis == 1:
                a = np.swapaxes(a, 1, 2)
            if self.flip:
                a = a[:, ::-1]
            if spec["kind"] == "vector":
                (iu, su), (iv, sv) = self.components[name]
                a = np.stack([su * a[..., iu], sv * a[..., iv]], axis=-1)
            out[name] = np.ascontiguousarray(a, dtype=np.float32)
        return out

    # ------------------------------------------------------------------ statistics
    def _cached_stats(self) -> dict | None:
        cache = self.path / STATS_CACHE
        if not cache.is_file():
            return None
        try:
            data = yaml.safe_load(cache.read_text())
        except (yaml.YAMLError, UnicodeDecodeError) as err:
            raise CorruptFileError(
                f"the statistics cache {cache} is not valid YAML: delete it (it is recomputed from the train split)"
            ) from err
        if isinstance(data, dict) and not isinstance(data.get("fields"), dict):
            raise CorruptFileError(
                f"the statistics cache {cache} has no 'fields' mapping: delete it (it is recomputed from the train "
                "split)"
            )
        if (
            not isinstance(data, dict)
            or data.get("grid") != self.grid.to_dict()
            or set(data.get("fields", {})) != set(self.fields)
        ):
            log.warning("%s was made for another grid or other fields: recomputing the statistics", cache)
            return None
        return data["fields"]

    def _load_or_compute_stats(self) -> dict:
        cached = self._cached_stats()
        if cached is not None:
            return cached
        log.info("computing area-weighted statistics of %s (train split; cached in %s)", self.path, STATS_CACHE)
        stats = area_weighted_stats(self, self.trajectories("train"))
        if os.access(self.path, os.W_OK):
            write_yaml_atomic(
                self.path / STATS_CACHE,
                {
                    "grid": self.grid.to_dict(),
                    "fields": stats,
                    "note": "area-weighted train-split statistics computed by Dandelion",
                },
            )
        else:
            log.warning("%s is read-only: the statistics are not cached and will be recomputed next time", self.path)
        return stats
