"""Cahn-Hilliard phase separation on a sphere of radius R (docs/datasets/cahn_hilliard.md, cahn_hilliard_sphere).

Equation (Cahn & Hilliard 1958, J. Chem. Phys. 28, 258; the card's form, non-dimensional)::

    d(phi)/dt = D lap(mu),   mu = a^2 f'(phi) - eps^2 lap(phi),   f(phi) = phi^2 (1 - phi)^2 / 2,

with ``D = a = 1``, so ``f'(phi) = phi (1 - phi) (1 - 2 phi)`` and ``f''(phi) = 6 phi^2 - 6 phi + 1``.
The mass ``integral phi dA`` is conserved and the free energy
``F = integral [a^2 f(phi) + eps^2 |grad phi|^2 / 2] dA`` never increases. Linear theory about a uniform
state ``m0`` (``k^2 = l(l+1)/R^2``): ``sigma(l) = -D k^2 (a^2 f''(m0) + eps^2 k^2)``; spinodal for
``0.211 < m0 < 0.789``; fastest rate ``a^4 f''(m0)^2 / (4 eps^2)``.

Radius: the nominal sphere radius ``R`` of the sweep (5, 7.5, 10). The reference FiPy runs used a
one-cell shell extruded by x1.1, effectively ``R ~ 1.05 R_nominal``; we simulate the physics
as stated, at the nominal radius.

Numerics
--------
* State: the spectrum of ``phi`` (orthonormal harmonics on the unit sphere; torch-harmonics layout),
  float64; batch = ensemble, every trajectory with its own ``eps`` and ``R``.
* The cubic term ``f'(phi)`` is evaluated on the 2x-padded Gauss grid of the shared
  :class:`~dandelion.solvers.spectral_core.SpectralCore` (``nlat = 2 lmax``, ``nlon >= 4 lmax``): the
  projection of a cubic of band-limited fields is then exact (no aliasing).
* Time stepping: linear stabilisation (Shen & Yang 2010, Discrete Contin. Dyn. Syst. 28, 1669) with
  the splitting of the card, integrated by the generic IMEX Runge-Kutta of
  :func:`dandelion.solvers.integrators.imex_runge_kutta`:

      implicit ``-D eps^2 lap^2 phi + D a^2 S lap(phi)``,  explicit ``D a^2 lap(f'(phi) - S phi)``.

  Default ``scheme="ars222"`` (Ascher-Ruuth-Spiteri (2,2,2): second order, L-stable, two evaluations
  of the cubic per step). ``scheme="imex_euler"`` is the first-order scheme (2.5) of Shen & Yang: with
  ``S >= max |f''| / 2`` over the values taken (``S = 2`` covers ``phi`` in [-0.37, 1.37]) its discrete
  free energy (Gauss quadrature of the padded grid -- the quadrature the analysis uses -- plus the
  exact gradient term) is non-increasing for any ``dt`` (their Thm 2.1), but the lagged stabiliser
  slows interface motion by a factor ~``1 + O(dt S)`` at the late, large steps. Convergence study
  (R = 5, eps = 0.5, m0 = 0.5, variance 0.01, lmax 64, 2 seeds; coarsening length L at t = 300):
  IMEX Euler on the schedule below 11.31, with dt <= 0.5 / 0.25 / 0.1: 12.38 / 12.64 / 12.81;
  ARS222 on the schedule 12.77 (615 steps), with dt <= 1: 12.85 -- so ARS222 on the reference schedule
  is within ~1% of the converged value at a fifth of the steps, and its free energy fell at every step
  (largest relative change -2.4e-6); the tests check that no step raises it by more than 1e-10.
  For both schemes the mean of ``phi`` (the ``l = 0`` coefficient, untouched by ``lap``) is constant to
  the last bit. :meth:`CahnHilliardSimulation.stabilisation_margin` reports ``S - max|f''|/2``.
* Step schedule: the reference's ``dt_n = exp(-5 + 0.01 n)`` (685 steps to t = 630; 715 here, as each
  10-unit interval rounds its step count up), i.e. geometric
  steps ``t_n + c = c e^(0.01 n)`` with ``c = e^-5 / (e^0.01 - 1) = 0.6704``, i.e. equal steps of 0.01
  in the clock ``ln(t + c)``; the driver's landing rule (:mod:`dandelion.solvers.time_stepping`) rounds
  the number of steps of each interval between output times up and shrinks the ratio so that every
  output time is hit exactly (``dt`` ~ ``0.01 (t + 0.67)``: 0.0067 at t = 0, where the fastest linear
  growth time ``1/sigma_max >= 4`` (eps = 0.5) is resolved by ~600 steps, and ~6 at t = 630, where
  coarsening is slow: ``dt / t ~ 1%``). A fixed ``dt`` can be given instead (verification).
"""

