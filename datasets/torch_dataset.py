"""Torch dataset over a dataset folder: windows of frames, Cartesian vectors, normalised.

The folder is one made by ``dandelion-generate`` or one in the Well's layout (``DIR/data/{train,valid,test}``),
which :class:`dandelion.datasets.well.WellFolder` maps onto our conventions (grid, row order, (u, v)
components, time step, area-weighted statistics).

:class:`WindowDataset` reads windows of ``n_in`` input and ``n_out`` target frames and encodes them with
the folder's :class:`dandelion.channels.ChannelLayout` (channel order, vector lift and normalisation
are defined there). HDF5 files are opened lazily in the process that reads them (each DataLoader
worker opens its own handles; none is created in ``__init__`` or pickled).
"""

from __future__ import annotations

import logging
import os
from collections import OrderedDict
from pathlib import Path

import h5py
import numpy as np
import torch

from dandelion.channels import ChannelLayout
from dandelion.sphere import SphereGrid

from . import folder
from .integrity import check_folder
from .statistics import first_non_finite
from .storage import open_trajectory, read_field, read_mask, reading
from .well import WellFolder, is_well_folder, open_well_file

__all__ = ["WindowDataset", "warn_small_split"]

log = logging.getLogger("dandelion.datasets")


def warn_small_split(dataset, batch_size: int, world_size: int = 1, key: str = "trainer.batch_size") -> str | None:
    """Warn (log, and return the text) when one batch of ``batch_size`` per process is larger than the split's
    windows: every epoch is then one short batch per process, which the plan counts as a whole step. None when the
    batch fits."""
    per_rank = -(-len(dataset) // int(world_size))
    if int(batch_size) <= per_rank:
        return None
    text = (
        f"{key}={batch_size} is larger than the {len(dataset)} windows of split {dataset.split!r} of {dataset.path}"
        + (f" ({per_rank} per process)" if world_size > 1 else "")
        + f": each epoch is one batch of {per_rank}; lower {key} or use more data"
    )
    log.warning("%s", text)
    return text


class WindowDataset(torch.utils.data.Dataset):
    """Windows of ``n_in`` input and ``n_out`` target frames over every trajectory of a split.

    Parameters
    ----------
    path : dataset folder (``train/ valid/ test/``, ``dataset.yaml``, ``stats.yaml``, ``splits.json``), or a folder in
        the Well's layout (``data/train`` etc., :mod:`dandelion.datasets.well`).
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
    ``dataset.yaml`` and ``stats.yaml`` (for a Well-layout folder, their equivalents from
    :class:`dandelion.datasets.well.WellFolder`); files : list of trajectory files (one entry per
    trajectory: a Well file holding several appears once per trajectory); trajectory_ids, n_frames : per entry.
    wet : the ocean mask of a masked dataset (files with ``mask/wet``, ``dataset.yaml`` ``masked: true``), a bool
    tensor ``(nlat, nlon)``, True on wet points, the same in every file; ``None`` for a dataset without a mask.
    Metrics and the loss take it (``wet=``, :mod:`dandelion.metrics`).

    Raises
    ------
    FileNotFoundError / ValueError
        For a missing folder or split (from :mod:`dandelion.datasets.folder`), a field listed in
        ``dataset.yaml`` missing from a file (names the field and the file), a file whose grid
        disagrees with ``dataset.yaml``, statistics lacking a field, a split too short for
        one window, or files whose masks differ or are missing in a ``masked: true`` dataset.
    CorruptFileError
        For a folder changed after generation (:func:`dandelion.datasets.integrity.check_folder`: a file holding
        another trajectory, an id in two splits, a size unlike ``checksums.sha256``'s) or a damaged file.
    """

    def __init__(self, path, split: str, n_in: int = 4, n_out: int = 1, stride: int = 1, max_open_files: int = 128):
        for name, v in (("n_in", n_in), ("n_out", n_out), ("stride", stride)):
            if int(v) != v or v < 1:
                raise ValueError(f"{name}={v} must be a positive integer")
        self.path = Path(path)
        self.split = str(split)
        self.n_in, self.n_out, self.stride = int(n_in), int(n_out), int(stride)
        self.max_open_files = int(max_open_files)
        self.well = WellFolder(self.path) if is_well_folder(self.path) else None
        if self.well is not None:
            self.metadata, self.stats = self.well.metadata, self.well.stats
        else:
            problem = folder.completeness_problem(self.path) if (self.path / "dataset.yaml").is_file() else None
            if problem:
                raise ValueError(problem)
            check_folder(self.path)  # ids against names and splits, sizes against checksums.sha256: cheap
            self.metadata = folder.load_metadata(self.path)
            self.stats = folder.load_stats(self.path)
        self.grid = SphereGrid(int(self.metadata["nlat"]), int(self.metadata["nlon"]), str(self.metadata["grid"]))
        self.levels = self.metadata.get("levels")  # None for 2-D datasets
        self.layout = ChannelLayout(
            self.metadata["fields"],
            self.stats,
            self.grid,
            stats_source=str(self.path / "stats.yaml"),
            levels=self.levels,
        )
        self._lat_deg = np.degrees(self.grid.lat.numpy())
        if self.well is not None:
            items = self.well.trajectories(self.split)
            self.files, self.samples = [Path(p) for p, _ in items], [k for _, k in items]
        else:
            self.files = [Path(f) for f in folder.list_split(self.path, self.split)]
            self.samples = [0] * len(self.files)
        if not self.files and self.well is not None:
            sub = self.path / "data" / ("valid" if self.split == "val" else self.split)
            raise ValueError(
                f"split {self.split!r} of {self.path} holds no trajectory ({sub} has no .hdf5/.h5 file): download that "
                "split of the Well dataset (or rerun the dandelion-well-resample that wrote the folder)"
            )
        if not self.files:
            raise ValueError(
                f"split {self.split!r} of {self.path} holds no trajectory: check splits.json or regenerate the dataset"
            )
        self.trajectory_ids, self.n_frames = [], []
        self.wet = None
        if self.well is not None:
            self.trajectory_ids = self.well.trajectory_ids(self.split)
            for f in self.files:
                with open_well_file(f) as h, reading(f):
                    self.well.check_file(h, f)
                    self.n_frames.append(int(h["dimensions/time"].shape[-1]))
        for f in self.files if self.well is None else []:
            with open_trajectory(f) as h, reading(f):
                self._check_file(h, f)
                self.trajectory_ids.append(int(h.attrs["trajectory_id"]))
                self.n_frames.append(int(h["dimensions/time"].shape[0]))
        span = self.n_in + self.n_out
        counts = [max(0, (t - span) // self.stride + 1) for t in self.n_frames]
        self._offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        if self._offsets[-1] == 0:
            raise ValueError(
                f"split {self.split!r} of {self.path}: no trajectory has n_in + n_out = {span} frames "
                f"(longest: {max(self.n_frames)}); use fewer frames"
            )
        self._handles: OrderedDict = OrderedDict()
        self._pid = None

    def _check_file(self, h, f):
        for key in ("nlat", "nlon", "grid"):
            if key in h.attrs and str(h.attrs[key]) != str(self.metadata[key]):
                raise ValueError(
                    f"{f}: {key}={h.attrs[key]} but dataset.yaml says {self.metadata[key]}; the folder mixes grids: "
                    "regenerate it"
                )
        self._check_mask(h, f)
        lat = np.asarray(h["dimensions/lat"][:], dtype=np.float64)
        if lat.shape != (self.grid.nlat,) or not np.allclose(lat, self._lat_deg, atol=1e-6):
            raise ValueError(
                f"{f}: dimensions/lat are not the rows of the {self.grid.grid} grid with nlat={self.grid.nlat} "
                "(row 0 northernmost, descending): the file is not in the dandelion layout; regenerate it"
            )
        for name in self.layout.scalars:
            if name not in h.get("t0_fields", {}):
                raise ValueError(
                    f"field {name!r} (scalar, listed in dataset.yaml) is missing from t0_fields of {f}: "
                    "regenerate this trajectory"
                )
        for name in self.layout.vectors:
            if name not in h.get("t1_fields", {}):
                raise ValueError(
                    f"field {name!r} (vector, listed in dataset.yaml) is missing from t1_fields of {f}: "
                    "regenerate this trajectory"
                )

    def _check_mask(self, h, f):
        wet = read_mask(h)
        if wet is None:
            if self.metadata.get("masked"):
                raise ValueError(f"{f} has no mask/wet but dataset.yaml says masked: true: regenerate this trajectory")
            if self.wet is not None:
                raise ValueError(
                    f"{f} has no mask/wet but other files of split {self.split!r} have one: regenerate this trajectory"
                )
            return
        wet = torch.from_numpy(wet)
        if self.wet is None and self.trajectory_ids:
            raise ValueError(
                f"{f} has a mask/wet but earlier files of split {self.split!r} have none: regenerate the dataset"
            )
        if self.wet is not None and not torch.equal(wet, self.wet):
            raise ValueError(
                f"{f}: mask/wet differs from the other files of split {self.split!r}; one mask per dataset is expected"
            )
        self.wet = wet

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
            try:  # the layout was validated in __init__; reopening is the hot path of random access
                h = h5py.File(self.files[i], "r")
            except OSError:  # raises with the storage module's explanation, naming the file
                h = open_well_file(self.files[i]) if self.well is not None else open_trajectory(self.files[i])
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
        with reading(self.files[file_index]):  # a damaged chunk or B-tree: one line naming the file and the fix
            h = self._handle(file_index)
            if self.well is not None:
                out = self.well.read(h, self.samples[file_index], start, stop)
            else:
                out = {n: read_field(h["t0_fields"][n], start, stop) for n in self.layout.scalars}
                out.update({n: read_field(h["t1_fields"][n], start, stop) for n in self.layout.vectors})
        self._check_finite(out, file_index, start)
        return out

    def _check_finite(self, frames: dict[str, np.ndarray], file_index: int, start: int) -> None:
        """Refuse frames holding a NaN or Inf on a point that counts (wet points of a masked dataset): the data,
        not the model, is then at fault, and the message names the file, trajectory, field and frame."""
        w = None if self.wet is None else self.wet.numpy()
        for name, a in frames.items():
            bad = first_non_finite(a, w)
            if bad is not None:
                raise ValueError(
                    f"{self.files[file_index]}: the data is not finite (NaN or Inf) in field {name!r} of trajectory "
                    f"{self.trajectory_ids[file_index]} at frame {(start or 0) + bad} (split {self.split!r}): "
                    "regenerate that file (or check it with dandelion-verify), or move it out of the split"
                )

    def times(self, file_index: int) -> np.ndarray:
        """Frame times of one file (``dimensions/time``, units in ``metadata['time_units']``)."""
        with reading(self.files[file_index]):
            if self.well is not None:
                return self.well.times(self._handle(file_index), self.samples[file_index])
            return np.asarray(self._handle(file_index)["dimensions/time"][:], dtype=np.float64)

    def __getitem__(self, index: int) -> dict:
        """One window (class docstring). Raises ValueError naming the file, trajectory and frame of a NaN or Inf in
        the data."""
        f, t0 = self.window(index)
        raw = self.read_frames(f, t0, t0 + self.n_in + self.n_out)
        frames = self.layout.encode({k: torch.from_numpy(np.asarray(v, dtype=np.float32)) for k, v in raw.items()})
        nlat, nlon = self.grid.shape
        x = frames[: self.n_in].reshape(self.n_in * self.layout.n_channels, nlat, nlon)
        y = frames[self.n_in :]
        return {"x": x.contiguous(), "y": y.contiguous(), "traj": self.trajectory_ids[f], "t0": t0}
