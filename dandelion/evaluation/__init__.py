"""Evaluation of trained models: autoregressive rollouts scored per lead time (:mod:`dandelion.evaluation.scoring`).

* :func:`evaluate`: ``evaluate(model, dataset, n_steps=20, init_stride=1, ...)`` rolls a
  :class:`dandelion.forecast.Forecaster` (:func:`dandelion.checkpoint.load_model`) out over a split
  (:class:`dandelion.datasets.torch_dataset.WindowDataset`) and scores every registered metric per lead; returns
  ``{"results": <the metrics.json content>, "sample": ..., "forecast": ...}``;
* :func:`write_results`: ``metrics.json``, ``metrics.csv`` and ``spectra.csv`` of those results into a folder;
* :data:`UNSTABLE_VRMSE`: the VRMSE above which a forecast counts as blown up.

``dandelion-rollout`` (:mod:`dandelion.cli.rollout`) wraps these; nothing here imports hydra or omegaconf.
"""

from dandelion.evaluation.scoring import UNSTABLE_VRMSE, evaluate, write_results

__all__ = ["evaluate", "write_results", "UNSTABLE_VRMSE"]
