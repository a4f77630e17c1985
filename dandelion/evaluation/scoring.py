"""Scoring of rollouts: autoregressive forecasts on a split, scored per lead time (what ``dandelion-rollout`` writes).

Three modules take part in a rollout and each is named for its part: :mod:`dandelion.forecast` runs the
autoregressive loop (``rollout``, ``iter_rollout``), this module scores what it produces (:func:`evaluate`,
:func:`write_results`), and :mod:`dandelion.cli.rollout` is the ``dandelion-rollout`` job around both.

``dandelion-rollout checkpoint=RUN/best.pt dataset=galewsky dataset.path=DIR [n_steps=20 init_stride=1
max_inits=null max_trajectories=null device=cuda output_dir=DIR save_forecasts=true]``

For every valid initial frame of every test trajectory (or the configured subset) the model is run
``n_steps`` steps, each prediction fed back as input (:func:`dandelion.forecast.iter_rollout`), decoded to
physical units with the checkpoint's channel layout, and scored with every metric of the registry
(:data:`dandelion.metrics.METRICS`) against the stored frames. Written to ``output_dir`` (default
``<checkpoint folder>/rollout_<split>``):

* ``metrics.json``: per lead step (1..n_steps) and variable, the mean over all forecasts of the
  per-forecast metric (our definition, ``dandelion``): by default ``rmse`` (area-weighted, physical units),
  ``vrmse`` (area-weighted),
  ``vrmse_well`` (the Well's unweighted definition), ``acc`` (against the train-split mean of each
  scalar field, 0 for vector components, which have no stored mean); with WeatherBench 2's definitions
  (``wb2``, :mod:`dandelion.evaluation.definitions`) also ``rmse_wb2`` (the square root of the mean over
  forecasts of the area-weighted MSE) and ``acc_wb2`` (the mean over forecasts of the ACC, the numbers of
  ``acc``); ``definitions`` (the ``definitions`` argument, both by default) selects them and ``metrics.json``
  names each selected one in ``definitions``; for metrics registered with
  ``mean=True`` (the VRMSEs) variable ``mean`` = the average of the per-variable curves (scalar
  fields and vector components); a ``summary`` with the
  ``next_step`` value (lead 1) and ``mean_1_20`` (mean over leads 1..min(20, n_steps)); ``spectra``:
  mean angular power spectra of prediction and truth at ``spectra_leads``;
  ``stability``: per lead, how many forecasts have blown up by then (their VRMSE, mean over variables,
  above ``UNSTABLE_VRMSE`` = 10, ten times the truth's own spread, or not finite), and the median over
  forecasts of that VRMSE (one blown-up forecast dominates the mean; the median shows the others);
  on a masked dataset (``WindowDataset.wet``) every metric and spectrum is over wet points (land values
  are never read; spectra of the fields with land set to their wet mean, :mod:`dandelion.metrics`);
  forcing fields (``dataset.yaml`` ``forcing_fields``) are taken from the truth at every step
  (:func:`dandelion.forecast.rollout`) and are not scored;
* ``metrics.csv`` (long format: lead_step, lead_time, metric, variable, value) and
  ``spectra.csv`` (lead_step, variable, degree, pred, true);
* ``sample_forecast.nc``: the first forecast with its truth (CF netCDF), and PNG plots
  (maps, error versus lead, spectra) when ``plots=true``;
* ``forecasts.nc`` with every forecast when ``save_forecasts=true`` (never overwritten unless
  ``overwrite=true``).
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import numpy as np
import torch

from dandelion import metrics as M
from dandelion.evaluation.definitions import DEFINITIONS, WB2_METRICS, check_definitions, wb2_curves
from dandelion.forecast import collect_forecast, iter_rollout
from dandelion.runtime import write_text_atomic

__all__ = ["evaluate", "write_results", "UNSTABLE_VRMSE"]

#: A forecast counts as blown up at a lead where its VRMSE (area-weighted, mean over variables) exceeds this
#: (ten times the truth's spatial standard deviation) or is not finite.
UNSTABLE_VRMSE = 10.0


def _climatology(dataset) -> dict:
    """Train-split mean per scalar field (stats.yaml; a list per level for level fields); vectors 0
    (no per-component mean is stored)."""
    out = {}
    for name, kind in dataset.layout.fields.items():
        m = dataset.stats[name]["mean"] if kind == "scalar" else 0.0
        out[name] = [float(x) for x in m] if isinstance(m, (list, tuple)) else float(m)
    return out


def _level_tags(dataset) -> list[str]:
    """``["50hPa", ...]`` for a leveled dataset (dataset.yaml ``levels``), [] for 2-D data."""
    lv = dataset.metadata.get("levels")
    return [f"{float(v):g}{lv.get('units', '')}" for v in lv["values"]] if lv else []


def _split_levels(d: dict, tags: list[str], level_dim: int, ndim_2d: int) -> dict:
    """Entries with a level axis (``ndim_2d + 1`` dims, level at ``level_dim``) become ``<var>_<level>`` entries."""
    out = {}
    for var, v in d.items():
        if tags and v.ndim == ndim_2d + 1:
            out.update({f"{var}_{t}": v.select(level_dim, i) for i, t in enumerate(tags)})
        else:
            out[var] = v
    return out


class _Sums:
    """Running sums over the forecasts of one evaluation: every registered metric per lead and variable, the
    squares of those WB2 reports as a root mean square, the power spectra at ``spectra_leads``, and each
    forecast's VRMSE curve (mean over scalar fields and vector components) for the stability record."""

    def __init__(self, dataset, spectra_leads: list[int]):
        self.grid, self.spectra_leads = dataset.grid, spectra_leads
        self.clim = _climatology(dataset)
        # forcing fields (dataset.yaml forcing_fields) are taken from the truth in the rollout: not scored
        self.forcing = set(getattr(dataset, "metadata", {}).get("forcing_fields") or [])
        self.tags = _level_tags(dataset)  # leveled data: metrics and spectra per level, <var>_<level> (T_850hPa)
        self.wet = getattr(dataset, "wet", None)  # masked dataset: scores over wet points
        self.metrics = list(M.METRICS)  # the registry as it stands now (a metric registered after import counts)
        self.sums: dict = {m: {} for m in self.metrics}
        rms_of = {base for base, how in WB2_METRICS.values() if how == "rms"} & set(self.metrics)
        self.square_sums: dict = {m: {} for m in rms_of}  # sum over forecasts of the squared metric (rmse: the MSE)
        self.spec_sums: dict = {"pred": {}, "true": {}}
        self.count = 0
        vector_vars = {n for n, kind in dataset.layout.fields.items() if kind == "vector"}
        self.vector_vars = vector_vars | {f"{n}_{t}" for n in vector_vars for t in self.tags}
        self.per_forecast = []  # (b, n_steps) VRMSE per forecast, mean over scalar fields and vector components

    def add(self, b: dict) -> None:
        """Score one batch of :func:`dandelion.forecast.iter_rollout` and add it to the sums."""
        dev = next(iter(b["pred"].values())).device
        clim_b = {
            k: torch.tensor(v, dtype=torch.float64, device=dev)[:, None, None] if isinstance(v, list) else v
            for k, v in self.clim.items()
        }
        wet = None if self.wet is None else self.wet.to(dev)
        scored = {which: {k: v for k, v in b[which].items() if k not in self.forcing} for which in ("pred", "true")}
        out = M.field_metrics(scored["pred"], scored["true"], self.grid, climatology=clim_b, wet=wet)
        for m in self.metrics:
            for var, v in _split_levels(out[m], self.tags, -1, 2).items():  # v: (b, n_steps)
                self.sums[m][var] = self.sums[m].get(var, 0.0) + v.sum(0).cpu().double()
                if m in self.square_sums:
                    self.square_sums[m][var] = self.square_sums[m].get(var, 0.0) + (v.double() ** 2).sum(0).cpu()
        vr = [v for var, v in _split_levels(out["vrmse"], self.tags, -1, 2).items() if var not in self.vector_vars]
        if vr:  # (none when every field is a forcing field)
            self.per_forecast.append(torch.stack(vr).mean(0).cpu().double())
        self.count += len(b["init"])
        if self.spectra_leads:
            self._add_spectra(scored, wet)

    def _add_spectra(self, scored: dict, wet) -> None:
        leads = torch.as_tensor(self.spectra_leads) - 1
        for which in ("pred", "true"):
            for name, f in scored[which].items():
                f = f[:, leads].double()
                parts = (
                    {name: f}
                    if f.shape[-2:] == self.grid.shape
                    else dict(zip(M.variable_names(name, "vector"), f.unbind(-1)))
                )
                spectra = _split_levels(
                    {var: M.power_spectrum(g, self.grid, wet=wet) for var, g in parts.items()}, self.tags, -2, 3
                )
                for var, sp in spectra.items():
                    self.spec_sums[which][var] = self.spec_sums[which].get(var, 0.0) + sp.sum(0).cpu()

    def curves(self, definitions: tuple[str, ...]) -> dict:
        """Mean over forecasts per metric and variable (lead curves), WB2's definitions when asked, and the
        ``mean`` over variables of the metrics registered with ``mean=True``."""
        curves = {m: {var: (s / self.count).tolist() for var, s in d.items()} for m, d in self.sums.items()}
        per_var = [v for v in curves[self.metrics[0]] if v not in self.vector_vars]  # scalar fields, vector parts
        if "wb2" in definitions:
            curves.update(wb2_curves(self.sums, self.square_sums, self.count))
        if "dandelion" not in definitions:  # the registered metrics that have a WB2 counterpart give way to it
            for base, _ in WB2_METRICS.values():
                curves.pop(base, None)
        with_mean = set(M.metric_names(mean=True))
        with_mean |= {name for name, (base, _) in WB2_METRICS.items() if base in with_mean}
        for m in curves:
            if m in with_mean:
                curves[m]["mean"] = np.mean([curves[m][v] for v in per_var], axis=0).tolist()
        return curves

    def spectra(self) -> dict | None:
        """Mean power spectra of prediction and truth at ``spectra_leads``; None when there are none."""
        if not self.spectra_leads:
            return None
        means = {w: {v: (s / self.count).tolist() for v, s in self.spec_sums[w].items()} for w in ("pred", "true")}
        return {"leads": self.spectra_leads, **means}


