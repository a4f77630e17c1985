"""Python API for notebooks: open a dataset, load a checkpoint, roll out, export (no hydra needed).

A thin facade over the modules that do the work; nothing inside the package imports it:

* :func:`open_dataset`: a split of a dataset folder (:class:`dandelion.datasets.torch_dataset.WindowDataset`);
* :func:`load_model`: a checkpoint as a :class:`Forecaster` (:func:`dandelion.checkpoint.load_model`);
* :func:`rollout`, :func:`iter_rollout`, :func:`valid_inits`, :class:`Forecast`: the autoregressive
  forecasts (:mod:`dandelion.forecast`);
* :func:`to_xarray`, :func:`export`: CF netCDF, or a Zarr store with ``format="zarr"`` (WeatherBench 2 names with
  ``convention="wb2"``) (:mod:`dandelion.export.forecasts`).

Example::

    from dandelion import api
    data = api.open_dataset("data/galewsky", "test")
    model = api.load_model("quickstart_output/runs/dandelion/best.pt", dataset=data)
    fc = api.rollout(model, data, n_steps=20, init_stride=8)
    ds = api.to_xarray(fc, include_truth=True)      # xarray.Dataset, CF metadata
    api.export(fc, "forecast.nc")                    # netCDF4 file
    api.export(fc, "forecast.zarr", format="zarr", convention="wb2")  # Zarr store, WeatherBench 2 names

Conventions (:mod:`dandelion.forecast`): the model sees ``n_in`` normalised frames folded into
channels and predicts the next normalised frame; a rollout feeds each prediction back in place of
the oldest frame. A forecast from initial frame ``i`` (the last input frame, ``init_time = time[i]``)
holds the predictions of frames ``i + 1 .. i + n_steps``, decoded to physical units with the
checkpoint's channel layout (vectors projected back to (u east, v north)).
"""

from __future__ import annotations

from dandelion.datasets.torch_dataset import WindowDataset
from dandelion.export.forecasts import to_xarray
from dandelion.export.forecasts import write_forecast as export

from .checkpoint import load_model
from .forecast import Forecast, Forecaster, collect_forecast, iter_rollout, valid_inits
from .forecast import forecast as rollout
from .registry import import_plugins

__all__ = [
    "Forecaster",
    "Forecast",
    "open_dataset",
    "import_plugins",
    "load_model",
    "valid_inits",
    "iter_rollout",
    "rollout",
    "collect_forecast",
    "to_xarray",
    "export",
]


def open_dataset(path, split: str = "test", n_in: int = 4) -> WindowDataset:
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
    return WindowDataset(path, split, n_in=n_in, n_out=1)
