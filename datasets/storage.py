"""Trajectory files: one HDF5 file per trajectory in the Well's layout (the folder around them is
:mod:`.folder`'s, its statistics :mod:`.statistics`').

Trajectory file (the Well's layout, docs/datasets/README.md, with our deviations)::

    /                    attrs dataset_name, grid_type="spherical", grid, nlat, nlon, lmax (absent when
                         band_limited=False), band_limited, n_spatial_dims=2, n_trajectories=1, trajectory_id,
                         simulation_parameters, time_units, dandelion_version, and one attribute per simulation
                         parameter holding its value (as the Well asks)
    boundary_conditions/ lon_periodic (bc_type PERIODIC), lat_open (OPEN; level_wall WALL in leveled files), each
                         with associated_dims, associated_fields=[], sample_varying, time_varying and a bool mask
                         (True at the first and last point of its dimension): the Well's loader needs this group
    dimensions/time      (T,) float64, in ``time_units`` (rebased: the first stored frame is 0)
    dimensions/lat       (nlat,) float64 degrees_north in the grid's row order (row 0 northernmost: descending)
    dimensions/lon       (nlon,) float64 degrees_east in [0, 360)
    scalars/<param>      0-d float64, one per sweep or seeded parameter (attr units)
    t0_fields/<name>     (1, T, nlat, nlon) float32 scalar fields
    t1_fields/<name>     (1, T, nlat, nlon, 2) float32 tangent vectors, component_names = ["u", "v"]
                         (u eastward, v northward)
    t2_fields/           empty
    mask/wet             (nlat, nlon) uint8, 1 = ocean (wet), 0 = land; only in masked datasets (e.g.
                         ``global_ocean``), stored once per file (static); attrs long_name, flag_values
    mask/wet_fraction    (nlat, nlon) float32, the ocean fraction of each cell (``wet = fraction >= 0.5``)

Leveled datasets (e.g. ``held_suarez``, docs/datasets/README.md) add a vertical ``level`` axis as a third
spatial dimension (the Well's convention):

    /                    attr n_spatial_dims=3
    dimensions/level     (L,) float64 (attrs units, e.g. "hPa", long_name, positive="down");
                         dimensions attr spatial_dims=["level", "lat", "lon"]
    t0_fields/<name>     (1, T, L, nlat, nlon) float32, dim_varying=[True, True, True]
    t1_fields/<name>     (1, T, L, nlat, nlon, 2) float32
    surface fields       (e.g. ``ps``) (1, T, 1, nlat, nlon[, 2]) with a size-1 level axis and
                         dim_varying=[False, True, True]; :func:`read_field` and :func:`read_fields`
                         SQUEEZE that axis on read (surface fields come back as (T, nlat, nlon)).

Chunks hold one frame over the whole sphere (all levels); compression is gzip (level 4) after byte shuffle, with
a Fletcher-32 checksum per chunk so that a flipped byte fails loudly on read. Files are deterministic
(no creation times are recorded), so the same data gives the same bytes.

Every file is written under a temporary name in its final folder (hidden, with the writer's process id) and
renamed with ``os.replace`` once complete: a file with its final name is always complete, and holds finite values
only (:meth:`TrajectoryWriter.write_frame` refuses a NaN or Inf).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Mapping
from pathlib import Path

import h5py
import numpy as np

from dandelion import __version__
from dandelion.runtime import DamagedFileError, temp_leftovers
from dandelion.runtime import temp_path as _process_temp_path
from dandelion.sphere import SphereGrid

from .layout import is_surface, layout_problems

__all__ = [
    "CorruptFileError",
    "TrajectoryWriter",
    "write_boundary_conditions",
    "trajectory_filename",
    "temp_path",
    "temp_leftovers",
    "open_hdf5",
    "reading",
    "damaged_file_message",
    "open_trajectory",
    "read_fields",
    "read_field",
    "read_mask",
    "file_levels",
    "is_surface",
]

_COMPRESSION = dict(compression="gzip", compression_opts=4, shuffle=True, fletcher32=True)
_REGENERATE = (
    "delete it and rerun the dandelion-generate command that made the folder (it regenerates missing files), "
    "or check it with dandelion-verify"
)


class CorruptFileError(DamagedFileError):
    """A dataset file is truncated, corrupt or does not follow the layout; the message names the file."""


def trajectory_filename(trajectory_id: int) -> str:
    """``traj_XXXXXX.h5`` for a trajectory id (six digits, zero padded)."""
    return f"traj_{int(trajectory_id):06d}.h5"


def temp_path(path: str | os.PathLike) -> Path:
    """The temporary name a trajectory file is written under before ``os.replace``: same folder, hidden, with this
    process's id (:func:`dandelion.runtime.temp_path`), so two writers never share one. A rerun holding the
    folder's lock removes the leftovers of any process (:func:`dandelion.runtime.temp_leftovers`), and
    ``dandelion-verify`` reports them."""
    return _process_temp_path(path)


def open_hdf5(path: str | os.PathLike, fix: str) -> h5py.File:
    """``h5py.File(path, "r")``; a file HDF5 cannot open raises :class:`CorruptFileError` naming it and ``fix``.

    Raises FileNotFoundError for a missing file."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist: {fix}")
    try:
        return h5py.File(path, "r")
    except OSError as e:
        why = " ".join(str(e).split())
        raise CorruptFileError(f"cannot open {path} (truncated or corrupt HDF5: {why[:160]}): {fix}") from e


