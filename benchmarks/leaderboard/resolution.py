"""Resolution content of a dataset: how much of each field's variance, and of its one-step increment, lies above the
band limit of a coarser grid (Issue #71, item 1: the resolution trend is judged only where the finer grid adds
resolved content).

For every field of a dataset folder's trajectories (a split), :func:`content` returns the fraction of the
area-weighted variance above degree ``band`` (default: the analysis band limit of the grid with half the rows, 16
for 64x128 -> 32x64), of the states and of the one-step increments ``x_{t+1} - x_t``, summed over frames (and
levels). The variance of a frame is ``<f^2> - <f>^2`` with the grid's quadrature weights; the part below the band is
``sum_{l=1}^{band-1} P(l)``, the angular power spectrum of
:func:`dandelion.power_spectra.power_spectrum` (torch-harmonics
``RealSHT``, ``lmax`` = ``mmax`` = the grid's analysis band limit, orthonormal, so ``sum_l P(l) = <f^2>`` for a
band-limited field); the fraction above is ``1 - below / variance``, so content the grid cannot analyse (above its own
band limit) counts as above too. Vector fields are scored per component (u, v), like the leaderboard's VRMSE. On a
masked (ocean) dataset land is filled with the wet mean first (zero anomaly, as :func:`~dandelion.power_spectra.
power_spectrum` does); the coastline then leaks some power to high degrees, so the fraction there is an upper bound.

Run it on a dataset folder (the data is not committed; generate it with ``dandelion-benchmark scale=cpu
generate_only=true``)::

    python -m dandelion.benchmarks.leaderboard.resolution data/benchmark/cpu_v2/galewsky_64x128 \\
        data/benchmark/cpu_v2/shock_caps_64x128 --split test --out resolution_content.md \\
        --json benchmarks/results/cpu/resolution_content.json

``--json`` writes the results (dataset key -> :func:`content`, plus the command) for the leaderboard, which judges
the resolution trend only on the datasets that qualify (:mod:`~dandelion.benchmarks.leaderboard.qualify`).
"""

from __future__ import annotations

import argparse
import json
import math
import shlex
import sys
from pathlib import Path

import numpy as np
import torch

from dandelion.datasets.folder import list_split, load_metadata
from dandelion.datasets.storage import open_trajectory, read_field, read_mask
from dandelion.power_spectra import power_spectrum
from dandelion.quadrature import weighted_mean
from dandelion.runtime import write_text_atomic
from dandelion.sphere import SphereGrid, analysis_lmax

__all__ = ["variance_split", "content", "content_table", "write_json", "read_json", "main"]


def variance_split(frames: torch.Tensor, grid: SphereGrid, band: int, wet=None) -> tuple[float, float]:
    """``(variance above degree band - 1, total variance)`` of ``frames`` ``(N, nlat, nlon)``, summed over the N
    frames (area-weighted; module docstring). ``band``: the number of degrees kept below (16: degrees 0..15).

    Raises:
        ValueError: ``band`` is not in ``2..grid.lmax``."""
    if not 2 <= band <= grid.lmax:
        raise ValueError(f"band={band} must be in 2..{grid.lmax} (the {grid.nlat}x{grid.nlon} grid's band limit)")
    f = frames.to(torch.float64)
    if wet is not None:
        wet = torch.as_tensor(wet, dtype=torch.bool)
        f = torch.where(wet, f, weighted_mean(f, grid, wet)[..., None, None])
    total = (weighted_mean(f**2, grid) - weighted_mean(f, grid) ** 2).clamp_min(0.0).sum()
    below = power_spectrum(f, grid)[..., 1:band].sum()
    total = float(total)
    return max(total - float(below), 0.0), total


def _components(name: str, a: np.ndarray, vector: bool) -> dict[str, np.ndarray]:
    """Frames ``(T, [L,] nlat, nlon)`` per scored component of one stored field."""
    if not vector:
        return {name: a}
    return {f"{name}.u": a[..., 0], f"{name}.v": a[..., 1]}


def _variables(comp: str, a: np.ndarray, tags: list[str]) -> list[str]:
    """The leaderboard's scored variable names of component ``comp`` (``velocity.u`` -> ``u``, ``momentum.u`` ->
    ``momentum_u``, :func:`dandelion.metrics.variable_names`), one per level ``<var>_<tag>`` when ``a``
    ``(T, [L,] nlat, nlon)`` has a level axis (as :mod:`dandelion.evaluation.scoring` names them)."""
    name, _, c = comp.partition(".")
    var = comp if not c else c if name == "velocity" else f"{name}_{c}"
    return [f"{var}_{t}" for t in tags] if tags and a.ndim == 4 else [var]


