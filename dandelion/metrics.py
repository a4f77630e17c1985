"""Metrics on the sphere and the training loss: one definition used by training, rollout evaluation and reports.

A metric is written once, as a function registered with :func:`metric`; the registry
(:data:`METRICS`) is what :func:`field_metrics` computes, what the rollout job writes
(``metrics.json``, ``metrics.csv``), what a benchmark cell keeps, what the leaderboard tabulates and
what its error-versus-lead plot draws. Adding one::

    from dandelion.metrics import metric

    @metric("max_error", mean=True, cell=True, title="Maximum absolute error")
    def max_error(pred, true, weights, climatology):
        return (pred - true).abs().amax((-2, -1))

The training loss (:func:`area_weighted_mse` with :func:`loss_weights`, module :mod:`dandelion.loss`), the
area weights and weighted means (:mod:`dandelion.quadrature`) and the power spectrum
(:mod:`dandelion.power_spectra`) are defined in their own modules and re-exported here.

Every function takes fields of shape ``(..., nlat, nlon)`` (row 0 northernmost, as
:class:`dandelion.sphere.SphereGrid`) and reduces over the two spatial dimensions, returning ``(...)``.
Statistics are area-weighted with the grid's quadrature weights (:attr:`dandelion.sphere.SphereGrid.weights`),
except the Well's unweighted VRMSE, kept so that our numbers compare with published tables.

Definitions (``w`` the quadrature weights normalised to sum 1 over the grid, ``<f> = sum(w f)``):

* area-weighted RMSE: ``sqrt(<(p - t)^2>)``;
* VRMSE, area-weighted: ``sqrt(<(p - t)^2> / (<(t - <t>)^2> + eps))``;
* VRMSE, the Well's (unweighted): ``sqrt(mean((p - t)^2) / (var(t) + eps))`` with the plain mean
  over grid points, ``var`` the *unbiased* sample variance (``torch.std(t) ** 2``, Bessel
  correction N - 1) and ``eps = 1e-7`` added to the variance, exactly as
  ``the_well/benchmark/metrics/spatial.py`` (PolymathicAI/the_well: ``VRMSE`` = ``NRMSE`` with
  ``norm_mode="std"``) computes it per field, time step and sample. Ohana et al. (2024), "The Well",
  NeurIPS Datasets and Benchmarks track (VRMSE);
* anomaly correlation (uncentred, as in WeatherBench 2, Rasp et al. 2024):
  ``<(p - c)(t - c)> / sqrt(<(p - c)^2> <(t - c)^2>)`` against a climatology ``c``;
* angular power spectrum per degree ``l`` from the orthonormal real SHT:
  ``P(l) = (|f_l0|^2 + 2 sum_{m>=1} |f_lm|^2) / (4 pi)``, so ``sum_l P(l) = <f^2>`` (Parseval) for a
  field band-limited to the grid's analysis band limit.

Masked (ocean) datasets: every function takes an optional ``wet`` mask (bool, ``(nlat, nlon)``, True on
ocean). Then ``w`` is the quadrature weight times the mask, normalised to sum 1 over the wet points, so
every mean, variance and error above is over wet points only, and values on land (NaN included) are
never read (they are replaced by 0 before any product). The Well's VRMSE becomes the plain mean and
unbiased variance over the wet points. The power spectrum is not defined on a masked domain; it is
taken of the field with land filled by the field's wet-area mean (zero anomaly on land), which keeps
the wet variance and adds no land signal (the coastline still leaks power into high degrees).

Vector fields (trailing axis of 2 components ``(u, v)``, u east, v north) are scored two ways:
per component, as if ``u`` and ``v`` were scalar fields (what the Well's tables report), and by a
frame-independent *vector* error from the magnitude of the difference vector,
``sqrt(<|p - t|^2>)`` with ``|.|`` the Euclidean norm of ``(u, v)``; the vector VRMSE divides its
square by the summed component variances ``<|t - <t>|^2>`` (area-weighted). Component metrics
depend on the local frame (they jump through the poles); the vector metrics do not.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable

import torch

from dandelion.sphere import SphereGrid

from .loss import area_weighted_mse, loss_weights
from .metric_registry import METRICS, Metric, metric, metric_names, unregister_metric
from .power_spectra import power_spectrum
from .quadrature import _check_wet, area_weights, weighted_mean

__all__ = [
    "WELL_EPS",
    "area_weights",
    "weighted_mean",
    "area_weighted_rmse",
    "vrmse",
    "acc",
    "power_spectrum",
    "vector_rmse",
    "vector_vrmse",
    "variable_names",
    "field_metrics",
    "Metric",
    "METRICS",
    "metric",
    "unregister_metric",
    "metric_names",
    "loss_weights",
    "area_weighted_mse",
]

#: The Well's epsilon added to the variance in VRMSE (``eps=1e-7`` in the_well's NMSE).
WELL_EPS = 1e-7


def _check_pair(pred: torch.Tensor, true: torch.Tensor) -> None:
    if pred.shape != true.shape:
        raise ValueError(
            f"prediction of shape {tuple(pred.shape)} and truth of shape {tuple(true.shape)} differ: "
            "pass fields of the same shape"
        )


def area_weighted_rmse(pred: torch.Tensor, true: torch.Tensor, weights, wet=None) -> torch.Tensor:
    """Area-weighted root-mean-square error ``sqrt(<(pred - true)^2>)`` over the sphere.

    Parameters
    ----------
    pred, true : torch.Tensor of shape (..., nlat, nlon)
        In physical units.
    weights : SphereGrid or quadrature weights of shape (nlat, 1)
    wet : bool tensor (nlat, nlon), optional; the mean is over wet points.

    Returns
    -------
    torch.Tensor of shape (...), in the units of the fields.

    Raises
    ------
    ValueError
        If shapes differ or the weights do not fit the grid.
    """
    _check_pair(pred, true)
    return torch.sqrt(weighted_mean((pred - true) ** 2, weights, wet))


def vrmse(pred: torch.Tensor, true: torch.Tensor, weights=None, eps: float = WELL_EPS, wet=None) -> torch.Tensor:
    """Variance-scaled RMSE per field, time step and sample.

    ``weights=None`` gives the Well's definition (``the_well/benchmark/metrics/spatial.py``,
    ``VRMSE``): ``sqrt(mean((pred - true)^2) / (var(true) + eps))`` with a plain mean over the
    grid points and the unbiased variance (``torch.std(true) ** 2``, divisor N - 1). With weights it
    is the area-weighted analogue ``sqrt(<(pred - true)^2> / (<(true - <true>)^2> + eps))``: 1 for a
    prediction equal to the truth's own area-weighted mean.

    Parameters
    ----------
    pred, true : torch.Tensor of shape (..., nlat, nlon)
    weights : None, SphereGrid, or quadrature weights of shape (nlat, 1)
    eps : float
        Added to the variance (the Well's ``1e-7``, in the squared units of the field).
    wet : bool tensor (nlat, nlon), optional
        Ocean mask: means and variance over wet points (unweighted: ``N`` the number of wet points).

    Returns
    -------
    torch.Tensor of shape (...), dimensionless.
    """
    _check_pair(pred, true)
    if weights is None and wet is not None:
        wet = _check_wet(wet, true)
        zero = torch.zeros((), dtype=true.dtype, device=true.device)
        n = wet.sum()
        mse = torch.where(wet, (pred - true) ** 2, zero).sum((-2, -1)) / n
        mean = torch.where(wet, true, zero).sum((-2, -1)) / n
        var = torch.where(wet, (true - mean[..., None, None]) ** 2, zero).sum((-2, -1)) / (n - 1)
    elif weights is None:
        mse = ((pred - true) ** 2).mean((-2, -1))
        var = torch.std(true.flatten(-2), dim=-1) ** 2
    else:
        mse = weighted_mean((pred - true) ** 2, weights, wet)
        mean = weighted_mean(true, weights, wet)
        var = weighted_mean((true - mean[..., None, None]) ** 2, weights, wet)
    return torch.sqrt(mse / (var + eps))


def acc(pred: torch.Tensor, true: torch.Tensor, climatology, weights, wet=None) -> torch.Tensor:
    """Area-weighted (uncentred) anomaly correlation coefficient.

    ``<(p - c)(t - c)> / sqrt(<(p - c)^2> <(t - c)^2>)`` (as in WeatherBench 2, Rasp et al. 2024).

    Parameters
    ----------
    pred, true : torch.Tensor of shape (..., nlat, nlon)
    climatology : float or torch.Tensor broadcastable to (..., nlat, nlon)
        The reference state ``c`` (e.g. the train-split mean of the field, stats.yaml).
    weights : SphereGrid or quadrature weights of shape (nlat, 1)
    wet : bool tensor (nlat, nlon), optional; the means are over wet points.

    Returns
    -------
    torch.Tensor of shape (...) in [-1, 1]; NaN where an anomaly is identically zero.
    """
    _check_pair(pred, true)
    c = torch.as_tensor(climatology, dtype=true.dtype, device=true.device)
    pa, ta = pred - c, true - c
    num = weighted_mean(pa * ta, weights, wet)
    den = torch.sqrt(weighted_mean(pa**2, weights, wet) * weighted_mean(ta**2, weights, wet))
    return num / den


def vector_rmse(pred: torch.Tensor, true: torch.Tensor, weights, wet=None) -> torch.Tensor:
    """Area-weighted RMS magnitude of the vector error, ``sqrt(<|pred - true|^2>)``.

    Parameters
    ----------
    pred, true : torch.Tensor of shape (..., nlat, nlon, 2)
        Tangent vectors as (u east, v north) components.
    weights : SphereGrid or quadrature weights of shape (nlat, 1)

    Returns
    -------
    torch.Tensor of shape (...), in the units of the field. Independent of the local frame.
    """
    _check_pair(pred, true)
    return torch.sqrt(weighted_mean(((pred - true) ** 2).sum(-1), weights, wet))


def vector_vrmse(pred: torch.Tensor, true: torch.Tensor, weights, eps: float = WELL_EPS, wet=None) -> torch.Tensor:
    """Vector VRMSE: ``sqrt(<|pred - true|^2> / (<|true - <true>|^2> + eps))`` (area-weighted).

    The denominator is the sum of the area-weighted variances of the u and v components.

    Parameters
    ----------
    pred, true : torch.Tensor of shape (..., nlat, nlon, 2)
    weights : SphereGrid or quadrature weights of shape (nlat, 1)
    wet : bool tensor (nlat, nlon), optional; over wet points.

    Returns
    -------
    torch.Tensor of shape (...), dimensionless.
    """
    _check_pair(pred, true)
    p, t = pred.movedim(-1, -3), true.movedim(-1, -3)  # (..., 2, nlat, nlon)
    mse = weighted_mean(((p - t) ** 2).sum(-3), weights, wet)
    mean = weighted_mean(t, weights, wet)
    var = weighted_mean((t - mean[..., None, None]) ** 2, weights, wet).sum(-1)
    return torch.sqrt(mse / (var + eps))


def variable_names(name: str, kind: str, components=("u", "v")) -> list[str]:
    """Names of the scored / exported variables of one field.

    A scalar field keeps its name. A vector field gives one variable per component: the bare component
    names (``u``, ``v``) for a field called ``velocity`` and ``<name>_<component>`` otherwise
    (``momentum_u``); its frame-independent vector metrics use the field's own name.
    """
    if kind == "scalar":
        return [name]
    if kind != "vector":
        raise ValueError(f"field {name!r} has kind {kind!r}: expected 'scalar' or 'vector'")
    return list(components) if name == "velocity" else [f"{name}_{c}" for c in components]


# ---------------------------------------------------------------------------------------------- registry
@metric("rmse", vector=vector_rmse, cell=True, label="RMSE", units=True)
def _rmse(pred, true, weights, climatology, wet=None):
    return area_weighted_rmse(pred, true, weights, wet)


@metric(
    "vrmse",
    vector=vector_vrmse,
    mean=True,
    cell=True,
    curve=True,
    title="VRMSE, area-weighted (quadrature weights)",
    label="VRMSE",
    reference=1.0,
)
def _vrmse(pred, true, weights, climatology, wet=None):
    return vrmse(pred, true, weights, wet=wet)


@metric(
    "vrmse_well",
    mean=True,
    cell=True,
    curve=True,
    title="VRMSE, unweighted (the Well's definition)",
    label="VRMSE (Well)",
    reference=1.0,
)
def _vrmse_well(pred, true, weights, climatology, wet=None):
    return vrmse(pred, true, None, wet=wet)


@metric("acc", label="ACC")
def _acc(pred, true, weights, climatology, wet=None):
    return acc(pred, true, climatology, weights, wet)


def _score(fn: Callable, pred, true, weights, *rest, wet=None):
    """``fn(pred, true, weights, *rest)``, over wet points when ``wet`` is given: passed as ``wet=`` to a metric
    that takes it, else folded into the weights (zero on land) for one that does not."""
    if wet is None:
        return fn(pred, true, weights, *rest)
    if "wet" in inspect.signature(fn).parameters:
        return fn(pred, true, weights, *rest, wet=wet)
    return fn(pred, true, weights * wet, *rest)


# ---------------------------------------------------------------------------------------------- all of them
def field_metrics(
    pred: dict,
    true: dict,
    grid: SphereGrid,
    climatology: dict | None = None,
    spectra: bool = False,
    lmax: int | None = None,
    wet=None,
) -> dict:
    """Every registered metric (:data:`METRICS`) for decoded fields.

    Parameters
    ----------
    pred, true : dict[str, torch.Tensor]
        Physical fields, scalars ``(..., nlat, nlon)`` and vectors ``(..., nlat, nlon, 2)``
        (as :meth:`dandelion.channels.ChannelLayout.decode` returns them).
    grid : SphereGrid
    climatology : dict[str, float or tensor], optional
        Reference state per field for the ACC (for a vector field: a ``(..., 2)``-broadcastable
        value or a scalar). Default 0 for every field (then ACC is the plain uncentred correlation).
    spectra : bool
        Also return power spectra of prediction and truth (``spectrum_pred``, ``spectrum_true``:
        ``(..., lmax)`` per scalar variable and component).
    lmax : int, optional
        Band limit of the spectra (default ``grid.lmax``).
    wet : bool tensor (nlat, nlon), optional
        Ocean mask of a masked dataset: every metric and spectrum over wet points (module docstring).

    Returns
    -------
    dict[str, dict[str, torch.Tensor]]
        ``{"rmse": {var: (...)}, "vrmse": ..., "vrmse_well": ..., "acc": ..., ...}`` where ``var`` is a
        scalar field, a vector component (see :func:`variable_names`) or, for metrics with a vector
        form (``rmse`` and ``vrmse``), a vector field's own name (the frame-independent vector error).
    """
    if set(pred) != set(true):
        raise ValueError(f"prediction fields {sorted(pred)} differ from truth fields {sorted(true)}")
    climatology = climatology or {}
    metrics = list(METRICS.values())
    out = {m.name: {} for m in metrics}
    if spectra:
        out["spectrum_pred"], out["spectrum_true"] = {}, {}
    w = grid.weights
    if wet is not None:
        wet = _check_wet(wet, w.expand(grid.shape))
        w = w.to(wet.device)
    for name in pred:
        p, t = pred[name].to(torch.float64), true[name].to(torch.float64)
        if p.shape != t.shape:
            raise ValueError(f"field {name!r}: prediction {tuple(p.shape)} and truth {tuple(t.shape)} differ")
        clim = climatology.get(name, 0.0)
        if p.shape[-2:] == grid.shape:
            parts = {name: (p, t, clim)}
        elif p.shape[-3:] == (*grid.shape, 2):
            clim_t = torch.as_tensor(clim, dtype=torch.float64, device=p.device)
            if clim_t.ndim and clim_t.shape[-1] == 2:
                clims = (clim_t[..., 0], clim_t[..., 1])
            else:
                clims = (clim_t, clim_t)
            names = variable_names(name, "vector")
            parts = {names[i]: (p[..., i], t[..., i], clims[i]) for i in range(2)}
            for m in metrics:
                if m.vector is not None:
                    out[m.name][name] = _score(m.vector, p, t, w, wet=wet)
        else:
            raise ValueError(
                f"field {name!r} of shape {tuple(p.shape)} is neither (..., {grid.nlat}, {grid.nlon}) "
                f"nor (..., {grid.nlat}, {grid.nlon}, 2)"
            )
        for var, (pp, tt, cc) in parts.items():
            for m in metrics:
                out[m.name][var] = _score(m.fn, pp, tt, w, cc, wet=wet)
            if spectra:
                out["spectrum_pred"][var] = power_spectrum(pp, grid, lmax, wet=wet)
                out["spectrum_true"][var] = power_spectrum(tt, grid, lmax, wet=wet)
    return out