def damaged_file_message(path: str | os.PathLike, err: BaseException) -> str:
    """One line for a trajectory file HDF5 cannot read: the file, h5py's words (shortened), the likely cause and the
    fix (``dandelion-verify DIR`` on its dataset folder, then regenerate the file)."""
    path = Path(path)
    root = path.parent.parent if path.parent.name in ("train", "valid", "test") else path.parent
    why = " ".join(str(err).split())[:160]
    return (
        f"cannot read {path} ({type(err).__name__}: {why}): the file is damaged (flipped or lost bytes on the disk or "
        f"in a copy); check the folder with `dandelion-verify {root}` and regenerate the file (delete it and rerun "
        "the dandelion-generate command that made the folder, which regenerates missing files)"
    )


@contextlib.contextmanager
def reading(path: str | os.PathLike):
    """Turn an h5py error raised while reading ``path`` (a damaged chunk: ``OSError``, a damaged B-tree or object
    header: ``RuntimeError``, ``KeyError``) into :class:`CorruptFileError` with :func:`damaged_file_message`.

    Every read of a trajectory's frames goes through it (training windows, statistics, rollout, export, resample), so
    a damaged file stops a job with one line naming it. Errors that already name a file (:class:`CorruptFileError`)
    pass unchanged."""
    try:
        yield
    except DamagedFileError:
        raise
    except (OSError, RuntimeError, KeyError) as e:
        raise CorruptFileError(damaged_file_message(path, e)) from e


