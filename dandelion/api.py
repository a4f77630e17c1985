"""Python API for notebooks: train, roll out, evaluate, export; no hydra and no omegaconf are imported.

A thin facade over the modules that do the work (the ``dandelion-*`` commands wrap the same functions); nothing
inside the package imports it:

* :func:`train` (:func:`dandelion.training.train`): ``train(model, train_data, valid_data=None, options=None, *,
  run_dir, seed, device, resume, **options)`` trains a registered model (name or ``{"name", "preset",
  "overrides"}``) or an ``nn.Module`` on dataset folders or :class:`WindowDataset` objects and returns a
  :class:`TrainResult` (``.model``, ``.history``, ``.summary``; unpacks as ``model, history``); :class:`Trainer`
  is the same run as an object and :class:`TrainOptions` every option of ``configs/trainer/default.yaml`` (same
  names and defaults, checked on construction); ``resume=RUN/last.pt`` continues a run bit-exactly;
* :func:`open_dataset`: a split of a dataset folder (:class:`dandelion.datasets.torch_dataset.WindowDataset`);
* :func:`load_model`: a checkpoint as a :class:`Forecaster` (:func:`dandelion.checkpoint.load_model`);
* :func:`rollout`, :func:`iter_rollout`, :func:`valid_inits`, :class:`Forecast`: the autoregressive
  forecasts (:mod:`dandelion.forecast`);
* :func:`evaluate` (:func:`dandelion.evaluation.evaluate`): a rollout scored per lead time with every registered
  metric (the ``metrics.json`` of ``dandelion-rollout``), :func:`write_results` to write it;
* :func:`to_xarray`, :func:`export`: CF netCDF, or a Zarr store with ``format="zarr"`` (WeatherBench 2 names with
  ``convention="wb2"``) (:mod:`dandelion.export.forecasts`).

Example::

    from dandelion import api
    result = api.train({"name": "dandelion", "preset": "tiny"}, "data/galewsky", run_dir="runs/x",
                       epochs=2, finetune={"epochs": 1}, warmup_steps=10, num_workers=0)
    model, history = result                         # the trained network, one record per epoch (metrics.jsonl)
    data = api.open_dataset("data/galewsky", "test")
    fc_model = api.load_model("runs/x/best.pt", dataset=data)
    scores = api.evaluate(fc_model, data, n_steps=20)["results"]   # metrics.json content
    fc = api.rollout(fc_model, data, n_steps=20, init_stride=8)
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
from dandelion.evaluation import evaluate, write_results
from dandelion.export import to_xarray
from dandelion.export import write_forecast as export
from dandelion.training import Trainer, TrainOptions, TrainResult, parameter_hash, train

from .checkpoint import load_model
from .forecast import Forecast, Forecaster, collect_forecast, iter_rollout, valid_inits
from .forecast import forecast as rollout
from .registry import import_plugins

__all__ = [
    "train",
    "Trainer",
    "TrainOptions",
    "TrainResult",
    "parameter_hash",
    "Forecaster",
    "Forecast",
    "open_dataset",
    "import_plugins",
    "load_model",
    "valid_inits",
    "iter_rollout",
    "rollout",
    "collect_forecast",
    "evaluate",
    "write_results",
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
