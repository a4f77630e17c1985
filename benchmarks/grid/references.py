"""Reference forecasts of the benchmark: persistence and the pointwise linear autoregression.

Neither is trained by gradient descent; both are scored by the same rollout code
(:func:`dandelion.evaluation.scoring.evaluate`) on the same test forecasts as the cells, and shown as
reference lines of the leaderboard (:mod:`dandelion.benchmarks.leaderboard.render`):

* ``persistence``: the newest input frame as every forecast;
* ``linear_ar``: a pointwise linear autoregression, the same ``(n_in * C [+ 1 wet]) + 1 -> C`` channel map
  at every grid point, in the protocol's form (it sees the older frames as scaled differences to the
  newest, :func:`dandelion.step.difference_window`, and predicts the scaled increment,
  :func:`dandelion.step.next_frame` with ``target=increment``), fitted by area-weighted least squares
  to the one-step increments of the train split (the normal equations accumulated in float64 over every
  train window, solved with a ridge of 1e-8 of the mean diagonal). It is the simplest model that uses
  the input window, a lower bar than any network should clear at the next step; rolled out, it shows how
  much of a network's lead over persistence a linear extrapolation already gives. It has no spatial
  mixing, so it is the same map on any grid;
* ``oracle``: for a dataset whose scenario declares its flow (:class:`~dandelion.benchmarks.grid.oracle.FlowScenario`,
  e.g. ``transport``), one exact semi-Lagrangian step per frame with the package's sampler
  (:mod:`dandelion.benchmarks.grid.oracle`); :func:`references_of` lists it only there.

Each record is written atomically to ``results_dir/<dataset>/<name>.json`` with the scale's
:func:`~dandelion.benchmarks.grid.cells.protocol_hash`.
"""

from __future__ import annotations

import torch
from torch.utils.data import DataLoader

from dandelion.benchmarks.grid.cells import REFERENCES, data_digest, metric_summaries, protocol_hash, reference_path
from dandelion.benchmarks.grid.oracle import dataset_flow, declares_flow, oracle_forecaster
from dandelion.datasets.torch_dataset import WindowDataset
from dandelion.evaluation.scoring import evaluate
from dandelion.forecast import Forecaster, difference_window, nonzero_scale
from dandelion.metrics import loss_weights, metric_names
from dandelion.pointwise import Pointwise
from dandelion.runtime import write_json_atomic

__all__ = [
    "Persistence",
    "REFERENCES",
    "persistence_reference",
    "linear_ar_reference",
    "oracle_reference",
    "references_of",
    "fit_linear_ar",
    "reference_path",
]

_SCHEMA = "dandelion-benchmark-reference/1"


class Persistence(torch.nn.Module):
    """The newest frame of a ``(B, n_in * C, nlat, nlon)`` window as the forecast ``(B, C, nlat, nlon)``.

    The target is ``frame``.
    """

    def __init__(self, n_channels: int):
        super().__init__()
        self.n_channels = n_channels

    def forward(self, x):
        return x[:, -self.n_channels :]


def fit_linear_ar(data: WindowDataset, batch_size: int = 32) -> tuple[Pointwise, dict]:
    """Fit the pointwise linear autoregression to the one-step increments of ``data`` (a split).

    The features are what a network of the protocol sees: :func:`~dandelion.step.difference_window`
    of the ``(n_in * C)`` window with the layout's increment scale, plus the wet mask channel for a
    masked dataset; the target is the increment ``(x_{t+1} - x_t) / s`` (``s`` the increment scale, 0
    read as 1). The fit minimises ``sum_{windows, points} w (features @ W + b - target)**2`` with ``w``
    the area weights (zero on land, :func:`dandelion.metrics.loss_weights`), through the normal
    equations in float64.

    Returns the map as a :class:`~dandelion.pointwise.Pointwise` (float32; input ``(B, n_features, nlat,
    nlon)``, output ``(B, C, nlat, nlon)``) and a dict ``{"n_windows", "n_features"}``.

    Raises
    ------
    ValueError
        If the split holds no window.
    """
    if len(data) == 0:
        raise ValueError(
            f"the {data.split!r} split of {data.path} holds no window of {data.n_in} + 1 frames: nothing to fit"
        )
    c = data.layout.n_channels
    scale = data.layout.increment_scale().double()
    wet = data.wet
    w = loss_weights(data.grid, wet).double()  # (nlat, 1) or (nlat, nlon)
    w = w.expand(data.grid.shape).reshape(-1)
    gram = rhs = None
    n = 0
    for batch in DataLoader(data, batch_size=batch_size, shuffle=False, num_workers=0):
        x = batch["x"].double()
        y = batch["y"][:, 0].double()
        feats = difference_window(x, c, scale)
        if wet is not None:
            feats = torch.cat([feats, wet.to(feats.dtype).expand(feats.shape[0], 1, *wet.shape)], dim=1)
        feats = torch.cat([feats, torch.ones_like(feats[:, :1])], dim=1)
        target = (y - x[:, -c:]) / nonzero_scale(scale).reshape(1, c, 1, 1)
        if (
            wet is not None
        ):  # land values may be non-finite fill: their weight is 0, their value must not be read (0 * NaN = NaN)
            target = torch.where(wet, target, torch.zeros_like(target))
            feats = torch.where(wet, feats, torch.zeros_like(feats))
        f = feats.permute(0, 2, 3, 1).reshape(x.shape[0], -1, feats.shape[1])  # (B, points, F)
        t = target.permute(0, 2, 3, 1).reshape(x.shape[0], -1, c)
        fw = f * w[None, :, None]
        g = torch.einsum("bpf,bpg->fg", fw, f)
        r = torch.einsum("bpf,bpc->fc", fw, t)
        gram, rhs = (g, r) if gram is None else (gram + g, rhs + r)
        n += x.shape[0]
    ridge = 1e-8 * float(torch.diagonal(gram).mean())
    coef = torch.linalg.solve(gram + ridge * torch.eye(gram.shape[0], dtype=gram.dtype), rhs)  # (F, C)
    n_feat = gram.shape[0] - 1
    layer = Pointwise(n_feat, c)
    with torch.no_grad():
        layer.weight.copy_(coef[:-1].T.reshape(c, n_feat, 1, 1).float())
        layer.bias.copy_(coef[-1].float())
    return layer, {"n_windows": n, "n_features": n_feat}