# ---------------------------------------------------------------------------------------------- writing
class TrajectoryWriter:
    """Write one trajectory file frame by frame, atomically.

    The file is created under :func:`temp_path` of ``path``; :meth:`close` (or leaving the ``with``
    block normally) renames it to ``path``. Leaving the block with an exception deletes the temporary
    file, so a final name always means a complete file.

    Parameters
    ----------
    path : path-like
        Final file name, e.g. ``DIR/train/traj_000007.h5``.
    dataset_name : str
    grid : SphereGrid
        Output grid; fields are ``(nlat, nlon)`` in its row order.
    lmax : int or None
        Band limit of the stored fields (degrees ``< lmax``); None for data that is not band-limited
        (no ``lmax`` attribute, ``band_limited = False``).
    trajectory_id : int
    times : array (T,)
        Stored frame times in ``time_units`` (float64).
    time_units : str
        ``"s"`` or ``"nondimensional"``.
    scalars : mapping name -> (value, units)
        Every sweep and seeded parameter of the trajectory (stored as 0-d float64).
    fields : mapping name -> dict(kind="scalar"|"vector", units=str, long_name=str)
        The stored fields, in order.
    levels : array (L,), optional
        Vertical levels (e.g. pressure in hPa, top to bottom) of a leveled dataset; ``None`` (default)
        writes the 2-D layout. With levels the file gets ``dimensions/level`` and
        ``n_spatial_dims = 3`` (module docstring).
    level_units : str
        Units of ``levels`` (``"hPa"``).
    level_fields : iterable of str, optional
        The fields that carry the level axis (default: all); the others are surface fields, stored
        with a size-1 level axis and ``dim_varying = [False, True, True]``.
    mask : array (nlat, nlon), optional
        Ocean fraction of each cell (0..1) of a masked dataset, written as ``mask/wet_fraction`` and
        ``mask/wet`` (fraction >= 0.5); ``None`` (default) writes no mask group.

    Raises
    ------
    ValueError
        For an unknown field kind, a level field that is not a field, empty or non-finite levels, or
        inconsistent shapes (in :meth:`write_frame`).
    """

    def __init__(
        self,
        path,
        *,
        dataset_name: str,
        grid: SphereGrid,
        lmax: int,
        trajectory_id: int,
        times,
        time_units: str,
        scalars: Mapping[str, tuple[float, str]],
        fields: Mapping[str, Mapping],
        levels=None,
        level_units: str = "hPa",
        level_fields: Iterable[str] | None = None,
        mask=None,
    ):
        self.path = Path(path)
        self.tmp = temp_path(self.path)
        self.grid = grid
        self.times = np.asarray(times, dtype=np.float64)
        self.fields = {k: dict(v) for k, v in fields.items()}
        for name, spec in self.fields.items():
            if spec.get("kind") not in ("scalar", "vector"):
                raise ValueError(f"field {name!r} has kind {spec.get('kind')!r}: use 'scalar' or 'vector'")
        self.levels = None if levels is None else np.asarray(levels, dtype=np.float64).reshape(-1)
        leveled = self.levels is not None
        if leveled:
            if self.levels.size == 0 or not np.isfinite(self.levels).all():
                raise ValueError(
                    f"levels={levels!r} must be a non-empty list of finite values ({level_units}); "
                    "pass levels=None for a 2-D dataset"
                )
            self.level_fields = set(self.fields) if level_fields is None else {str(n) for n in level_fields}
            unknown = sorted(self.level_fields - set(self.fields))
            if unknown:
                raise ValueError(
                    f"level_fields {unknown} are not among the fields {list(self.fields)}: list only stored fields"
                )
        else:
            self.level_fields = set()
        self.n_written = 0
        self.path.parent.mkdir(parents=True, exist_ok=True)
        T, nlat, nlon = len(self.times), grid.nlat, grid.nlon
        f = h5py.File(self.tmp, "w", libver="earliest", track_order=False)
        self.file = f
        try:  # a refusal below (mask, levels) must not leave the temporary file or an open handle
            f.attrs["dataset_name"] = str(dataset_name)
            f.attrs["grid_type"] = "spherical"
            f.attrs["grid"] = str(grid.grid)
            f.attrs["nlat"] = int(nlat)
            f.attrs["nlon"] = int(nlon)
            if lmax is not None:  # None: data that is not band-limited (finite volume) has no lmax attribute
                f.attrs["lmax"] = int(lmax)
            f.attrs["band_limited"] = lmax is not None
            f.attrs["n_spatial_dims"] = 3 if leveled else 2
            f.attrs["n_trajectories"] = 1
            f.attrs["trajectory_id"] = int(trajectory_id)
            f.attrs["simulation_parameters"] = [str(k) for k in scalars]
            f.attrs["time_units"] = str(time_units)
            f.attrs["dandelion_version"] = str(__version__)

            dims = f.create_group("dimensions")
            dims.attrs["spatial_dims"] = ["level", "lat", "lon"] if leveled else ["lat", "lon"]
            coords = [("time", self.times, str(time_units))]
            if leveled:
                coords.append(("level", self.levels, str(level_units)))
            coords += [
                ("lat", np.degrees(grid.lat.numpy()), "degrees_north"),
                ("lon", np.degrees(grid.lon.numpy()), "degrees_east"),
            ]
            for name, values, units in coords:
                d = dims.create_dataset(name, data=np.asarray(values, dtype=np.float64), track_times=False)
                d.attrs["units"] = units
                d.attrs["sample_varying"] = False
                d.attrs["time_varying"] = name == "time"
                if name == "level":
                    d.attrs["long_name"] = "pressure level" if str(level_units).lower() in ("hpa", "pa") else "level"
                    d.attrs["positive"] = "down"

            sc = f.create_group("scalars")
            sc.attrs["field_names"] = [str(k) for k in scalars]
            for name, (value, units) in scalars.items():
                # the Well's format: each simulation parameter also as a root attribute
                f.attrs[str(name)] = float(value)
                d = sc.create_dataset(name, data=np.float64(value), track_times=False)
                d.attrs["units"] = str(units)
                d.attrs["time_varying"] = False
                d.attrs["sample_varying"] = False

            sizes = {"lat": nlat, "lon": nlon, **({"level": len(self.levels)} if leveled else {})}
            write_boundary_conditions(f, list(dims.attrs["spatial_dims"]), sizes)

            if mask is not None:
                _write_mask(f, np.asarray(mask, dtype=np.float64), (nlat, nlon))
            g0, g1 = f.create_group("t0_fields"), f.create_group("t1_fields")
            f.create_group("t2_fields").attrs["field_names"] = []
            g0.attrs["field_names"] = [k for k, s in self.fields.items() if s["kind"] == "scalar"]
            g1.attrs["field_names"] = [k for k, s in self.fields.items() if s["kind"] == "vector"]
            self.datasets = {}
            for name, spec in self.fields.items():
                vec = spec["kind"] == "vector"
                spatial = (nlat, nlon)
                if leveled:
                    spatial = ((len(self.levels) if name in self.level_fields else 1),) + spatial
                shape = (1, T) + spatial + ((2,) if vec else ())
                d = (g1 if vec else g0).create_dataset(
                    name, shape=shape, dtype=np.float32, chunks=(1, 1) + shape[2:], track_times=False, **_COMPRESSION
                )
                d.attrs["units"] = str(spec["units"])
                d.attrs["long_name"] = str(spec["long_name"])
                d.attrs["dim_varying"] = [name in self.level_fields, True, True] if leveled else [True, True]
                d.attrs["sample_varying"] = True
                d.attrs["time_varying"] = True
                if vec:
                    d.attrs["component_names"] = ["u", "v"]
                self.datasets[name] = d
        except BaseException:
            self.abort()
            raise

    def write_frame(self, index: int, values: Mapping[str, np.ndarray]) -> None:
        """Store frame ``index``: scalars ``(nlat, nlon)``, vectors ``(nlat, nlon, 2)`` (cast to float32);
        in a leveled file, level fields ``(L, nlat, nlon[, 2])`` and surface fields ``(nlat, nlon[, 2])``
        (or with a size-1 level axis)."""
        for name, d in self.datasets.items():
            if name not in values:
                raise ValueError(f"frame {index} lacks field {name!r}: expected {list(self.datasets)}")
            a = np.asarray(values[name])
            if self.levels is not None and name not in self.level_fields and a.shape == d.shape[3:]:
                a = a[None]  # surface field: size-1 level axis
            if a.shape != d.shape[2:]:
                raise ValueError(f"field {name!r} has shape {a.shape}, expected {d.shape[2:]}")
            a = a.astype(np.float32)
            if not np.isfinite(a).all():  # after the cast: a finite float64 beyond 3.4e38 is Inf in float32
                raise FloatingPointError(
                    f"{self.path}: frame {index} of field {name!r} holds {np.isnan(a).sum()} NaN and "
                    f"{np.isinf(a).sum()} Inf values (as float32): the file is not written; check the solver's "
                    "settings (time step, band limit) for this trajectory"
                )
            d[0, index] = a
        self.n_written = max(self.n_written, index + 1)

    def close(self) -> Path:
        """Close and rename to the final name. Raises ``ValueError`` if not every frame was written."""
        if self.file is None:
            return self.path
        if self.n_written != len(self.times):
            self.abort()
            raise ValueError(f"{self.path}: only {self.n_written} of {len(self.times)} frames were written")
        try:
            self.file.flush()  # a full disk fails here, not in close (where h5py crashes on a failed flush)
        except BaseException:
            self.abort()
            raise
        self.file.close()
        self.file = None
        os.replace(self.tmp, self.path)
        return self.path

    def abort(self) -> None:
        """Close and delete the temporary file (the final name is never touched). Never raises for the close: a file
        HDF5 cannot flush (a full disk) is closed as far as it goes and its temporary name removed, so that the other
        writers of a batch are aborted too and no open handle is left for the interpreter's exit (where h5py's
        clean-up of a failed file crashed the process)."""
        if self.file is not None:
            # the file is discarded: emptying it first gives a full disk back the room HDF5's closing flush needs
            with contextlib.suppress(OSError):
                os.truncate(self.tmp, 0)
            f, self.file, self.datasets = self.file, None, {}
            try:
                f.close()
            except (OSError, RuntimeError):
                pass  # the temporary file is removed below; the error that made the caller abort is raised there
            finally:
                self.tmp.unlink(missing_ok=True)

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            self.close()
        else:
            self.abort()
        return False


