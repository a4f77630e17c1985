"""Metrics on the sphere and the training loss: one definition used by training, rollout evaluation and reports.

A metric is written once, as a function registered with :func:`metric`; the registry
(:data:`METRICS`) is what :func:`field_metrics` computes, what the rollout job writes
(``metrics.json``, ``metrics.csv``), what a benchmark cell keeps, what the leaderboard tabulates and
what its error-versus-lead plot draws. Adding one::

    from dandelion.metrics import metric

    @metric("max_error", mean=True, cell=True, title="Maximum absolute error")
    def max_error(pred, true, weights, climatology):
        return (pred - true).abs().amax((-2, -1))

The training loss (:func:`area_weighted_mse` with :func:`loss_weights`) lives here too.

Every function takes fields of shape ``(..., nlat, nlon)`` (row 0 northernmost, as :class:`dandelion.sphere.SphereGrid`) and
reduces over the two spatial dimensions, returning ``(...)``. Statistics are area-weighted with the
grid's quadrature weights (:attr:`dandelion.sphere.SphereGrid.weights`), except the Well's
unweighted VRMSE, kept so that our numbers compare with published tables.

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

Vector fields (trailing axis of 2 components ``(u, v)``, u east, v north) are scored two ways:
per component, as if ``u`` and ``v`` were scalar fields (what the Well's tables report), and by a
frame-independent *vector* error from the magnitude of the difference vector,
``sqrt(<|p - t|^2>)`` with ``|.|`` the Euclidean norm of ``(u, v)``; the vector VRMSE divides its
square by the summed component variances ``<|t - <t>|^2>`` (area-weighted). Component metrics
depend on the local frame (they jump through the poles); the vector metrics do not.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Callable

import torch
from torch_harmonics import RealSHT

from dandelion.sphere import SphereGrid

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


def area_weights(grid: SphereGrid, dtype: torch.dtype = torch.float64, device=None) -> torch.Tensor:
    """Quadrature weights of ``grid`` normalised to sum 1 over all ``nlat * nlon`` points.

    Returns
    -------
    torch.Tensor of shape (nlat, 1)
        ``grid.weights / (4 pi)``; multiply by a field of shape ``(..., nlat, nlon)`` and sum over the
        last two dimensions for the area-weighted mean.
    """
    return (grid.weights / (4.0 * math.pi)).to(dtype=dtype, device=device)


def _as_weights(weights, like: torch.Tensor) -> torch.Tensor:
    if isinstance(weights, SphereGrid):
        weights = weights.weights
    w = torch.as_tensor(weights).to(dtype=like.dtype, device=like.device)
    if w.ndim == 1:
        w = w[:, None]
    if w.ndim != 2 or w.shape[0] != like.shape[-2] or w.shape[1] not in (1, like.shape[-1]):
        raise ValueError(
            f"weights of shape {tuple(w.shape)} do not fit fields of shape {tuple(like.shape)}: "
            "pass the grid's quadrature weights of shape (nlat, 1) (SphereGrid.weights) or the SphereGrid itself"
        )
    if not torch.isfinite(w).all() or (w < 0).any():
        raise ValueError("weights must be finite and non-negative: pass SphereGrid.weights")
    w = w.expand(like.shape[-2], like.shape[-1])
    return w / w.sum()


def weighted_mean(f: torch.Tensor, weights) -> torch.Tensor:
    """Area-weighted mean over ``(nlat, nlon)``.

    Parameters
    ----------
    f : torch.Tensor of shape (..., nlat, nlon)
    weights : SphereGrid or torch.Tensor of shape (nlat, 1), (nlat,) or (nlat, nlon)
        Quadrature weights (any positive scale; they are normalised to sum 1).

    Returns
    -------
    torch.Tensor of shape (...)
    """
    w = _as_weights(weights, f)
    return (f * w).sum((-2, -1))


def _check_pair(pred: torch.Tensor, true: torch.Tensor) -> None:
    if pred.shape != true.shape:
        raise ValueError(f"prediction of shape {tuple(pred.shape)} and truth of shape {tuple(true.shape)} differ: pass fields of the same shape")


def area_weighted_rmse(pred: torch.Tensor, true: torch.Tensor, weights) -> torch.Tensor:
    """Area-weighted root-mean-square error ``sqrt(<(pred - true)^2>)`` over the sphere.

    Parameters
    ----------
    pred, true : torch.Tensor of shape (..., nlat, nlon)
        In physical units.
    weights : SphereGrid or quadrature weights of shape (nlat, 1)

    Returns
    -------
    torch.Tensor of shape (...), in the units of the fields.

    Raises
    ------
    ValueError
        If shapes differ or the weights do not fit the grid.
    """
    _check_pair(pred, true)
    return torch.sqrt(weighted_mean((pred - true) ** 2, weights))


def vrmse(pred: torch.Tensor, true: torch.Tensor, weights=None, eps: float = WELL_EPS) -> torch.Tensor:
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

    Returns
    -------
    torch.Tensor of shape (...), dimensionless.
    """
    _check_pair(pred, true)
    if weights is None:
        mse = ((pred - true) ** 2).mean((-2, -1))
        var = torch.std(true.flatten(-2), dim=-1) ** 2
    else:
        mse = weighted_mean((pred - true) ** 2, weights)
        mean = weighted_mean(true, weights)
        var = weighted_mean((true - mean[..., None, None]) ** 2, weights)
    return torch.sqrt(mse / (var + eps))


