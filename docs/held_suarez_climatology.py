"""Held-Suarez climatology check (docs/datasets/held_suarez.md "Verification"; slow, outside CI).

Runs one Held-Suarez trajectory (anchor: Omega factor 1, dT_y = 60 K, dtheta_z = 10 K), drops the
spin-up, averages zonal means of u and T on pressure levels over the following days (sampled
every 6 h), prints the card's checks and writes ``<out>.npz`` and ``<out>.png`` (zonal-mean u and T).

Card targets (T42 L20, 200 d spin-up, 200 d average): 250 hPa zonal-mean jet 28 +- 7 m/s at
45 +- 12 degrees in each hemisphere; 1000 hPa T 300 +- 10 K for |lat| < 10.

Usage (the run behind docs/held_suarez_climatology_T42.*, about 85 minutes on one CPU thread)::

    OMP_NUM_THREADS=1 python docs/held_suarez_climatology.py --lmax 43 --levels 20 --dt 1200 \
        --spinup-days 200 --avg-days 200 --out docs/held_suarez_climatology_T42

The running time mean is written every ``--write-every-days`` of the averaging window, so a run
stopped early still leaves its numbers (``avg_days_done``, ``complete`` in the JSON).
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import torch

from dandelion.reporting.plotting import pyplot, save_figure
from dandelion.runtime import write_json_atomic
from dandelion.solvers.held_suarez import DAY, HeldSuarezSimulation
from dandelion.sphere import SphereGrid

LEVELS = (
    30,
    50,
    70,
    100,
    150,
    200,
    250,
    300,
    350,
    400,
    450,
    500,
    550,
    600,
    650,
    700,
    750,
    800,
    850,
    900,
    925,
    950,
    1000,
)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lmax", type=int, default=43, help="solver band limit (43 = T42)")
    ap.add_argument("--levels", type=int, default=20)
    ap.add_argument("--dt", type=float, default=1200.0)
    ap.add_argument("--spinup-days", type=float, default=200.0)
    ap.add_argument("--avg-days", type=float, default=200.0)
    ap.add_argument("--sample-hours", type=float, default=6.0)
    ap.add_argument("--out", default="docs/held_suarez_climatology_T42")
    ap.add_argument("--device", default="cpu")
    ap.add_argument(
        "--write-every-days",
        type=float,
        default=20.0,
        help="write the running time mean (json, npz, png) this often during the averaging window",
    )
    a = ap.parse_args()

    p = dict(
        omega_factor=torch.tensor([1.0]),
        delta_T_y=torch.tensor([60.0]),
        delta_theta_z=torch.tensor([10.0]),
        seed=torch.tensor([0.0]),
    )
    sim = HeldSuarezSimulation(p, lmax=a.lmax, n_levels=a.levels, dt=a.dt, pressure_levels=LEVELS, device=a.device)
    nlat = sim.core.nlat - (sim.core.nlat % 2)
    grid = SphereGrid(nlat, 2 * nlat, "legendre-gauss")
    t0 = time.time()
    for d in range(10, int(a.spinup_days) + 1, 10):
        sim.advance_to(d * DAY)
        g = sim.model_level_fields()
        print(f"day {d}: max|u| {float(g['u'].abs().max()):.1f} m/s, wall {time.time() - t0:.0f} s", flush=True)
    sim.advance_to(a.spinup_days * DAY)
    t_spin = time.time() - t0
    print(
        f"spin-up {a.spinup_days} d: {t_spin:.0f} s wall ({t_spin / a.spinup_days:.2f} s per simulated day)", flush=True
    )
    n = int(round(a.avg_days * 24 / a.sample_hours))
    every = max(1, int(round(a.write_every_days * 24 / a.sample_hours)))
    lat = np.rad2deg(grid.lat.numpy())
    um = np.zeros((len(LEVELS), grid.nlat))
    Tm = np.zeros((len(LEVELS), grid.nlat))
    qm = np.zeros((len(LEVELS), grid.nlat))
    for k in range(1, n + 1):
        sim.advance_to(a.spinup_days * DAY + k * a.sample_hours * 3600.0)
        f = sim.fields(grid)
        um += f["u"][0].mean(-1).numpy()
        Tm += f["T"][0].mean(-1).numpy()
        qm += f["tracer"][0].mean(-1).numpy()
        if k % every == 0 or k == n:
            # Write the running average so far: a long run that is stopped early still leaves its numbers.
            write(a, lat, um / k, Tm / k, qm / k, k * a.sample_hours / 24.0, time.time() - t0, t_spin, complete=k == n)


def write(a, lat, um, Tm, qm, days_done, wall, t_spin, complete):
    i250, i1000 = LEVELS.index(250), LEVELS.index(1000)
    res = {
        "lmax": a.lmax,
        "levels": a.levels,
        "dt": a.dt,
        "spinup_days": a.spinup_days,
        "avg_days": a.avg_days,
        "avg_days_done": days_done,
        "complete": bool(complete),
        "wall_s": wall,
        "spinup_wall_s": t_spin,
        "s_per_day": wall / (a.spinup_days + days_done),
        "torch_threads": torch.get_num_threads(),
    }
    for name, sel in (("north", lat > 0), ("south", lat < 0)):
        u = um[i250][sel]
        j = int(np.argmax(u))
        res[f"jet250_{name}_ms"] = float(u[j])
        res[f"jet250_{name}_lat"] = float(lat[sel][j])
    res["T1000_tropics_K"] = float(
        np.average(Tm[i1000][np.abs(lat) < 10], weights=np.cos(np.deg2rad(lat[np.abs(lat) < 10])))
    )
    res["T1000_polar_K"] = float(
        np.average(Tm[i1000][np.abs(lat) > 75], weights=np.cos(np.deg2rad(lat[np.abs(lat) > 75])))
    )
    res["T50_100_mean_K"] = float(
        np.average(Tm[[LEVELS.index(50), LEVELS.index(100)]].mean(0), weights=np.cos(np.deg2rad(lat)))
    )
    res["checks"] = {
        "jet_north": abs(res["jet250_north_ms"] - 28) <= 7 and abs(res["jet250_north_lat"] - 45) <= 12,
        "jet_south": abs(res["jet250_south_ms"] - 28) <= 7 and abs(abs(res["jet250_south_lat"]) - 45) <= 12,
        "T1000_tropics": abs(res["T1000_tropics_K"] - 300) <= 10,
    }
    print(json.dumps(res, indent=1), flush=True)
    np.savez(a.out + ".npz", lat=lat, pressure_hpa=np.array(LEVELS), u=um, T=Tm, q=qm)
    write_json_atomic(a.out + ".json", res)

    plt = pyplot()
    fig, ax = plt.subplots(1, 3, figsize=(15, 4.5), sharey=True)
    P = np.array(LEVELS)
    for axi, data, title, cmap, levs in (
        (ax[0], um, "zonal-mean u (m/s)", "RdBu_r", np.arange(-40, 41, 4)),
        (ax[1], Tm, "zonal-mean T (K)", "viridis", np.arange(190, 316, 5)),
        (ax[2], qm, "zonal-mean tracer q", "magma", np.linspace(0, max(qm.max(), 1e-6), 21)),
    ):
        cs = axi.contourf(lat, P, data, levels=levs, cmap=cmap, extend="both")
        axi.contour(lat, P, data, levels=levs[::2], colors="k", linewidths=0.4)
        fig.colorbar(cs, ax=axi)
        axi.set_title(title)
        axi.set_xlabel("latitude (deg)")
    ax[0].set_ylabel("pressure (hPa)")
    ax[0].invert_yaxis()
    end = a.spinup_days + days_done
    fig.suptitle(f"Held-Suarez, T{a.lmax - 1} L{a.levels}, time mean over days {a.spinup_days:g}-{end:g}")
    fig.tight_layout()
    save_figure(fig, a.out + ".png", dpi=110)
    print("wrote", a.out + ".png", flush=True)


if __name__ == "__main__":
    main()
