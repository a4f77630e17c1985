"""Plots of rollouts (``dandelion-report``): maps, error versus lead time, power spectra.

Inputs are what ``dandelion-rollout`` writes in its output folder: ``metrics.json`` (per-lead metrics
and spectra, :func:`dandelion.evaluation.scoring.evaluate`) and ``sample_forecast.nc`` (one forecast
with its truth, CF layout of :mod:`dandelion.export.forecasts`). Several rollout folders (one per
model) give one error-versus-lead figure with a line per model.

All figures are PNG files written atomically (temporary name, then rename).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import xarray as xr
from matplotlib.lines import Line2D
from matplotlib.ticker import ScalarFormatter

from dandelion.metrics import METRICS
from dandelion.reporting.plotting import plain_log_ticks, pyplot, save_figure

__all__ = ["plot_maps", "plot_error_vs_lead", "plot_spectra"]


#: y-axis labels: which error each built-in metric of metrics.json is (dandelion.metrics); a registered
#: metric without an entry is labelled with its leaderboard title or its label.
METRIC_LABELS = {
    "rmse": "RMSE (area-weighted)",
    "vrmse": "VRMSE (area-weighted)",
    "vrmse_well": "VRMSE (the Well's, unweighted)",
    "acc": "ACC (area-weighted, uncentred)",
}


def _panel_grid(plt, n: int, top_in: float = 0.0):
    """A figure with ``n`` panels in rows of at most 3 (unused cells hidden) and ``top_in`` inches kept
    free above them (a title and a shared legend); returns ``(fig, axes)``."""
    ncols = min(3, n)
    nrows = -(-n // ncols)
    height = 3.4 * nrows + top_in
    fig, axes = plt.subplots(nrows, ncols, figsize=(4.6 * ncols, height), squeeze=False)
    fig.subplots_adjust(
        left=0.09 if ncols > 1 else 0.17,
        right=0.97,
        bottom=0.55 / height,
        top=1 - (0.35 + top_in) / height,
        hspace=0.45,
        wspace=0.32,
    )
    for ax in axes.flat[n:]:
        ax.set_visible(False)
    return fig, axes


def _lead_unit(max_hours: float) -> tuple[str, float]:
    """One unit for every lead of a figure: hours up to 3 days, days beyond; ``(name, hours per unit)``."""
    return ("h", 1.0) if max_hours <= 72 else ("d", 24.0)


def _hours(t) -> float:
    """A time coordinate value (timedelta64, or datetime64 since the trajectory start) in hours."""
    if isinstance(t, np.datetime64):
        t = t - np.datetime64("2000-01-01T00:00:00", "ns")  # the export's epoch = the trajectory start
    return float(t / np.timedelta64(1, "h"))


def _fmt(value: float, unit: str) -> str:
    return f"{value:.2f} {unit}" if unit == "d" else f"{value:.3g} {unit}".rstrip()


def _squared_units(units: str) -> str:
    units = str(units or "").strip()
    if units in ("", "1"):
        return "dimensionless"
    return f"({units})²" if any(c in units for c in " /*") or "-" in units else f"{units}²"


#: Colour of land in the maps of a masked dataset.
LAND_GREY = "0.75"


def _time_texts(ds, leads: list[int], init: int) -> tuple[dict, str]:
    """The text of every lead step and of the initial time, in one unit (hours up to 3 days, else days), or
    non-dimensional when the file's times are numbers."""
    if np.issubdtype(ds.lead_time.dtype, np.timedelta64):  # the initial time and every lead in one unit
        t0 = _hours(ds.init_time.values[init])
        unit, per = _lead_unit(max([t0] + [_hours(ds.lead_time.values[k - 1]) for k in leads]))
        lead_text = {k: "+" + _fmt(_hours(ds.lead_time.values[k - 1]) / per, unit) for k in leads}
        return lead_text, _fmt(t0 / per, unit)
    lead_text = {k: f"+{float(ds.lead_time.values[k - 1]):.3g} (non-dimensional)" for k in leads}
    return lead_text, f"{float(ds.init_time.values[init]):.3g} (non-dimensional time)"


