"""Measurements quoted in docs/datasets/shock_caps.md: the Courant-number sweep, solver speed and the figure.

python docs/shock_caps_checks.py cfl      # stability / energy / positivity against the Courant number
python docs/shock_caps_checks.py speed    # wall time per unit simulated time, batch 1 and 8
python docs/shock_caps_checks.py figure   # docs/shock_caps_trajectory.png (h at four times)
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import torch

from dandelion.datasets.chained_turbulence import ic_generator
from dandelion.datasets.shock_caps import cap_draws, initial_state
from dandelion.solvers.fv_fluxes import FVOperator
from dandelion.solvers.fv_geometry import CalhounHelzelGrid
from dandelion.solvers.fv_shallow_water import FVShallowWaterSimulation, ssp_rk3_step
from dandelion.sphere import SphereGrid


def caps(grid, K, delta, seed):
    return initial_state(grid, cap_draws(ic_generator(0, seed)), K, delta)


def cfl_sweep(ny=24, t_end=0.4, values=(0.3, 0.45, 0.6, 0.8, 1.0, 1.2, 1.5)):
    """Per Courant number: worst relative energy increase in one step, min h, mass drift.

    On K=16, delta=1, seeds 0-3.
    """
    g = CalhounHelzelGrid(ny)
    op = FVOperator(g)
    q0 = op.project(torch.stack([caps(g, 16, 1.0, s) for s in range(4)]))
    for cfl in values:
        q, t, worst, hmin, ok = q0.clone(), torch.zeros(4, dtype=torch.float64), -1.0, float(q0[:, 0].min()), True
        m0, e = op.mass(q), op.energy(q)
        while bool((t < t_end).any()):
            k1, rate = op(q)
            dt = torch.minimum(cfl / rate, t_end - t).clamp_min(0)
            q = ssp_rk3_step(op, q, dt, k1)
            t = t + dt
            if not bool(torch.isfinite(q).all()) or float(q[:, 0].min()) <= 0:
                ok = False
                break
            e_new = op.energy(q)
            worst = max(worst, float(((e_new - e) / e).max()))
            e, hmin = e_new, min(hmin, float(q[:, 0].min()))
        drift = float(((op.mass(q) - m0) / m0).abs().max()) if ok else float("nan")
        print(
            f"cfl {cfl:4.2f}: {'stable' if ok else 'FAILED'}; worst energy increase per step {worst:.2e}; "
            f"min h {hmin:.4f}; mass drift {drift:.1e}",
            flush=True,
        )


def speed(sizes=(32, 256), batches=(1, 8), n_steps=3, device="cpu"):
    """Seconds per unit simulated time = (seconds per step) x (steps per unit time at the initial state,
    K=16, delta=1, the sweep's fastest waves)."""
    for ny in sizes:
        g = CalhounHelzelGrid(ny, device=device)
        for B in batches:
            q0 = torch.stack([caps(g, 16, 1.0, s) for s in range(B)])
            sim = FVShallowWaterSimulation(g, q0)
            _, rate = sim.op(sim.q)
            dt = float((sim.cfl / rate).min())
            sim.advance_to(dt)  # warm-up step
            if device != "cpu":
                torch.cuda.synchronize()
            t0 = time.perf_counter()
            sim.advance_to(dt * (1 + n_steps) * 0.999)
            if device != "cpu":
                torch.cuda.synchronize()
            per_step = (time.perf_counter() - t0) / max(1, sim.n_steps - 1)
            print(
                f"ny {ny} ({ny}x{2 * ny} cells) batch {B}: {per_step:.3f} s/step, {1 / dt:.0f} steps per unit time -> "
                f"{per_step / dt:.0f} s per unit time ({per_step / dt / B:.0f} s per trajectory and unit time)",
                flush=True,
            )


def figure(
    ny=64, nlat=64, nlon=128, K=4, delta=0.5, seed=1, times=(0.0, 0.15, 0.6, 1.5), out="docs/shock_caps_trajectory.png"
):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    g, go = CalhounHelzelGrid(ny), SphereGrid(nlat, nlon)
    sim = FVShallowWaterSimulation(g, caps(g, K, delta, seed)[None])
    fig, ax = plt.subplots(
        3, len(times), figsize=(4 * len(times), 10), gridspec_kw={"height_ratios": [1, 1.5, 1.5]}, layout="constrained"
    )
    vmin, vmax = float(sim.q[0, 0].min()), float(sim.q[0, 0].max())
    c = g.centre.numpy().reshape(-1, 3)
    lon, lat = np.degrees(go.lon.numpy()), np.degrees(go.lat.numpy())
    style = dict(vmin=vmin, vmax=vmax, cmap="viridis")
    for k, t in enumerate(times):
        sim.advance_to(t)
        h = sim.fields(go)["h"][0].numpy()
        im = ax[0, k].pcolormesh(lon, lat, h, shading="nearest", **style)
        ax[0, k].set_title(f"t = {t:g}: stored {nlat}x{nlon} grid")
        ax[0, k].set_xlabel("longitude")
        ax[0, k].set_ylabel("latitude")
        hc = sim.q[0, 0].numpy().reshape(-1)
        for row, (name, side) in enumerate((("north", c[:, 2] > 0), ("south", c[:, 2] < 0)), start=1):
            ax[row, k].tripcolor(c[side, 0], c[side, 1], hc[side], shading="gouraud", **style)
            ax[row, k].plot(0, 0, "+", color="white", ms=8)
            ax[row, k].set_aspect("equal")
            ax[row, k].set_title(f"solver cells, {name} (pole +)")
            ax[row, k].axis("off")
    fig.colorbar(im, ax=ax, shrink=0.4, label="depth h")
    fig.suptitle(f"shock_caps: K={K}, delta={delta}, seed {seed}; finite volume {ny}x{2 * ny} cells")
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=100)
    m = sim.invariants()
    print(f"wrote {out}; mass {float(m['mass'][0]):.15g}, steps {sim.n_steps}")


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("what", choices=["cfl", "speed", "figure"])
    p.add_argument("--device", default="cpu")
    p.add_argument("--sizes", type=int, nargs="*", default=[32, 256])
    a = p.parse_args()
    torch.set_num_threads(int(torch.get_num_threads()))
    if a.what == "cfl":
        cfl_sweep()
    elif a.what == "speed":
        speed(sizes=tuple(a.sizes), device=a.device)
    else:
        figure()
