"""Galewsky barotropic-instability initial conditions and Williamson case 2: analytic initial states.

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

The simulations that start from these states are in :mod:`dandelion.solvers.galewsky`, which
re-exports every name of this module.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from .shallow_water import EARTH_OMEGA, EARTH_RADIUS, GRAVITY

__all__ = [
    "GALEWSKY_MIN_LMAX",
    "GALEWSKY_PARAMS",
    "galewsky_reference_params",
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


def galewsky_reference_params(batch: int = 1, **overrides) -> dict:
    """The ``params`` of :class:`~dandelion.solvers.galewsky.GalewskySimulation` for ``batch`` trajectories of
    the reference case: ``u_max`` = 80 m/s, jets at ``phi_c`` = +-pi/4, bump ``h_hat`` = 120 m on the northern jet
    axis at longitude 0, mean depth ``H`` = 10 km, untilted planet; ``overrides`` replace any key (a number, or one
    value per trajectory). Each entry is a (batch,) float64 tensor."""
    p = {
        "u_max": 80.0,
        "phi_c": math.pi / 4,
        "h_hat": 120.0,
        "H": 1e4,
        "bump_lon": 0.0,
        "bump_dlat": 0.0,
        "rot_axis_x": 0.0,
        "rot_axis_y": 0.0,
        "rot_axis_z": 1.0,
        "rot_angle": 0.0,
    }
    p.update(overrides)
    return {k: torch.as_tensor(p[k], dtype=torch.float64).reshape(-1).expand(batch).clone() for k in GALEWSKY_PARAMS}


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
