"""Torch dataset over a generated dataset folder: windows of frames, Cartesian vectors, normalised.

Every model, Dandelion or baseline, sees the same channels (DESIGN.md §2, §6; DATASETS.md §0.5):

* ``n_in`` consecutive frames in, ``n_out`` consecutive frames out, folded frame-major
  ``[frame0 channels..., frame1 channels..., ...]`` for the input;
* per frame, the scalar fields (in the order of ``dataset.yaml``), then each vector field as the
  three Cartesian components ``(x, y, z)`` of ``u e + v n`` (``e``/``n`` the local east/north unit
  vectors of :class:`dandelion.sphere.SphereGrid`), because local (u, v) components are
  discontinuous through the poles;
* normalised with the train-split statistics of ``stats.yaml`` (area-weighted): scalars as
  ``(x - mean) / std``, vectors by one scale, their RMS magnitude ``sqrt(mean(u^2 + v^2))``
  (no per-component mean, so the normalisation commutes with rotations of the sphere).

Leveled datasets (``dataset.yaml`` ``levels``, e.g. ``held_suarez``) fold their levels into channels
FIELD-MAJOR, each field's levels contiguous in the file's level order (DATASETS.md §0.5), after
per-level normalisation (per-level ``stats.yaml`` lists, DATASETS.md §0.3). Per frame, with L levels:

* scalar fields in ``dataset.yaml`` order: a level field gives L channels ``<name>_<level><units>``
  (e.g. ``T_50hPa ... T_1000hPa``), a surface field one channel ``<name>`` (e.g. ``ps``);
* then each vector field, COMPONENT-major: ``<name>_x_<level>`` for every level, then all ``_y``,
  then all ``_z`` (3L channels; a surface vector field gives 3). Each level is divided by its own RMS
  magnitude.

``held_suarez`` (8 levels): ``T`` x 8, ``ps``, ``tracer`` x 8, ``velocity_x`` x 8, ``velocity_y`` x 8,
``velocity_z`` x 8 = 41 channels. 2-D datasets are unchanged.

:class:`ChannelLayout` does the lift and normalisation (``encode``) and its inverse
(``decode``: de-normalise, then project the Cartesian vector back onto east/north, which also
drops any radial component a model may predict). :class:`WindowDataset` reads the windows,
opening HDF5 files lazily in the process that reads them (each DataLoader worker opens its own
handles; none is created in ``__init__`` or pickled).
"""

from __future__ import annotations

import math
import os
from collections import OrderedDict
from pathlib import Path
from typing import Mapping

import numpy as np
import torch

from dandelion.sphere import SphereGrid

__all__ = ["ChannelLayout", "WindowDataset", "loss_weights"]

_SCALAR_KEYS = ("mean", "std")
_VECTOR_KEYS = ("rms",)
# optional: the one-step-difference statistics (kept when present; needed to predict increments)
_SCALAR_DELTA_KEYS = ("delta_mean", "delta_std")
_VECTOR_DELTA_KEYS = ("delta_rms",)
_REGENERATE = ("regenerate stats.yaml from the train split (rerun the dandelion-generate command that made the folder, "
               "or write dandelion.datasets.storage.compute_stats(train files, dataset.yaml fields) to it)")


def loss_weights(grid: SphereGrid) -> torch.Tensor:
    """Area quadrature weights of ``grid`` normalised to mean 1 over the grid points.

    Returns a float64 tensor of shape ``(nlat, 1)``; ``mean((a - b)**2 * w)`` over ``(nlat, nlon)``
    is then the area-weighted mean squared error (the integral over the sphere divided by 4*pi).
    """
    w = grid.weights
    return w / w.mean()


