"""Day-6 relative vorticity of the canonical Galewsky et al. (2004) case, for comparison with their Fig. 4.

Runs :func:`dandelion.solvers.galewsky.canonical_galewsky` (one jet, u_max 80 m/s, H 10 km,
bump 120 m, Laplacian viscosity 1e5 m^2/s) at band limit ``--lmax`` (default 128: the 256x512
equiangular grid holds degrees < 128) and draws the vorticity synthesised exactly on a 256 x 512
equiangular grid (truncated to that grid's band limit).

    python docs/make_galewsky_figure.py [--lmax 128] [--dt 900] [--out docs/galewsky_vorticity_day6.png]
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from dandelion.reporting.plotting import pyplot, save_figure
from dandelion.solvers.galewsky import canonical_galewsky
from dandelion.sphere import SphereGrid


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lmax", type=int, default=128)
    ap.add_argument("--dt", type=float, default=900.0, help="time step [s] (ARS(3,4,3))")
    ap.add_argument("--days", type=float, default=6.0)
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "galewsky_vorticity_day6.png"))
    ap.add_argument("--save-npz", default=None, help="optionally also save the vorticity field (npz)")
    args = ap.parse_args(argv)

    plt = pyplot()
    t0 = time.time()
    sim = canonical_galewsky(args.lmax, dt=args.dt, nu=1e5, scheme="ars343")
    sim.advance_to(args.days * 86400.0)
    grid = SphereGrid(256, 512, "equiangular")
    vort = sim.vorticity(grid)[0].numpy()
    wall = time.time() - t0
    if args.save_npz:
        np.savez(args.save_npz, vorticity=vort, lat=grid.lat.numpy(), lon=grid.lon.numpy(), lmax=args.lmax, dt=args.dt)

    lat, lon = np.degrees(grid.lat.numpy()), np.degrees(grid.lon.numpy())
    fig, axes = plt.subplots(2, 1, figsize=(10, 7.5), gridspec_kw={"height_ratios": [1.0, 0.8]})
    vmax = 1.5e-4
    ax = axes[0]
    im = ax.pcolormesh(lon, lat, vort, cmap="RdBu_r", vmin=-vmax, vmax=vmax, shading="nearest")
    ax.set_title(
        f"Galewsky et al. (2004) canonical case: relative vorticity at day {args.days:g} "
        f"(lmax {args.lmax}, 256x512 equiangular)"
    )
    ax.set_ylabel("latitude [deg]")
    ax.set_xlim(0, 360)
    fig.colorbar(im, ax=ax, label="1/s", shrink=0.9)
    ax = axes[1]  # the view of Galewsky et al. Fig. 4: contours, northern mid-latitudes
    sel = (lat >= 10) & (lat <= 80)
    levels = np.concatenate([np.arange(-1.1e-4, 0, 2e-5), np.arange(2e-5, 1.6e-4, 2e-5)])
    ax.contour(lon, lat[sel], vort[sel], levels=levels, colors="k", linewidths=0.6)
    ax.set_xlim(0, 360)
    ax.set_xlabel("longitude [deg] (bump centred at 0)")
    ax.set_ylabel("latitude [deg]")
    ax.set_title("contours every 2e-5 1/s, zero omitted (compare Galewsky et al. 2004, Fig. 4)")
    fig.tight_layout()
    save_figure(fig, args.out, dpi=110)
    print(
        f"wrote {args.out} (lmax {args.lmax}, dt {args.dt} s, {wall:.0f} s of simulation wall time); "
        f"vorticity range {vort.min():.3e} .. {vort.max():.3e} 1/s"
    )


if __name__ == "__main__":
    main()
