"""Chained-turbulence coarse-grid spin-up check (docs/datasets/chained_turbulence.md, "Coarse-grid spin-up"; slow,
outside CI).

Two runs of the same trajectories at the fine band limit: (a) grown from the initial noise at that band limit,
(b) grown at ``--coarse-lmax`` and continued at the fine one from ``spinup - fine_tau`` (datasets/spinup.py).
Every 0.1 tau from the handover to two tau past the spin-up, each run's enstrophy per degree,
``Z_l = 1/2 sum_m w_m |omega_lm|^2`` (w_0 = 1, w_m = 2; orthonormal harmonics on the unit sphere, summed over the
trajectories), is split into the band the coarse run resolved and the band above it; the check prints (b)/(a) for
both bands over time, and their means over the two tau after the spin-up (21 samples, 15 to 17 tau). The flow is
chaotic, so the two runs decorrelate: the ratios measure the statistics, not the fields.

Usage (the run behind the card's numbers)::

    OMP_NUM_THREADS=1 python docs/chained_turbulence_coarse_spinup.py --out docs/chained_turbulence_coarse_spinup.json
"""

from __future__ import annotations

import argparse

import torch
from spinup_comparison import compare_spinups, summarise

from dandelion.datasets.scenario import get_scenario
from dandelion.solvers.chained_turbulence import degree_power


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lmax", type=int, default=42)
    ap.add_argument("--coarse-lmax", type=int, default=21)
    ap.add_argument("--nlat", type=int, default=64)
    ap.add_argument("--spinup-tau", type=float, default=15.0)
    ap.add_argument("--fine-tau", type=float, default=2.0)
    ap.add_argument("--ids", type=int, nargs="+", default=[0, 1, 120, 121], help="trajectory ids (40 per cell)")
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    n = max(a.ids) + 1
    base = dict(nlat=a.nlat, nlon=2 * a.nlat, lmax=a.lmax, n_trajectories=n, n_frames=10, spinup_tau=a.spinup_tau)
    fine_only = get_scenario("chained_turbulence")(base)
    coarse = get_scenario("chained_turbulence")({**base, "spinup_lmax": a.coarse_lmax, "spinup_fine_tau": a.fine_tau})
    coarse.validate_time_step()
    ps = [fine_only.parameters(i) for i in a.ids]
    params = {k: torch.tensor([p[k] for p in ps], dtype=torch.float64) for k in ps[0]}
    t_hand = coarse.coarse_spinup()[1]
    n_out = int(round((a.spinup_tau + 2.0 - t_hand) / 0.1))
    times = [t_hand + 0.1 * k for k in range(n_out + 1)]
    series, cost, ratio = compare_spinups(
        fine_only,
        coarse,
        params,
        times,
        lambda sim: 0.5 * degree_power(sim.omega).sum(0),
        a.coarse_lmax,
        time_key="tau",
    )
    record = {"args": vars(a), "trajectory_ids": a.ids, "cpu_seconds": cost, "series": series}
    summarise(ratio, a.spinup_tau, time_key="tau", out=a.out, record=record, every=5)


if __name__ == "__main__":
    main()
