"""Speed of the Galewsky shallow-water solver next to torch-harmonics' example solver.

Wall time per simulated day per trajectory, at the band limits and batch sizes asked for, for

* ours: :class:`dandelion.solvers.galewsky.GalewskySimulation` (float64, dealiased 3/2 Gauss grid,
  IMEX ARS(3,4,3) with gravity waves implicit and exact hyperdiffusion, step
  :func:`~dandelion.solvers.galewsky.galewsky_default_dt`; also ARS(2,2,2), half the cost per step);
* torch-harmonics: ``torch_harmonics.examples.ShallowWaterSolver`` on the same grid and lmax
  (float64, explicit third-order Adams-Bashforth, so its step is bounded by the gravity-wave CFL;
  we use 90 % of the AB3 imaginary-axis limit 0.72 (as ours runs at 90 % of its limit) for 120 m/s
  winds plus sqrt(g H), rounded to divide 4 h; the run checks that it stays finite).
  It has no batch dimension: its batch-B cost per trajectory equals its batch-1 cost.

    python -m dandelion.benchmarks.solver_speed [--out solver_speed.json] [--days 0.5] [--device cpu]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import time

import torch

__all__ = ["solver_speed"]


def _sync(device):
    if str(device).startswith("cuda"):
        torch.cuda.synchronize()


def _params(B):
    from dandelion.solvers.galewsky import GALEWSKY_PARAMS

    p = {"u_max": 80.0, "phi_c": math.pi / 4, "h_hat": 120.0, "H": 1e4, "bump_lon": 0.0, "bump_dlat": 0.0,
         "rot_axis_x": 0.0, "rot_axis_y": 0.0, "rot_axis_z": 1.0, "rot_angle": 0.0}
    return {k: torch.full((B,), float(p[k]), dtype=torch.float64) for k in GALEWSKY_PARAMS}


def _th_dt(lmax):
    from dandelion.solvers.shallow_water import EARTH_RADIUS, GRAVITY

    L = lmax - 1
    speed = 120.0 + math.sqrt(GRAVITY * 1e4)
    dt_max = 0.9 * 0.72 * EARTH_RADIUS / (speed * math.sqrt(L * (L + 1)))
    return 14400.0 / math.ceil(14400.0 / dt_max)


def solver_speed(lmax_list=(42, 85), batches=(1, 8), days: float = 0.5, device="cpu", schemes=("ars343", "ars222")) -> dict:
    """Measure seconds of wall time per simulated day per trajectory.

    Returns a dict with ``machine`` info and ``rows``: one per (solver, scheme, lmax, batch) with
    ``dt``, ``steps``, ``wall_s``, ``s_per_day_per_traj`` and, for ours, ``speedup_vs_torch_harmonics``
    (batch-1 torch-harmonics time / ours per trajectory) and ``batch_gain`` (batch-1 / batch-B cost).
    """
    from torch_harmonics.examples import ShallowWaterSolver

    from dandelion.solvers.galewsky import GalewskySimulation, galewsky_default_dt

    rows = []
    for lmax in lmax_list:
        # torch-harmonics on the same transform grid and band limit as ours
        from dandelion.solvers.spectral import SpectralCore

        core = SpectralCore(lmax, dealias=1.5)
        dt_th = _th_dt(lmax)
        swe = ShallowWaterSolver(core.nlat, core.nlon, dt_th, lmax=lmax, mmax=lmax, grid="legendre-gauss").to(device).to(torch.float64)
        u = swe.galewsky_initial_condition()
        n = max(1, int(round(days * 86400.0 / dt_th)))
        u = swe.timestep(u, 3)  # warm-up
        _sync(device)
        t0 = time.perf_counter()
        u = swe.timestep(u, n)
        _sync(device)
        wall = time.perf_counter() - t0
        ok = bool(torch.isfinite(torch.view_as_real(u)).all())
        th_row = {"solver": "torch_harmonics.ShallowWaterSolver", "scheme": "ab3", "lmax": lmax, "nlat": core.nlat,
                  "nlon": core.nlon, "batch": 1, "dt": dt_th, "steps": n, "wall_s": wall, "finite": ok,
                  "s_per_day_per_traj": wall / (n * dt_th / 86400.0), "s_per_step": wall / n}
        rows.append(th_row)
        for scheme in schemes:
            base = None
            for B in batches:
                dt = galewsky_default_dt(lmax)
                sim = GalewskySimulation(_params(B), lmax=lmax, dt=dt, nu=1e5, device=device, scheme=scheme)
                sim.advance_to(dt)  # warm-up step
                n = max(1, int(round(days * 86400.0 / dt)))
                _sync(device)
                t0 = time.perf_counter()
                sim.advance_to(sim.time + n * dt)
                _sync(device)
                wall = time.perf_counter() - t0
                per = wall / (n * dt / 86400.0) / B
                base = per if B == 1 else base
                rows.append({"solver": "dandelion.GalewskySimulation", "scheme": scheme, "lmax": lmax, "nlat": sim.core.nlat,
                             "nlon": sim.core.nlon, "batch": B, "dt": dt, "steps": n, "wall_s": wall,
                             "s_per_day_per_traj": per, "s_per_step": wall / n,
                             "speedup_vs_torch_harmonics": th_row["s_per_day_per_traj"] / per,
                             "batch_gain": (base / per) if base else None})
    return {"machine": {"platform": platform.platform(), "processor": platform.processor(), "device": str(device),
                        "torch": torch.__version__, "threads": torch.get_num_threads(),
                        "cuda": torch.cuda.get_device_name(0) if str(device).startswith("cuda") else None},
            "days": days, "rows": rows}


def main(argv=None):
    ap = argparse.ArgumentParser(description="solver speed: ours vs torch-harmonics ShallowWaterSolver")
    ap.add_argument("--out", default="solver_speed.json")
    ap.add_argument("--days", type=float, default=0.5)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--lmax", type=int, nargs="+", default=[42, 85])
    ap.add_argument("--batches", type=int, nargs="+", default=[1, 8])
    args = ap.parse_args(argv)
    res = solver_speed(tuple(args.lmax), tuple(args.batches), days=args.days, device=args.device)
    for r in res["rows"]:
        extra = f"  x{r['speedup_vs_torch_harmonics']:.2f} vs th, batch gain {r['batch_gain'] or 1:.2f}" if "batch_gain" in r else ""
        print(f"{r['solver']:38s} {r['scheme']:7s} lmax {r['lmax']:4d} B {r['batch']:3d} dt {r['dt']:6.1f} s: "
              f"{r['s_per_day_per_traj']:8.3f} s/day/traj{extra}")
    tmp = args.out + ".tmp"
    with open(tmp, "w") as f:
        json.dump(res, f, indent=2)
    os.replace(tmp, args.out)
    print("wrote", args.out)


if __name__ == "__main__":
    main()