def _first_forecast(b: dict) -> dict:
    """The first forecast of batch ``b`` as a batch of one, on the CPU."""
    return {
        **b,
        "init": b["init"][:1],
        "inits": b["init"][:1],
        "init_slot": np.arange(1),
        "pred": {k: v[:1].cpu() for k, v in b["pred"].items()},
        "true": {k: v[:1].cpu() for k, v in b["true"].items()},
    }


def _units(meta: dict, tags: list[str]) -> dict:
    """Units of every scored variable (vector components and the vector itself, each level's variable)."""
    units = {}
    for name, fm in meta["fields"].items():
        for var in M.variable_names(name, fm.get("kind", "scalar")):
            units[var] = str(fm.get("units", ""))
        if fm.get("kind") == "vector":
            units[name] = str(fm.get("units", ""))
    units.update({f"{var}_{t}": u for var, u in list(units.items()) for t in tags})
    return units


def _summary(curves: dict, n_steps: int) -> dict:
    """``next_step`` (lead 1) and ``mean_1_<n>`` (mean over leads 1..min(20, n_steps)) of every curve."""
    n20 = min(20, n_steps)
    return {
        "next_step": {m: {v: c[0] for v, c in d.items()} for m, d in curves.items()},
        f"mean_1_{n20}": {m: {v: float(np.mean(c[:n20])) for v, c in d.items()} for m, d in curves.items()},
    }