def acc(pred: torch.Tensor, true: torch.Tensor, climatology, weights) -> torch.Tensor:
    """Area-weighted (uncentred) anomaly correlation coefficient.

    ``<(p - c)(t - c)> / sqrt(<(p - c)^2> <(t - c)^2>)`` (as in WeatherBench 2, Rasp et al. 2024).

    Parameters
    ----------
    pred, true : torch.Tensor of shape (..., nlat, nlon)
    climatology : float or torch.Tensor broadcastable to (..., nlat, nlon)
        The reference state ``c`` (e.g. the train-split mean of the field, stats.yaml).
    weights : SphereGrid or quadrature weights of shape (nlat, 1)

    Returns
    -------
    torch.Tensor of shape (...) in [-1, 1]; NaN where an anomaly is identically zero.
    """
    _check_pair(pred, true)
    c = torch.as_tensor(climatology, dtype=true.dtype, device=true.device)
    pa, ta = pred - c, true - c
    num = weighted_mean(pa * ta, weights)
    den = torch.sqrt(weighted_mean(pa**2, weights) * weighted_mean(ta**2, weights))
    return num / den


@lru_cache(maxsize=16)
def _sht(nlat: int, nlon: int, grid: str, lmax: int, mmax: int, device: str):
    return RealSHT(nlat, nlon, lmax=lmax, mmax=mmax, grid=grid, norm="ortho").to(torch.device(device))


def power_spectrum(field: torch.Tensor, grid: SphereGrid, lmax: int | None = None, mmax: int | None = None) -> torch.Tensor:
    """Angular power spectrum per spherical-harmonic degree.

    Uses torch-harmonics ``RealSHT`` (orthonormal harmonics, ``lmax`` and ``mmax`` passed
    explicitly). ``P(l) = (|f_l0|^2 + 2 sum_{m=1}^{l} |f_lm|^2) / (4 pi)``, so that
    ``sum_l P(l)`` equals the area-weighted mean of ``f^2`` for a field band-limited to ``lmax``.

    Parameters
    ----------
    field : torch.Tensor of shape (..., nlat, nlon)
        Real field on ``grid`` (computed in float64).
    grid : SphereGrid
    lmax, mmax : int, optional
        Number of degrees / orders kept (exclusive bounds); default the grid's exact analysis band
        limit ``grid.lmax`` for both.

    Returns
    -------
    torch.Tensor of shape (..., lmax), float64, in squared units of the field.
    """
    grid.check_shape(field)
    lmax = grid.lmax if lmax is None else int(lmax)
    mmax = lmax if mmax is None else int(mmax)
    if not (1 <= mmax <= lmax <= grid.lmax):
        raise ValueError(f"need 1 <= mmax={mmax} <= lmax={lmax} <= grid.lmax={grid.lmax} for a {grid.nlat}x{grid.nlon} {grid.grid} grid")
    sht = _sht(grid.nlat, grid.nlon, grid.grid, lmax, mmax, str(field.device))
    coeffs = sht(field.to(torch.float64))  # (..., lmax, mmax) complex
    power = coeffs.abs() ** 2
    power[..., 1:] *= 2.0
    return power.sum(-1) / (4.0 * math.pi)


