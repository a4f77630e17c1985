"""A wind-driven single-basin gyre in the two-layer ocean against Sverdrup (1947) and Munk (1950).

Dedicated configuration: a closed sector basin 15-45 N (walls on all sides), uniform upper-layer T and
S (no restoring), interface diffusion and diapycnal flux off, a single-gyre wind
``tau_x = -tau0 cos(pi (phi - 15 deg) / 30 deg)``. Both baroclinic modes are made fast (reduced gravities
0.5 and ~2 m/s^2, layers 250 and 1000 m: deformation radii of several hundred km) so that the long
Rossby waves cross the basin in days and the gyre equilibrates in a short run.

Checks at 30 N (Munk 1950, *J. Meteorol.* 7, 80-93; Pedlosky 1996, *Ocean Circulation Theory*, §2.5):

* total (both layers) meridional transport east of 5 Munk widths from the western wall, against the
  Sverdrup transport ``curl tau / (rho0 beta)`` integrated over the same longitudes (within 20%);
* the western boundary current's width: Munk's no-slip boundary-layer solution with the Sverdrup interior,
  ``psi = C (x - L) b(x)``, ``b = 1 - exp(-x / 2 delta) (cos(k x) + sin(k x) / sqrt(3))``, ``k = sqrt(3) / (2 delta)``
  (Munk 1950, eq. 26; Pedlosky 1996, §2.5; ``x`` from the western wall, ``L`` the basin width), has its
  meridional transport ``d psi / dx`` change sign at the ``x0`` where ``b + (x - L) b' = 0``; the ``delta`` whose
  ``x0`` is the measured sign change must lie within 15% of ``(A / beta)^(1/3)`` where the layer is resolved
  (3 cells), within a factor 1.5 at 1.5 cells. (Without the interior term, ``x0 = 2 pi delta / sqrt(3)``, the
  estimate is biased low by 23% at 3 cells in this basin.)
* that formula is Munk's boundary-layer limit (``delta`` small against the basin width and the wind's meridional
  scale); the exact steady solution of Munk's equation ``beta psi_x = curl tau / rho0 + A lap^2 psi`` in this basin
  (Cartesian beta-plane, no-slip walls, finite differences: :func:`munk_reference`) reads 1.12 on the same
  estimator at 3 cells. The model's width must match that exact solution within 3% (it does to 0.2% at 3, 4 and 6
  cells per Munk width: ``docs/global_ocean_diagnostics.py munk``).
"""

import math

import torch

from dandelion.solvers.ocean import RHO0
from dandelion.solvers.ocean_munk import munk_reference, munk_width_from_crossing, sector_gyre, sector_wind


def curl_tau(phi: float, radius: float, tau0: float) -> float:
    """Wind-stress curl on the sphere, -(1 / (a cos phi)) d(tau cos phi)/d phi, by autograd."""
    x = torch.tensor(phi, dtype=torch.float64, requires_grad=True)
    (sector_wind(x, 0.0, tau0) * torch.cos(x)).backward()
    return float(-x.grad / (radius * math.cos(phi)))


def gyre(res_deg: float, width_deg: float, munk_cells: float, days: float):
    """Run the basin; return (interior transport / Sverdrup, measured WBC width / Munk width, Munk width in cells,
    the same ratio for the exact solution of Munk's equation in this basin)."""
    b = sector_gyre(res_deg, width_deg, munk_cells)
    s, t = b.model.rest_state(), 0.0
    for _ in range(round(days * 86400.0 / b.dt)):
        s = b.model.step(s, t)
        t += b.dt
    V = b.transport(s)  # m^3/s per column
    i0 = math.ceil(5.0 * b.munk / b.dxv)
    sverdrup = curl_tau(b.phi, b.grid.radius, b.params.tau0) / (RHO0 * b.beta) * b.dxv * (b.nx - i0)
    ratio = float(V[i0:].sum()) / sverdrup
    width = munk_width_from_crossing(b.crossing(V), b.nx * b.dxv)  # from the wall to the sign change
    assert float(V[0]) > 0 and sverdrup < 0  # northward western boundary current, southward interior
    reference = munk_reference(b.munk, b.nx * b.dxv, b.ny * b.grid.dy, b.beta, b.params.tau0)
    return ratio, width / b.munk, b.munk / b.dxv, reference


def test_gyre_sverdrup_transport_and_munk_width():
    """1-degree cells, Munk width 3 cells, 40 days (about 15 s on one core; the width steady to 0.1% over the last
    10 days): against Munk's boundary-layer formula within 15%, against the exact solution of Munk's equation
    within 3%."""
    ratio, width, cells, reference = gyre(1.0, 30.0, 3.0, 40.0)
    assert cells >= 3.0
    assert abs(ratio - 1.0) < 0.2, ratio
    assert abs(width - 1.0) < 0.15, width
    assert abs(width / reference - 1.0) < 0.03, (width, reference)


def test_gyre_cheap_check():
    """CI version: 2-degree cells, Munk width 1.5 cells, 12 days: same bounds, coarser and shorter."""
    ratio, width, _, _ = gyre(2.0, 40.0, 1.5, 12.0)
    assert abs(ratio - 1.0) < 0.2, ratio
    assert 1 / 1.5 < width < 1.5, width
