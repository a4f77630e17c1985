"""Python API for notebooks: open a dataset, load a checkpoint, roll out, export (no hydra needed).

The command-line jobs ``dandelion-rollout`` and ``dandelion-export`` call these functions. This is the
one module of ``dandelion/`` that imports ``dandelion.datasets`` and ``dandelion.benchmarks``
(DESIGN.md §1); it imports them inside functions so that ``import dandelion`` stays light.

Example::

    from dandelion import api
    data = api.open_dataset("data/galewsky", "test")
    model = api.load_model("runs/quickstart/dandelion/best.pt", dataset=data)
    fc = api.rollout(model, data, n_steps=20, init_stride=8)
    ds = api.to_xarray(fc, include_truth=True)      # xarray.Dataset, CF metadata
    api.export(fc, "forecast.nc")                    # netCDF4 file

Conventions: the model sees ``n_in`` normalised frames folded into channels and predicts the next
normalised frame (:class:`dandelion.datasets.torch_dataset.WindowDataset`); a rollout feeds each
prediction back in place of the oldest frame. A forecast from initial frame ``i`` (the last input
frame, ``init_time = time[i]``) holds the predictions of frames ``i + 1 .. i + n_steps``, decoded to
physical units with the checkpoint's channel layout (vectors projected back to (u east, v north)).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import numpy as np
import torch

from .sphere import SphereGrid

__all__ = ["Forecaster", "Forecast", "open_dataset", "import_plugins", "load_model", "valid_inits", "iter_rollout", "rollout", "collect_forecast", "to_xarray", "export"]


def open_dataset(path, split: str = "test", n_in: int = 4):
    """Open one split of a dataset folder.

    Parameters
    ----------
    path : dataset folder written by ``dandelion-generate``.
    split : ``"train"``, ``"valid"`` or ``"test"``.
    n_in : input frames of the models to run (only used to check the trajectories are long enough).

    Returns
    -------
    :class:`dandelion.datasets.torch_dataset.WindowDataset` (one-frame targets) with ``.grid``,
    ``.layout``, ``.metadata``, ``.stats``, ``.files``, ``.trajectory_ids``, ``.n_frames``,
    ``.read_frames(file_index, start, stop)`` and ``.times(file_index)``.

    Raises
    ------
    FileNotFoundError / ValueError
        For a missing folder or split, or a broken dataset (message names the problem).
    """
    from dandelion.datasets.torch_dataset import WindowDataset

    return WindowDataset(path, split, n_in=n_in, n_out=1)


class Forecaster(torch.nn.Module):
    """A trained model with what a rollout needs: channel layout, frames in, name.

    Attributes
    ----------
    model : the network, input ``(B, n_in*C, nlat, nlon)`` -> output ``(B, C, nlat, nlon)`` (normalised).
    layout : :class:`ChannelLayout` of the checkpoint (its normalisation statistics), on the run grid.
    n_in : int, frames in.
    name : model name (``dandelion``, ``sfno``, ...); checkpoint : its path or None.
    target : ``"frame"`` (the network outputs the next normalised frame) or ``"increment"`` (it
        outputs the normalised increment, scaled by ``layout.increment_scale()``; see
        :func:`dandelion.benchmarks.train.next_frame`), as the model was trained.
    inputs : ``"frames"`` (the network sees the window of normalised frames) or ``"differences"``
        (:func:`dandelion.benchmarks.train.difference_window`), as the model was trained.
    """

    def __init__(self, model: torch.nn.Module, layout, n_in: int, name: str = "model", checkpoint=None, target: str = "frame",
                 inputs: str = "frames"):
        super().__init__()
        from dandelion.benchmarks.train import INPUTS, TARGETS, next_frame

        if target not in TARGETS:
            raise ValueError(f"target={target!r}: expected one of {TARGETS}")
        if inputs not in INPUTS:
            raise ValueError(f"inputs={inputs!r}: expected one of {INPUTS}")
        self.inputs = str(inputs)
        self.model = model
        self.layout = layout
        self.n_in = int(n_in)
        self.name = str(name)
        self.checkpoint = None if checkpoint is None else str(checkpoint)
        self.target = str(target)
        need = target == "increment" or inputs == "differences"
        scale = layout.increment_scale().float() if need else torch.zeros(0)
        self.register_buffer("increment_scale", scale, persistent=False)
        self._next_frame = next_frame  # imported here, once: dandelion.api keeps `import dandelion` light

    @property
    def grid(self) -> SphereGrid:
        return self.layout.grid

    @property
    def device(self) -> torch.device:
        p = next(self.model.parameters(), None)
        return p.device if p is not None else torch.device("cpu")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """One step: ``(B, n_in*C, nlat, nlon)`` -> next normalised frame ``(B, C, nlat, nlon)``."""
        return self._next_frame(self.model, x, self.layout.n_channels, self.increment_scale if self.target == "increment" else None,
                          self.increment_scale if self.inputs == "differences" else None)


def import_plugins(plugins) -> None:
    """Import modules that register more models (``plugins=[module, ...]`` of the jobs)."""
    import importlib

    for mod in plugins or []:
        importlib.import_module(str(mod))


def load_model(checkpoint, device="cpu", dataset=None, allow_resolution_change: bool = False) -> Forecaster:
    """Load a ``dandelion-train`` checkpoint as a :class:`Forecaster` on ``device``.

    Parameters
    ----------
    checkpoint : path of ``best.pt`` / ``last.pt``.
    device : torch device (``"cpu"``, ``"cuda"``, ...; ``"auto"`` = CUDA if available); weights are mapped there.
    dataset : optional, the data to run on (from :func:`open_dataset`): the model is then built on
        that grid and checked against it.
    allow_resolution_change : run a model whose weights do not depend on the resolution on another
        grid than it was trained on.

    Raises
    ------
    ValueError
        If the data's fields differ from the checkpoint's (names the fields), or its grid or
        resolution differs (names both) and ``allow_resolution_change`` is false or the model's
        weights depend on the resolution.
    """
    from dandelion.benchmarks.checkpoint import config_from_checkpoint, layout_from_checkpoint, load_checkpoint, model_from_checkpoint
    from dandelion.datasets.torch_dataset import ChannelLayout

    if str(device) == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    ckpt = load_checkpoint(checkpoint, map_location="cpu")
    layout = layout_from_checkpoint(ckpt)
    saved = {"nlat": int(ckpt["grid"]["nlat"]), "nlon": int(ckpt["grid"]["nlon"]), "grid": str(ckpt["grid"]["grid"])}
    if dataset is not None:
        data_fields = dataset.layout.fields
        if data_fields != layout.fields:
            raise ValueError(
                f"checkpoint {checkpoint} was trained on fields {layout.fields} but the dataset {dataset.path} has {data_fields}: "
                "evaluate it on a dataset with the same fields"
            )
        want = dataset.grid.to_dict()
        if want != saved:
            what = ", ".join(k for k in ("grid", "nlat", "nlon") if want[k] != saved[k])
            if not allow_resolution_change:
                raise ValueError(
                    f"checkpoint {checkpoint} was trained on {saved} but the dataset {dataset.path} is on {want} ({what} differ): "
                    "use data on the training grid, or pass allow_resolution_change=true for a model whose weights do not depend on the resolution"
                )
        model = model_from_checkpoint(ckpt, nlat=want["nlat"], nlon=want["nlon"], grid=want["grid"], allow_resolution_change=allow_resolution_change)
        layout = ChannelLayout(layout.fields, layout.stats, dataset.grid, stats_source=f"checkpoint {checkpoint}", levels=layout.levels)
    else:
        model = model_from_checkpoint(ckpt)
    spec = ckpt.get("extra", {}).get("model_spec", {})
    n_in = ckpt.get("extra", {}).get("n_in")
    if n_in is None:
        cfg = config_from_checkpoint(ckpt)
        n_in = (cfg.get("trainer") or {}).get("n_in") or int(spec["in_channels"]) // layout.n_channels
    name = spec.get("name", "model")
    extra = ckpt.get("extra", {})  # checkpoints from before these options predicted frames from frames
    return Forecaster(model, layout, int(n_in), name=name, checkpoint=checkpoint, target=extra.get("target", "frame"),
                      inputs=extra.get("inputs", "frames")).to(device).eval()


def valid_inits(n_frames: int, n_in: int, n_steps: int, init_stride: int = 1, max_inits: int | None = None) -> np.ndarray:
    """Indices of the last input frame of every forecast that fits in a trajectory.

    ``i`` runs over ``n_in - 1, n_in - 1 + init_stride, ...`` up to ``n_frames - 1 - n_steps``; with
    ``max_inits`` an evenly spaced subset of that many is kept.

    Raises
    ------
    ValueError
        If no forecast of ``n_steps`` fits (message gives the frames needed and available).
    """
    if n_steps < 1 or init_stride < 1:
        raise ValueError(f"n_steps={n_steps} and init_stride={init_stride} must be >= 1")
    last = n_frames - 1 - n_steps
    if last < n_in - 1:
        raise ValueError(f"a forecast of n_steps={n_steps} from n_in={n_in} frames needs {n_in + n_steps} frames but the trajectories hold {n_frames}: use fewer steps")
    idx = np.arange(n_in - 1, last + 1, init_stride)
    if max_inits is not None and 0 < int(max_inits) < len(idx):
        idx = idx[np.unique(np.round(np.linspace(0, len(idx) - 1, int(max_inits))).astype(int))]
    return idx


def _select_files(dataset, trajectories=None, max_trajectories=None) -> list[int]:
    """File indices of the chosen trajectory ids (None: all), the first ``max_trajectories`` of them."""
    ids = list(dataset.trajectory_ids)
    if trajectories is None:
        out = list(range(len(ids)))
    else:
        out = []
        for t in trajectories:
            if int(t) not in ids:
                raise ValueError(f"trajectory {t} is not in split {dataset.split!r} of {dataset.path}: choose from {ids}")
            out.append(ids.index(int(t)))
    if max_trajectories is not None and int(max_trajectories) > 0:
        out = out[: int(max_trajectories)]
    return out


@torch.no_grad()
def iter_rollout(model: Forecaster, dataset, n_steps: int, init_stride: int = 1, max_inits: int | None = None, trajectories=None,
                 max_trajectories: int | None = None, batch_size: int = 8, progress: bool = False) -> Iterator[dict]:
    """Autoregressive rollouts, yielded batch by batch (constant memory).

    Yields dicts with ``traj_index`` (position in the selected trajectories), ``trajectory`` (id),
    ``init`` (array of initial frame indices of the batch), ``init_slot`` (their positions in
    ``inits``), ``inits`` (all initial frame indices), ``pred`` and ``true``: physical fields
    ``(b, n_steps, nlat, nlon)`` / ``(b, n_steps, nlat, nlon, 2)`` float32 on the model's device, and
    ``times`` (the trajectory's frame times).
    """
    files = _select_files(dataset, trajectories, max_trajectories)
    n_frames = min(dataset.n_frames[f] for f in files)
    inits = valid_inits(n_frames, model.n_in, n_steps, init_stride, max_inits)
    layout, dev, n_in = model.layout, model.device, model.n_in
    C = layout.n_channels
    nlat, nlon = layout.grid.shape
    if model.grid.shape != dataset.grid.shape or model.grid.grid != dataset.grid.grid:
        raise ValueError(f"model runs on {model.grid.to_dict()} but the dataset is on {dataset.grid.to_dict()}: load the model with dataset=")
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(files) * len(inits), desc=f"rollout {model.name}", unit="forecast")
    for k, f in enumerate(files):
        raw = dataset.read_frames(f, 0, n_frames)
        raw = {n: torch.as_tensor(np.asarray(v, dtype=np.float32)) for n, v in raw.items()}
        frames = layout.encode(raw).to(device=dev, dtype=torch.float32)  # (T, C, nlat, nlon)
        times = dataset.times(f)
        for s in range(0, len(inits), batch_size):
            idx = inits[s : s + batch_size]
            x = torch.stack([frames[i - n_in + 1 : i + 1].reshape(n_in * C, nlat, nlon) for i in idx])
            preds = []
            for _ in range(n_steps):
                y = model(x)
                preds.append(y)
                x = torch.cat([x[:, C:], y], dim=1) if n_in > 1 else y
            pred = layout.decode(torch.stack(preds, 1).float())
            tgt = torch.as_tensor(np.stack([np.arange(i + 1, i + 1 + n_steps) for i in idx]))
            true = {n: v[tgt].to(dev) for n, v in raw.items()}
            yield {"traj_index": k, "trajectory": dataset.trajectory_ids[f], "init": idx, "init_slot": np.arange(s, s + len(idx)),
                   "inits": inits, "pred": pred, "true": true, "times": times}
            if bar is not None:
                bar.update(len(idx))
    if bar is not None:
        bar.close()


@dataclass
class Forecast:
    """Rollout forecasts of several trajectories from the same initial frames.

    Attributes
    ----------
    fields : dict name -> array ``(n_traj, n_init, n_steps, nlat, nlon[, 2])`` float32, physical units.
    truth : same layout, the true frames (or None).
    trajectory : (n_traj,) trajectory ids. init_index : (n_init,) last input frame of each forecast.
    init_time : (n_init,) its time; lead_time : (n_steps,) ``k * dt_frame``; both in ``time_units``
        (``"s"`` or ``"nondimensional"``).
    grid : SphereGrid; fields_meta : ``dataset.yaml`` ``fields``; model : name; attrs : provenance.
    levels : (n_level,) level values (hPa) of a leveled dataset, or None; its level fields are then
        ``(n_traj, n_init, n_steps, n_level, nlat, nlon[, 2])`` and its surface fields have no level axis.
    """

    fields: dict
    truth: dict | None
    trajectory: np.ndarray
    init_index: np.ndarray
    init_time: np.ndarray
    lead_time: np.ndarray
    time_units: str
    grid: SphereGrid
    fields_meta: dict
    model: str = "model"
    attrs: dict = field(default_factory=dict)
    levels: np.ndarray | None = None


def rollout(model: Forecaster, dataset, n_steps: int, init_stride: int = 1, max_inits: int | None = None, trajectories=None,
            max_trajectories: int | None = None, batch_size: int = 8, keep_truth: bool = True, progress: bool = False) -> Forecast:
    """Roll ``model`` out for ``n_steps`` from every valid initial frame (or a subset) of ``dataset``.

    Parameters
    ----------
    model : :class:`Forecaster` from :func:`load_model` (or any with ``layout``, ``n_in``, ``name``).
    dataset : from :func:`open_dataset`.
    n_steps : autoregressive steps.
    init_stride, max_inits : subset of initial frames (:func:`valid_inits`).
    trajectories : None (all) or a list of trajectory ids; max_trajectories : keep the first n of them.
    batch_size : forecasts advanced together.
    keep_truth : also return the true frames.

    Returns
    -------
    :class:`Forecast` (arrays on the CPU as numpy).
    """
    batches = iter_rollout(model, dataset, n_steps, init_stride, max_inits, trajectories, max_trajectories, batch_size, progress)
    return collect_forecast(batches, model, dataset, n_steps, keep_truth)


def collect_forecast(batches, model, dataset, n_steps: int, keep_truth: bool = True) -> Forecast:
    """Gather the batches of :func:`iter_rollout` into one :class:`Forecast` (numpy, CPU)."""
    fields, truth, trajs, inits, times = {}, {}, [], None, None
    for b in batches:
        if inits is None:
            inits, times = b["inits"], b["times"]
        if b["traj_index"] == len(trajs):
            trajs.append(b["trajectory"])
            for n in b["pred"]:
                fields.setdefault(n, []).append([])
                truth.setdefault(n, []).append([])
        for n in b["pred"]:
            fields[n][-1].append(b["pred"][n].cpu().numpy())
            if keep_truth:
                truth[n][-1].append(b["true"][n].cpu().numpy())
    if inits is None:
        raise ValueError("the rollout produced no forecast: check the trajectories and initial frames chosen")

    def stack(d):
        return {n: np.stack([np.concatenate(per_traj) for per_traj in v]) for n, v in d.items()}

    meta = dataset.metadata
    time_units = str(meta.get("time_units", "s"))
    dt = float(meta.get("dt_frame", times[1] - times[0] if len(times) > 1 else 1.0))
    return Forecast(
        fields=stack(fields), truth=stack(truth) if keep_truth else None, trajectory=np.asarray(trajs, dtype=np.int64),
        init_index=np.asarray(inits), init_time=np.asarray(times)[inits], lead_time=dt * np.arange(1, n_steps + 1),
        time_units=time_units, grid=dataset.grid, fields_meta=dict(meta["fields"]), model=getattr(model, "name", "model"),
        attrs={"dataset": str(meta.get("name", "")), "dataset_path": str(dataset.path), "split": dataset.split,
               "model": getattr(model, "name", "model"), "checkpoint": str(getattr(model, "checkpoint", "") or "")},
        levels=None if not meta.get("levels") else np.asarray(meta["levels"]["values"], dtype=np.float64),
    )


def to_xarray(forecast: Forecast, include_truth: bool = False):
    """The forecasts as a CF-annotated :class:`xarray.Dataset` (:func:`dandelion.benchmarks.export.forecasts_to_xarray`)."""
    from dandelion.benchmarks.export import forecasts_to_xarray

    if include_truth and forecast.truth is None:
        raise ValueError("the forecast holds no truth: roll out with keep_truth=True")
    return forecasts_to_xarray(
        forecast.fields, grid=forecast.grid, fields=forecast.fields_meta, init_time=forecast.init_time, lead_time=forecast.lead_time,
        time_units=forecast.time_units, trajectory=forecast.trajectory, truth=forecast.truth if include_truth else None, attrs=forecast.attrs,
        levels=getattr(forecast, "levels", None),
    )


def export(forecast: Forecast, path, overwrite: bool = False, include_truth: bool = False) -> Path:
    """Write the forecasts to a netCDF4 file (atomic; :class:`FileExistsError` unless ``overwrite``)."""
    from dandelion.benchmarks.export import write_netcdf

    if Path(path).exists() and not overwrite:
        raise FileExistsError(f"{path} exists: choose another path or pass overwrite=true to replace it")
    return write_netcdf(to_xarray(forecast, include_truth), path, overwrite=overwrite)