from __future__ import annotations

import math

import numpy as np
import torch

from dandelion.sphere import SphereGrid

from .chained_turbulence import real_to_complex_coefficients
from .integrators import ARS222, IMEX_EULER, imex_amplification, imex_runge_kutta
from .spectral_core import SpectralCore
from .time_stepping import (
    GeometricClock,
    Simulation,
    StabilityLimit,
    check_finite,
    enforce_limits,
    largest_stable_step,
    step_count,
)

__all__ = [
    "CH_MIN_LMAX",
    "CH_DEFAULT_LMAX",
    "IMEX_EULER",
    "SCHEMES",
    "free_energy_density",
    "growth_rate",
    "noise_band_limit",
    "initial_phi",
    "step_times",
    "CahnHilliard",
    "CahnHilliardSimulation",
]

#: Documented minimum band limit (degrees 0..127): the thinnest interface of the sweep, eps = 0.5 on
#: R = 10, needs l >~ 2 pi R / eps ~ 126 (card; a tanh interface of width 2 eps has spectral tail
#: ~exp(-pi eps l / R), 2.7e-9 at l = 126). Below it a dataset is marked ``reduced: true``.
CH_MIN_LMAX = 128
#: Default band limit (degrees 0..191, transform grid 384 x 768): the card's margin above the minimum.
CH_DEFAULT_LMAX = 192

#: Time-stepping schemes of :class:`CahnHilliardSimulation`.
SCHEMES = {"ars222": ARS222, "imex_euler": IMEX_EULER}

#: Reference step schedule (docs/datasets/cahn_hilliard.md): dt_n = exp(-5 + 0.01 n).
_GROWTH = 0.01
_OFFSET = math.exp(-5.0) / math.expm1(_GROWTH)


def free_energy_density(phi: torch.Tensor) -> torch.Tensor:
    """Bulk free energy ``f(phi) = phi^2 (1 - phi)^2 / 2`` (dimensionless), elementwise."""
    return 0.5 * phi * phi * (1.0 - phi) ** 2


def _fprime(phi: torch.Tensor) -> torch.Tensor:
    return phi * (1.0 - phi) * (1.0 - 2.0 * phi)


def growth_rate(l, *, epsilon, mean, radius, D: float = 1.0, a: float = 1.0) -> torch.Tensor:
    """Linear growth rate ``sigma(l) = -D k^2 (a^2 f''(m0) + eps^2 k^2)``, ``k^2 = l(l+1)/R^2``.

    The linearisation of docs/datasets/cahn_hilliard.md. ``l`` any shape; ``epsilon, mean, radius`` floats
    or (B,) tensors. Returns ``(B, *l.shape)`` or ``l.shape``.
    """
    l = torch.as_tensor(l, dtype=torch.float64)

    def col(x):
        x = torch.as_tensor(x, dtype=torch.float64)
        return x.reshape((-1,) + (1,) * l.dim()) if x.dim() else x

    eps, m0, R = col(epsilon), col(mean), col(radius)
    k2 = l * (l + 1.0) / R**2
    fpp = 6.0 * m0**2 - 6.0 * m0 + 1.0
    return -D * k2 * (a * a * fpp + eps**2 * k2)


def noise_band_limit(radius: float, cell_edge: float = 0.3) -> int:
    """Highest degree of the initial noise, ``l_c = round(pi R / cell_edge)`` (52, 79, 105 for R = 5, 7.5, 10)."""
    return int(round(math.pi * float(radius) / cell_edge))


