"""Actively driven "generalised Navier-Stokes" vorticity model on the sphere (chained turbulence).

Mickelin, Slomka, Burns, Lecoanet, Vasquez, Brandt & Dunkel (2018), "Anomalous chained turbulence
in actively driven flows on spheres", Phys. Rev. Lett. 120, 164503 (eqs. 1-3), as described in
docs/datasets/chained_turbulence.md (mickelin_gns). On a sphere of radius ``R`` (non-dimensional:
``R = 1``, ``K = 1/R^2``, time unit ``tau = 1``)::

    d(omega)/dt + u . grad(omega) = L omega,    L = f(lap + 4K) (lap + 2K),
    f(x) = Gamma0 - Gamma2 x + Gamma4 x^2,
    lap(psi) = -omega,   u = r_hat x grad(psi),   gauges <psi> = <omega> = 0.

On a spherical harmonic of degree ``l`` (``k^2 = l(l+1)/R^2``) the operator is diagonal with growth
rate ``sigma(l) = f(4K - k^2) (2K - k^2)``: ``sigma(1) = 0`` exactly (angular momentum is neutral),
a band of unstable degrees around ``l ~ pi R / Lambda``, and a sixth-order damping beyond it.

Numerics (ours, docs/datasets/chained_turbulence.md "Our method" / "Ours, decided"):

* state: the vorticity spectrum ``omega_lm`` (orthonormal harmonics, torch-harmonics ``(lmax, mmax)``
  layout), float64, batch = ensemble, each trajectory with its own operator coefficients;
* the linear operator is integrated exactly by exponential time differencing (Cox-Matthews ETDRK4,
  :class:`dandelion.solvers.exponential.ETDRK4`): ``sigma(127)`` reaches -5e9 / tau, far too stiff for any explicit
  scheme, and ``exp(sigma dt)`` is exact because ``L`` is diagonal;
* advection ``-u . grad(omega)`` is evaluated pseudo-spectrally on the 3/2-dealiased Gauss grid of the
  shared :class:`dandelion.solvers.spectral_core.SpectralCore` (exact Galerkin projection of the quadratic
  product, so the truncated advection conserves energy and enstrophy and has no ``l = 0``/``l = 1``
  projection up to round-off);
* ``sigma(0) = 2 f(4K) > 0`` (and above the maximum over ``l >= 1``), so the ``l = 0`` coefficient
  is held at zero at every step (the gauge ``<omega> = 0``); the linear rate used for ``l = 0`` is 0;
* adaptive steps: advective CFL number ``max|u| dt / (pi R / lmax) <= cfl``, capped at
  ``dt_max = 0.05 tau`` (the reference's largest step); ``pi R / lmax`` is the half wavelength of the
  highest resolved degree (the equatorial spacing of a ``2 lmax``-column grid). Default ``cfl = 0.2``
  (docs/datasets/chained_turbulence.md), not 0.3: the 4-stage scheme damps the highest advected
  degrees by ~``(u k dt)^6/144`` per step, and over 1 tau of inviscid flow from a saturated state
  (lmax 24) the enstrophy drifts by 5.7e-6 relative at 0.3 but 7.7e-7 at 0.2 (2.6e-8 at 0.1;
  drift ~ dt^5), so 0.2 meets the 1e-6 conservation check at the generation step. The steps are
  shrunk uniformly so that every :meth:`ChainedTurbulenceSimulation.advance_to` target is hit
  exactly (the landing rule of :mod:`dandelion.solvers.time_stepping`, with the CFL step of each
  trajectory as its limit). ETDRK4's stability along the imaginary axis (~2.8) is far from
  ``u k dt <= 0.2 pi``.

Sign: with ``lap(psi) = -omega`` and ``u = r_hat x grad(psi)`` the stored ``omega`` is
``-r_hat . curl(u)`` (docs/datasets/chained_turbulence.md); :class:`~dandelion.solvers.spectral_core.SpectralCore` uses
``zeta = +r_hat . curl(u)``, so velocities here are ``core.vrtdiv_to_uv(-omega, 0)``.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from dandelion.sphere import SphereGrid

from .exponential import ETDRK4
from .spectral_core import SpectralCore, pad_spec
from .time_stepping import Simulation, check_finite

__all__ = [
    "TURBULENCE_MIN_LMAX",
    "TURBULENCE_DEFAULT_LMAX",
    "MAX_CFL",
    "check_cfl_number",
    "operator_coefficients",
    "growth_rate",
    "peak_degree",
    "unstable_degrees",
    "ic_max_degree",
    "real_to_complex_coefficients",
    "initial_vorticity",
    "degree_power",
    "ChainedTurbulenceSimulation",
]

#: Default solver band limit (degrees 0..127, as the reference Dedalus runs at 256x128).
TURBULENCE_DEFAULT_LMAX = 128
#: Documented minimum band limit resolving the physics of the whole sweep (degrees 0..64): the smallest
#: band limit whose truncation degree and all above it are damped at >= 100 / tau in every cell of the
#: sweep (sigma(64) = -106 / tau at r = 10, kappa*Lambda = 1.8, the least damped cell), about seven times
#: the eddy turnover rate (RMS vorticity ~ 14.6 / tau), so the enstrophy cascade is dissipated by the
#: operator before it reaches the truncation. Below it a dataset is marked ``reduced: true``.
TURBULENCE_MIN_LMAX = 65


#: Largest CFL number ``max|u| dt / (pi R / lmax)``: ETDRK4 reduces to a classical four-stage scheme on
#: advection, stable on the imaginary axis up to 2 sqrt(2); with the margin of
#: :data:`dandelion.solvers.shallow_water.CFL_LIMITS` (2.5) on ``u k dt`` and ``k ~ lmax / R``, 2.5 / pi.
MAX_CFL = 2.5 / math.pi


def check_cfl_number(cfl: float) -> None:
    """Refuse a CFL number outside ``(0, MAX_CFL]`` (the message gives the largest safe one)."""
    if not 0 < float(cfl) <= MAX_CFL:
        raise ValueError(
            f"cfl={cfl} is unsafe: the advective CFL number max|u| dt / (pi R / lmax) of ETDRK4 must lie in "
            f"(0, {MAX_CFL:.4f}] (|u k dt| <= 2.5 on the imaginary axis); the largest safe cfl is {MAX_CFL:.4f}"
        )


def _as_tensor(x, device=None) -> torch.Tensor:
    return torch.as_tensor(x, dtype=torch.float64, device=device)


def _f_times(l: torch.Tensor, g0, g2, g4, radius: float = 1.0) -> torch.Tensor:
    k2 = l * (l + 1.0) / radius**2
    K = 1.0 / radius**2
    x = 4.0 * K - k2
    return (g0 - g2 * x + g4 * x * x) * (2.0 * K - k2)


def operator_coefficients(r_over_lambda, kappa_lambda, *, radius: float = 1.0, tau: float = 1.0):
    """Operator coefficients ``(Gamma0, Gamma2, Gamma4)`` from ``R/Lambda`` and ``kappa*Lambda``.

    docs/datasets/chained_turbulence.md (after Mickelin et al. 2018, eq. 2 and Supplement): with ``Lambda = R/r``,
    ``kappa = (kappa*Lambda)/Lambda``, ``k+- = pi/Lambda +- kappa/2``, ``X_lo = 4K - k+^2``,
    ``X_hi = 4K - k-^2``: ``Gamma4 = 1``, ``Gamma2 = X_lo + X_hi``, ``Gamma0 = X_lo X_hi``, then all three
    divided by ``tau * max sigma`` with the maximum over integer ``l = 1 .. max(floor(4 pi R/Lambda), 64)``,
    so that the fastest linear growth is exactly ``1/tau``.

    Parameters
    ----------
    r_over_lambda, kappa_lambda : float or array-like of shape (B,)
    radius : float
        Sphere radius R (1 in the dataset). ``tau`` : time unit (1).

    Returns
    -------
    tuple of three float64 tensors of shape (B,) (0-d for scalar input), units tau^-1 R^(2j) for Gamma_2j.

    Raises
    ------
    ValueError
        For non-positive ``r_over_lambda`` or ``kappa_lambda``, or a band with no unstable degree.
    """
    r = _as_tensor(r_over_lambda)
    kl = _as_tensor(kappa_lambda)
    if (r <= 0).any() or (kl <= 0).any():
        raise ValueError(f"r_over_lambda={r.tolist()} and kappa_lambda={kl.tolist()} must be positive")
    lam = radius / r
    kappa = kl / lam
    K = 1.0 / radius**2
    kp, km = math.pi / lam + kappa / 2, math.pi / lam - kappa / 2
    x_lo, x_hi = 4.0 * K - kp**2, 4.0 * K - km**2
    g4, g2, g0 = torch.ones_like(r), x_lo + x_hi, x_lo * x_hi
    lmax_scan = int(max(torch.floor(4.0 * math.pi * radius / lam).max().item(), 64))
    l = torch.arange(1, lmax_scan + 1, dtype=torch.float64)
    sig = _f_times(l, g0[..., None], g2[..., None], g4[..., None], radius)
    # per trajectory: scan up to its own max(floor(4 pi R / Lambda), 64)
    own = torch.clamp(torch.floor(4.0 * math.pi * radius / lam), min=64)
    sig = torch.where(l <= own[..., None], sig, torch.full_like(sig, -math.inf))
    smax = sig.max(-1).values
    if (smax <= 0).any():
        raise ValueError(
            f"no unstable degree for r={r.tolist()}, kappa*Lambda={kl.tolist()}: widen the band (larger kappa*Lambda)"
        )
    s = 1.0 / (tau * smax)
    return g0 * s, g2 * s, g4 * s


def growth_rate(l, gammas, *, radius: float = 1.0) -> torch.Tensor:
    """Linear growth rate ``sigma(l) = f(4K - k^2)(2K - k^2)`` [1/tau] (docs/datasets/chained_turbulence.md).

    ``l`` : degrees, any shape; ``gammas`` : ``(Gamma0, Gamma2, Gamma4)`` each of shape (B,) or scalar.
    Returns ``(B, *l.shape)`` (or ``l.shape`` for scalar coefficients), float64.
    """
    l = _as_tensor(l)
    g0, g2, g4 = (_as_tensor(g) for g in gammas)
    shape = g0.shape + (1,) * l.dim()
    return _f_times(l, g0.reshape(shape), g2.reshape(shape), g4.reshape(shape), radius)


def peak_degree(r_over_lambda: float, kappa_lambda: float, lmax: int = 200) -> int:
    """Integer degree ``l >= 1`` of the fastest linear growth (the predicted spectral peak)."""
    sig = growth_rate(torch.arange(lmax), operator_coefficients(r_over_lambda, kappa_lambda))
    sig[0] = -math.inf
    return int(torch.argmax(sig))


def unstable_degrees(r_over_lambda: float, kappa_lambda: float, *, radius: float = 1.0) -> list[int]:
    """Degrees ``l >= 1`` with a positive linear growth rate ``sigma(l) > 0``.

    Computed from the operator of :func:`operator_coefficients` (docs/datasets/chained_turbulence.md)
    over ``l = 1 .. max(floor(4 pi R/Lambda), 64)`` (beyond which ``sigma`` is negative). A cell with a
    single unstable degree is untouched by advection (the Jacobian of a one-degree field with itself
    vanishes), so it grows at ``1/tau`` until far past the saturated amplitude of the other cells before
    it breaks up; :mod:`dandelion.datasets.chained_turbulence` keeps only cells with at least two.
    """
    lam = float(radius) / float(r_over_lambda)
    l = torch.arange(1, int(max(math.floor(4.0 * math.pi * radius / lam), 64)) + 1, dtype=torch.float64)
    sig = growth_rate(l, operator_coefficients(r_over_lambda, kappa_lambda, radius=radius), radius=radius)
    return [int(x) for x in l[sig > 0].tolist()]


def ic_max_degree(r_over_lambda: float, kappa_lambda: float, *, radius: float = 1.0) -> int:
    """Highest degree of the initial noise, ``l_i = ceil(R (pi/Lambda + kappa/2)) + 4``.

    See docs/datasets/chained_turbulence.md.
    """
    lam = radius / float(r_over_lambda)
    kappa = float(kappa_lambda) / lam
    return int(math.ceil(radius * (math.pi / lam + kappa / 2) - 1e-12)) + 4


def real_to_complex_coefficients(a: dict[tuple[int, int], float] | np.ndarray, lmax: int) -> torch.Tensor:
    """Real orthonormal SH coefficients -> torch-harmonics ``(lmax, lmax)`` complex spectrum.

    ``a`` is an array ``(lmax, 2 lmax - 1)`` indexed ``[l, m + lmax - 1]`` for the real harmonics
    ``Y_l0 = sqrt((2l+1)/4pi) P_l``, ``Y_lm = sqrt((2l+1)/2pi (l-m)!/(l+m)!) P_l^m cos(m lon)`` (m > 0),
    ``Y_l,-m`` the same with ``sin(m lon)``, ``P_l^m`` with the Condon-Shortley phase (scipy ``lpmv``).
    torch-harmonics' orthonormal spectrum ``c`` represents ``f = sum_l c_l0 Ybar_l0 + 2 Re sum_{m>0}
    c_lm Ybar_lm e^{i m lon}`` (same phase), so ``c_l0 = a_l0`` and ``c_lm = (a_lm - i a_l,-m)/sqrt(2)``.
    """
    a = np.asarray(a, dtype=np.float64)
    c = np.zeros((lmax, lmax), dtype=np.complex128)
    off = a.shape[1] // 2
    L = min(lmax, a.shape[0])
    c[:L, 0] = a[:L, off]
    for m in range(1, L):
        c[m:L, m] = (a[m:L, off + m] - 1j * a[m:L, off - m]) / math.sqrt(2.0)
    return torch.from_numpy(c)


def initial_vorticity(
    rng: np.random.Generator, r_over_lambda: float, kappa_lambda: float, lmax: int, amplitude: float = 1e-3
) -> torch.Tensor:
    """Initial vorticity spectrum ``(lmax, lmax)`` complex128 (docs/datasets/chained_turbulence.md "IC").

    ``omega0 = amplitude * sum_{l=2..l_i} sum_{m=-l..l} a_lm Y_lm`` with ``a_lm ~ N(0, 1)`` drawn from
    ``rng`` with ``l`` ascending and ``m`` from ``-l`` to ``l`` (real orthonormal ``Y_lm``, see
    :func:`real_to_complex_coefficients`). All ``l <= l_i`` are drawn whatever ``lmax`` is, so the
    low degrees are the same at every resolution; degrees ``>= lmax`` are then dropped.
    """
    li = ic_max_degree(r_over_lambda, kappa_lambda)
    a = np.zeros((li + 1, 2 * li + 1))
    for l in range(2, li + 1):
        a[l, li - l : li + l + 1] = rng.standard_normal(2 * l + 1)
    c = real_to_complex_coefficients(a, li + 1)
    out = torch.zeros(lmax, lmax, dtype=torch.complex128)
    L = min(lmax, li + 1)
    out[:L, :L] = c[:L, :L]
    return amplitude * out


def degree_power(spec: torch.Tensor) -> torch.Tensor:
    """Power per degree ``P_l = sum_m |c_lm|^2`` over ``m = -l..l``, i.e. ``|c_l0|^2 + 2 sum_{m>0} |c_lm|^2``.

    ``spec`` : (..., lmax, mmax) complex orthonormal spectrum of a real field. Returns (..., lmax);
    ``sum_l P_l`` is the integral of the squared field over the unit sphere.
    """
    w = torch.full((spec.shape[-1],), 2.0, dtype=torch.float64, device=spec.device)
    w[0] = 1.0
    return (spec.real**2 + spec.imag**2) @ w


class ChainedTurbulenceSimulation(Simulation):
    """Batched chained-turbulence simulation (the simulation protocol of the dataset framework).

    Parameters
    ----------
    params : dict of float64 tensors of shape (B,)
        ``r_over_lambda`` (R/Lambda) and ``kappa_lambda`` (kappa*Lambda).
    omega0 : torch.Tensor
        Initial vorticity spectra ``(B, lmax, lmax)`` complex (see :func:`initial_vorticity`); the
        ``l = 0`` coefficient is set to zero.
    lmax : int
        Solver band limit (number of degrees; default :data:`TURBULENCE_DEFAULT_LMAX`; below
        :data:`TURBULENCE_MIN_LMAX` the physics is under-resolved).
    cfl : float
        Advective Courant number ``max|u| dt / (pi R / lmax)`` (0.2, module docstring).
    dt_max : float
        Largest step in tau (0.05, as the reference runs).
    advection, linear : bool
        Switch the advection term or the linear operator off (verification only).
    device : torch device.

    Attributes
    ----------
    time : float, current time in tau. ``omega`` : (B, lmax, lmax) complex128 state.
    sigma : (B, lmax, 1) linear rates actually used (``l = 0`` set to 0).
    n_steps : int, steps taken so far.

    Raises
    ------
    ValueError
        For inconsistent shapes, ``cfl``/``dt_max`` not positive, or coefficients with no unstable band.
    """

    name = "chained_turbulence"
    time_units = "tau"
    radius = 1.0
    tau = 1.0

    def __init__(
        self,
        params: dict,
        omega0: torch.Tensor,
        *,
        lmax: int = TURBULENCE_DEFAULT_LMAX,
        cfl: float = 0.2,
        dt_max: float = 0.05,
        advection: bool = True,
        linear: bool = True,
        device="cpu",
    ):
        if not dt_max > 0:
            raise ValueError(f"dt_max={dt_max} must be positive")
        check_cfl_number(cfl)
        self.device = torch.device(device)
        self.lmax = int(lmax)
        r = _as_tensor(params["r_over_lambda"]).reshape(-1).cpu()  # tables are built on the CPU, then moved
        kl = _as_tensor(params["kappa_lambda"]).reshape(-1).cpu()
        if r.shape != kl.shape:
            raise ValueError(
                f"r_over_lambda {tuple(r.shape)} and kappa_lambda {tuple(kl.shape)} must both have shape (B,)"
            )
        self.batch = r.shape[0]
        if tuple(omega0.shape) != (self.batch, self.lmax, self.lmax):
            raise ValueError(
                f"omega0 has shape {tuple(omega0.shape)}, expected (B, lmax, lmax) = "
                f"{(self.batch, self.lmax, self.lmax)}"
            )
        self.gammas = operator_coefficients(r, kl, radius=self.radius, tau=self.tau)
        self.core = SpectralCore(self.lmax, dealias=1.5, radius=self.radius).to(self.device)
        l = torch.arange(self.lmax, dtype=torch.float64)
        sigma = growth_rate(l, self.gammas, radius=self.radius)  # (B, lmax)
        sigma[:, 0] = 0.0  # l = 0 held at zero (gauge), never amplified
        self.sigma = (sigma if linear else torch.zeros_like(sigma)).reshape(self.batch, self.lmax, 1).to(self.device)
        self.cfl, self.dt_max = float(cfl), float(dt_max)
        self.advection, self.linear = bool(advection), bool(linear)
        self.omega = (omega0.to(torch.complex128).to(self.device) * self.core.mask).clone()
        self.omega[:, 0, 0] = 0.0
        self.time = 0.0
        self.n_steps = 0
        self._etd_cache: dict[float, ETDRK4] = {}
        self._fields = None
        self.params = {"r_over_lambda": r, "kappa_lambda": kl}

    @property
    def state(self) -> torch.Tensor:
        """The vorticity spectrum (B, lmax, lmax) complex128 (same tensor as :attr:`omega`)."""
        return self.omega

    # ------------------------------------------------------------------ physics
    def velocity(self, omega: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(u, v)`` eastward/northward on the transform grid, ``u = r_hat x grad(psi)``, ``lap(psi) = -omega``."""
        return self.core.vrtdiv_to_uv(-omega, torch.zeros_like(omega))

    def velocity_and_gradient(self, omega: torch.Tensor):
        """``(u, v, d omega/dx, d omega/dy)`` on the transform grid from one inverse vector SHT.

        The gradient of ``omega`` is the irrotational field whose divergence is ``lap(omega)``, so the
        velocity (``vrt = -omega``) and the gradient (``div = lap(omega)``) are synthesised together.
        """
        z = torch.zeros_like(omega)
        u, v = self.core.vrtdiv_to_uv(torch.stack((-omega, z)), torch.stack((z, self.core.laplacian(omega))))
        return u[0], v[0], u[1], v[1]

    def nonlinear(self, omega: torch.Tensor, fields=None) -> torch.Tensor:
        """Advection term ``-u . grad(omega)`` projected on ``lmax`` degrees, ``l = 0`` zeroed; (B, lmax, lmax).

        ``fields``: the output of :meth:`velocity_and_gradient` for ``omega`` if already computed.
        """
        if not self.advection:
            return torch.zeros_like(omega)
        u, v, wx, wy = self.velocity_and_gradient(omega) if fields is None else fields
        out = self.core.to_spec(-(u * wx + v * wy)) * self.core.mask
        out[..., 0, 0] = 0.0
        return out

    def max_speed(self, omega: torch.Tensor | None = None) -> torch.Tensor:
        """Largest wind speed of each trajectory on the transform grid, (B,) [R/tau]."""
        u, v = self.velocity(self.omega if omega is None else omega)
        return torch.sqrt(u * u + v * v).flatten(1).max(-1).values

    def cfl_dt(self, umax: torch.Tensor) -> torch.Tensor:
        """Largest step of each trajectory allowed by the CFL rule (module docstring) and ``dt_max``, in tau."""
        dx = math.pi * self.radius / self.lmax
        umax = torch.as_tensor(umax, dtype=torch.float64)
        return torch.clamp(self.cfl * dx / umax.clamp(min=1e-300), max=self.dt_max)

    def _stepper(self, dt: torch.Tensor) -> ETDRK4:
        key = tuple(dt.tolist())
        etd = self._etd_cache.get(key)
        if etd is None:
            if len(self._etd_cache) >= 16:
                self._etd_cache.pop(next(iter(self._etd_cache)))
            etd = self._etd_cache[key] = ETDRK4(self.sigma, dt.to(self.device).reshape(-1, 1, 1))
        return etd

    def max_step(self) -> torch.Tensor:
        """CFL step of each trajectory (:meth:`cfl_dt`) on its current winds, (B,) in tau: the driver's
        per-trajectory limit, re-evaluated before every step; the transform-grid fields are kept for
        the next :meth:`step`."""
        if not self.advection:
            self._fields = None
            return self.cfl_dt(torch.zeros(self.batch, dtype=torch.float64))
        self._fields = (self.omega, self.velocity_and_gradient(self.omega))
        u, v = self._fields[1][0], self._fields[1][1]
        return self.cfl_dt(torch.sqrt(u * u + v * v).flatten(1).max(-1).values.cpu())

    def step(self, dt, active: torch.Tensor | None = None, fields=None) -> None:
        """One ETDRK4 step of ``dt`` tau (float, or (B,) one per trajectory); ``active``: (B,) bool, the
        trajectories that step (the others keep their state); ``fields``: the :meth:`velocity_and_gradient`
        of the current state if computed (else the one :meth:`max_step` kept for it). Does not change :attr:`time`."""
        if fields is None and self._fields is not None and self._fields[0] is self.omega:
            fields = self._fields[1]
        self._fields = None
        dt = torch.as_tensor(dt, dtype=torch.float64).reshape(-1).expand(self.batch).cpu()
        etd = self._stepper(dt)
        nu = self.nonlinear(self.omega, fields)
        new = etd.step(self.omega, self.nonlinear, nu=nu)
        new[..., 0, 0] = 0.0
        if active is not None:
            new = torch.where(active.to(self.device).reshape(-1, 1, 1), new, self.omega)
        self.omega = new
        self.n_steps += 1

    def continue_from(self, coarse: ChainedTurbulenceSimulation) -> None:
        """Take over the state of a run of the same trajectories at a lower band limit (a coarse-grid spin-up).

        The vorticity spectrum ``(B, lmax_c, lmax_c)`` of ``coarse`` is zero-padded to this run's ``(lmax, lmax)``
        (orthonormal harmonics: a coefficient does not depend on the band limit); the degrees the coarse run did
        not have start at zero and fill in by the cascade once this run steps, where the operator damps them. The
        time and the step count are taken over.

        Raises
        ------
        ValueError
            If ``coarse`` is not a chained-turbulence run, has another batch or other parameters, or a band
            limit above this run's.
        """
        if not isinstance(coarse, ChainedTurbulenceSimulation):
            raise ValueError(f"continue_from takes a ChainedTurbulenceSimulation, not {type(coarse).__name__}")
        if coarse.batch != self.batch:
            raise ValueError(
                f"continue_from: the coarse run has batch {coarse.batch}, this one {self.batch}: build both from the "
                "same trajectories"
            )
        for k, v in self.params.items():
            if not torch.equal(coarse.params[k].to(v.device), v):
                raise ValueError(f"continue_from: parameter {k!r} differs between the coarse run and this one")
        if coarse.lmax > self.lmax:
            raise ValueError(
                f"continue_from: the coarse run's band limit ({coarse.lmax}) exceeds this run's ({self.lmax}); "
                "spin up at a LOWER lmax"
            )
        self.omega = pad_spec(coarse.omega.to(self.device), self.lmax) * self.core.mask
        self.omega[:, 0, 0] = 0.0
        self.time, self.n_steps = float(coarse.time), int(coarse.n_steps)
        self._fields = None

    # ------------------------------------------------------------------ output and invariants
    def fields(self, grid: SphereGrid) -> dict[str, torch.Tensor]:
        """``{"vorticity": (B, nlat, nlon)}`` float64 [1/tau], truncated to ``min(lmax, grid.lmax)`` and
        synthesised exactly at ``grid``'s nodes. Raises ``FloatingPointError`` naming a non-finite trajectory."""
        check_finite(self)
        return {"vorticity": self.core.synthesise(self.omega, grid)}

    def spectrum(self) -> torch.Tensor:
        """Vorticity power per degree ``(B, lmax)`` (:func:`degree_power`)."""
        return degree_power(self.omega)

    def enstrophy(self) -> torch.Tensor:
        """``Z = 1/2 integral omega^2 dA`` on the unit sphere, (B,)."""
        return 0.5 * self.spectrum().sum(-1)

    def energy(self) -> torch.Tensor:
        """``E = 1/2 integral |u|^2 dA = 1/2 sum_l P_l R^2 / (l (l+1))`` (B,)."""
        p = self.spectrum()
        return 0.5 * (p[:, 1:] * (-self.core.invlap[1:, 0])).sum(-1)