#: Boundary of each spatial dimension in the Well's terms: periodic in longitude, none in latitude (OPEN, as the
#: Well's spherical PlanetSWE set marks it), ground and model top on a vertical level axis (WALL).
_BOUNDARIES = {"lon": ("lon_periodic", "PERIODIC"), "lat": ("lat_open", "OPEN"), "level": ("level_wall", "WALL")}


def write_boundary_conditions(f: h5py.File, spatial_dims, sizes) -> None:
    """Add the ``boundary_conditions`` group of the Well's format (module docstring) to a writable file;
    ``sizes`` maps each spatial dimension to its length."""
    bcs = f.create_group("boundary_conditions")
    for dim in spatial_dims:
        name, bc_type = _BOUNDARIES[dim]
        g = bcs.create_group(name)
        g.attrs["bc_type"] = bc_type
        g.attrs["associated_dims"] = [dim]
        g.attrs["associated_fields"] = []
        g.attrs["sample_varying"] = False
        g.attrs["time_varying"] = False
        mask = np.zeros(int(sizes[dim]), dtype=bool)
        mask[[0, -1]] = True
        g.create_dataset("mask", data=mask, track_times=False)


# ---------------------------------------------------------------------------------------------- reading
def _write_mask(f: h5py.File, fraction: np.ndarray, shape: tuple[int, int]) -> None:
    if fraction.shape != shape or not np.isfinite(fraction).all() or fraction.min() < 0 or fraction.max() > 1:
        raise ValueError(f"mask must be an ocean fraction in [0, 1] of shape {shape}, got shape {fraction.shape}")
    g = f.create_group("mask")
    d = g.create_dataset("wet", data=(fraction >= 0.5).astype(np.uint8), track_times=False, **_COMPRESSION)
    d.attrs["long_name"] = "ocean mask (1 = wet, 0 = land)"
    d.attrs["flag_values"] = [0, 1]
    d = g.create_dataset("wet_fraction", data=fraction.astype(np.float32), track_times=False, **_COMPRESSION)
    d.attrs["long_name"] = "ocean fraction of the cell area"
    d.attrs["units"] = "1"