def _maps_title(a: dict, tid, init_text: str) -> str:
    """``<model> on <dataset> (<split> split): trajectory <id>, initialised at t = ...`` from the file's attributes."""
    who = f"{a.get('model', 'model')} on {a.get('dataset', 'the dataset')}" + (
        f" ({a['split']} split)" if a.get("split") else ""
    )
    where = (
        f"trajectory {tid}, " if tid is not None else ""
    ) + f"initialised at t = {init_text} after the trajectory start"
    return f"{who}: {where}"


def _level_sel(ds, var: str, level: float) -> tuple[dict, str]:
    """For a variable with a ``level`` axis, the index of the level nearest ``level`` and its label; else nothing."""
    if "level" not in ds[var].dims:
        return {}, ""
    i = int(np.argmin(np.abs(ds.level.values - float(level))))
    return {"level": i}, f" at {float(ds.level.values[i]):g} {ds.level.attrs.get('units', '')}".rstrip()


def _map_row(fig, axes, ds, var: str, k: int, sel: dict, title: tuple, land, cmaps: dict, last: bool) -> None:
    """One row of :func:`plot_maps`: truth, prediction and their difference of ``var`` at lead step ``k`` (``sel``
    picks the forecast and level; ``title``: the variable's label and the lead's text; ``last``: the bottom row)."""
    pred = ds[var].isel(**sel, lead_time=k - 1).values
    true = ds[f"{var}_truth"].isel(**sel, lead_time=k - 1).values
    err = pred - true
    if land is not None:  # land greyed out (masked cells take the colour map's "bad" colour)
        pred, true, err = (np.ma.masked_where(np.broadcast_to(land, a.shape), a) for a in (pred, true, err))
    vmin, vmax = float(np.nanmin(true)), float(np.nanmax(true))
    emax = float(np.nanmax(np.abs(err))) or 1.0
    units = ds[var].attrs.get("units", "")
    lon, lat = ds.lon.values, ds.lat.values
    panels = [
        (true, "truth", dict(cmap=cmaps["viridis"], vmin=vmin, vmax=vmax)),
        (pred, "prediction", dict(cmap=cmaps["viridis"], vmin=vmin, vmax=vmax)),
        (err, "prediction - truth", dict(cmap=cmaps["RdBu_r"], vmin=-emax, vmax=emax)),
    ]
    for c, (data, name, kw) in enumerate(panels):
        ax = axes[c]
        im = ax.pcolormesh(lon, lat, data, shading="nearest", **kw)
        ax.set_title(f"{title[0]}, {name}, lead {title[1]}", fontsize=9)
        ax.set_xlim(0, 360)
        ax.set_ylim(-90, 90)
        ax.set_xticks([0, 90, 180, 270, 360])
        ax.set_yticks([-90, -45, 0, 45, 90])
        if c == 0:
            ax.set_ylabel("latitude [°N]")
        if last:
            ax.set_xlabel("longitude [°E]")
        fig.colorbar(im, ax=ax, shrink=0.9, label=f"{var} [{units}]" if units else var)


