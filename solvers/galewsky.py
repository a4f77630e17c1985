"""Galewsky barotropic-instability initial conditions, Williamson case 2, and the batched Galewsky run.

Sources
-------
* Galewsky, Scott & Polvani (2004), "An initial-value problem for testing numerical models of the
  global shallow-water equations", *Tellus* 56A, 429-440: jet eq. (2), balance eq. (3), bump
  eq. (4) with alpha = 1/3 (zonal) and beta = 1/15 (meridional), constants of their Table/§3.
* Williamson et al. (1992), *J. Comput. Phys.* 102, 211-224, test case 2 (steady zonal
  geostrophic flow), eqs. (90)-(95).
* docs/datasets/galewsky.md (our dataset card): two jets at +-phi_c with half-width 20 degrees, bump on the
  northern jet only, tilted planets, hyperviscosity ``nu4 = nu0 R^2 / 32^2 * (256 / lmax)^4``.

Tilted planets are built without interpolation (docs/datasets/galewsky.md "Our method"): trajectory ``b``
has a rotation ``R_b`` (solver frame -> output frame, rotation vector ``rot_angle * rot_axis``),
runs with Coriolis ``f = 2 Omega (R_b z) . r``, and its initial condition is evaluated at the
back-rotated points ``R_b^T r`` (every piece is an analytic function of those), with the wind
vector mapped by ``R_b``. The run is then the canonical-frame physics seen in the output frame.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import torch

from dandelion.sphere import SphereGrid

from .integrators import make_stepper
from .shallow_water import EARTH_OMEGA, EARTH_RADIUS, GRAVITY, ShallowWater, SWState, cfl_limits, check_cfl
from .spectral import SpectralCore
from .time_stepping import Simulation, check_finite

__all__ = [
    "GALEWSKY_MIN_LMAX",
    "GALEWSKY_PARAMS",
    "SPEED_FACTOR",
    "JET_HALF_WIDTH",
    "BUMP_ALPHA",
    "BUMP_BETA",
    "FRAME_SECONDS",
    "galewsky_default_dt",
    "hyperviscosity",
    "rotation_matrices",
    "jet_wind",
    "balanced_height",
    "bump_height",
    "wrap_longitude",
    "galewsky_fields",
    "williamson2_fields",
    "ShallowWaterSimulation",
    "GalewskySimulation",
    "canonical_galewsky",
    "williamson2_simulation",
]

#: Minimum solver band limit (number of degrees) that resolves the card's physics: the upstream
#: Dedalus runs keep degrees <= 255. Below it the card's resolution rule for the hyperviscosity
#: (``nu ~ (256/lmax)^4``) damps the vortex scales visibly (e-folding at l = 32 is 4.3 d at 256
#: but 6.4 h at lmax = 128), so datasets made below it are ``reduced``.
GALEWSKY_MIN_LMAX = 256
#: Frame cadence of the dataset [s] (4 h); default steps divide it exactly.
FRAME_SECONDS = 14400.0
#: Half-width of each jet [rad] (docs/datasets/galewsky.md: phi_a,b = c -+ 20 degrees).
JET_HALF_WIDTH = math.radians(20.0)
#: Bump widths of Galewsky et al. (2004) eq. (4): zonal alpha = 1/3 rad, meridional beta = 1/15 rad.
BUMP_ALPHA = 1.0 / 3.0
BUMP_BETA = 1.0 / 15.0
#: Keys of the ``params`` dict of :class:`GalewskySimulation`, each a (B,) tensor.
GALEWSKY_PARAMS = (
    "u_max",
    "phi_c",
    "h_hat",
    "H",
    "bump_lon",
    "bump_dlat",
    "rot_axis_x",
    "rot_axis_y",
    "rot_axis_z",
    "rot_angle",
)
#: Expected peak wind over the initial jet maximum: the speed of the up-front Courant limit.
SPEED_FACTOR = 1.2


def galewsky_default_dt(lmax: int) -> float:
    """A stable step [s] dividing the 4-h frame exactly: ``14400 / ceil(14400 / min(900, 300*256/lmax))``.

    300 s at ``lmax = 256`` (the card's step; Courant number 1.44 for 120 m/s winds), the same
    Courant number at other band limits, at most 900 s. Passes :func:`check_cfl` for the default
    scheme ``"ars343"`` with jets up to 100 m/s.
    """
    if int(lmax) < 2:
        raise ValueError(f"lmax={lmax} must be >= 2")
    target = min(900.0, 300.0 * 256.0 / float(lmax))
    return FRAME_SECONDS / math.ceil(FRAME_SECONDS / target - 1e-9)


def hyperviscosity(nu0: float, lmax: int, radius: float = EARTH_RADIUS) -> float:
    """Card's hyperviscosity ``nu4 = nu0 R^2 / 32^2 * (256 / lmax)^4`` [m^4/s] (docs/datasets/galewsky.md).

    ``nu0 = 1e5`` m^2/s gives 3.96e15 m^4/s at ``lmax = 256``: e-folding 98 s at l = 255.
    """
    return float(nu0) * radius**2 / 32.0**2 * (256.0 / float(lmax)) ** 4


# ---------------------------------------------------------------------------- geometry helpers
def rotation_matrices(axis: torch.Tensor, angle: torch.Tensor) -> torch.Tensor:
    """Rotation matrices (B, 3, 3) of rotation vectors ``angle * axis/|axis|`` (Rodrigues).

    ``axis`` (B, 3), ``angle`` (B,) [rad]. A zero axis with zero angle gives the identity.
    """
    axis = torch.as_tensor(axis, dtype=torch.float64)
    angle = torch.as_tensor(angle, dtype=torch.float64, device=axis.device).reshape(-1)
    n = axis.norm(dim=-1, keepdim=True)
    if bool(((n.reshape(-1) == 0) & (angle != 0)).any()):
        raise ValueError("rotation axis is zero for a non-zero rotation angle: give rot_axis_x/y/z of a unit vector")
    k = axis / torch.where(n > 0, n, torch.ones_like(n))
    K = torch.zeros(k.shape[0], 3, 3, dtype=torch.float64, device=axis.device)
    K[:, 0, 1], K[:, 0, 2], K[:, 1, 2] = -k[:, 2], k[:, 1], -k[:, 0]
    K = K - K.transpose(1, 2)
    s, c = torch.sin(angle).reshape(-1, 1, 1), torch.cos(angle).reshape(-1, 1, 1)
    eye = torch.eye(3, dtype=torch.float64, device=axis.device).expand_as(K)
    return eye + s * K + (1 - c) * (K @ K)


def wrap_longitude(dlon: torch.Tensor) -> torch.Tensor:
    """Longitude difference wrapped to ``(-pi, pi]``."""
    return math.pi - torch.remainder(math.pi - dlon, 2.0 * math.pi)


def jet_wind(lat: torch.Tensor, u_max: torch.Tensor, lat_a: torch.Tensor, lat_b: torch.Tensor) -> torch.Tensor:
    """Compact jet of Galewsky et al. (2004) eq. (2): ``(u_max/e_n) exp(1/((phi-phi_a)(phi-phi_b)))``
    on ``phi_a < phi < phi_b``, 0 elsewhere, ``e_n = exp(-4/(phi_b-phi_a)^2)`` [m/s].

    ``lat`` (B, ...) [rad]; ``u_max, lat_a, lat_b`` broadcastable to it.
    """
    inside = (lat > lat_a) & (lat < lat_b)
    prod = torch.where(inside, (lat - lat_a) * (lat - lat_b), -torch.ones_like(lat))
    en = torch.exp(-4.0 / (lat_b - lat_a) ** 2)
    return torch.where(inside, (u_max / en) * torch.exp(1.0 / prod), torch.zeros_like(lat))


def _jets(lat, jets):
    return sum(jet_wind(lat, um, la, lb) for um, la, lb in jets)


def balanced_height(
    lat: torch.Tensor,
    jets,
    *,
    radius=EARTH_RADIUS,
    omega=EARTH_OMEGA,
    gravity=GRAVITY,
    n_panels: int = 512,
    n_gauss: int = 16,
) -> torch.Tensor:
    """Height [m] in gradient-wind balance with the zonal jets, area mean 0 (Galewsky et al. 2004, eq. 3).

    ``dh/dphi = -(1/g) u (2 Omega R sin(phi) + u tan(phi))`` integrated from the south pole with
    composite Gauss-Legendre quadrature (``n_panels`` panels of ``n_gauss`` nodes; exact to
    round-off for these smooth jets, no interpolation), then the area mean removed.

    Parameters
    ----------
    lat : tensor (B, N) [rad], the latitudes where h is wanted (per trajectory).
    jets : list of ``(u_max, lat_a, lat_b)`` each a (B, 1) tensor.
    """
    dev = lat.device
    xi, wq = _gauss(n_gauss, dev)
    edges = torch.linspace(-math.pi / 2, math.pi / 2, n_panels + 1, dtype=torch.float64, device=dev)
    width = math.pi / n_panels

    def rhs(phi):  # phi (B, N) -> (B, N); jets hold (B, 1) tensors
        u = _jets(phi, jets)
        return -(u / gravity) * (2.0 * omega * radius * torch.sin(phi) + u * torch.tan(phi))

    # panel integrals and their cumulative sums from the south pole, (B, n_panels + 1)
    B = lat.shape[0]
    nodes = (edges[:-1, None] + 0.5 * width * (xi + 1.0)).reshape(1, -1)  # (1, P*q)
    f = rhs(nodes.expand(B, -1)).reshape(B, n_panels, n_gauss)
    panel = 0.5 * width * (f * wq).sum(-1)
    cum = torch.cat([torch.zeros(B, 1, dtype=torch.float64, device=dev), torch.cumsum(panel, dim=1)], dim=1)

    def h_at(phi):  # phi (B, N) -> (B, N)
        k = torch.clamp(torch.floor((phi + math.pi / 2) / width), 0, n_panels - 1).long()
        start = edges[k]
        part_nodes = start[..., None] + 0.5 * (phi - start)[..., None] * (xi + 1.0)  # (B, N, q)
        fq = rhs(part_nodes.reshape(B, -1)).reshape(part_nodes.shape)
        return torch.gather(cum, 1, k) + 0.5 * (phi - start) * (fq * wq).sum(-1)

    # area mean over the sphere: (1/2) int h cos(phi) dphi, with the same composite rule
    hn = h_at(nodes.expand(B, -1))
    mean = 0.25 * width * (hn * torch.cos(nodes) * wq.repeat(n_panels)).sum(-1, keepdim=True)
    return h_at(lat) - mean


def _gauss(n, device):
    x, w = np.polynomial.legendre.leggauss(n)
    return torch.as_tensor(x, device=device), torch.as_tensor(w, device=device)


def bump_height(
    lat: torch.Tensor, lon: torch.Tensor, h_hat, lat_c, lon_c, *, alpha: float = BUMP_ALPHA, beta: float = BUMP_BETA
) -> torch.Tensor:
    """Height perturbation of Galewsky et al. (2004) eq. (4) [m]:
    ``h_hat cos(phi) exp(-(dlon/alpha)^2) exp(-((phi_c - phi)/beta)^2)`` with ``dlon`` the longitude
    difference to ``lon_c`` wrapped to ``(-pi, pi]`` (so the bump is whole across the 0/360 seam).
    Defaults: zonal width ``alpha = 1/3`` rad, meridional ``beta = 1/15`` rad (the paper, not the
    swapped widths of the reference code)."""
    dlon = wrap_longitude(lon - lon_c)
    return h_hat * torch.cos(lat) * torch.exp(-((dlon / alpha) ** 2)) * torch.exp(-(((lat_c - lat) / beta) ** 2))


def _frame(points):
    xyz, east, north = points
    return xyz.reshape(3, -1), east.reshape(3, -1), north.reshape(3, -1), xyz.shape[1:]


def galewsky_fields(points, rot: torch.Tensor, jets, bumps, *, radius=EARTH_RADIUS, omega=EARTH_OMEGA, gravity=GRAVITY):
    """Galewsky-type initial fields ``(u, v, h)`` (B, ...) at given points of the output frame.

    Parameters
    ----------
    points : ``(xyz, east, north)`` each (3, ...) float64 (e.g. a SphereGrid's).
    rot : (B, 3, 3) rotation solver frame -> output frame (identity for untilted planets).
    jets : list of ``(u_max, lat_a, lat_b)`` each (B,) tensors [m/s, rad, rad].
    bumps : list of ``(h_hat, lat_c, lon_c)`` each (B,) tensors [m, rad, rad] (solver frame).

    Returns ``u`` (east), ``v`` (north) [m/s] and ``h`` [m, departure from H, balanced part with
    area mean 0 plus the bumps], evaluated at the back-rotated points exactly.
    """
    xyz, east, north, shape = _frame(points)
    dev = rot.device
    xyz, east, north = xyz.to(dev), east.to(dev), north.to(dev)
    p = torch.einsum("bji,jn->bin", rot, xyz)  # R^T x, (B, 3, N)
    lat_p = torch.asin(torch.clamp(p[:, 2], -1.0, 1.0))
    lon_p = torch.atan2(p[:, 1], p[:, 0])
    jets = [tuple(torch.as_tensor(t, dtype=torch.float64, device=dev).reshape(-1, 1) for t in j) for j in jets]
    u_p = _jets(lat_p, jets)
    a = rot[:, :, 2]  # planet axis R z, (B, 3)
    axx = torch.cross(a[:, :, None].expand(-1, -1, xyz.shape[1]), xyz[None].expand(a.shape[0], -1, -1), dim=1)
    nrm = axx.norm(dim=1, keepdim=True)
    w = u_p[:, None] * axx / torch.where(nrm > 0, nrm, torch.ones_like(nrm))
    u = (w * east).sum(1)
    v = (w * north).sum(1)
    h = balanced_height(lat_p, jets, radius=radius, omega=omega, gravity=gravity)
    for h_hat, lat_c, lon_c in bumps:
        h = h + bump_height(
            lat_p,
            lon_p,
            *(torch.as_tensor(t, dtype=torch.float64, device=dev).reshape(-1, 1) for t in (h_hat, lat_c, lon_c)),
        )
    B = rot.shape[0]
    return u.reshape(B, *shape), v.reshape(B, *shape), h.reshape(B, *shape)


def williamson2_fields(
    points,
    axis: torch.Tensor,
    *,
    u0: float | None = None,
    gh0: float = 2.94e4,
    radius=EARTH_RADIUS,
    omega=EARTH_OMEGA,
    gravity=GRAVITY,
):
    """Williamson et al. (1992) case 2 for a planet rotating about ``axis`` (B, 3).

    Solid-body flow ``u = u0 a x r`` about the planet axis ``a`` with
    ``g h_total = gh0 - (R Omega u0 + u0^2/2) (a . r)^2`` (eqs. 90-95; ``alpha`` tilts are
    ``a = (-sin alpha, 0, cos alpha)``). ``u0`` defaults to ``2 pi R / 12 days``.

    Returns ``(u, v, h, H)``: ``u, v, h`` (B, ...) with ``h`` the departure from ``H = gh0/g`` [m].
    """
    xyz, east, north, shape = _frame(points)
    u0 = 2.0 * math.pi * radius / (12.0 * 86400.0) if u0 is None else float(u0)
    a = torch.as_tensor(axis, dtype=torch.float64).reshape(-1, 3)
    a = a / a.norm(dim=-1, keepdim=True)
    xyz, east, north = xyz.to(a.device), east.to(a.device), north.to(a.device)
    axr = torch.cross(a[:, :, None].expand(-1, -1, xyz.shape[1]), xyz[None].expand(a.shape[0], -1, -1), dim=1)
    u = u0 * (axr * east).sum(1)
    v = u0 * (axr * north).sum(1)
    ar = a @ xyz
    h = -(radius * omega * u0 + 0.5 * u0**2) * ar**2 / gravity
    B = a.shape[0]
    return u.reshape(B, *shape), v.reshape(B, *shape), h.reshape(B, *shape), gh0 / gravity


# ---------------------------------------------------------------------------- simulations
class ShallowWaterSimulation(Simulation):
    """A batch of shallow-water trajectories advanced by the driver of :mod:`dandelion.solvers.time_stepping`.

    Attributes: ``time`` [s], ``state`` (:class:`SWState`); methods ``advance_to(t)``, ``fields(grid)``.
    Built by :class:`GalewskySimulation`, :func:`canonical_galewsky`, :func:`williamson2_simulation`.

    Parameters
    ----------
    equation : ShallowWater
    state : SWState
    dt : float
        Step [s]; ``advance_to`` lands exactly on any ``t`` (equal steps of ``dt`` where it divides the
        interval, else equal shorter ones); a ``dt`` longer than the interval is refused.
    scheme : str
        Integrator name (``"ars343"``, ``"ars222"``, ``"rk4"``).
    params : dict of (B,) tensors, quoted in error messages.
    expected_speed : float or tensor (B,)
        Largest wind expected [m/s]: the up-front Courant limit (:func:`cfl_limits`); during the run
        the measured winds are checked every ``check_every`` steps.
    check_every : int
        Steps between non-finite and stability checks (and always at the end of ``advance_to``).

    Raises
    ------
    ValueError
        For a step violating a stability limit (the message gives the largest safe dt).
    """

    name = "shallow water"

    def __init__(
        self,
        equation: ShallowWater,
        state: SWState,
        *,
        dt: float,
        scheme: str,
        params: dict | None = None,
        expected_speed=0.0,
        check_every: int = 64,
    ):
        self.equation = equation
        self.core = equation.core
        self.state = state
        self.dt = self.fixed_step = float(dt)
        self.scheme = scheme
        self.params = dict(params or {})
        self.time = 0.0
        self.check_every = int(check_every)
        self.n_steps = 0
        self._steppers: dict[float, Callable] = {}
        check_cfl(self.dt, **self._limit_args(expected_speed))

    def _limit_args(self, speed) -> dict:
        eq = self.equation
        return dict(
            lmax=self.core.lmax,
            radius=self.core.radius,
            max_speed=speed,
            scheme=self.scheme,
            gravity_wave_speed=torch.sqrt(eq.gravity * eq.H.reshape(-1)),
            diffusion=eq.nu.reshape(-1),
        )

    @property
    def batch_size(self) -> int:
        return self.state.h.shape[0]

    def stability_limits(self):
        """Courant limits on the measured winds of each trajectory (:func:`cfl_limits`)."""
        u, v = self.core.vrtdiv_to_uv(self.state.vrt, self.state.div)
        return cfl_limits(**self._limit_args(torch.sqrt(u * u + v * v).flatten(1).max(-1).values))

    def max_step(self) -> float:
        return self.dt

    def step(self, h, active=None) -> None:
        h = float(h)
        if h not in self._steppers:
            self._steppers[h] = make_stepper(self.scheme, self.equation, h)
        self.state = self._steppers[h](self.state)
        self.n_steps += 1

    def fields(self, grid: SphereGrid) -> dict[str, torch.Tensor]:
        """``{"h", "u", "v"}`` float64 (B, grid.nlat, grid.nlon): the state truncated to
        ``min(lmax, grid.lmax)`` and synthesised exactly at ``grid``'s nodes. ``h`` [m] is the
        departure from the mean depth, ``u`` eastward and ``v`` northward [m/s].

        Raises ``FloatingPointError`` naming the trajectory if a state is non-finite.
        """
        check_finite(self)
        s = self.state
        h = self.core.synthesise(s.h, grid)
        u, v = self.core.synthesise_uv(s.vrt, s.div, grid)
        return {"h": h, "u": u, "v": v}

    def vorticity(self, grid: SphereGrid) -> torch.Tensor:
        """Relative vorticity [1/s] (B, nlat, nlon) at ``grid``'s nodes (truncated as in :meth:`fields`)."""
        return self.core.synthesise(self.state.vrt, grid)

    def invariants(self) -> dict[str, torch.Tensor]:
        """Mass [m^3], energy [m^5/s^2], enstrophy, potential enstrophy, each (B,)."""
        eq, s = self.equation, self.state
        return {
            "mass": eq.mass(s),
            "energy": eq.energy(s),
            "enstrophy": eq.enstrophy(s),
            "potential_enstrophy": eq.potential_enstrophy(s),
        }


def _check_params(params: dict) -> tuple[dict, int]:
    missing = [k for k in GALEWSKY_PARAMS if k not in params]
    if missing:
        raise ValueError(
            f"GalewskySimulation params lack {missing}; give every key of {GALEWSKY_PARAMS} as a (B,) tensor"
        )
    out = {k: torch.as_tensor(params[k], dtype=torch.float64).reshape(-1) for k in GALEWSKY_PARAMS}
    sizes = {k: v.numel() for k, v in out.items()}
    B = max(sizes.values())
    bad = {k: n for k, n in sizes.items() if n not in (1, B)}
    if bad:
        raise ValueError(f"GalewskySimulation params have inconsistent batch sizes {bad} (expected {B} or 1)")
    out = {k: v.expand(B).clone() for k, v in out.items()}
    if bool((out["H"] <= 0).any()):
        raise ValueError(f"mean depth H must be positive, got {out['H'].tolist()}")
    if bool((out["phi_c"] - JET_HALF_WIDTH <= 0).any() or (out["phi_c"] + JET_HALF_WIDTH >= math.pi / 2).any()):
        raise ValueError(
            f"jet centre phi_c={out['phi_c'].tolist()} rad must lie in (20, 70) degrees so the jets "
            "(half-width 20 degrees) stay inside one hemisphere"
        )
    return out, B


class GalewskySimulation(ShallowWaterSimulation):
    """Batched Galewsky two-jet runs (docs/datasets/galewsky.md) on tilted planets, simulation protocol.

    Parameters
    ----------
    params : dict of (B,) tensors with keys :data:`GALEWSKY_PARAMS`:
        ``u_max`` [m/s] jet maximum; ``phi_c`` [rad] jet centres at +-phi_c (half-width 20 deg);
        ``h_hat`` [m] bump amplitude; ``H`` [m] mean depth; ``bump_lon`` [rad] bump centre longitude
        and ``bump_dlat`` [rad] its offset from the northern jet centre (solver frame; the bump sits
        on the northern jet only, widths 1/3 rad zonal and 1/15 rad meridional);
        ``rot_axis_x/y/z``, ``rot_angle`` [rad]: rotation R (solver -> output frame); the planet's
        axis is ``R z`` and the fields come out in the output frame.
    lmax : int
        Solver band limit (number of degrees); :data:`GALEWSKY_MIN_LMAX` resolves the physics.
    dt : float
        Time step [s], e.g. :func:`galewsky_default_dt`; checked with :func:`check_cfl`.
    nu : float
        The card's ``nu0`` [m^2/s], the Laplacian-equivalent viscosity that sets the
        hyperviscosity ``nu4 = nu R^2/32^2 (256/lmax)^4`` [m^4/s] (:func:`hyperviscosity`; 1e5 is
        the card's value, 0 is inviscid). With ``viscosity="laplacian"`` it is a plain
        Laplacian viscosity ``nu`` [m^2/s] instead.
    device : str or torch.device
    scheme : str
        ``"ars343"`` (default: gravity waves implicit, explicit part stable to Courant 2.8 without
        diffusion), ``"ars222"`` (half the cost, needs the hyperviscosity) or ``"rk4"``.

    Raises
    ------
    ValueError
        For missing or inconsistent parameters, or a step violating the CFL limit.
    """

    def __init__(
        self,
        params: dict,
        *,
        lmax: int,
        dt: float,
        nu: float,
        device="cpu",
        scheme: str = "ars343",
        viscosity: str = "hyper",
    ):
        p, B = _check_params(params)
        if viscosity not in ("hyper", "laplacian"):
            raise ValueError(f"viscosity={viscosity!r}: use 'hyper' (card) or 'laplacian'")
        if not float(nu) >= 0:
            raise ValueError(f"nu={nu} must be >= 0 [m^2/s]")
        if not dt > 0:
            raise ValueError(f"time step dt={dt} must be positive")
        p = {k: v.to(device) for k, v in p.items()}
        core = SpectralCore(lmax, dealias=1.5, radius=EARTH_RADIUS).to(device)
        rot = rotation_matrices(torch.stack([p["rot_axis_x"], p["rot_axis_y"], p["rot_axis_z"]], -1), p["rot_angle"])
        if viscosity == "hyper":
            nu_eff, order = hyperviscosity(nu, lmax), 2
        else:
            nu_eff, order = float(nu), 1
        eq = ShallowWater(core, H=p["H"], axis=rot[:, :, 2], nu=nu_eff, diffusion_order=order)
        w = JET_HALF_WIDTH
        jets = [(p["u_max"], p["phi_c"] - w, p["phi_c"] + w), (p["u_max"], -p["phi_c"] - w, -p["phi_c"] + w)]
        bumps = [(p["h_hat"], p["phi_c"] + p["bump_dlat"], p["bump_lon"])]
        g = core.grid_spec
        u, v, h = galewsky_fields((g.xyz.to(device), g.east.to(device), g.north.to(device)), rot, jets, bumps)
        super().__init__(
            eq,
            eq.state_from_grid(u, v, h),
            dt=dt,
            scheme=scheme,
            params=p,
            expected_speed=SPEED_FACTOR * p["u_max"].abs(),
        )
        self.rotation = rot
        self.lmax = int(lmax)
        self.nu4 = nu_eff if viscosity == "hyper" else None


def canonical_galewsky(
    lmax: int,
    *,
    dt: float,
    nu: float = 1e5,
    h_hat: float = 120.0,
    scheme: str = "rk4",
    bump_lon: float = 0.0,
    rotation: torch.Tensor | None = None,
    device="cpu",
) -> ShallowWaterSimulation:
    """The canonical case of Galewsky et al. (2004): one jet on ``pi/7 < phi < 5pi/14``, u_max = 80 m/s,
    H = 10 km, bump ``h_hat`` = 120 m at ``phi_2 = pi/4`` and longitude ``bump_lon``, Laplacian
    viscosity ``nu`` [m^2/s] on all fields (their §3.3 uses 1e5). ``rotation`` (3, 3) optionally
    tilts the planet (solver -> output frame). Batch size 1.
    """
    rot = (
        torch.eye(3, dtype=torch.float64)[None]
        if rotation is None
        else torch.as_tensor(rotation, dtype=torch.float64).reshape(1, 3, 3)
    )
    rot = rot.to(device)
    if not dt > 0:
        raise ValueError(f"time step dt={dt} must be positive")
    core = SpectralCore(lmax, dealias=1.5, radius=EARTH_RADIUS).to(device)
    eq = ShallowWater(core, H=1e4, axis=rot[:, :, 2], nu=nu, diffusion_order=1)
    one = lambda x: torch.tensor([x], dtype=torch.float64, device=device)
    jets = [(one(80.0), one(math.pi / 7), one(5 * math.pi / 14))]
    bumps = [(one(h_hat), one(math.pi / 4), one(bump_lon))] if h_hat != 0 else []
    g = core.grid_spec
    u, v, h = galewsky_fields((g.xyz.to(device), g.east.to(device), g.north.to(device)), rot, jets, bumps)
    params = {"u_max": one(80.0), "h_hat": one(h_hat), "H": one(1e4)}
    return ShallowWaterSimulation(
        eq, eq.state_from_grid(u, v, h), dt=dt, scheme=scheme, params=params, expected_speed=SPEED_FACTOR * 80.0
    )


def williamson2_simulation(
    lmax: int, alpha, *, dt: float, scheme: str = "rk4", nlat: int | None = None, device="cpu"
) -> tuple[ShallowWaterSimulation, dict]:
    """Williamson case 2 for tilt angles ``alpha`` (B,) [rad] (axis ``(-sin a, 0, cos a)``), inviscid.

    Returns the simulation and the exact (steady) transform-grid fields ``{"u", "v", "h"}``.
    """
    alpha = torch.as_tensor(alpha, dtype=torch.float64).reshape(-1)
    axis = torch.stack([-torch.sin(alpha), torch.zeros_like(alpha), torch.cos(alpha)], -1).to(device)
    core = SpectralCore(lmax, dealias=1.5, radius=EARTH_RADIUS, nlat=nlat, nlon=None if nlat is None else 2 * nlat).to(
        device
    )
    g = core.grid_spec
    u, v, h, H = williamson2_fields((g.xyz, g.east, g.north), axis)
    u0 = 2.0 * math.pi * EARTH_RADIUS / (12.0 * 86400.0)
    eq = ShallowWater(core, H=torch.full_like(alpha, H), axis=axis)
    sim = ShallowWaterSimulation(
        eq, eq.state_from_grid(u, v, h), dt=dt, scheme=scheme, params={"alpha": alpha}, expected_speed=u0
    )
    return sim, {"u": u, "v": v, "h": h, "H": H}