def _evaluate_reference(
    cfg, key: str, name: str, model: Forecaster, data: WindowDataset, extra: dict | None = None
) -> dict:
    e = cfg.scale.evaluation
    res = evaluate(
        model,
        data,
        n_steps=int(e.n_steps),
        init_stride=int(e.get("init_stride", 1)),
        max_inits=e.get("max_inits"),
        batch_size=int(e.get("batch_size", 8)),
        spectra_leads=[],
        sample=False,
    )["results"]
    table = metric_names(table=True)  # the leaderboard's reference line of every table
    rec = {
        "schema": _SCHEMA,
        "model": name,
        "label": REFERENCES[name],
        "dataset_key": key,
        "n_forecasts": res["n_forecasts"],
        "protocol_hash": protocol_hash(cfg, key),
        "data_files_sha256": data_digest(data.path),
        **(extra or {}),
        **metric_summaries(res, metrics=table, curves=table),
    }
    write_json_atomic(reference_path(cfg.scale.results_dir, key, name), rec)
    return rec


def persistence_reference(cfg, key: str, data_path) -> dict:
    """Scores of persistence (the newest input frame as every forecast) on the evaluation split of the
    dataset at ``data_path`` (grid key ``key``) with the scale's evaluation settings, written to
    ``results_dir/<key>/persistence.json``. Returns the record."""
    e = cfg.scale.evaluation
    n_in = int(cfg.scale.trainer.n_in)
    data = WindowDataset(data_path, e.get("split", "test"), n_in=n_in, n_out=1)
    model = Forecaster(Persistence(data.layout.n_channels), data.layout, n_in, name="persistence")
    return _evaluate_reference(cfg, key, "persistence", model, data)


def linear_ar_reference(cfg, key: str, data_path) -> dict:
    """Fit the pointwise linear autoregression (:func:`fit_linear_ar`) on the train split of the dataset
    at ``data_path`` and score it like a cell on the evaluation split; written to
    ``results_dir/<key>/linear_ar.json``. Returns the record."""
    e = cfg.scale.evaluation
    n_in = int(cfg.scale.trainer.n_in)
    train = WindowDataset(data_path, "train", n_in=n_in, n_out=1)
    layer, info = fit_linear_ar(train)
    data = WindowDataset(data_path, e.get("split", "test"), n_in=n_in, n_out=1)
    model = Forecaster(
        layer, data.layout, n_in, name="linear_ar", target="increment", inputs="differences", wet=data.wet
    )
    return _evaluate_reference(cfg, key, "linear_ar", model, data, extra={"fit": {**info, "split": "train"}})


def oracle_reference(cfg, key: str, data_path) -> dict:
    """Scores of the exact semi-Lagrangian oracle (:mod:`dandelion.benchmarks.grid.oracle`) on the evaluation split
    of the dataset at ``data_path``, written to ``results_dir/<key>/oracle.json``. Returns the record.

    Raises
    ------
    ValueError
        If the dataset's scenario declares no flow (the oracle does not apply: :func:`references_of`)."""
    e = cfg.scale.evaluation
    n_in = int(cfg.scale.trainer.n_in)
    data = WindowDataset(data_path, e.get("split", "test"), n_in=n_in, n_out=1)
    flow = dataset_flow(data.metadata)
    if flow is None:
        raise ValueError(f"the dataset at {data_path} ({data.metadata.get('name')}) declares no flow: no oracle")
    model = oracle_forecaster(flow, data, n_in, int(e.n_steps))
    return _evaluate_reference(cfg, key, "oracle", model, data)


def references_of(scenario: str) -> dict:
    """``{name: function(cfg, key, data_path)}`` of the references that apply to datasets of the scenario named
    ``scenario`` (a dataset config group, e.g. ``transport``): persistence and linear AR always, the oracle where the
    scenario declares its flow (:func:`~dandelion.benchmarks.grid.oracle.declares_flow`)."""
    refs = {"persistence": persistence_reference, "linear_ar": linear_ar_reference}
    if declares_flow(scenario):
        refs["oracle"] = oracle_reference
    return refs