def plot_maps(
    sample, path, variables=None, leads=(1, 5, 20), trajectory: int = 0, init: int = 0, level: float = 500.0
) -> Path:
    """Maps of truth, prediction and error at chosen leads, one row per (variable, lead).

    The figure title names the model, the dataset and split, the trajectory id and the initial time
    (since the trajectory start); every lead is given in one unit (hours up to 3 days, else days).

    Parameters
    ----------
    sample : xarray.Dataset or path
        An exported forecast holding ``<var>`` and ``<var>_truth`` (``include_truth``), dims
        ``([trajectory,] init_time, lead_time, lat, lon)``.
    path : output PNG path.
    variables : list of variable names (default all with a ``_truth`` partner).
    leads : lead steps (1-based) to show; steps beyond the forecast are skipped.
    trajectory, init : which forecast of the file to show (index).
    level : for variables with a ``level`` axis (hPa), the map shows the level nearest to this one.

    A masked dataset's file (with ``land_mask``, 1 = wet) shows land in grey in every panel.

    Returns
    -------
    Path of the PNG.

    Raises
    ------
    ValueError
        If the file holds no ``<var>_truth`` variables.
    """
    plt = pyplot()
    ds = xr.open_dataset(sample) if not isinstance(sample, xr.Dataset) else sample
    if variables is None:
        variables = [v for v in ds.data_vars if not v.endswith("_truth") and f"{v}_truth" in ds]
    if not variables:
        raise ValueError("the forecast file has no '<var>_truth' variables: export it with include_truth=true")
    sel = {"init_time": init}
    tid = None
    if "trajectory" in ds.dims:
        sel["trajectory"] = trajectory
        tid = int(ds.trajectory.values[trajectory])
    n_lead = ds.sizes["lead_time"]
    leads = [k for k in leads if 1 <= k <= n_lead] or [1]
    lead_text, init_text = _time_texts(ds, leads, init)
    rows = [(v, k) for v in variables for k in leads]
    height = 2.7 * len(rows) + 1.0
    fig, axes = plt.subplots(len(rows), 3, figsize=(14, height), squeeze=False)
    fig.subplots_adjust(left=0.06, right=0.98, bottom=0.5 / height, top=1 - 0.85 / height, hspace=0.45, wspace=0.18)
    fig.suptitle(_maps_title(ds.attrs, tid, init_text), fontsize=11, y=1 - 0.2 / height, va="top")
    land = None if "land_mask" not in ds.variables else ds.land_mask.values == 0
    cmaps = {
        name: plt.get_cmap(name) if land is None else plt.get_cmap(name).with_extremes(bad=LAND_GREY)
        for name in ("viridis", "RdBu_r")
    }
    for r, (var, k) in enumerate(rows):
        lsel, ltag = _level_sel(ds, var, level)
        _map_row(fig, axes[r], ds, var, k, {**sel, **lsel}, (var + ltag, lead_text[k]), land, cmaps, r == len(rows) - 1)
    return save_figure(fig, path)


def _load_metrics(m):
    if isinstance(m, dict):
        return m
    p = Path(m)
    if p.is_dir():
        p = p / "metrics.json"
    if not p.exists():
        raise FileNotFoundError(
            f"{p} not found: run dandelion-rollout first (it writes metrics.json in its output folder)"
        )
    return json.loads(p.read_text())


def _lead_axis(res: dict, n: int, unit=None) -> tuple[np.ndarray, str]:
    """Lead times of a rollout's curves and the x-axis label (hours or days, non-dimensional, or steps)."""
    hours = res.get("lead_time_hours")
    if hours:
        unit = unit or _lead_unit(max(hours[:n]))
        return np.asarray(hours[:n], dtype=float) / unit[1], f"lead time [{unit[0]}]"
    if res.get("time_units") == "nondimensional" and res.get("lead_time"):
        return np.asarray(res["lead_time"][:n], dtype=float), "lead time (non-dimensional)"
    return np.arange(1, n + 1, dtype=float), "lead step"


def _is_vector(res: dict, var: str) -> bool:
    """Whether a scored variable is a vector field's frame-independent error (named after the field; such
    variables have units but no per-component metrics such as ACC)."""
    return (
        var != "mean"
        and var in res.get("units", {})
        and "acc" in res.get("metrics", {})
        and var not in res["metrics"]["acc"]
    )