def initial_phi(
    rng: np.random.Generator,
    *,
    mean: float,
    variance: float,
    radius: float,
    lmax: int,
    cell_area: float = 0.039,
    cell_edge: float = 0.3,
) -> torch.Tensor:
    """Initial spectrum ``(lmax, lmax)`` complex128 of ``phi`` (docs/datasets/cahn_hilliard.md "IC", ours).

    Upstream draws one N(mean, variance) value per mesh cell (area ``cell_area`` ~ 0.039, edge 0.3):
    white noise at mesh scale. We draw its spectral equivalent, independent of our grid: real
    orthonormal coefficients (unit sphere) ``a_lm ~ N(0, variance * cell_area / R^2)`` for
    ``1 <= l <= l_c = round(pi R / cell_edge)``, ``l`` ascending and ``m = -l..l`` (same order as the
    turbulence card), which matches the noise power per unit area (pointwise variance
    ``~ 0.34 variance`` at every R). ``a_00`` sets the mean to ``mean``. All degrees up to ``l_c`` are
    drawn whatever ``lmax`` is, then degrees ``>= lmax`` are dropped, so a seed gives the same large
    scales at every resolution.

    Raises
    ------
    ValueError
        For a negative variance or non-positive radius.
    """
    if variance < 0 or radius <= 0:
        raise ValueError(f"variance={variance} must be >= 0 and radius={radius} > 0")
    lc = noise_band_limit(radius, cell_edge)
    std = math.sqrt(variance * cell_area / radius**2)
    a = np.zeros((lc + 1, 2 * lc + 1))
    for l in range(1, lc + 1):
        a[l, lc - l : lc + l + 1] = std * rng.standard_normal(2 * l + 1)
    a[0, lc] = mean * math.sqrt(4.0 * math.pi)
    c = real_to_complex_coefficients(a, lc + 1)
    out = torch.zeros(lmax, lmax, dtype=torch.complex128)
    L = min(lmax, lc + 1)
    out[:L, :L] = c[:L, :L]
    return out


def step_times(
    t0: float, t1: float, *, dt: float | None = None, growth: float = _GROWTH, offset: float = _OFFSET
) -> np.ndarray:
    """End times of the steps the driver takes from ``t0`` to ``t1`` (the last is exactly ``t1``), float64.

    Default: the reference geometric schedule, the driver's landing rule in the clock ``ln(t + c)``
    (:class:`~dandelion.solvers.time_stepping.GeometricClock`): ``n = ceil(ln((t1+c)/(t0+c))/growth - 1e-9)``
    steps of ratio ``((t1+c)/(t0+c))^(1/n)``; with ``dt``: ``n = ceil((t1 - t0)/dt - 1e-9)`` equal steps.
    Raises ``ValueError`` for ``t1 < t0`` or a non-positive ``dt``.
    """
    t0, t1 = float(t0), float(t1)
    if t1 < t0:
        raise ValueError(f"step_times: t1={t1} is before t0={t0}")
    if t1 == t0:
        return np.array([], dtype=np.float64)
    if dt is not None and not dt > 0:
        raise ValueError(f"dt={dt} must be positive")
    if dt is not None:
        n = step_count(t1 - t0, dt)
        return t0 + (t1 - t0) / n * np.arange(1, n + 1)
    ratio = (t1 + offset) / (t0 + offset)
    n = step_count(math.log(ratio), growth)
    out = (t0 + offset) * ratio ** (np.arange(1, n + 1) / n) - offset
    out[-1] = t1
    return out


