"""Diagnostics of the ``global_ocean`` solver: spin-up drift, the ``diff_kr`` sweep axis's response, and the
western boundary current's width against Munk (1950).

Usage::

    OMP_NUM_THREADS=1 python docs/global_ocean_diagnostics.py spinup --years 8 --out docs/global_ocean_diagnostics.json
    OMP_NUM_THREADS=1 python docs/global_ocean_diagnostics.py munk --out docs/global_ocean_diagnostics.json

Both commands update (merge into) the JSON file given by ``--out``.

``spinup`` runs the dataset's global configuration (:class:`dandelion.datasets.global_ocean.GlobalOceanScenario`
settings, idealised continents) on an ``--nlat x --nlon`` ocean grid (default 32 x 64) from rest for ``--years``
years, one trajectory per ``diff_kr`` value of the sweep (the other four parameters at their middle values), and
records per model year (means over 12 samples, every ``365 / 12`` days):

* ``h1_mean``: wet-area mean upper-layer thickness (m);
* ``h1_rms_change``: wet-area rms of the change of the annual-mean upper-layer thickness map from the previous year
  (m; the drift of the pattern, which a fixed mean does not show);
* ``h1_std``: wet-area standard deviation of the upper-layer thickness (m; the interface tilt of the gyres and
  the equatorial wave guide);
* ``upwelling_sv``: area integral of the upward diapycnal volume flux (lower -> upper layer) in Sv
  (1 Sv = 1e6 m^3/s), ``entrainment_sv`` its part from the thin-layer entrainment alone when the model exposes it;
* ``gyre_sv``: the North Pacific-like subtropical gyre transport: at the v-face row nearest 30 N in the wide basin
  (40-280 E), the maximum over longitude of the westward-accumulated meridional volume transport of both layers
  from the eastern wall, ``max_x |int_x^east (h_1 v_1 + h_2 v_2) dx|`` (Sv).

``munk`` runs the closed single-gyre sector basin of :func:`dandelion.solvers.ocean_munk.sector_gyre` (15-45 N,
30 degrees wide, 1-degree cells, fast baroclinic modes) with Munk widths ``delta = (A / beta)^(1/3)`` (Munk 1950,
*J. Meteorol.* 7, 80-93) of 3 and 4 cells and reports the measured width from the first sign change ``x0`` of the
meridional transport of both layers at 30 N, two ways: ``ratio_naive = x0 sqrt(3) / (2 pi) / delta`` (the boundary
layer alone, ``v ~ exp(-x / 2 delta) sin(sqrt(3) x / 2 delta)``), and ``ratio`` = the ``delta`` of Munk's no-slip
solution with the Sverdrup interior, ``psi = C (x - L) b(x)``, ``b = 1 - exp(-x / 2 delta) (cos kx + sin kx /
sqrt(3))``, ``k = sqrt(3) / (2 delta)`` (Pedlosky 1996, *Ocean Circulation Theory*, §2.5), whose transport changes
sign at the measured ``x0``, over ``(A / beta)^(1/3)``. The interior's southward flow moves the sign change towards
the wall, so the naive ratio is biased low (0.77 for an exact Munk solution at 3 cells in this basin).

The formula is Munk's boundary-layer solution, the limit ``delta / L -> 0`` and ``delta / L_y -> 0`` (``L_y``
the wind's meridional scale). ``ratio_reference`` is the same estimator applied to the exact solution of Munk's
equation ``beta psi_x = curl tau / rho0 + A lap^2 psi`` in the same basin (a Cartesian beta-plane at 30 N with the
same ``L``, ``L_y``, wind and no-slip walls ``psi = d psi / dn = 0``, second-order finite differences on 120 x 120
points, :func:`munk_reference`), and ``ratio_over_reference`` the model's ratio over it: the model's width against
Munk's theory without the boundary-layer approximation. ``ratio_by_day`` is the ratio every 5 days (steadiness).
The cases fix ``delta`` = 334 km and refine the grid (1, 0.75, 0.5 degrees: 3, 4, 6 meridional cells per Munk
width), plus ``delta`` = 4 cells at 1 degree.
"""