def _shared_legend(fig, axes):
    """One legend for the whole figure, centred under the title (the panels share their lines)."""
    handles, labels = [], []
    for ax in axes.flat:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            if lab not in labels:
                handles.append(h)
                labels.append(lab)
    if handles:
        fig.legend(
            handles,
            labels,
            loc="upper center",
            bbox_to_anchor=(0.5, 1 - 0.5 / fig.get_figheight()),
            ncol=min(len(labels), 4),
            fontsize=9,
            frameon=False,
        )


def _forecast_suptitle(fig, title: str, n) -> None:
    """Figure title ``title``, followed by ", mean over n forecast(s)" when the count ``n`` is known."""
    fig.suptitle(
        title + (f", mean over {n} forecast{'s' if n != 1 else ''}" if n else ""),
        fontsize=11,
        y=1 - 0.15 / fig.get_figheight(),
        va="top",
    )


def plot_error_vs_lead(results: dict, path, metric: str = "vrmse", variables=None) -> Path:
    """Error versus lead time, one panel per variable, one line per model, one legend for all panels.

    Errors (RMSE, VRMSE) are drawn on a logarithmic y axis (they grow by orders of magnitude over a
    rollout, and curves of 0.004 and 0.1 stay apart); ACC on an auto-scaled linear axis. The y label
    says which error (area-weighted or the Well's unweighted VRMSE, :data:`METRIC_LABELS`); the
    title names the dataset, split and number of forecasts.

    Parameters
    ----------
    results : dict model label -> metrics dict (``metrics.json`` content) or its path/folder.
    path : output PNG path.
    metric : a metric of the rollout's ``metrics.json`` (a name registered in :data:`dandelion.metrics.METRICS`).
    variables : variables to show (default: those of the first model).

    Raises
    ------
    ValueError
        If ``metric`` is not in the first model's metrics (the message lists those they hold).
    """
    plt = pyplot()
    results = {k: _load_metrics(v) for k, v in results.items()}
    first = next(iter(results.values()))
    if metric not in first["metrics"]:
        raise ValueError(
            f"metric {metric!r} not in the rollout metrics {sorted(first['metrics'])}: "
            f"use metric={' or '.join(sorted(first['metrics']))}"
        )
    variables = variables or list(first["metrics"][metric])
    spec = METRICS.get(metric)  # None for a metric of an older metrics.json that is no longer registered
    fig, axes = _panel_grid(plt, len(variables), top_in=0.8)
    hours = first.get("lead_time_hours")
    unit = _lead_unit(max(hours)) if hours else None
    label = METRIC_LABELS.get(metric) or ((spec.title or spec.label) if spec is not None else metric)
    log = metric != "acc"
    for ax, var in zip(axes.flat, variables):
        top = 0.0
        for i, (model, res) in enumerate(results.items()):
            vals = res["metrics"][metric].get(var)
            if vals is None:
                continue
            vals = np.asarray(vals, dtype=float)
            x, xlabel = _lead_axis(res, len(vals), unit)
            ax.plot(x, vals, marker="o", ms=3, color=f"C{i}", label=model)
            top = max(top, float(np.nanmax(vals)) if vals.size else 0.0)
            log = log and bool(np.all(vals[np.isfinite(vals)] > 0))
        units = first.get("units", {}).get(var, "") if spec is not None and spec.units else ""
        ax.set_title(
            {"mean": "mean over the variables (fields and components)"}.get(
                var, f"{var} (vector error)" if _is_vector(first, var) else var
            ),
            fontsize=10,
        )
        ax.set_xlabel(xlabel)
        ax.set_ylabel(label + (f" [{units}]" if units else ""), fontsize=9)
        ref = spec.reference if spec is not None else None
        if ref is not None and top > 0.3 * ref:  # only when the curves come near it
            ax.axhline(
                ref,
                color="0.5",
                lw=0.8,
                ls="--",
                label=f"{spec.label} = {ref:g}"
                + (" (error of forecasting the spatial mean)" if metric in ("vrmse", "vrmse_well") else ""),
            )
        ax.grid(alpha=0.35, which="major")
        ax.grid(alpha=0.1, which="minor")
    if log:
        for ax in axes.flat[: len(variables)]:
            ax.set_yscale("log")
            plain_log_ticks(ax)
    _shared_legend(fig, axes)
    title = f"{label} vs lead time: {first.get('dataset', '')} {first.get('split', '')} split"
    _forecast_suptitle(fig, title, first.get("n_forecasts"))
    return save_figure(fig, path)


