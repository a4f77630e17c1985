"""What one forecast step is, and the autoregressive loop that chains them.

A model sees ``n_in`` normalised frames folded into channels (frame-major, oldest first; the channel
layout of :class:`dandelion.channels.ChannelLayout`) and gives the next normalised frame
(:func:`next_frame`). Two choices, fixed at training time and stored in the checkpoint:

* ``target`` (:data:`TARGETS`): what the network outputs. ``frame`` = the next normalised frame itself,
  ``x_{t+1} = model([x_{t-n_in+1} .. x_t])``; ``increment`` = the normalised one-step increment,
  ``x_{t+1} = x_t + s * model(...)`` with ``s`` the per-channel ratio of the train split's one-step
  difference spread to the field spread (:meth:`ChannelLayout.increment_scale`), so that the output
  has unit spread and a zero output is persistence;
* ``inputs`` (:data:`INPUTS`): what it sees. ``frames`` (the window of normalised frames) or
  ``differences`` (:func:`difference_window`: the older frames as scaled differences to the newest).

:func:`rollout` feeds each prediction back in place of the oldest frame, in normalised units (as in
training). :class:`Forecaster` bundles a network with its layout and choices; :func:`iter_rollout`
and :func:`forecast` run it over the trajectories of a dataset split and decode the forecasts to
physical units: a forecast from initial frame ``i`` (the last input frame, ``init_time = time[i]``)
holds the predictions of frames ``i + 1 .. i + n_steps``.

Masked datasets (an ocean, ``WindowDataset.wet``): :func:`next_frame` is the one place the mask enters
a model, for every architecture alike. The network sees one more, constant input channel, the wet
mask (1 on wet points, 0 on land) appended after the window (so ``in_channels = n_in * C + 1``), and
the land values of each prediction are replaced by those of the newest input frame, so that land
stays fixed through a rollout (and the loss and metrics, over wet points, never read it). The
checkpoint records the mask (``extra["wet"]``), so that :func:`dandelion.checkpoint.load_model`
rebuilds the same input.

Forcing channels (``dataset.yaml`` ``forcing_fields``, e.g. the ocean's ``doy_sin``, ``doy_cos``) are known
in advance: they are inputs but not prediction targets. :func:`rollout` given ``forcing`` replaces the
network's values of those channels by the true ones at every step (in training, the target frames; in
:func:`iter_rollout`, the stored frames), so they add nothing to the loss and feed the truth back; the
rollout job scores no metric on them (:func:`forcing_channels`).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np
import torch
from tqdm.auto import tqdm

from .channels import ChannelLayout
from .sphere import SphereGrid
from .step import INPUTS, TARGETS, difference_window, next_frame, nonzero_scale

__all__ = [
    "TARGETS",
    "INPUTS",
    "nonzero_scale",
    "difference_window",
    "next_frame",
    "forcing_channels",
    "rollout",
    "Forecaster",
    "valid_inits",
    "select_files",
    "iter_rollout",
    "Forecast",
    "collect_forecast",
    "forecast",
]


def forcing_channels(layout: ChannelLayout, metadata) -> torch.Tensor | None:
    """Channel indices (long tensor) of the forcing fields (``metadata["forcing_fields"]``: scalar 2-D fields, or
    vector fields, which give their three Cartesian channels ``<name>_x, _y, _z``), or None.

    Raises ``ValueError`` for a forcing field that is not a field of ``layout``."""
    names = list((metadata or {}).get("forcing_fields") or [])
    vectors = {n: [f"{n}_{c}" for c in "xyz"] for n in names if all(f"{n}_{c}" in layout.channels for c in "xyz")}
    missing = [n for n in names if n not in layout.channels and n not in vectors]
    if missing:
        raise ValueError(
            f"forcing_fields {missing} of dataset.yaml are not scalar channels or vector fields of the layout "
            f"{layout.channels}: fix dataset.yaml"
        )
    channels = [c for n in names for c in vectors.get(n, [n])]
    return torch.tensor([layout.channels.index(c) for c in channels], dtype=torch.long) if names else None


def rollout(
    model,
    x: torch.Tensor,
    n_steps: int,
    n_channels: int,
    increment_scale: torch.Tensor | None = None,
    input_scale: torch.Tensor | None = None,
    wet: torch.Tensor | None = None,
    forcing=None,
) -> torch.Tensor:
    """Autoregressive rollout in normalised units (training and evaluation alike).

    ``x`` : (B, n_in*C, nlat, nlon) frame-major window; returns (B, n_steps, C, nlat, nlon), where
    step k is the prediction of frame ``n_in + k`` (:func:`next_frame`) after the earlier predictions
    were fed back (the oldest frame is dropped, the prediction appended). ``wet``: :func:`next_frame`.
    ``forcing`` : None or ``(channels, truth)``: channel indices (:func:`forcing_channels`) and the true
    frames ``(B, >= n_steps, C, nlat, nlon)``, whose values replace the prediction's in those channels.
    """
    preds = []
    for k in range(n_steps):
        pred = next_frame(model, x, n_channels, increment_scale, input_scale, wet)
        if forcing is not None:
            idx, truth = forcing
            idx = idx.to(pred.device)
            pred = pred.index_copy(1, idx, truth[:, k].index_select(1, idx).to(device=pred.device, dtype=pred.dtype))
        preds.append(pred)
        if k + 1 < n_steps:
            x = torch.cat([x[:, n_channels:], pred], dim=1)
    return torch.stack(preds, dim=1)


class Forecaster(torch.nn.Module):
    """A trained model with what a rollout needs: channel layout, frames in, target and inputs, name.

    Attributes
    ----------
    model : the network, input ``(B, n_in*C, nlat, nlon)`` -> output ``(B, C, nlat, nlon)`` (normalised), or
        ``(B, C + 3, nlat, nlon)`` for a model with advected persistence (:func:`dandelion.step.next_frame`).
    layout : :class:`ChannelLayout` of the checkpoint (its normalisation statistics), on the run grid.
    n_in : int, frames in.
    name : model name (``dandelion``, ``sfno``, ...); checkpoint : its path or None.
    target : one of :data:`TARGETS`; inputs : one of :data:`INPUTS` (as the model was trained).
    wet : (nlat, nlon) bool ocean mask the model was trained with (an input channel; land kept fixed), or None.

    Raises
    ------
    ValueError
        For an unknown ``target`` or ``inputs`` (the message lists the choices).
    """

    def __init__(
        self,
        model: torch.nn.Module,
        layout: ChannelLayout,
        n_in: int,
        name: str = "model",
        checkpoint=None,
        target: str = "frame",
        inputs: str = "frames",
        wet: torch.Tensor | None = None,
    ):
        super().__init__()
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
        if wet is not None and tuple(wet.shape) != layout.grid.shape:
            raise ValueError(
                f"wet mask of shape {tuple(wet.shape)} does not fit the {layout.grid.shape} grid of the layout"
            )
        self.register_buffer("wet", None if wet is None else torch.as_tensor(wet, dtype=torch.bool), persistent=False)

    @property
    def grid(self) -> SphereGrid:
        return self.layout.grid

    @property
    def device(self) -> torch.device:
        p = next(self.model.parameters(), None)
        return p.device if p is not None else torch.device("cpu")

    def scales(self) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        """``(increment_scale, input_scale)`` arguments of :func:`next_frame` for this model's target and inputs."""
        return (
            self.increment_scale if self.target == "increment" else None,
            self.increment_scale if self.inputs == "differences" else None,
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """One step: ``(B, n_in*C, nlat, nlon)`` -> next normalised frame ``(B, C, nlat, nlon)``."""
        return next_frame(self.model, x, self.layout.n_channels, *self.scales(), self.wet)

    def rollout(self, x: torch.Tensor, n_steps: int) -> torch.Tensor:
        """:func:`rollout` of this model: ``(B, n_in*C, nlat, nlon)`` -> ``(B, n_steps, C, nlat, nlon)``, normalised."""
        return rollout(self.model, x, n_steps, self.layout.n_channels, *self.scales(), self.wet)


# ---------------------------------------------------------------------------------------------- over a dataset
def valid_inits(
    n_frames: int, n_in: int, n_steps: int, init_stride: int = 1, max_inits: int | None = None
) -> np.ndarray:
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
        raise ValueError(
            f"a forecast of n_steps={n_steps} from n_in={n_in} frames needs {n_in + n_steps} frames but the "
            f"trajectories hold {n_frames}: use fewer steps"
        )
    idx = np.arange(n_in - 1, last + 1, init_stride)
    if max_inits is not None and 0 < int(max_inits) < len(idx):
        idx = idx[np.unique(np.round(np.linspace(0, len(idx) - 1, int(max_inits))).astype(int))]
    return idx


def select_files(dataset, trajectories=None, max_trajectories=None) -> list[int]:
    """File indices of the chosen trajectory ids (None: all), the first ``max_trajectories`` of them.

    Raises
    ------
    ValueError
        If a trajectory id is not in the dataset's split (the message lists the ids there).
    """
    ids = list(dataset.trajectory_ids)
    if trajectories is None:
        out = list(range(len(ids)))
    else:
        out = []
        for t in trajectories:
            if int(t) not in ids:
                raise ValueError(
                    f"trajectory {t} is not in split {dataset.split!r} of {dataset.path}: choose from {ids}"
                )
            out.append(ids.index(int(t)))
    if max_trajectories is not None and int(max_trajectories) > 0:
        out = out[: int(max_trajectories)]
    return out


def iter_rollout(
    model: Forecaster,
    dataset,
    n_steps: int,
    init_stride: int = 1,
    max_inits: int | None = None,
    trajectories=None,
    max_trajectories: int | None = None,
    batch_size: int = 8,
    progress: bool = False,
    amp: bool = False,
) -> Iterator[dict]:
    """Autoregressive rollouts over a dataset split, yielded batch by batch (constant memory: one batch at a time).

    ``amp=True`` runs the network under bf16 autocast on the model's device (CUDA or CPU); increments are
    added and the forecasts decoded in float32.

    ``dataset`` : a :class:`dandelion.datasets.torch_dataset.WindowDataset` (or any object with
    ``grid``, ``trajectory_ids``, ``n_frames``, ``read_frames`` and ``times``).

    Yields dicts with ``traj_index`` (position in the selected trajectories), ``trajectory`` (id),
    ``init`` (array of initial frame indices of the batch), ``init_slot`` (their positions in
    ``inits``), ``inits`` (all initial frame indices), ``pred`` and ``true``: physical fields
    ``(b, n_steps, nlat, nlon)`` / ``(b, n_steps, nlat, nlon, 2)`` float32 on the model's device, and
    ``times`` (the trajectory's frame times).

    Raises
    ------
    ValueError
        If the model runs on another grid than the dataset's, or no forecast fits (:func:`valid_inits`).
    """
    files = select_files(dataset, trajectories, max_trajectories)
    n_frames = min(dataset.n_frames[f] for f in files)
    inits = valid_inits(n_frames, model.n_in, n_steps, init_stride, max_inits)
    layout, dev, n_in = model.layout, model.device, model.n_in
    C = layout.n_channels
    nlat, nlon = layout.grid.shape
    if model.grid.shape != dataset.grid.shape or model.grid.grid != dataset.grid.grid:
        raise ValueError(
            f"model runs on {model.grid.to_dict()} but the dataset is on {dataset.grid.to_dict()}: load the model "
            "with dataset="
        )
    fch = forcing_channels(layout, getattr(dataset, "metadata", None))  # forcing channels: taken from the stored frames
    bar = tqdm(total=len(files) * len(inits), desc=f"rollout {model.name}", unit="forecast") if progress else None
    for k, f in enumerate(files):
        raw = dataset.read_frames(f, 0, n_frames)
        raw = {n: torch.as_tensor(np.asarray(v, dtype=np.float32)) for n, v in raw.items()}
        with torch.no_grad():
            frames = layout.encode(raw).to(device=dev, dtype=torch.float32)  # (T, C, nlat, nlon)
        times = dataset.times(f)
        for s in range(0, len(inits), batch_size):
            idx = inits[s : s + batch_size]
            # no_grad here, not as a decorator: torch's generator wrapper holds a yielded batch while making the next
            with torch.no_grad():
                x = torch.stack([frames[i - n_in + 1 : i + 1].reshape(n_in * C, nlat, nlon) for i in idx])
                tgt = torch.as_tensor(np.stack([np.arange(i + 1, i + 1 + n_steps) for i in idx]))
                forced = None if fch is None else (fch, frames[tgt.to(frames.device)])
                with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=bool(amp)):
                    out = rollout(model, x, n_steps, C, forcing=forced)
                pred = layout.decode(out.float())
                true = {n: v[tgt].to(dev) for n, v in raw.items()}
            yield {
                "traj_index": k,
                "trajectory": dataset.trajectory_ids[f],
                "init": idx,
                "init_slot": np.arange(s, s + len(idx)),
                "inits": inits,
                "pred": pred,
                "true": true,
                "times": times,
            }
            del out, pred, true  # the next batch is rolled out without this one's arrays
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
    wet : (nlat, nlon) bool ocean mask of a masked dataset (``WindowDataset.wet``), or None.
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
    wet: np.ndarray | None = None


