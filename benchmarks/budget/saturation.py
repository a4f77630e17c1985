"""How far a training budget is from a plateau: a saturating power law fitted to final loss against steps.

``dandelion-budget`` (:mod:`dandelion.benchmarks.budget.study`) retrains a benchmark cell at several multiples of its
step budget; the budget counts as flat where a doubling lowers the final validation loss by less than a tolerance. When
no measured doubling is that small, this module estimates where it would be, from the measured points, with the learning
curve in steps of Kaplan et al. 2020 ("Scaling laws for neural language models", arXiv:2001.08361, eq. 1.6 = eq. 5.6,
``L(N, S) = (N_c / N)^alpha_N + (S_c / S)^alpha_S``) at a fixed model size ``N``, which is a constant plus a power law
in steps (their ``S`` is a batch-adjusted step count; here the batch is fixed, so plain steps serve); Hestness et al.
2017 (arXiv:1712.00409) found the same form, with an irreducible floor, for error against training-set size::

    L(S) = c + b * (S / S_0) ** (-alpha),      c >= 0, b > 0, alpha > 0

(``S`` optimiser steps, ``S_0`` the smallest measured budget, ``c`` the loss floor, in the loss's units). A doubling
changes the loss by ``(L(2S) - L(S)) / L(S) = -b x (1 - 2^-alpha) / (c + b x)`` with ``x = (S / S_0)^-alpha``,
which is smaller than ``tol`` in magnitude from

    S_flat = S_0 * (b (1 - 2^-alpha - tol) / (tol c)) ** (1 / alpha)

on (``S_0`` when ``1 - 2^-alpha <= tol``; never, ``inf``, when ``c = 0``). The fit minimises the squared differences
of ``log L`` (relative errors) with ``0 <= c <= 0.999 min L``, ``1e-12 <= b <= 10 max L`` and ``0.02 <= alpha <= 4``.
It is an extrapolation, and with four or five points the floor is poorly pinned down: :func:`fit_saturation` also
reports the range of ``S_flat`` over the fits that leave one point out. With four points each of those fits passes
through its three points exactly, so the range is the spread of three-point interpolants, not a confidence interval.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.optimize import least_squares

__all__ = ["SaturationFit", "fit_saturation", "flat_budget", "saturating_power_law"]


def saturating_power_law(steps, c: float, b: float, alpha: float, s0: float):
    """``c + b * (steps / s0) ** -alpha`` (module docstring).

    ``steps`` and ``s0`` in optimiser steps (a number or an array; the result has its shape), ``c`` and ``b`` in the
    loss's units, ``alpha`` dimensionless.
    """
    return c + b * (np.asarray(steps, dtype=float) / s0) ** (-alpha)


def flat_budget(c: float, b: float, alpha: float, s0: float, tol: float) -> float:
    """The smallest budget (steps) from which a doubling changes :func:`saturating_power_law` by less than ``tol``
    (a fraction): ``s0`` if it already does at ``s0``, ``inf`` if it never does (``c = 0``). Formula in the module
    docstring.

    Raises
    ------
    ValueError
        If ``tol`` is not in (0, 1), or ``alpha``, ``b`` or ``s0`` is not positive.
    """
    if not 0 < tol < 1:
        raise ValueError(f"tol must be a fraction in (0, 1), got {tol}")
    if not (alpha > 0 and b > 0 and s0 > 0):
        raise ValueError(f"alpha, b and s0 must be positive, got alpha={alpha}, b={b}, s0={s0}")
    gain = 1.0 - 2.0 ** (-alpha)
    if gain <= tol:
        return float(s0)
    if c <= 0:
        return math.inf
    return float(s0 * max(1.0, (b * (gain - tol) / (tol * c)) ** (1.0 / alpha)))


@dataclass
class SaturationFit:
    """A fitted :func:`saturating_power_law`.

    Attributes
    ----------
    c, b, alpha : float
        The law's parameters (``c`` the loss floor and ``b`` in the loss's units).
    s0 : float
        The smallest fitted budget, in steps (the law's reference).
    max_rel_residual : float
        Largest ``|L_fit / L - 1|`` over the fitted points.
    flat_steps : float
        :func:`flat_budget` of the fit (``inf``: no floor found).
    loo_flat_steps : tuple[float, float] | None
        Smallest and largest ``flat_steps`` of the fits leaving one point out (None below 4 points).
    n_points : int
    at_bound : bool
        Whether ``alpha`` or ``c`` ended on a bound of the fit (other than ``c = 0``): the law does not describe the
        points well, and ``flat_steps`` should not be trusted.
    """

    c: float
    b: float
    alpha: float
    s0: float
    max_rel_residual: float
    flat_steps: float
    loo_flat_steps: tuple[float, float] | None
    n_points: int
    at_bound: bool = False


_ALPHA_BOUNDS = (0.02, 4.0)


def _fit(steps: np.ndarray, losses: np.ndarray):
    """Least-squares fit in ``log L`` (module docstring): ``(c, b, alpha, s0, worst relative misfit, at_bound)``."""
    s0 = float(steps.min())
    x = steps / s0
    lo = float(losses.min())

    def resid(p):
        c, b, alpha = p
        return np.log(c + b * x ** (-alpha)) - np.log(losses)

    c0 = 0.5 * lo
    p0 = [c0, max(float(losses[np.argmin(x)]) - c0, 1e-12), 0.5]
    c_max = 0.999 * lo
    res = least_squares(
        resid,
        p0,
        bounds=([0.0, 1e-12, _ALPHA_BOUNDS[0]], [c_max, 10.0 * float(losses.max()), _ALPHA_BOUNDS[1]]),
        x_scale="jac",
    )
    c, b, alpha = (float(v) for v in res.x)
    at_bound = any(math.isclose(alpha, a, rel_tol=1e-6) for a in _ALPHA_BOUNDS) or math.isclose(c, c_max, rel_tol=1e-6)
    return c, b, alpha, s0, float(np.max(np.abs(np.exp(resid(res.x)) - 1.0))), at_bound


def fit_saturation(steps, losses, tol: float) -> SaturationFit:
    """Fit :func:`saturating_power_law` to final losses at several budgets and estimate the flat budget.

    Parameters
    ----------
    steps : sequence of float
        Budgets in optimiser steps (at least 3 distinct, positive).
    losses : sequence of float
        Final validation losses at those budgets (positive, finite).
    tol : float
        Relative change per doubling below which the budget counts as flat (e.g. 0.05).

    Returns
    -------
    SaturationFit

    Raises
    ------
    ValueError
        Fewer than 3 distinct budgets, a non-positive or non-finite value, lengths that differ, or losses that do
        not fall from the smallest budget to the largest (no learning curve to fit).
    """
    s = np.asarray(steps, dtype=float)
    y = np.asarray(losses, dtype=float)
    if s.shape != y.shape or s.ndim != 1:
        raise ValueError(f"steps and losses must be 1-d of one length, got shapes {s.shape} and {y.shape}")
    if len(np.unique(s)) < 3:
        raise ValueError(f"a saturation fit needs at least 3 distinct budgets, got {sorted(set(s.tolist()))}")
    if not (np.all(np.isfinite(s)) and np.all(np.isfinite(y)) and np.all(s > 0) and np.all(y > 0)):
        raise ValueError("steps and losses must be positive and finite (leave diverged runs out)")
    if not y[np.argmax(s)] < y[np.argmin(s)]:
        raise ValueError(
            "the loss does not fall from the smallest budget to the largest "
            f"({y[np.argmin(s)]:.4g} -> {y[np.argmax(s)]:.4g}): "
            "a saturation fit needs a falling learning curve (a rise means an unstable rate for that budget)"
        )
    c, b, alpha, s0, worst, at_bound = _fit(s, y)
    loo = None
    if len(s) >= 4:
        flats = []
        for i in range(len(s)):
            keep = np.arange(len(s)) != i
            if len(np.unique(s[keep])) >= 3:
                ci, bi, ai, s0i, _, _ = _fit(s[keep], y[keep])
                flats.append(flat_budget(ci, bi, ai, s0i, tol))
        loo = (min(flats), max(flats)) if flats else None
    return SaturationFit(c, b, alpha, s0, worst, flat_budget(c, b, alpha, s0, tol), loo, len(s), at_bound)