from __future__ import annotations

import argparse
import json
import math
import pathlib
import sys
import time

import torch

from dandelion.datasets.global_ocean import GlobalOceanScenario
from dandelion.solvers.ocean_forcing import DAY
from dandelion.solvers.ocean_munk import munk_crossing, munk_reference, munk_width_from_crossing, sector_gyre
from dandelion.solvers.ocean_simulation import OceanSimulation

YEAR_DAYS = 365.0


def _gyre_transport(sim: OceanSimulation) -> torch.Tensor:
    """(B,) North Pacific-like subtropical gyre transport in Sv (module docstring)."""
    g, s = sim.grid, sim.state
    j = int(torch.argmin((g.lat_edges - math.radians(30.0)).abs()))
    lon = torch.rad2deg(g.lon)
    cols = torch.nonzero((lon > 40.0) & (lon < 280.0) & (g.wet[j] > 0) & (g.wet[j - 1] > 0)).reshape(-1)
    V = (s.v[:, :, j, cols] * g.to_v_rows(s.h)[:, :, j, cols]).sum(1) * float(g.dx_v[j, 0])  # (B, ncol) m^3/s
    psi = torch.flip(torch.cumsum(torch.flip(V, [-1]), -1), [-1])  # from the eastern wall westwards
    return psi.abs().amax(-1) / 1e6