def vector_rmse(pred: torch.Tensor, true: torch.Tensor, weights) -> torch.Tensor:
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
    return torch.sqrt(weighted_mean(((pred - true) ** 2).sum(-1), weights))


def vector_vrmse(pred: torch.Tensor, true: torch.Tensor, weights, eps: float = WELL_EPS) -> torch.Tensor:
    """Vector VRMSE: ``sqrt(<|pred - true|^2> / (<|true - <true>|^2> + eps))`` (area-weighted).

    The denominator is the sum of the area-weighted variances of the u and v components.

    Parameters
    ----------
    pred, true : torch.Tensor of shape (..., nlat, nlon, 2)
    weights : SphereGrid or quadrature weights of shape (nlat, 1)

    Returns
    -------
    torch.Tensor of shape (...), dimensionless.
    """
    _check_pair(pred, true)
    p, t = pred.movedim(-1, -3), true.movedim(-1, -3)  # (..., 2, nlat, nlon)
    mse = weighted_mean(((p - t) ** 2).sum(-3), weights)
    mean = weighted_mean(t, weights)
    var = weighted_mean((t - mean[..., None, None]) ** 2, weights).sum(-1)
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


# ---------------------------------------------------------------------------------------------- training loss
def loss_weights(grid: SphereGrid) -> torch.Tensor:
    """Area quadrature weights of ``grid`` normalised to mean 1 over the grid points.

    Returns a float64 tensor of shape ``(nlat, 1)``; ``mean((a - b)**2 * w)`` over ``(nlat, nlon)``
    is then the area-weighted mean squared error (the integral over the sphere divided by 4*pi).
    """
    w = grid.weights
    return w / w.mean()