def _results(model, dataset, acc: _Sums, n_steps: int, definitions: tuple[str, ...]) -> dict:
    """The ``metrics.json`` content of an evaluation from its sums (module docstring)."""
    curves = acc.curves(definitions)
    meta = dataset.metadata
    time_units = str(meta.get("time_units", "s"))
    lead = (float(meta.get("dt_frame", 1.0)) * np.arange(1, n_steps + 1)).tolist()
    results = {
        "model": getattr(model, "name", "model"),
        "checkpoint": str(getattr(model, "checkpoint", "") or ""),
        "dataset": str(meta.get("name", "")),
        "dataset_path": str(dataset.path),
        "split": dataset.split,
        "grid": dataset.grid.to_dict(),
        "n_forecasts": acc.count,
        "n_steps": int(n_steps),
        "lead_time": lead,
        "time_units": time_units,
        "lead_time_hours": [t / 3600.0 for t in lead] if time_units == "s" else None,
        "units": _units(meta, acc.tags),
        "climatology": acc.clim,
        "metrics": curves,
        "summary": _summary(curves, n_steps),
        "stability": _stability(torch.cat(acc.per_forecast).numpy()) if acc.per_forecast else None,
        "spectra": acc.spectra(),
        "definitions": {d: DEFINITIONS[d] for d in definitions},
    }
    return results


