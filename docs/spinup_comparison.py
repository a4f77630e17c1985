"""The comparison both coarse-grid spin-up checks run (docs/held_suarez_coarse_spinup.py,
docs/chained_turbulence_coarse_spinup.py): the same trajectories spun up at the fine band limit, and on a coarse band
limit then continued on the fine one (datasets/spinup.py), measured per band at the same times."""

from __future__ import annotations

import time

from dandelion.datasets.spinup import start_simulation
from dandelion.runtime import write_json_atomic


def compare_spinups(fine_only, coarse, params, times, per_degree, split, *, time_key, time_unit=1.0):
    """Run both plans and split ``per_degree(sim)`` ((lmax,) tensor) at degree ``split`` into ``low`` and ``high``.

    ``times``: solver times to measure at, ascending; ``time_key`` / ``time_unit``: how a row names its time (the
    solver time divided by ``time_unit``). Returns ``(series, cpu_seconds, ratio)``: per plan the rows
    ``{time_key, "low", "high"}`` and its process CPU-seconds, and per time the coarse-then-fine over fine ratios.
    """
    series, cost = {}, {}
    for name, sc in (("fine_only", fine_only), ("coarse_then_fine", coarse)):
        t0 = time.process_time()
        sim = start_simulation(sc, params, device="cpu")
        rows = []
        for t in times:
            sim.advance_to(t)
            e = per_degree(sim)
            rows.append({time_key: t / time_unit, "low": float(e[:split].sum()), "high": float(e[split:].sum())})
        series[name], cost[name] = rows, time.process_time() - t0
        print(f"{name}: {cost[name]:.0f} CPU-s", flush=True)
    ratio = [
        {time_key: f[time_key], "low": c["low"] / f["low"], "high": c["high"] / f["high"]}
        for f, c in zip(series["fine_only"], series["coarse_then_fine"])
    ]
    return series, cost, ratio


def summarise(ratio, after, *, time_key, out, record, every=1) -> dict:
    """Print the ratios (every ``every``-th row) and their means from time ``after`` on; write ``record`` plus the
    summary to ``out`` (atomically) and return the summary."""
    tail = [r for r in ratio if r[time_key] >= after - 1e-9]
    summary = {
        "low_band_ratio_after_spinup": sum(r["low"] for r in tail) / len(tail),
        "high_band_ratio_after_spinup": sum(r["high"] for r in tail) / len(tail),
    }
    for r in ratio[::every]:
        print(f"{time_key} {r[time_key]:5.1f}: (b)/(a) low band {r['low']:.3f}, high band {r['high']:.3f}")
    print(summary)
    write_json_atomic(out, {**record, "ratio": ratio, **summary})
    return summary