def content(path, split: str = "test", band: int | None = None, max_files: int | None = None) -> dict:
    """``{"band", "grid", "split", "n_files", "fields": {name: {"state", "increment", "variables", "forcing"}}}`` for
    the dataset folder
    ``path`` (its ``split``; ``max_files``: the first trajectories only), ``band`` defaulting to the analysis band
    limit of the grid with half the rows (module docstring): ``state`` and ``increment`` are the fractions above (NaN
    for a field without variance), ``variables`` the leaderboard's variable names of the field (a level each) and
    ``forcing`` whether ``dataset.yaml`` lists it in ``forcing_fields`` (known to the models, not scored).

    Raises:
        FileNotFoundError: the split lists no trajectory (or the folder lacks ``dataset.yaml``/``splits.json``).
        ValueError: ``band`` is outside ``2..`` the grid's band limit."""
    meta = load_metadata(path)
    grid = SphereGrid(int(meta["nlat"]), int(meta["nlon"]), str(meta["grid"]))
    band = analysis_lmax(grid.nlat // 2, grid.grid) if band is None else int(band)
    sums: dict[str, np.ndarray] = {}
    lv = meta.get("levels")
    tags = [f"{float(v):g}{lv.get('units', '')}" for v in lv["values"]] if lv else []
    forcing = set(meta.get("forcing_fields") or [])
    names: dict[str, tuple[list[str], bool]] = {}
    files = list_split(path, split)[: max_files or None]
    if not files:
        raise FileNotFoundError(f"{path}: the {split} split lists no trajectory; pass another split=")
    for file in files:
        with open_trajectory(file) as f:
            wet = read_mask(f)
            for group, vector in (("t0_fields", False), ("t1_fields", True)):
                for name, d in f[group].items():
                    for comp, a in _components(name, read_field(d), vector).items():
                        names[comp] = (_variables(comp, a, tags), name in forcing)
                        x = torch.from_numpy(np.asarray(a, dtype=np.float64))
                        x = x.reshape(x.shape[0], -1, grid.nlat, grid.nlon)  # (T, levels, nlat, nlon)
                        state = variance_split(x.reshape(-1, grid.nlat, grid.nlon), grid, band, wet)
                        inc = variance_split((x[1:] - x[:-1]).reshape(-1, grid.nlat, grid.nlon), grid, band, wet)
                        sums[comp] = sums.get(comp, np.zeros(4)) + np.array([*state, *inc])
    frac = {
        name: {
            "state": s[0] / s[1] if s[1] > 0 else math.nan,
            "increment": s[2] / s[3] if s[3] > 0 else math.nan,
            "variables": names[name][0],
            "forcing": names[name][1],
        }
        for name, s in sums.items()
    }
    return {"band": band, "grid": f"{grid.nlat}x{grid.nlon}", "split": split, "n_files": len(files), "fields": frac}


def content_table(results: dict) -> list[str]:
    """Markdown rows, one per dataset and field: ``results`` is dataset name -> :func:`content`."""
    lines = [
        "| dataset | grid | field | variance share at degree >= L, states | one-step increments |",
        "|---|---|---|---:|---:|",
    ]
    for name, r in results.items():
        for field, f in r["fields"].items():
            lines.append(
                f"| {name} | {r['grid']} (L = {r['band']}, {r['split']}, {r['n_files']} files) | {field} | "
                f"{f['state']:.3g} | {f['increment']:.3g} |"
            )
    return lines


def write_json(path, results: dict, command: str) -> Path:
    """Write ``results`` (dataset key -> :func:`content`) with the ``command`` that measured them to ``path``
    (atomically; NaN fractions as ``null``). Returns the path."""
    clean = {
        key: {
            **r,
            "fields": {
                f: {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in x.items()}
                for f, x in r["fields"].items()
            },
            "command": command,
        }
        for key, r in results.items()
    }
    write_text_atomic(path, json.dumps(clean, indent=1, sort_keys=True) + "\n")
    return Path(path)


def read_json(path) -> dict:
    """The results written by :func:`write_json` (``null`` fractions back to NaN).

    Raises:
        ValueError: the file is not a mapping of dataset keys to results with ``band``, ``grid`` and ``fields``."""
    data = json.loads(Path(path).read_text())
    if not isinstance(data, dict) or not all(
        isinstance(r, dict) and {"band", "grid", "fields"} <= set(r) for r in data.values()
    ):
        raise ValueError(
            f"{path}: expected dataset key -> {{band, grid, fields, ...}}; rewrite it with "
            "`python -m dandelion.benchmarks.leaderboard.resolution FOLDERS --json PATH`"
        )
    for r in data.values():
        for x in r["fields"].values():
            for k in ("state", "increment"):
                x[k] = math.nan if x.get(k) is None else float(x[k])
    return data


def main(argv: list[str] | None = None) -> list[str]:
    """Command line: dataset folders in, the table (markdown) printed and written to ``--out``, the results to
    ``--json``."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "paths", nargs="+", help="dataset folders (a 64x128 key, e.g. data/benchmark/cpu_v2/galewsky_64x128)"
    )
    p.add_argument("--split", default="test", help="train | valid | test (default test)")
    p.add_argument("--band", type=int, default=None, help="degrees kept below (default: the half-rows grid's limit)")
    p.add_argument("--max-files", type=int, default=None, help="score only the first trajectories of the split")
    p.add_argument("--out", default=None, help="also write the table to this markdown file")
    p.add_argument("--json", default=None, help="also write the results (for the leaderboard) to this JSON file")
    args = sys.argv[1:] if argv is None else list(argv)
    a = p.parse_args(args)
    results = {Path(x).name: content(x, a.split, a.band, a.max_files) for x in a.paths}
    lines = content_table(results)
    text = "\n".join(lines) + "\n"
    print(text, end="")
    if a.out:
        write_text_atomic(a.out, text)
    if a.json:
        write_json(a.json, results, "python -m dandelion.benchmarks.leaderboard.resolution " + shlex.join(args))
    return lines


if __name__ == "__main__":  # pragma: no cover
    main()