def plot_spectra(result, path, variables=None) -> Path:
    """Angular power spectra of truth (solid) and prediction (dashed) at the rollout's spectrum leads.

    ``P(l)`` per spherical-harmonic degree, in squared units of the field
    (:func:`dandelion.metrics.power_spectrum`: ``sum_l P(l)`` = the area-weighted mean of
    the squared field), averaged over the forecasts; one colour per lead, one legend for all panels.

    Parameters
    ----------
    result : metrics dict (``metrics.json``) or its path/folder, with a ``spectra`` entry.
    path : output PNG path.

    Raises
    ------
    ValueError
        If the metrics hold no spectra.
    """
    plt = pyplot()
    res = _load_metrics(result)
    spec = res.get("spectra")
    if not spec:
        raise ValueError("the rollout metrics hold no spectra: run dandelion-rollout with spectra_leads set")
    variables = variables or list(spec["true"])
    fig, axes = _panel_grid(plt, len(variables), top_in=0.8)
    hours = res.get("lead_time_hours")
    steps = [int(k) for k in spec["leads"]]
    if hours:
        unit, per = _lead_unit(max(hours[k - 1] for k in steps if k <= len(hours)))
        lead_text = [("+" + _fmt(hours[k - 1] / per, unit)) if k <= len(hours) else f"step {k}" for k in steps]
    else:
        lead_text = [f"step {k}" for k in steps]
    for ax, var in zip(axes.flat, variables):
        top = max(float(np.max(spec[w][var][i][1:] or [1.0])) for i in range(len(steps)) for w in ("true", "pred"))
        floor = min(float(np.max(spec["true"][var][i][1:] or [1.0])) for i in range(len(steps))) * 1e-10
        for i in range(len(steps)):
            t = np.asarray(spec["true"][var][i])
            p = np.asarray(spec["pred"][var][i])
            deg = np.arange(len(t))
            ax.loglog(deg[1:], np.maximum(t[1:], 1e-300), color=f"C{i}", ls="-")
            ax.loglog(deg[1:], np.maximum(p[1:], 1e-300), color=f"C{i}", ls="--")
        ax.set_ylim(max(floor, 1e-300), top * 3)
        n_deg = len(spec["true"][var][0])
        ax.set_xticks([t for t in (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000) if t < n_deg])
        ax.xaxis.set_major_formatter(ScalarFormatter())
        ax.xaxis.set_minor_formatter(plt.NullFormatter())
        ax.set_title(var, fontsize=10)
        ax.set_xlabel("spherical-harmonic degree l")
        ax.set_ylabel(f"P(l) [{_squared_units(res.get('units', {}).get(var, ''))}]", fontsize=9)
        ax.grid(alpha=0.3, which="both")
    handles = [Line2D([], [], color=f"C{i}", label=f"lead {text}") for i, text in enumerate(lead_text)]
    handles += [
        Line2D([], [], color="0.3", ls="-", label="truth"),
        Line2D([], [], color="0.3", ls="--", label="prediction"),
    ]
    fig.legend(
        handles=handles,
        loc="upper center",
        bbox_to_anchor=(0.5, 1 - 0.5 / fig.get_figheight()),
        ncol=min(len(handles), 5),
        fontsize=9,
        frameon=False,
    )
    _forecast_suptitle(
        fig,
        f"Angular power spectra: {res.get('model', '')} on {res.get('dataset', '')} {res.get('split', '')} split",
        res.get("n_forecasts"),
    )
    return save_figure(fig, path)