def collect_forecast(batches, model, dataset, n_steps: int, keep_truth: bool = True) -> Forecast:
    """Gather the batches of :func:`iter_rollout` into one :class:`Forecast` (numpy, CPU).

    Raises
    ------
    ValueError
        If ``batches`` is empty (no forecast was made).
    """
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
        fields=stack(fields),
        truth=stack(truth) if keep_truth else None,
        trajectory=np.asarray(trajs, dtype=np.int64),
        init_index=np.asarray(inits),
        init_time=np.asarray(times)[inits],
        lead_time=dt * np.arange(1, n_steps + 1),
        time_units=time_units,
        grid=dataset.grid,
        fields_meta=dict(meta["fields"]),
        model=getattr(model, "name", "model"),
        attrs={
            "dataset": str(meta.get("name", "")),
            "dataset_path": str(dataset.path),
            "split": dataset.split,
            "model": getattr(model, "name", "model"),
            "checkpoint": str(getattr(model, "checkpoint", "") or ""),
        },
        levels=None if not meta.get("levels") else np.asarray(meta["levels"]["values"], dtype=np.float64),
        wet=None if getattr(dataset, "wet", None) is None else np.asarray(dataset.wet, dtype=bool),
    )


def forecast(
    model: Forecaster,
    dataset,
    n_steps: int,
    init_stride: int = 1,
    max_inits: int | None = None,
    trajectories=None,
    max_trajectories: int | None = None,
    batch_size: int = 8,
    keep_truth: bool = True,
    progress: bool = False,
    amp: bool = False,
) -> Forecast:
    """Roll ``model`` out for ``n_steps`` from every valid initial frame (or a subset) of ``dataset``.

    Parameters
    ----------
    model : :class:`Forecaster` (e.g. from :func:`dandelion.checkpoint.load_model`).
    dataset : a split of a dataset folder (:class:`dandelion.datasets.torch_dataset.WindowDataset`).
    n_steps : autoregressive steps.
    init_stride, max_inits : subset of initial frames (:func:`valid_inits`).
    trajectories : None (all) or a list of trajectory ids; max_trajectories : keep the first n of them.
    batch_size : forecasts advanced together.
    keep_truth : also return the true frames.
    amp : bf16 autocast for the network (:func:`iter_rollout`).

    Returns
    -------
    :class:`Forecast` (arrays on the CPU as numpy).
    """
    batches = iter_rollout(
        model, dataset, n_steps, init_stride, max_inits, trajectories, max_trajectories, batch_size, progress, amp
    )
    return collect_forecast(batches, model, dataset, n_steps, keep_truth)
