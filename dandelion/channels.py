"""The channel layout every model and job shares: order, vector lift and normalisation of a frame.

Every model, Dandelion or baseline, sees the same channels:

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
FIELD-MAJOR, each field's levels contiguous in the file's level order, after per-level normalisation
(per-level ``stats.yaml`` lists). Per frame, with L levels:

* scalar fields in ``dataset.yaml`` order: a level field gives L channels ``<name>_<level><units>``
  (e.g. ``T_50hPa ... T_1000hPa``), a surface field one channel ``<name>`` (e.g. ``ps``);
* then each vector field, COMPONENT-major: ``<name>_x_<level>`` for every level, then all ``_y``,
  then all ``_z`` (3L channels; a surface vector field gives 3). Each level is divided by its own RMS
  magnitude.

``held_suarez`` (8 levels): ``T`` x 8, ``ps``, ``tracer`` x 8, ``velocity_x`` x 8, ``velocity_y`` x 8,
``velocity_z`` x 8 = 41 channels. 2-D datasets are unchanged.

:class:`ChannelLayout` does the lift and normalisation (``encode``) and its inverse
(``decode``: de-normalise, then project the Cartesian vector back onto east/north, which also
drops any radial component a model may predict). The windows themselves are read by
:class:`dandelion.datasets.torch_dataset.WindowDataset`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import torch

from .sphere import SphereGrid

__all__ = ["ChannelLayout"]

_SCALAR_KEYS = ("mean", "std")
_VECTOR_KEYS = ("rms",)
# optional: the one-step-difference statistics (kept when present; needed to predict increments)
_SCALAR_DELTA_KEYS = ("delta_mean", "delta_std")
_VECTOR_DELTA_KEYS = ("delta_rms",)
_REGENERATE = (
    "regenerate stats.yaml from the train split (rerun the dandelion-generate command that made the folder, "
    "or write dandelion.datasets.statistics.compute_stats(train files, dataset.yaml fields) to it)"
)


def _field_kinds(fields: Mapping) -> dict[str, str]:
    """``{name: "scalar" | "vector"}`` from dataset.yaml's fields (a kind or a ``{"kind": ...}`` entry each).

    Raises
    ------
    ValueError
        For another kind, or no field.
    """
    kinds = {}
    for name, spec in fields.items():
        kind = spec.get("kind") if isinstance(spec, Mapping) else spec
        if kind not in ("scalar", "vector"):
            raise ValueError(f"field {name!r} has kind {kind!r}: expected 'scalar' or 'vector' (t0_fields / t1_fields)")
        kinds[str(name)] = kind
    if not kinds:
        raise ValueError("no fields given: a dataset needs at least one scalar or vector field")
    return kinds


def _check_levels(levels: Mapping | None, kinds: dict) -> dict | None:
    """dataset.yaml's ``levels`` entry as ``{"values", "units", "fields"}``, or None for 2-D data.

    Raises
    ------
    ValueError
        For no level values, or a level field that is not a field of the data.
    """
    if levels is None:
        return None
    values = [float(v) for v in levels.get("values", [])]
    level_fields = [str(n) for n in levels.get("fields", [])]
    unknown = [n for n in level_fields if n not in kinds]
    if not values or unknown:
        raise ValueError(
            f"levels {dict(levels)} must list non-empty 'values' and 'fields' among {list(kinds)}: "
            "pass dataset.yaml's 'levels' entry"
        )
    return {"values": values, "units": str(levels.get("units", "")), "fields": level_fields}


def _clean_stats(name: str, kind: str, entry, n_levels: int, source: str) -> dict:
    """The statistics of field ``name`` as floats (a list of ``n_levels`` per key for a level field).

    The keys of its kind must be present, finite and, except the mean, positive; the increment keys are kept
    when usable and dropped otherwise (:meth:`ChannelLayout.increment_scale` then names the problem).

    Raises
    ------
    ValueError
        For a missing entry or key, another kind, a level count that does not match, or a value out of range.
    """
    if entry is None:
        raise ValueError(f"statistics {source} lack field {name!r}: {_REGENERATE}")
    if entry.get("kind", kind) != kind:
        raise ValueError(
            f"statistics {source} give field {name!r} kind {entry.get('kind')!r} but the data "
            f"have {kind!r}: {_REGENERATE}"
        )
    keys = _SCALAR_KEYS if kind == "scalar" else _VECTOR_KEYS
    clean = {"kind": kind}
    L = n_levels
    for key in keys:
        if key not in entry:
            raise ValueError(f"statistics {source} lack {key!r} for field {name!r}: {_REGENERATE}")
        raw = entry[key]
        if L:
            if not isinstance(raw, (list, tuple)) or len(raw) != L:
                raise ValueError(
                    f"statistics {source}: {key} of level field {name!r} must be a list of {L} "
                    f"values (one per level), got {raw!r}: {_REGENERATE}"
                )
            values = [float(v) for v in raw]
        else:
            if isinstance(raw, (list, tuple)):
                raise ValueError(
                    f"statistics {source}: {key} of field {name!r} is a list but the field has no "
                    f"level axis: {_REGENERATE}"
                )
            values = [float(raw)]
        for value in values:
            if not math.isfinite(value) or (key != "mean" and value <= 0.0):
                raise ValueError(
                    f"statistics {source}: {key}={value} for field {name!r} is not finite and positive: {_REGENERATE}"
                )
        clean[key] = values if L else values[0]
    for key in _SCALAR_DELTA_KEYS if kind == "scalar" else _VECTOR_DELTA_KEYS:
        raw = entry.get(key)
        if raw is None:
            continue
        values = [float(v) for v in raw] if isinstance(raw, (list, tuple)) else [float(raw)]
        if len(values) != max(L, 1) or not all(math.isfinite(v) and (key == "delta_mean" or v >= 0.0) for v in values):
            continue  # unusable: increment_scale() then names the problem
        clean[key] = values if L else values[0]
    return clean


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

    def __init__(
        self,
        fields: Mapping,
        stats: Mapping,
        grid: SphereGrid,
        stats_source: str = "stats.yaml",
        levels: Mapping | None = None,
    ):
        self.grid = grid
        self.stats_source = str(stats_source)
        kinds = _field_kinds(fields)
        self.scalars = [n for n, k in kinds.items() if k == "scalar"]
        self.vectors = [n for n, k in kinds.items() if k == "vector"]
        self.levels = _check_levels(levels, kinds)
        self.n_levels = {n: 0 for n in kinds}
        for n in self.levels["fields"] if self.levels else ():
            self.n_levels[n] = len(self.levels["values"])
        tag = [f"{v:g}{self.levels['units']}" for v in self.levels["values"]] if self.levels else []
        self.channels = []
        for n in self.scalars:
            self.channels += [f"{n}_{t}" for t in tag] if self.n_levels[n] else [n]
        for n in self.vectors:
            self.channels += (
                [f"{n}_{c}_{t}" for c in "xyz" for t in tag] if self.n_levels[n] else [f"{n}_{c}" for c in "xyz"]
            )
        self.stats = {}
        for name, kind in kinds.items():
            entry = stats.get(name) if isinstance(stats, Mapping) else None
            self.stats[name] = _clean_stats(name, kind, entry, self.n_levels[name], self.stats_source)
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
    def from_dict(cls, d: Mapping) -> ChannelLayout:
        """Inverse of :meth:`to_dict`."""
        g = d["grid"]
        return cls(
            d["fields"],
            d["stats"],
            SphereGrid(int(g["nlat"]), int(g["nlon"]), str(g["grid"])),
            stats_source="checkpoint",
            levels=d.get("levels"),
        )

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
                raise ValueError(
                    f"statistics {self.stats_source} have no usable {missing[0]!r} for field {name!r}, which "
                    f"trainer.target=increment needs: {_REGENERATE} (or train with trainer.target=frame)"
                )
            entry, levelled = self.stats[name], bool(self.n_levels[name])

            def per_level(key, entry=entry, levelled=levelled):
                return entry[key] if levelled else [entry[key]]

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
            self._basis_cache[key] = (
                self.grid.east.to(device=device, dtype=dtype),
                self.grid.north.to(device=device, dtype=dtype),
            )
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
            self._basis_cache[ck] = torch.tensor(self.stats[name][key], dtype=torch.float64).to(
                device=device, dtype=dtype
            )[:, None, None]
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
                    raise ValueError(
                        f"vector field {name!r} must end in 2 components (u, v), got shape {tuple(x.shape)}"
                    )
                self.grid.check_shape(x[..., 0])
                shape = tuple(x.shape[:-3])
            else:
                self.grid.check_shape(x)
                shape = tuple(x.shape[:-2])
            if L:
                if len(shape) < 1 or shape[-1] != L:
                    raise ValueError(
                        f"level field {name!r} has shape {tuple(x.shape)}: expected {L} levels before the grid axes "
                        f"(..., T, {L}, nlat, nlon{', 2' if kind == 'vector' else ''})"
                    )
                shape = shape[:-1]
            if lead is not None and shape != lead:
                raise ValueError(
                    f"field {name!r} has leading shape {shape}, other fields {lead}: pass the same frames of every "
                    "field"
                )
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
            raise ValueError(
                f"tensor of shape {tuple(x.shape)} has {x.shape[-3]} channels at dim -3; the layout has "
                f"{self.n_channels}: {self.channels}"
            )
        out = {}
        c = 0
        for name in self.scalars:
            s, L = self.stats[name], self.n_levels[name]
            if L:
                mean, std = (
                    self._level_stat(name, "mean", x.dtype, x.device),
                    self._level_stat(name, "std", x.dtype, x.device),
                )
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