class CahnHilliard:
    """Equation object of the linearly stabilised Cahn-Hilliard split (module docstring).

    Parameters
    ----------
    core : SpectralCore on the unit sphere with ``dealias=2`` (exact cubic projection).
    epsilon, radius, D, a : tensors of shape (B,)
        Interface parameter, sphere radius, mobility, bulk coefficient (per trajectory).
    stabilizer : float
        ``S`` (units of ``a^2``).

    The explicit terms ``D a^2 lap(f'(phi) - S phi)``, the implicit (diagonal) ``-D eps^2 lap^2 phi
    + D a^2 S lap phi`` and its inverse, used by :func:`dandelion.solvers.integrators.imex_runge_kutta`.
    """

    def __init__(self, core: SpectralCore, *, epsilon, radius, D, a, stabilizer: float):
        B = epsilon.shape[0]
        col = lambda x: x.reshape(B, 1, 1)  # noqa: E731
        self.core = core
        self.eps, self.radius, self.D, self.a = col(epsilon), col(radius), col(D), col(a)
        self.S = float(stabilizer)
        ll1 = -core.lap.reshape(1, core.lmax, 1)  # l(l+1) on the unit sphere
        self.k2 = ll1 / self.radius**2  # (B, lmax, 1)
        self._implicit_rate = -self.D * self.k2 * (self.a**2 * self.S + self.eps**2 * self.k2)

    def explicit_terms(self, phi_hat: torch.Tensor) -> torch.Tensor:
        """``D a^2 lap(f'(phi) - S phi)`` in spectral space (cubic evaluated on the 2x-padded grid)."""
        fp = self.core.to_spec(_fprime(self.core.to_grid(phi_hat))) * self.core.mask
        return -self.D * self.k2 * self.a**2 * (fp - self.S * phi_hat)

    def implicit_terms(self, phi_hat: torch.Tensor) -> torch.Tensor:
        """``-D eps^2 lap^2 phi + D a^2 S lap phi`` in spectral space (diagonal)."""
        return self._implicit_rate * phi_hat

    def implicit_inverse(self, phi_hat: torch.Tensor, eta: float) -> torch.Tensor:
        """Solve ``(I - eta L) x = phi_hat`` for the diagonal implicit operator ``L``."""
        return phi_hat / (1.0 - eta * self._implicit_rate)

    def tendency(self, phi_hat: torch.Tensor) -> torch.Tensor:
        """Full right-hand side ``D lap(mu)`` (spectral), for checks."""
        return self.explicit_terms(phi_hat) + self.implicit_terms(phi_hat)

    def max_curvature(self, phi_hat: torch.Tensor) -> torch.Tensor:
        """``max f''(phi)`` over the padded grid, (B,)."""
        phi = self.core.to_grid(phi_hat)
        return (6.0 * phi**2 - 6.0 * phi + 1.0).flatten(1).max(-1).values

    def largest_stable_step(self, tableau, curvature: torch.Tensor) -> torch.Tensor:
        """Largest step (B,) for which ``tableau`` does not amplify any decaying mode of the equation
        linearised about a uniform state with ``f'' = curvature`` (B,): per degree, explicit rate
        ``D a^2 k^2 (S - f'')`` and implicit rate ``-D k^2 (a^2 S + eps^2 k^2)``
        (:func:`~dandelion.solvers.integrators.imex_amplification`). Unbounded (inf) while ``f'' <= S``
        (the explicit part then only grows and the L-stable implicit part dominates; verified by the tests)."""
        out = torch.full(curvature.shape, math.inf, dtype=torch.float64)
        for b in torch.nonzero(curvature.cpu() > self.S).reshape(-1).tolist():
            k2, D, a2, e2 = self.k2[b, 1:, 0].cpu(), float(self.D[b]), float(self.a[b]) ** 2, float(self.eps[b]) ** 2
            lam_ex = D * a2 * k2 * (self.S - float(curvature[b]))
            lam_im = -D * k2 * (a2 * self.S + e2 * k2)
            decaying = lam_ex + lam_im <= 0

            def worst(h, lam_ex=lam_ex, lam_im=lam_im, decaying=decaying):
                r = imex_amplification(tableau, h * lam_ex, h * lam_im).abs()
                return float(r[decaying].max()) if bool(decaying.any()) else 0.0

            out[b] = largest_stable_step(worst)
        return out


