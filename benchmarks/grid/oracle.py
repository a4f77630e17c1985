"""The exact semi-Lagrangian oracle: a reference forecast for datasets whose scenario declares its flow.

A scenario that knows its flow exactly has the capability :class:`FlowScenario` (a method
``departure_points(params, xyz, t_from, t_to)``, e.g. :class:`dandelion.datasets.transport.TransportScenario`).
For such a dataset the oracle steps each forecast by one exact semi-Lagrangian step per frame: the newest frame's
advected (scalar, non-forcing) channels are sampled at the exact departure points of the grid's nodes over the frame
interval, ``x_d = departure_points(x, t + dt, t)``, with the package's pole-aware bilinear sampler
(:func:`dandelion.warp.sample_sphere`); forcing channels (the prescribed velocity) are copied and then replaced by
the truth like every model's. Its error is the sampler's interpolation error and the band-limited frames' departure
from an exact transport, nothing learned: the bar a model that moves information along the flow should reach.

The oracle needs each forecast's trajectory and time, which a model's window does not carry. Forecasts are made by
:func:`dandelion.evaluation.scoring.evaluate` in batches of ``n_steps`` calls; at the first call of each batch the
oracle looks every window up (by its bytes) among the windows of the split's trajectories, which gives the trajectory
and the time of its newest frame, and raises if one is not found; later calls advance the time by ``dt_frame``.
"""

from __future__ import annotations

import hashlib
from typing import Protocol, runtime_checkable

import numpy as np
import torch

from dandelion.datasets.scenario import get_scenario
from dandelion.forecast import Forecaster
from dandelion.warp import sample_sphere

__all__ = ["FlowScenario", "declares_flow", "dataset_flow", "SemiLagrangianOracle", "oracle_forecaster"]


@runtime_checkable
class FlowScenario(Protocol):
    """A scenario that declares its flow: ``departure_points(params, xyz, t_from, t_to)`` maps points ``xyz (B, 3,
    ...)`` at stored times ``t_from (B,)`` to where their particles are at stored times ``t_to (B,)``, for
    trajectories with parameters ``params`` (dict of ``(B,)`` tensors)."""

    def departure_points(self, params, xyz, t_from, t_to): ...

    def parameters(self, trajectory_id: int) -> dict: ...


def declares_flow(name: str, module: str | None = None) -> bool:
    """Whether the scenario registered as ``name`` declares its flow (a callable ``departure_points``); False for a
    name that is no scenario."""
    try:
        cls = get_scenario(name, module)
    except ValueError:
        return False
    return callable(getattr(cls, "departure_points", None))


def dataset_flow(metadata: dict) -> FlowScenario | None:
    """The scenario of a dataset folder's ``dataset.yaml`` (``metadata``), rebuilt from its recorded configuration,
    if it declares its flow; else None (the oracle does not apply)."""
    config = dict((metadata.get("config") or {}).get("dataset") or {})
    name = str(metadata.get("name", config.get("name", "")))
    if not declares_flow(name, config.get("module")):
        return None
    scenario = get_scenario(name, config.get("module"))(
        {k: v for k, v in config.items() if k not in ("path", "name", "module")}
    )
    return scenario if isinstance(scenario, FlowScenario) else None


def _key(window: torch.Tensor) -> bytes:
    return hashlib.sha1(window.detach().to("cpu", torch.float32).contiguous().numpy().tobytes()).digest()


class SemiLagrangianOracle(torch.nn.Module):
    """One exact semi-Lagrangian step per call (module docstring).

    Parameters
    ----------
    flow : a :class:`FlowScenario` (the dataset's scenario).
    data : the evaluated split (:class:`dandelion.datasets.torch_dataset.WindowDataset`); its windows are indexed.
    n_in, n_steps : frames in and steps per forecast, as the evaluation makes them.
    forcing : channel indices copied from the newest frame (the rollout replaces them by the truth), or None.

    Input ``(B, n_in * C, nlat, nlon)`` normalised windows; output ``(B, C, nlat, nlon)``.

    Raises
    ------
    ValueError
        At a forecast's first step, for a window that is not one of the split's (the message says why).
    """

    def __init__(self, flow: FlowScenario, data, n_in: int, n_steps: int, forcing: torch.Tensor | None = None):
        super().__init__()
        self.flow, self.data, self.n_in, self.n_steps = flow, data, int(n_in), int(n_steps)
        self.layout = data.layout
        c = self.layout.n_channels
        keep = torch.ones(c, dtype=torch.bool)
        if forcing is not None:
            keep[forcing] = False
        self.advected = keep.nonzero()[:, 0]
        self.dt = float(data.metadata["dt_frame"])
        self.grid = data.grid
        self.register_buffer("xyz", data.grid.xyz.clone(), persistent=False)
        self._index: dict[bytes, tuple[int, float]] = {}
        for f in range(len(data.trajectory_ids)):
            raw = data.read_frames(f, 0, data.n_frames[f])
            raw = {k: torch.as_tensor(np.asarray(v, dtype=np.float32)) for k, v in raw.items()}
            frames = self.layout.encode(raw).to(torch.float32)  # as dandelion.forecast.iter_rollout encodes them
            times = np.asarray(data.times(f), dtype=np.float64)
            for i in range(self.n_in - 1, frames.shape[0]):
                window = frames[i - self.n_in + 1 : i + 1].reshape(self.n_in * c, *self.grid.shape)
                self._index[_key(window)] = (int(data.trajectory_ids[f]), float(times[i]))
        self._calls = 0
        self._params: dict[str, torch.Tensor] | None = None
        self._time: torch.Tensor | None = None

    def _locate(self, x: torch.Tensor) -> None:
        found = [self._index.get(_key(w)) for w in x]
        if any(v is None for v in found):
            raise ValueError(
                "the oracle was given a window that is not one of the split's at a forecast's first step: it must be "
                "evaluated by dandelion.evaluation.scoring.evaluate with the n_steps it was built for "
                f"({self.n_steps})"
            )
        params = [self.flow.parameters(tid) for tid, _ in found]
        self._params = {k: torch.tensor([p[k] for p in params], dtype=torch.float64) for k in params[0]}
        self._time = torch.tensor([t for _, t in found], dtype=torch.float64)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self._calls % self.n_steps == 0:
            self._locate(x)
        self._calls += 1
        c = self.layout.n_channels
        newest = x[:, -c:]
        b = x.shape[0]
        xyz = self.xyz.to(torch.float64).unsqueeze(0).expand(b, -1, -1, -1)
        d = self.flow.departure_points(self._params, xyz, self._time + self.dt, self._time)
        colat = torch.acos(d[:, 2].clamp(-1.0, 1.0))
        lon = torch.remainder(torch.atan2(d[:, 1], d[:, 0]), 2 * np.pi)
        out = newest.clone()
        idx = self.advected.to(x.device)
        field = newest.index_select(1, idx).to(torch.float64)
        out[:, idx] = sample_sphere(field, colat.to(x.device), lon.to(x.device), self.grid).to(out.dtype)
        self._time = self._time + self.dt
        return out


def oracle_forecaster(flow: FlowScenario, data, n_in: int, n_steps: int) -> Forecaster:
    """The oracle as a :class:`~dandelion.forecast.Forecaster` (target ``frame``, inputs ``frames``) on ``data``."""
    from dandelion.forecast import forcing_channels

    fch = forcing_channels(data.layout, data.metadata)
    oracle = SemiLagrangianOracle(flow, data, n_in, n_steps, fch)
    return Forecaster(oracle, data.layout, n_in, name="oracle")