def read_mask(f: h5py.File) -> np.ndarray | None:
    """The wet mask (nlat, nlon) bool of an open trajectory file, or ``None`` when it has none."""
    return np.asarray(f["mask"]["wet"][()], dtype=bool) if "mask" in f else None


def open_trajectory(path: str | os.PathLike, *, check_data: bool = False) -> h5py.File:
    """Open a trajectory file read-only after checking its layout.

    Parameters
    ----------
    path : path-like
    check_data : bool
        Also read every field and check that it decodes (chunk checksums) and is finite. Slow for
        large files; :func:`dandelion.datasets.verify.verify` uses it.

    Returns
    -------
    h5py.File, opened with mode ``"r"`` (the caller closes it; usable as a context manager).

    Raises
    ------
    FileNotFoundError
        If there is no such file.
    CorruptFileError
        If the file is truncated, corrupt, or lacks a group, attribute or dataset of the layout; the
        message names the file and the problem.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"trajectory file {path} does not exist: check the dataset path and splits.json")
    f = open_hdf5(path, _REGENERATE)
    try:
        problems = layout_problems(f, check_data=check_data)
    except Exception as e:  # h5py raises OSError/KeyError/RuntimeError on damaged metadata or chunks
        problems = [f"unreadable content ({type(e).__name__}: {e})"]
    if problems:
        f.close()
        raise CorruptFileError(
            f"trajectory file {path} is damaged or not in the dandelion layout: "
            + "; ".join(problems)
            + f". {_REGENERATE[0].upper()}{_REGENERATE[1:]}"
        )
    return f


def file_levels(f: h5py.File) -> np.ndarray | None:
    """``dimensions/level`` of an open trajectory file (float64, e.g. hPa), or ``None`` for a 2-D file."""
    return np.asarray(f["dimensions"]["level"][()], dtype=np.float64) if "level" in f["dimensions"] else None


def read_field(d: h5py.Dataset, start: int | None = None, stop: int | None = None) -> np.ndarray:
    """Frames ``start:stop`` of one stored field (float32): ``(T, nlat, nlon[, 2])`` for 2-D and surface
    fields (a surface field's size-1 level axis is squeezed), ``(T, L, nlat, nlon[, 2])`` for level fields."""
    with reading(d.file.filename):
        a = d[0, start:stop]
    return a[:, 0] if is_surface(d) else a


def read_fields(path: str | os.PathLike) -> dict[str, np.ndarray]:
    """All fields of a trajectory file as arrays: scalars ``(T, nlat, nlon)``, vectors ``(T, nlat, nlon, 2)``;
    in a leveled file, level fields ``(T, L, nlat, nlon[, 2])`` and surface fields squeezed to
    ``(T, nlat, nlon[, 2])``."""
    with open_trajectory(path) as f, reading(path):
        out = {n: read_field(d) for n, d in f["t0_fields"].items()}
        out.update({n: read_field(d) for n, d in f["t1_fields"].items()})
    return out