class CahnHilliardSimulation(Simulation):
    """Batched Cahn-Hilliard simulation: a :class:`CahnHilliard` equation advanced by the driver of
    :mod:`dandelion.solvers.time_stepping`.

    Parameters
    ----------
    params : dict of float64 tensors of shape (B,)
        ``epsilon`` (interface parameter), ``radius`` (sphere radius R); optional ``D``, ``a`` (default 1).
    phi0 : torch.Tensor
        Initial spectra ``(B, lmax, lmax)`` complex (see :func:`initial_phi`).
    lmax : int
        Solver band limit (number of degrees; default :data:`CH_DEFAULT_LMAX`).
    stabilizer : float
        ``S`` of the linear stabilisation (units of ``a^2``; 2, as the card).
    scheme : str
        ``"ars222"`` (default, second order) or ``"imex_euler"`` (first order, provably energy-decreasing).
    dt : float, optional
        Fixed step (non-dimensional time); None = the reference schedule (:func:`step_times`).
    device : torch device.

    Stability: the linearised scheme amplifies no decaying mode at any step while ``max f''(phi) <= S``
    (:meth:`CahnHilliard.largest_stable_step`); checked on the initial state (a violation with a fixed
    ``dt`` above the limit is refused with the largest safe one) and during the run.

    Attributes
    ----------
    time : float. ``phi_hat`` : (B, lmax, lmax) complex128 state. ``n_steps`` : int.
    energy_log : list of (time, (B,) free energy) after every step when ``record_energy=True``.

    Raises
    ------
    ValueError
        For shape mismatches, non-positive epsilon/radius/D, a negative stabilizer or an unsafe ``dt``.
    """

    name = "cahn_hilliard"
    time_units = "nondimensional"

    def __init__(
        self,
        params: dict,
        phi0: torch.Tensor,
        *,
        lmax: int = CH_DEFAULT_LMAX,
        stabilizer: float = 2.0,
        scheme: str = "ars222",
        dt: float | None = None,
        record_energy: bool = False,
        device="cpu",
    ):
        if scheme not in SCHEMES:
            raise ValueError(f"unknown Cahn-Hilliard scheme {scheme!r}: use one of {sorted(SCHEMES)}")
        self.scheme = scheme
        self.device = torch.device(device)
        self.lmax = int(lmax)
        f64 = dict(dtype=torch.float64, device=self.device)
        eps = torch.as_tensor(params["epsilon"], **f64).reshape(-1)
        R = torch.as_tensor(params["radius"], **f64).reshape(-1)
        B = eps.shape[0]
        D = torch.as_tensor(params.get("D", 1.0), **f64).reshape(-1).expand(B)
        a = torch.as_tensor(params.get("a", 1.0), **f64).reshape(-1).expand(B)
        if R.shape != eps.shape:
            raise ValueError(f"epsilon {tuple(eps.shape)} and radius {tuple(R.shape)} must both have shape (B,)")
        if (eps <= 0).any() or (R <= 0).any() or (D <= 0).any():
            raise ValueError(f"epsilon={eps.tolist()}, radius={R.tolist()}, D={D.tolist()} must be positive")
        if stabilizer < 0:
            raise ValueError(f"stabilizer={stabilizer} must be >= 0 (energy stability needs S >= max|f''|/2)")
        if tuple(phi0.shape) != (B, self.lmax, self.lmax):
            raise ValueError(
                f"phi0 has shape {tuple(phi0.shape)}, expected (B, lmax, lmax) = {(B, self.lmax, self.lmax)}"
            )
        if dt is not None and not dt > 0:
            raise ValueError(f"dt={dt} must be positive")
        self.batch = B
        self.core = SpectralCore(self.lmax, dealias=2.0, radius=1.0).to(self.device)
        self.equation = CahnHilliard(self.core, epsilon=eps, radius=R, D=D, a=a, stabilizer=stabilizer)
        self.eps, self.radius, self.D, self.a, self.S = (
            self.equation.eps,
            self.equation.radius,
            self.equation.D,
            self.equation.a,
            self.equation.S,
        )
        self.params = {"epsilon": eps, "radius": R}
        self.state = (phi0.to(torch.complex128).to(self.device) * self.core.mask).clone()
        self.dt = self.fixed_step = None if dt is None else float(dt)
        if self.dt is None:
            self.clock = GeometricClock(_OFFSET)
        self.time = 0.0
        self.n_steps = 0
        self.record_energy = bool(record_energy)
        self.energy_log: list[tuple[float, torch.Tensor]] = []
        if self.dt is not None:
            enforce_limits(self.dt, self.stability_limits(), units="", what="Cahn-Hilliard")

    @property
    def phi_hat(self) -> torch.Tensor:
        """The state: spectrum of ``phi`` (B, lmax, lmax) complex128."""
        return self.state

    @phi_hat.setter
    def phi_hat(self, value: torch.Tensor) -> None:
        self.state = value

    # ------------------------------------------------------------------ stepping (driver protocol)
    def stability_limits(self):
        fpp = self.equation.max_curvature(self.state)
        limit = self.equation.largest_stable_step(SCHEMES[self.scheme], fpp)
        return [
            StabilityLimit(
                f"linearised {self.scheme} (stabiliser S = {self.S:g})",
                limit,
                f"max f''(phi) = {float(fpp.max()):.3g} exceeds S, so the explicit part damps and "
                "the scheme can amplify decaying modes; raise the stabilizer or lower dt",
            )
        ]

    def max_step(self) -> float:
        """The fixed ``dt``, or the reference schedule's 1% growth per step in the clock ``ln(t + c)``."""
        return _GROWTH if self.dt is None else self.dt

    def step(self, dt, active=None) -> None:
        """One stabilised IMEX step of ``dt`` (scheme chosen at construction); does not change :attr:`time`."""
        self.state = imex_runge_kutta(SCHEMES[self.scheme], self.equation, float(dt))(self.state)
        self.n_steps += 1
        if self.record_energy:
            self.energy_log.append((self.time + float(dt), self.free_energy()))

    # ------------------------------------------------------------------ equation (delegated)
    def explicit_terms(self, phi_hat: torch.Tensor) -> torch.Tensor:
        return self.equation.explicit_terms(phi_hat)

    def implicit_terms(self, phi_hat: torch.Tensor) -> torch.Tensor:
        return self.equation.implicit_terms(phi_hat)

    def tendency(self, phi_hat: torch.Tensor) -> torch.Tensor:
        """Full right-hand side ``D lap(mu)`` (spectral), for checks."""
        return self.equation.tendency(phi_hat)

    # ------------------------------------------------------------------ output and invariants
    def fields(self, grid: SphereGrid) -> dict[str, torch.Tensor]:
        """``{"phi": (B, nlat, nlon)}`` float64, truncated to ``min(lmax, grid.lmax)`` and synthesised
        exactly at ``grid``'s nodes. Raises ``FloatingPointError`` naming a non-finite trajectory."""
        check_finite(self)
        return {"phi": self.core.synthesise(self.phi_hat, grid)}

    def mean(self) -> torch.Tensor:
        """Area mean of ``phi`` (B,) (from the ``l = 0`` coefficient)."""
        return self.core.mean(self.phi_hat)

    def mass(self) -> torch.Tensor:
        """``integral phi dA`` over the sphere of radius R, (B,)."""
        return self.mean() * 4.0 * math.pi * self.radius.reshape(-1) ** 2

    def free_energy(self, phi_hat: torch.Tensor | None = None) -> torch.Tensor:
        """``F = integral [a^2 f(phi) + eps^2 |grad phi|^2 / 2] dA`` (B,): the bulk term by the padded
        grid's Gauss quadrature (exact for degree < 4 lmax), the gradient term exactly from the spectrum
        (``integral |grad phi|^2 dA = sum l(l+1) |phi_lm|^2`` for unit-sphere orthonormal coefficients)."""
        p = self.phi_hat if phi_hat is None else phi_hat
        R2 = self.radius.reshape(-1) ** 2
        bulk = self.core.integrate_grid(free_energy_density(self.core.to_grid(p))) * R2
        w = torch.full((self.lmax,), 2.0, dtype=torch.float64, device=p.device)
        w[0] = 1.0
        power = (p.real**2 + p.imag**2) @ w  # (B, lmax)
        grad2 = (power * (-self.core.lap.reshape(1, -1))).sum(-1)
        return self.a.reshape(-1) ** 2 * bulk + 0.5 * self.eps.reshape(-1) ** 2 * grad2

    def stabilisation_margin(self) -> torch.Tensor:
        """``a^2 S - a^2 max|f''(phi)|/2`` on the padded grid (B,); >= 0 is the energy-stability premise."""
        phi = self.core.to_grid(self.phi_hat)
        fpp = (6.0 * phi**2 - 6.0 * phi + 1.0).abs().flatten(1).max(-1).values
        return self.a.reshape(-1) ** 2 * (self.S - 0.5 * fpp)

    def spectrum(self) -> torch.Tensor:
        """Power per degree ``(B, lmax)`` of ``phi`` (``sum_m |phi_lm|^2``, unit-sphere normalisation)."""
        w = torch.full((self.lmax,), 2.0, dtype=torch.float64, device=self.phi_hat.device)
        w[0] = 1.0
        return (self.phi_hat.real**2 + self.phi_hat.imag**2) @ w

    def length_scale(self) -> torch.Tensor:
        """Coarsening length ``L = 2 pi / <k>``, ``<k> = sum_l k_l P_l / sum_l P_l`` over ``l >= 1``
        (``k_l = sqrt(l(l+1))/R``), (B,)."""
        p = self.spectrum()[:, 1:]
        k = torch.sqrt(-self.core.lap.reshape(1, -1)[:, 1:]) / self.radius.reshape(-1, 1)
        return 2.0 * math.pi / ((k * p).sum(-1) / p.sum(-1))