def evaluate(
    model,
    dataset,
    n_steps: int = 20,
    init_stride: int = 1,
    max_inits=None,
    trajectories=None,
    max_trajectories=None,
    batch_size: int = 8,
    spectra_leads=(1, 5, 20),
    keep_forecasts: bool = False,
    sample: bool = True,
    progress: bool = False,
    amp: bool = False,
    definitions=("dandelion", "wb2"),
) -> dict:
    """Roll out and score; the in-memory core of ``dandelion-rollout`` (:func:`dandelion.cli.rollout.rollout`).

    Parameters
    ----------
    model : :class:`dandelion.forecast.Forecaster`.
    dataset : a split (:class:`dandelion.datasets.torch_dataset.WindowDataset`).
    n_steps, init_stride, max_inits, trajectories, max_trajectories, batch_size :
        as :func:`dandelion.forecast.iter_rollout`.
    spectra_leads : lead steps at which mean power spectra are computed (those > n_steps are dropped).
    keep_forecasts : also return every forecast as a :class:`dandelion.forecast.Forecast` (``"forecast"``).
    sample : return the first forecast with its truth (``"sample"``, a Forecast of one).
    amp : run the network under bf16 autocast (:func:`dandelion.forecast.iter_rollout`).
    definitions : score definitions reported (:data:`dandelion.evaluation.definitions.DEFINITIONS`):
        ``"dandelion"`` the registered metrics as the mean over forecasts (``rmse``, ``acc``, ...), ``"wb2"``
        WeatherBench 2's ``rmse_wb2`` and ``acc_wb2``; both by default. Registered metrics without a WB2
        counterpart (the VRMSEs, ...) are always reported.

    Returns
    -------
    dict with ``results`` (the ``metrics.json`` content) and optionally ``forecast`` and ``sample``.

    Raises
    ------
    ValueError
        For an unknown definition, or when no forecast could be made (no valid initial frame).
    """
    definitions = check_definitions(definitions)
    acc = _Sums(dataset, [int(k) for k in spectra_leads if 1 <= int(k) <= n_steps])
    kept, first = [], None
    for b in iter_rollout(
        model, dataset, n_steps, init_stride, max_inits, trajectories, max_trajectories, batch_size, progress, amp
    ):
        acc.add(b)
        if keep_forecasts:
            kept.append(
                {
                    **b,
                    "pred": {k: v.cpu() for k, v in b["pred"].items()},
                    "true": {k: v.cpu() for k, v in b["true"].items()},
                }
            )
        if sample and first is None:
            first = _first_forecast(b)
    if acc.count == 0:
        raise ValueError("no forecast was made: check trajectories / max_inits")
    ret = {"results": _results(model, dataset, acc, n_steps, definitions)}
    if keep_forecasts:
        ret["forecast"] = collect_forecast(kept, model, dataset, n_steps)
    if sample and first is not None:
        ret["sample"] = collect_forecast([first], model, dataset, n_steps)
    return ret


def _stability(vrmse: np.ndarray) -> dict:
    """``stability`` of ``metrics.json`` from per-forecast VRMSE curves ``(n_forecasts, n_steps)`` (module
    docstring)."""
    bad = ~np.isfinite(vrmse) | (vrmse > UNSTABLE_VRMSE)
    by_lead = np.logical_or.accumulate(bad, axis=1)  # blown up at this lead or before
    first = np.flatnonzero(bad.any(0))
    return {
        "threshold_vrmse": UNSTABLE_VRMSE,
        "n_forecasts": int(vrmse.shape[0]),
        "n_unstable": int(by_lead[:, -1].sum()),
        "unstable_by_lead": by_lead.sum(0).astype(int).tolist(),
        "first_unstable_lead_step": int(first[0]) + 1 if first.size else None,
        "median_vrmse": np.median(np.where(np.isfinite(vrmse), vrmse, np.inf), axis=0).tolist(),
    }


def write_results(results: dict, out_dir) -> dict:
    """Write ``metrics.json``, ``metrics.csv`` and ``spectra.csv`` (atomic); returns their paths."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {"json": out_dir / "metrics.json", "csv": out_dir / "metrics.csv"}
    write_text_atomic(paths["json"], json.dumps(results, indent=1))
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["lead_step", f"lead_time_{results['time_units']}", "metric", "variable", "value"])
    for m, d in results["metrics"].items():
        for var, curve in d.items():
            for k, val in enumerate(curve):
                w.writerow([k + 1, results["lead_time"][k], m, var, f"{val:.8g}"])
    write_text_atomic(paths["csv"], buf.getvalue())
    if results.get("spectra"):
        buf = io.StringIO()
        w = csv.writer(buf)
        w.writerow(["lead_step", "variable", "degree", "pred", "true"])
        sp = results["spectra"]
        for i, lead in enumerate(sp["leads"]):
            for var in sp["true"]:
                for l, (p, t) in enumerate(zip(sp["pred"][var][i], sp["true"][var][i])):
                    w.writerow([lead, var, l, f"{p:.8g}", f"{t:.8g}"])
        paths["spectra_csv"] = out_dir / "spectra.csv"
        write_text_atomic(paths["spectra_csv"], buf.getvalue())
    return paths