def _diapycnal_parts(sim: OceanSimulation) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(B,) upward diapycnal flux (Sv) and, if the model exposes it, the entrainment part alone (Sv)."""
    m, g, s = sim.model, sim.grid, sim.state
    e = m._diapycnal(s.h)
    up = (e.clamp_min(0.0) * g.area * g.wet).sum((-2, -1)) / 1e6
    ent = None
    if hasattr(m, "entrainment"):
        ent = (m.entrainment(s.h) * g.area * g.wet).sum((-2, -1)) / 1e6
    return up, ent


def spinup(nlat: int, nlon: int, years: int, axis: str = "diff_kr") -> dict:
    """Run the sweep axis ``axis`` (other parameters at their middle values) for ``years`` years (module docstring)."""
    scen = GlobalOceanScenario({"nlat": nlat, "nlon": nlon})
    axes = scen.axes()
    values = axes[axis]
    B = len(values)
    params = {k: torch.tensor(values if k == axis else [v[1]] * B, dtype=torch.float64) for k, v in axes.items()}
    sim = OceanSimulation(params, nlat=nlat, nlon=nlon, settings=scen.settings())
    g = sim.grid
    w = g.area * g.wet / (g.area * g.wet).sum()
    rows = []
    prev = None
    t0 = time.time()
    for year in range(years):
        acc = {"h1": 0.0, "up": 0.0, "ent": 0.0, "gyre": 0.0}
        n = 12
        for k in range(n):
            sim.advance_to((year + (k + 1) / n) * YEAR_DAYS * DAY)
            up, ent = _diapycnal_parts(sim)
            acc["h1"] = acc["h1"] + sim.state.h[:, 0] / n
            acc["up"] = acc["up"] + up / n
            acc["ent"] = acc["ent"] + (ent / n if ent is not None else float("nan"))
            acc["gyre"] = acc["gyre"] + _gyre_transport(sim) / n
        h1 = acc["h1"]
        mean = (h1 * w).sum((-2, -1))
        std = (((h1 - mean[:, None, None]) ** 2 * w).sum((-2, -1))).sqrt()
        change = (((h1 - prev) ** 2 * w).sum((-2, -1))).sqrt() if prev is not None else torch.full((B,), float("nan"))
        prev = h1
        rows.append(
            {
                "year": year + 1,
                "h1_mean": mean.tolist(),
                "h1_std": std.tolist(),
                "h1_rms_change": change.tolist(),
                "upwelling_sv": acc["up"].tolist(),
                "entrainment_sv": torch.as_tensor(acc["ent"]).expand(B).tolist(),
                "gyre_sv": acc["gyre"].tolist(),
            }
        )
        print(
            f"year {year + 1}: h1_mean {[round(x, 2) for x in mean.tolist()]} h1_std "
            f"{[round(x, 2) for x in std.tolist()]} rms change {[round(x, 2) for x in change.tolist()]} "
            f"upwelling {[round(x, 1) for x in acc['up'].tolist()]} Sv gyre "
            f"{[round(x, 1) for x in acc['gyre'].tolist()]} Sv ({time.time() - t0:.0f} s)",
            flush=True,
        )
    return {
        "grid": [nlat, nlon],
        "dt": sim.dt,
        "years": years,
        "axis": axis,
        "values": values,
        "others": {k: v[1] for k, v in axes.items() if k != axis},
        "settings": scen.settings(),
        "per_year": rows,
    }


def munk_width(res_deg: float = 1.0, width_deg: float = 30.0, munk_cells: float = 3.0, days: float = 40.0) -> dict:
    """Measured western-boundary-current width over the Munk width in the closed sector basin (module docstring)."""
    b = sector_gyre(res_deg, width_deg, munk_cells)
    m, g, dt, nx, ny, munk, dxv, beta = b.model, b.grid, b.dt, b.nx, b.ny, b.munk, b.dxv, b.beta
    A = b.params.visc
    s, t, by_day = m.rest_state(), 0.0, {}
    per = round(5.0 * 86400.0 / dt)
    for n in range(1, round(days * 86400.0 / dt) + 1):
        s = m.step(s, t)
        t += dt
        if n % per == 0:
            by_day[round(t / 86400.0)] = munk_width_from_crossing(b.crossing(b.transport(s)), nx * dxv) / munk
    x0 = b.crossing(b.transport(s))
    naive = x0 * math.sqrt(3.0) / (2.0 * math.pi)
    fit = munk_width_from_crossing(x0, nx * dxv)
    exact = munk_crossing(munk, nx * dxv) * math.sqrt(3.0) / (2.0 * math.pi) / munk
    ref = munk_reference(munk, nx * dxv, ny * g.dy, beta)
    return {
        "res_deg": res_deg,
        "munk_cells": munk_cells,
        "munk_cells_dx": munk / dxv,
        "days": days,
        "dt": dt,
        "visc": A,
        "munk_km": munk / 1e3,
        "x0_km": x0 / 1e3,
        "basin_km": nx * dxv / 1e3,
        "ratio_naive": naive / munk,
        "ratio": fit / munk,
        "ratio_naive_of_exact_munk": exact,
        "ratio_reference": float(ref),
        "ratio_over_reference": float(fit / munk / ref),
        "ratio_by_day": by_day,
    }


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("what", choices=["spinup", "munk"])
    ap.add_argument("--nlat", type=int, default=32)
    ap.add_argument("--nlon", type=int, default=64)
    ap.add_argument("--years", type=int, default=10)
    ap.add_argument("--axis", default="diff_kr")
    ap.add_argument("--label", default=None, help="key under which the result is stored (default: the command)")
    ap.add_argument("--out", type=pathlib.Path, default=None)
    a = ap.parse_args(argv)
    torch.set_num_threads(1)
    if a.what == "spinup":
        result = spinup(a.nlat, a.nlon, a.years, a.axis)
    else:
        result = {"cases": []}
        for res, cells in ((1.0, 3.0), (0.75, 4.0), (0.5, 6.0), (1.0, 4.0)):
            r = munk_width(res, 30.0, cells, 40.0)
            print(r, flush=True)
            result["cases"].append(r)
    result["command"] = "python docs/global_ocean_diagnostics.py " + " ".join(sys.argv[1:] if argv is None else argv)
    if a.out is not None:
        data = json.loads(a.out.read_text()) if a.out.exists() else {}
        data[a.label or a.what] = result
        a.out.write_text(json.dumps(data, indent=1) + "\n")


if __name__ == "__main__":
    main()