def area_weighted_mse(pred: torch.Tensor, true: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """The training loss: mean over everything of ``(pred - true)**2 * weights``.

    ``weights`` (nlat, 1) normalised to mean 1 (:func:`loss_weights`), so the result is the
    area-weighted mean squared error averaged over samples and channels; or (C, nlat, 1), the same
    times a per-channel factor (the trainer's ``1 / increment_scale**2`` for ``target=increment``:
    the error in units of the normalised increment).
    """
    return ((pred - true) ** 2 * weights).mean()


# ---------------------------------------------------------------------------------------------- registry
@dataclass(frozen=True)
class Metric:
    """A registered metric (see :func:`metric`).

    Attributes
    ----------
    name : key in ``metrics.json``, cells and the leaderboard.
    fn : ``fn(pred, true, weights, climatology) -> (...)`` on one scalar variable, fields
        ``(..., nlat, nlon)`` in physical units, ``weights`` the grid's quadrature weights (nlat, 1),
        ``climatology`` a float or broadcastable tensor (the ACC's reference; 0 when none).
    vector : optional ``vector(pred, true, weights) -> (...)`` on a vector field ``(..., nlat, nlon, 2)``,
        scored under the field's own name besides its components.
    mean : the rollout adds variable ``mean``, the average over scalar fields and vector components.
    cell : benchmark cells keep its next-step and rollout-mean summaries.
    curve : benchmark cells keep its per-lead curves, and the leaderboard's error-versus-lead plot draws it.
    title : the leaderboard's section heading of its table (a metric without one gets no table);
        a table needs ``mean`` and ``cell``. Lower is better (the best entry is set in bold).
    label : short name for plot legends.
    units : the values are in the field's physical units (plots put the units in the panel title).
    reference : a value the error-versus-lead plots mark with a dashed line (1 for the VRMSEs: an
        error as large as the truth's spread), or None.
    """

    name: str
    fn: Callable
    vector: Callable | None = None
    mean: bool = False
    cell: bool = False
    curve: bool = False
    title: str | None = None
    label: str = ""
    units: bool = False
    reference: float | None = None


#: The registered metrics, in registration order (the order of ``metrics.json``).
METRICS: dict[str, Metric] = {}


def metric(name: str, *, vector: Callable | None = None, mean: bool = False, cell: bool = False, curve: bool = False,
           title: str | None = None, label: str | None = None, units: bool = False, reference: float | None = None):
    """Decorator registering ``fn(pred, true, weights, climatology) -> (...)`` as metric ``name`` (:class:`Metric`).

    Raises
    ------
    ValueError
        If ``name`` is already registered (call :func:`unregister_metric` first to replace it), or it
        has a ``title`` without ``mean`` and ``cell`` (the leaderboard tabulates the mean over variables of cells).
    """
    if name in METRICS:
        raise ValueError(f"metric {name!r} is already registered: choose another name or unregister_metric({name!r}) first")
    if title is not None and not (mean and cell):
        raise ValueError(f"metric {name!r} has a leaderboard title but mean={mean}, cell={cell}: a table needs mean=True and cell=True")

    def register(fn: Callable) -> Callable:
        METRICS[name] = Metric(name, fn, vector, bool(mean), bool(cell), bool(curve), title, label or name, bool(units),
                               None if reference is None else float(reference))
        return fn

    return register


def unregister_metric(name: str) -> None:
    """Remove metric ``name`` from the registry (no error if it is absent)."""
    METRICS.pop(name, None)


def metric_names(*, mean: bool | None = None, cell: bool | None = None, curve: bool | None = None, table: bool | None = None) -> list[str]:
    """Names of the registered metrics with the given flags (None: either), in registration order;
    ``table`` = has a leaderboard title."""
    def keep(m: Metric) -> bool:
        return all(want is None or have == want for want, have in
                   ((mean, m.mean), (cell, m.cell), (curve, m.curve), (table, m.title is not None)))

    return [n for n, m in METRICS.items() if keep(m)]


@metric("rmse", vector=vector_rmse, cell=True, label="RMSE", units=True)
def _rmse(pred, true, weights, climatology):
    return area_weighted_rmse(pred, true, weights)


@metric("vrmse", vector=vector_vrmse, mean=True, cell=True, curve=True, title="VRMSE, area-weighted (quadrature weights)", label="VRMSE",
        reference=1.0)
def _vrmse(pred, true, weights, climatology):
    return vrmse(pred, true, weights)


@metric("vrmse_well", mean=True, cell=True, curve=True, title="VRMSE, unweighted (the Well's definition)", label="VRMSE (Well)",
        reference=1.0)
def _vrmse_well(pred, true, weights, climatology):
    return vrmse(pred, true, None)


@metric("acc", label="ACC")
def _acc(pred, true, weights, climatology):
    return acc(pred, true, climatology, weights)


# ---------------------------------------------------------------------------------------------- all of them
def field_metrics(pred: dict, true: dict, grid: SphereGrid, climatology: dict | None = None, spectra: bool = False, lmax: int | None = None) -> dict:
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
                    out[m.name][name] = m.vector(p, t, w)
        else:
            raise ValueError(f"field {name!r} of shape {tuple(p.shape)} is neither (..., {grid.nlat}, {grid.nlon}) nor (..., {grid.nlat}, {grid.nlon}, 2)")
        for var, (pp, tt, cc) in parts.items():
            for m in metrics:
                out[m.name][var] = m.fn(pp, tt, w, cc)
            if spectra:
                out["spectrum_pred"][var] = power_spectrum(pp, grid, lmax)
                out["spectrum_true"][var] = power_spectrum(tt, grid, lmax)
    return out