class ChannelLayout:
    """Channel order, vector lift and normalisation shared by every model and job.

    Parameters
    ----------
    fields : mapping name -> ``"scalar"`` | ``"vector"`` (or a dict with a ``kind`` key, as in
        ``dataset.yaml``). Order is kept: scalars first, then vectors, each in the given order.
    stats : the ``stats.yaml`` mapping (train split, area-weighted): scalars need ``mean`` and
        ``std`` (> 0), vectors need ``rms`` (> 0).
    grid : the data grid.
    stats_source : name of the statistics' file, quoted in error messages.
    levels : optional, ``dataset.yaml``'s ``levels`` entry ``{"values": [...], "units": "hPa",
        "fields": [level field names]}`` of a leveled dataset (module docstring); the level fields'
        statistics are then lists of length L (one value per level).

    Attributes
    ----------
    channels : list[str], e.g. ``["h", "velocity_x", "velocity_y", "velocity_z"]`` (length C).
    scalars, vectors : the field names of each kind, in channel order.
    n_levels : dict name -> L for level fields, 0 for 2-D and surface fields.

    Raises
    ------
    ValueError
        If a field's statistics are missing, of the wrong kind, lack a key or are not finite and
        positive (the message names the field and the file and says to regenerate the statistics),
        or if a field kind is unknown.
    """

    def __init__(self, fields: Mapping, stats: Mapping, grid: SphereGrid, stats_source: str = "stats.yaml", levels: Mapping | None = None):
        self.grid = grid
        self.stats_source = str(stats_source)
        kinds = {}
        for name, spec in fields.items():
            kind = spec.get("kind") if isinstance(spec, Mapping) else spec
            if kind not in ("scalar", "vector"):
                raise ValueError(f"field {name!r} has kind {kind!r}: expected 'scalar' or 'vector' (t0_fields / t1_fields)")
            kinds[str(name)] = kind
        if not kinds:
            raise ValueError("no fields given: a dataset needs at least one scalar or vector field")
        self.scalars = [n for n, k in kinds.items() if k == "scalar"]
        self.vectors = [n for n, k in kinds.items() if k == "vector"]
        self.levels = None
        self.n_levels = {n: 0 for n in kinds}
        if levels is not None:
            values = [float(v) for v in levels.get("values", [])]
            level_fields = [str(n) for n in levels.get("fields", [])]
            unknown = [n for n in level_fields if n not in kinds]
            if not values or unknown:
                raise ValueError(f"levels {dict(levels)} must list non-empty 'values' and 'fields' among {list(kinds)}: "
                                 "pass dataset.yaml's 'levels' entry")
            self.levels = {"values": values, "units": str(levels.get("units", "")), "fields": level_fields}
            for n in level_fields:
                self.n_levels[n] = len(values)
        tag = [f"{v:g}{self.levels['units']}" for v in self.levels["values"]] if self.levels else []
        self.channels = []
        for n in self.scalars:
            self.channels += [f"{n}_{t}" for t in tag] if self.n_levels[n] else [n]
        for n in self.vectors:
            self.channels += [f"{n}_{c}_{t}" for c in "xyz" for t in tag] if self.n_levels[n] else [f"{n}_{c}" for c in "xyz"]
        self.stats = {}
        for name, kind in kinds.items():
            entry = stats.get(name) if isinstance(stats, Mapping) else None
            if entry is None:
                raise ValueError(f"statistics {self.stats_source} lack field {name!r}: {_REGENERATE}")
            if entry.get("kind", kind) != kind:
                raise ValueError(f"statistics {self.stats_source} give field {name!r} kind {entry.get('kind')!r} but the data have {kind!r}: {_REGENERATE}")
            keys = _SCALAR_KEYS if kind == "scalar" else _VECTOR_KEYS
            clean = {"kind": kind}
            L = self.n_levels[name]
            for key in keys:
                if key not in entry:
                    raise ValueError(f"statistics {self.stats_source} lack {key!r} for field {name!r}: {_REGENERATE}")
                raw = entry[key]
                if L:
                    if not isinstance(raw, (list, tuple)) or len(raw) != L:
                        raise ValueError(f"statistics {self.stats_source}: {key} of level field {name!r} must be a list of {L} "
                                         f"values (one per level), got {raw!r}: {_REGENERATE}")
                    values = [float(v) for v in raw]
                else:
                    if isinstance(raw, (list, tuple)):
                        raise ValueError(f"statistics {self.stats_source}: {key} of field {name!r} is a list but the field has no "
                                         f"level axis: {_REGENERATE}")
                    values = [float(raw)]
                for value in values:
                    if not math.isfinite(value) or (key != "mean" and value <= 0.0):
                        raise ValueError(f"statistics {self.stats_source}: {key}={value} for field {name!r} is not finite and positive: {_REGENERATE}")
                clean[key] = values if L else values[0]
            for key in _SCALAR_DELTA_KEYS if kind == "scalar" else _VECTOR_DELTA_KEYS:
                raw = entry.get(key)
                if raw is None:
                    continue
                values = [float(v) for v in raw] if isinstance(raw, (list, tuple)) else [float(raw)]
                if len(values) != max(L, 1) or not all(math.isfinite(v) and (key == "delta_mean" or v >= 0.0) for v in values):
                    continue  # unusable: increment_scale() then names the problem
                clean[key] = values if L else values[0]
            self.stats[name] = clean
        self._basis_cache: dict = {}

    # ------------------------------------------------------------------ description
    @property
    def n_channels(self) -> int:
        """Channels per frame, C."""
        return len(self.channels)

    @property
    def fields(self) -> dict[str, str]:
        """Field name -> kind, in channel order."""
        return {**{n: "scalar" for n in self.scalars}, **{n: "vector" for n in self.vectors}}

    def to_dict(self) -> dict:
        """Plain types (for checkpoints): fields, statistics and grid (and ``levels`` for leveled data)."""
        d = {"fields": self.fields, "stats": {k: dict(v) for k, v in self.stats.items()}, "grid": self.grid.to_dict()}
        if self.levels is not None:
            d["levels"] = {k: (list(v) if isinstance(v, list) else v) for k, v in self.levels.items()}
        return d

    @classmethod
    def from_dict(cls, d: Mapping) -> "ChannelLayout":
        """Inverse of :meth:`to_dict`."""
        g = d["grid"]
        return cls(d["fields"], d["stats"], SphereGrid(int(g["nlat"]), int(g["nlon"]), str(g["grid"])), stats_source="checkpoint",
                   levels=d.get("levels"))

    def __repr__(self):
        return f"ChannelLayout(channels={self.channels}, grid={self.grid.to_dict()})"

    def increment_scale(self) -> torch.Tensor:
        """Per-channel ratio of the one-step-difference RMS to the field spread, ``(C,)`` float64.

        ``sqrt(delta_mean**2 + delta_std**2) / std`` for scalar channels (the RMS of the one-step
        difference, its mean included: a field drifting uniformly still has an increment) and
        ``delta_rms / rms`` for the three Cartesian channels of a vector field (per level for level
        fields), in channel order. A model trained with ``trainer.target=increment`` predicts the
        normalised increment ``d``, and the next normalised frame is ``x_t + increment_scale * d``
        (so ``d`` has unit RMS, as the inputs have unit spread). A field that never changes gets 0:
        its channel is then exactly persistence.

        Raises
        ------
        ValueError
            If the statistics lack ``delta_mean``/``delta_std`` (scalars) or ``delta_rms`` (vectors)
            for a field, or they are not finite (the message names the field and says to regenerate
            stats.yaml or to train with ``trainer.target=frame``).
        """
        out = []
        for name in self.scalars + self.vectors:
            kind = self.stats[name]["kind"]
            keys = ("delta_mean", "delta_std") if kind == "scalar" else ("delta_rms",)
            missing = [k for k in keys if k not in self.stats[name]]
            if missing:
                raise ValueError(f"statistics {self.stats_source} have no usable {missing[0]!r} for field {name!r}, which "
                                 f"trainer.target=increment needs: {_REGENERATE} (or train with trainer.target=frame)")
            L = self.n_levels[name]
            per_level = lambda key: self.stats[name][key] if L else [self.stats[name][key]]  # noqa: E731
            if kind == "scalar":
                delta = [math.hypot(m, sd) for m, sd in zip(per_level("delta_mean"), per_level("delta_std"))]
                spread = per_level("std")
            else:
                delta, spread = per_level("delta_rms"), per_level("rms")
            ratio = [d / s for d, s in zip(delta, spread)]
            out += ratio if kind == "scalar" else ratio * 3  # x, y, z components, each over the levels
        return torch.tensor(out, dtype=torch.float64)

    # ------------------------------------------------------------------ lift / project
    def _basis(self, dtype, device):
        key = (dtype, str(device))
        if key not in self._basis_cache:
            self._basis_cache[key] = (self.grid.east.to(device=device, dtype=dtype), self.grid.north.to(device=device, dtype=dtype))
        return self._basis_cache[key]

    def _scaled_basis(self, name: str, dtype, device):
        """``east / rms``, ``north / rms`` of vector field ``name``, made once per dtype and device (encode's hot path);
        ``(3, L, nlat, nlon)`` (one RMS per level) for a level field, ``(3, nlat, nlon)`` otherwise."""
        key = (name, dtype, str(device))
        if key not in self._basis_cache:
            east, north = self._basis(dtype, device)
            rms = self.stats[name]["rms"]
            if self.n_levels[name]:
                r = torch.tensor(rms, dtype=torch.float64).to(device=device, dtype=dtype)[:, None, None]
                self._basis_cache[key] = (east[:, None] / r, north[:, None] / r)
            else:
                self._basis_cache[key] = (east / rms, north / rms)
        return self._basis_cache[key]

    def _level_stat(self, name: str, key: str, dtype, device) -> torch.Tensor:
        """Per-level statistic ``key`` of level field ``name`` as a ``(L, 1, 1)`` tensor."""
        ck = (name, key, dtype, str(device))
        if ck not in self._basis_cache:
            self._basis_cache[ck] = torch.tensor(self.stats[name][key], dtype=torch.float64).to(device=device, dtype=dtype)[:, None, None]
        return self._basis_cache[ck]

    def lift(self, uv: torch.Tensor) -> torch.Tensor:
        """Cartesian components of a tangent vector field.

        ``uv`` : (..., nlat, nlon, 2) with (u east, v north) -> (..., 3, nlat, nlon) = ``u e + v n``.
        """
        uv = torch.as_tensor(uv)
        dtype = uv.dtype if uv.dtype.is_floating_point else torch.float32
        east, north = self._basis(dtype, uv.device)
        return uv[..., None, :, :, 0].to(dtype) * east + uv[..., None, :, :, 1].to(dtype) * north

    def project(self, xyz: torch.Tensor) -> torch.Tensor:
        """(u, v) of a Cartesian vector field: (..., 3, nlat, nlon) -> (..., nlat, nlon, 2).

        The radial component, if any, is dropped (orthogonal projection onto the tangent plane).
        """
        east, north = self._basis(xyz.dtype, xyz.device)
        return torch.stack([(xyz * east).sum(-3), (xyz * north).sum(-3)], dim=-1)

    def encode(self, fields: Mapping) -> torch.Tensor:
        """Lift and normalise: fields -> ``(..., T, C, nlat, nlon)``.

        ``fields[name]`` is ``(..., T, nlat, nlon)`` for scalars and ``(..., T, nlat, nlon, 2)``
        (u east, v north) for vectors, in the units of the data, all with the same leading shape;
        level fields carry a level axis before the grid: ``(..., T, L, nlat, nlon[, 2])``.
        The result has the promoted floating dtype of the inputs (float64 input gives float64).

        Raises
        ------
        KeyError naming the field if one is missing; ValueError for a wrong grid shape or leading shapes
        that differ between fields.
        """
        tensors, lead = {}, None
        for name, kind in self.fields.items():
            if name not in fields:
                raise KeyError(f"field {name!r} missing from the input: expected {list(self.fields)}")
            x = torch.as_tensor(fields[name])
            L = self.n_levels[name]
            if kind == "vector":
                if x.ndim < 3 or x.shape[-1] != 2:
                    raise ValueError(f"vector field {name!r} must end in 2 components (u, v), got shape {tuple(x.shape)}")
                self.grid.check_shape(x[..., 0])
                shape = tuple(x.shape[:-3])
            else:
                self.grid.check_shape(x)
                shape = tuple(x.shape[:-2])
            if L:
                if len(shape) < 1 or shape[-1] != L:
                    raise ValueError(f"level field {name!r} has shape {tuple(x.shape)}: expected {L} levels before the grid axes "
                                     f"(..., T, {L}, nlat, nlon{', 2' if kind == 'vector' else ''})")
                shape = shape[:-1]
            if lead is not None and shape != lead:
                raise ValueError(f"field {name!r} has leading shape {shape}, other fields {lead}: pass the same frames of every field")
            lead = shape
            tensors[name] = x
        dtype = torch.float32
        floats = [t.dtype for t in tensors.values() if t.dtype.is_floating_point]
        if floats:
            dtype = floats[0]
            for d in floats[1:]:
                dtype = torch.promote_types(dtype, d)
        device = next(iter(tensors.values())).device
        out = torch.empty(lead + (self.n_channels,) + self.grid.shape, dtype=dtype, device=device)
        c = 0
        for name in self.scalars:
            st, L = self.stats[name], self.n_levels[name]
            if L:
                mean, std = self._level_stat(name, "mean", dtype, device), self._level_stat(name, "std", dtype, device)
                out[..., c : c + L, :, :] = (tensors[name].to(dtype) - mean) / std
                c += L
            else:
                out[..., c, :, :] = (tensors[name].to(dtype) - st["mean"]) / st["std"]
                c += 1
        for name in self.vectors:
            uv = tensors[name].to(dtype)
            L = self.n_levels[name]
            east, north = self._scaled_basis(name, dtype, device)
            if L:  # (..., T, 3L, nlat, nlon) viewed as (..., T, 3, L, nlat, nlon): component-major
                o = out[..., c : c + 3 * L, :, :].unflatten(-3, (3, L))
                torch.mul(uv[..., 0].unsqueeze(-4), east, out=o)
                o.addcmul_(uv[..., 1].unsqueeze(-4), north)
                c += 3 * L
            else:
                o = out[..., c : c + 3, :, :]
                torch.mul(uv[..., 0].unsqueeze(-3), east, out=o)  # written in place: no (T, 3, nlat, nlon) temporaries
                o.addcmul_(uv[..., 1].unsqueeze(-3), north)
                c += 3
        return out

    def decode(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        """De-normalise and project back: ``(..., T, C, nlat, nlon)`` -> fields (as in :meth:`encode`).

        Raises ValueError if the channel dimension (-3) is not C.
        """
        if x.shape[-3] != self.n_channels:
            raise ValueError(f"tensor of shape {tuple(x.shape)} has {x.shape[-3]} channels at dim -3; the layout has {self.n_channels}: {self.channels}")
        out = {}
        c = 0
        for name in self.scalars:
            s, L = self.stats[name], self.n_levels[name]
            if L:
                mean, std = self._level_stat(name, "mean", x.dtype, x.device), self._level_stat(name, "std", x.dtype, x.device)
                out[name] = x[..., c : c + L, :, :] * std + mean
                c += L
            else:
                out[name] = x[..., c, :, :] * s["std"] + s["mean"]
                c += 1
        for name in self.vectors:
            L = self.n_levels[name]
            if L:  # (..., 3, L, nlat, nlon) -> (..., L, 3, nlat, nlon) -> (..., L, nlat, nlon, 2)
                rms = self._level_stat(name, "rms", x.dtype, x.device)
                xyz = (x[..., c : c + 3 * L, :, :].unflatten(-3, (3, L)) * rms).movedim(-4, -3)
                out[name] = self.project(xyz)
                c += 3 * L
            else:
                out[name] = self.project(x[..., c : c + 3, :, :] * self.stats[name]["rms"])
                c += 3
        return out


# ---------------------------------------------------------------------- dataset folder access
def _storage():
    from dandelion.datasets import storage  # imported late: storage imports h5py

    return storage


class WindowDataset(torch.utils.data.Dataset):
    """Windows of ``n_in`` input and ``n_out`` target frames over every trajectory of a split.

    Parameters
    ----------
    path : dataset folder (``train/ valid/ test/``, ``dataset.yaml``, ``stats.yaml``, ``splits.json``).
    split : ``"train"``, ``"valid"`` or ``"test"``.
    n_in, n_out : frames in and out (>= 1).
    stride : spacing, in frames, between the first frames of consecutive windows of one
        trajectory (frames inside a window are always consecutive).
    max_open_files : HDF5 handles kept open per process (least recently used are closed).

    Items are dicts: ``"x"`` float32 ``(n_in*C, nlat, nlon)`` (frame-major), ``"y"`` float32
    ``(n_out, C, nlat, nlon)``, ``"traj"`` the trajectory id (file attribute ``trajectory_id``)
    and ``"t0"`` the index in its file of the first input frame (so the last input frame, the
    forecast's initial time, is ``t0 + n_in - 1`` and target k (0-based) is frame ``t0 + n_in + k``).

    Attributes
    ----------
    layout : :class:`ChannelLayout`; grid : :class:`SphereGrid`; metadata, stats : the folder's
    ``dataset.yaml`` and ``stats.yaml``; files : list of trajectory files; trajectory_ids,
    n_frames : per file.

    Raises
    ------
    FileNotFoundError / ValueError
        For a missing folder or split (from :mod:`dandelion.datasets.storage`), a field listed in
        ``dataset.yaml`` missing from a file (names the field and the file), a file whose grid
        disagrees with ``dataset.yaml``, statistics lacking a field, or a split too short for
        one window.
    """

    def __init__(self, path, split: str, n_in: int = 4, n_out: int = 1, stride: int = 1, max_open_files: int = 128):
        for name, v in (("n_in", n_in), ("n_out", n_out), ("stride", stride)):
            if int(v) != v or v < 1:
                raise ValueError(f"{name}={v} must be a positive integer")
        self.path = Path(path)
        self.split = str(split)
        self.n_in, self.n_out, self.stride = int(n_in), int(n_out), int(stride)
        self.max_open_files = int(max_open_files)
        storage = _storage()
        self.metadata = storage.load_metadata(self.path)
        self.stats = storage.load_stats(self.path)
        self.grid = SphereGrid(int(self.metadata["nlat"]), int(self.metadata["nlon"]), str(self.metadata["grid"]))
        self.levels = self.metadata.get("levels")  # None for 2-D datasets
        self.layout = ChannelLayout(self.metadata["fields"], self.stats, self.grid, stats_source=str(self.path / "stats.yaml"),
                                    levels=self.levels)
        self._lat_deg = np.degrees(self.grid.lat.numpy())
        self.files = [Path(f) for f in storage.list_split(self.path, self.split)]
        if not self.files:
            raise ValueError(f"split {self.split!r} of {self.path} holds no trajectory: check splits.json or regenerate the dataset")
        self.trajectory_ids, self.n_frames = [], []
        for f in self.files:
            with storage.open_trajectory(f) as h:
                self._check_file(h, f)
                self.trajectory_ids.append(int(h.attrs["trajectory_id"]))
                self.n_frames.append(int(h["dimensions/time"].shape[0]))
        span = self.n_in + self.n_out
        counts = [max(0, (t - span) // self.stride + 1) for t in self.n_frames]
        self._offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        if self._offsets[-1] == 0:
            raise ValueError(f"split {self.split!r} of {self.path}: no trajectory has n_in + n_out = {span} frames (longest: {max(self.n_frames)}); use fewer frames")
        self._handles: OrderedDict = OrderedDict()
        self._pid = None

    def _check_file(self, h, f):
        for key in ("nlat", "nlon", "grid"):
            if key in h.attrs and str(h.attrs[key]) != str(self.metadata[key]):
                raise ValueError(f"{f}: {key}={h.attrs[key]} but dataset.yaml says {self.metadata[key]}; the folder mixes grids: regenerate it")
        lat = np.asarray(h["dimensions/lat"][:], dtype=np.float64)
        if lat.shape != (self.grid.nlat,) or not np.allclose(lat, self._lat_deg, atol=1e-6):
            raise ValueError(f"{f}: dimensions/lat are not the rows of the {self.grid.grid} grid with nlat={self.grid.nlat} "
                             "(row 0 northernmost, descending): the file is not in the dandelion layout; regenerate it")
        for name in self.layout.scalars:
            if name not in h.get("t0_fields", {}):
                raise ValueError(f"field {name!r} (scalar, listed in dataset.yaml) is missing from t0_fields of {f}: regenerate this trajectory")
        for name in self.layout.vectors:
            if name not in h.get("t1_fields", {}):
                raise ValueError(f"field {name!r} (vector, listed in dataset.yaml) is missing from t1_fields of {f}: regenerate this trajectory")

    # ------------------------------------------------------------------ lazy file handles
    def __getstate__(self):
        state = self.__dict__.copy()
        state["_handles"] = OrderedDict()
        state["_pid"] = None
        return state

    def _handle(self, i: int):
        pid = os.getpid()
        if self._pid != pid:  # new process (DataLoader worker, fork): never reuse a parent's handles
            self._handles = OrderedDict()
            self._pid = pid
        h = self._handles.get(i)
        if h is None:
            import h5py

            try:  # the layout was validated in __init__; reopening is the hot path of random access
                h = h5py.File(self.files[i], "r")
            except OSError:
                h = _storage().open_trajectory(self.files[i])  # raises with the storage module's explanation
            self._handles[i] = h
            while len(self._handles) > self.max_open_files:
                self._handles.popitem(last=False)[1].close()
        else:
            self._handles.move_to_end(i)
        return h

    def close(self):
        """Close the handles this process opened."""
        if self._pid == os.getpid():
            for h in self._handles.values():
                h.close()
        self._handles = OrderedDict()

    # ------------------------------------------------------------------ items
    def __len__(self) -> int:
        return int(self._offsets[-1])

    def window(self, index: int) -> tuple[int, int]:
        """``(file index, t0)`` of item ``index``."""
        if not 0 <= index < len(self):
            raise IndexError(f"index {index} out of range for {len(self)} windows")
        f = int(np.searchsorted(self._offsets, index, side="right") - 1)
        return f, int(index - self._offsets[f]) * self.stride

    def read_frames(self, file_index: int, start: int, stop: int) -> dict[str, np.ndarray]:
        """Raw fields of frames ``start:stop`` of one file: scalars (T, nlat, nlon), vectors (T, nlat, nlon, 2);
        level fields (T, L, nlat, nlon[, 2]); surface fields of a leveled file squeezed (T, nlat, nlon[, 2])."""
        read_field = _storage().read_field
        h = self._handle(file_index)
        out = {n: read_field(h["t0_fields"][n], start, stop) for n in self.layout.scalars}
        out.update({n: read_field(h["t1_fields"][n], start, stop) for n in self.layout.vectors})
        return out

    def times(self, file_index: int) -> np.ndarray:
        """Frame times of one file (``dimensions/time``, units in ``metadata['time_units']``)."""
        return np.asarray(self._handle(file_index)["dimensions/time"][:], dtype=np.float64)

    def __getitem__(self, index: int) -> dict:
        f, t0 = self.window(index)
        raw = self.read_frames(f, t0, t0 + self.n_in + self.n_out)
        frames = self.layout.encode({k: torch.from_numpy(np.asarray(v, dtype=np.float32)) for k, v in raw.items()})
        nlat, nlon = self.grid.shape
        x = frames[: self.n_in].reshape(self.n_in * self.layout.n_channels, nlat, nlon)
        y = frames[self.n_in :]
        return {"x": x.contiguous(), "y": y.contiguous(), "traj": self.trajectory_ids[f], "t0": t0}
