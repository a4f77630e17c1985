"""The test sets of the zero-shot resolution transfer.

``dandelion-transfer`` (:mod:`dandelion.benchmarks.transfer.zero_shot`) evaluates on them.

Per coarse dataset and finer grid, two test-only datasets are made by the same solver from the same initial
states and physical parameters as the coarse one (docs/datasets/README.md, "Zero-shot resolution transfer"):

* ``coarse_band``: the coarse data's resolution content on the finer grid. Spectral scenarios: the solver at the
  coarse solver band limit, the stored fields truncated to the coarse stored band limit (the same fields sampled
  finer). Finite-volume scenarios (no band limit, :data:`FV_CELLS`): the solver on the coarse dataset's cells,
  its cell means remapped conservatively onto the finer grid (the same solver run, stored finer);
* ``fine_band``: what the finer grid supports. Spectral: the solver band limit scaled with the grid;
  finite volume: the solver cells scaled with the grid. Diffusion a scenario defines per truncation degree is
  held fixed in physical units (:data:`FIXED_PHYSICS`).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import torch
from omegaconf import OmegaConf

from dandelion.benchmarks.transfer.report import VARIANTS
from dandelion.datasets.folder import is_complete, load_metadata
from dandelion.datasets.generate import generate
from dandelion.runtime import write_json_atomic

__all__ = [
    "FIXED_PHYSICS",
    "FV_CELLS",
    "fine_dataset_config",
    "fine_datasets",
    "ensure_fine_dataset",
    "check_test_ids",
    "generation_cost",
    "solver_resolution",
]


def _galewsky_fixed_nu(coarse: dict, fine: dict) -> dict:
    """Galewsky's hyperviscosity follows the card's rule ``nu4 ~ (256 / lmax)^4`` at the solver band limit
    (:meth:`dandelion.datasets.galewsky.GalewskyScenario.solver_nu`); at another band limit the coarse
    value is kept by referring the rule to the coarse band limit (``nu_reference_lmax``)."""
    if int(fine["lmax"]) == int(coarse["lmax"]):
        return {}
    ref = coarse.get("nu_reference_lmax")
    return {"nu_reference_lmax": int(coarse["lmax"]) if ref is None else int(ref)}


def _held_suarez_fixed_hyperdiffusion(coarse: dict, fine: dict) -> dict:
    """Held-Suarez's del^8 hyperdiffusion is set by its e-folding time ``hyperdiffusion_days`` at the truncation
    degree ``L = lmax - 1`` (rate ``(l(l+1) / (L(L+1)))^4 / tau`` at degree ``l``,
    :func:`dandelion.solvers.primitive_equations.hyperdiffusion_filter`); at another band limit the same rate per
    degree needs ``tau' = tau (L(L+1) / (L'(L'+1)))^4``."""
    lc, lf = int(coarse["lmax"]) - 1, int(fine["lmax"]) - 1
    if lc == lf:
        return {}
    return {
        "hyperdiffusion_days": float(coarse.get("hyperdiffusion_days", 0.1)) * (lc * (lc + 1) / (lf * (lf + 1))) ** 4
    }


#: Scenario name -> ``f(coarse resolved config, fine config) -> overrides`` that hold diffusion defined per
#: truncation degree fixed in physical units. Scenarios absent here define their physics in physical units
#: whatever the band limit (Cahn-Hilliard: epsilon, D, a; chained turbulence: the linear operator's rates per
#: degree on the unit sphere), so nothing needs fixing.
FIXED_PHYSICS = {"galewsky": _galewsky_fixed_nu, "held_suarez": _held_suarez_fixed_hyperdiffusion}


def _scaled(n, num: int, den: int, even: bool = False) -> int:
    m = int(n) * int(num) // int(den)
    return m + m % 2 if even else m


#: Finite-volume scenario -> ``(row key, column key)`` of its solver cells in ``dataset.yaml``'s ``solver``
#: record, and ``f(solver record, rows, cols) -> dataset overrides`` that scale the coarse dataset's cells by the
#: ratios ``rows`` and ``cols`` (each ``(num, den)``: the grid's latitude and longitude refinement). Shock caps:
#: ``ny`` rows of the Calhoun-Helzel grid (``2 ny`` columns, ``ny`` even; its columns follow its rows); the ocean:
#: its C grid's ``ocean_nlat x ocean_nlon`` cells (the stability step follows from the cells).
FV_CELLS = {
    "shock_caps": (("ny", "nx"), lambda s, rows, cols: {"ny": _scaled(s["ny"], *rows, even=True)}),
    "global_ocean": (
        ("ocean_nlat", "ocean_nlon"),
        lambda s, rows, cols: {
            "ocean_nlat": _scaled(s["ocean_nlat"], *rows),
            "ocean_nlon": _scaled(s["ocean_nlon"], *cols),
        },
    ),
}


def solver_resolution(meta: dict) -> str:
    """The solver's resolution of a dataset, from its ``dataset.yaml`` (:func:`load_metadata`): ``"lmax 42"`` for a
    spectral scenario, ``"32x64 cells"`` for a finite-volume one listed in :data:`FV_CELLS`, else ``"?"``."""
    if meta.get("band_limited", True) and meta.get("lmax") is not None:
        return f"lmax {meta.get('solver_lmax') or meta['lmax']}"
    keys = FV_CELLS.get(str(meta.get("name")), (None,))[0]
    solver = meta.get("solver") or {}
    if keys and all(k in solver for k in keys):
        return f"{solver[keys[0]]}x{solver[keys[1]]} cells"
    return "?"


def _grid_tag(nlat: int, nlon: int) -> str:
    return f"{int(nlat)}x{int(nlon)}"


def _parse_grid(text) -> tuple[int, int]:
    try:
        a, b = str(text).lower().split("x")
        return int(a), int(b)
    except ValueError as err:
        raise ValueError(f"transfer grid {text!r}: write it as NLATxNLON, e.g. 64x128") from err


def fine_dataset_config(coarse_meta: dict, nlat: int, nlon: int, variant: str) -> dict:
    """The resolved dataset config of one fine test set, from the coarse dataset's ``dataset.yaml``.

    Same scenario, seeds, ``split_seed``, ``n_trajectories`` (hence the same test trajectory ids) and
    physical parameters; ``nlat``, ``nlon`` replaced; ``path`` left out. Spectral scenarios: ``coarse_band``
    keeps the coarse solver ``lmax`` and sets ``output_lmax`` to the coarse stored band limit; ``fine_band``
    scales ``lmax`` by ``nlat / nlat_coarse`` (rounded down), diffusion held fixed (:data:`FIXED_PHYSICS`).
    Finite-volume scenarios (:data:`FV_CELLS`): ``coarse_band`` keeps the coarse solver cells, ``fine_band``
    scales them by ``nlat / nlat_coarse`` (rows) and ``nlon / nlon_coarse`` (columns).

    Raises
    ------
    ValueError
        For an unknown variant, or a finite-volume scenario without an entry in :data:`FV_CELLS` (no rule
        for its solver cells). A grid of another type than the coarse one is refused by the scenario itself.
    """
    if variant not in VARIANTS:
        raise ValueError(f"transfer variant {variant!r}: use one of {VARIANTS}")
    coarse = dict((coarse_meta.get("config") or {}).get("dataset") or {})
    if coarse_meta.get("band_limited", True):  # the resolved solver band limit (a config may leave lmax to its default)
        coarse["lmax"] = coarse.get("lmax") or coarse_meta.get("solver_lmax") or coarse_meta.get("lmax")
    fine = {k: v for k, v in coarse.items() if k not in ("path", "output_lmax")}
    fine.update(nlat=int(nlat), nlon=int(nlon), name=str(coarse.get("name") or coarse_meta["name"]))
    coarse_grid = variant == "coarse_band"
    num, den = (1, 1) if coarse_grid else (int(nlat), int(coarse_meta["nlat"]))
    if not coarse_meta.get("band_limited", True) or coarse.get("lmax") is None:
        if fine["name"] not in FV_CELLS:
            raise ValueError(
                f"dataset {fine['name']!r} is not band-limited (finite volume) and has no rule for its solver cells: "
                "add its (row key, column key) and overrides to dandelion.benchmarks.transfer.sets.FV_CELLS"
            )
        fine.update(
            FV_CELLS[fine["name"]][1](
                coarse_meta["solver"], (num, den), (1, 1) if coarse_grid else (int(nlon), int(coarse_meta["nlon"]))
            )
        )
    elif variant == "coarse_band":
        fine["output_lmax"] = int(coarse_meta["lmax"])  # the coarse STORED band limit: the same fields, sampled finer
    else:
        fine["lmax"] = int(coarse["lmax"]) * num // den
        fine.update(FIXED_PHYSICS.get(fine["name"], lambda c, f: {})(coarse, fine))
    return fine


def fine_datasets(cfg, key: str) -> list[dict]:
    """The fine test sets of coarse dataset ``key`` (a key of ``scale.datasets`` listed in ``transfer.datasets``):
    dicts ``key`` (``<key>_to_<nlat>x<nlon>_<variant>``), ``coarse_key``, ``variant``, ``nlat``, ``nlon``, ``path``
    (under ``scale.work_dir/transfer``), ``config`` (:func:`fine_dataset_config`) and ``batch_size``.

    Raises
    ------
    FileNotFoundError
        If the coarse dataset has not been generated (run ``dandelion-benchmark`` first).
    """
    spec = cfg.transfer.datasets[key]
    coarse_path = Path(str(cfg.scale.datasets[key].get("path") or Path(cfg.scale.work_dir) / key))
    meta = load_metadata(coarse_path)
    out = []
    for g in spec.grids:
        nlat, nlon = _parse_grid(g)
        for variant in spec.get("variants") or VARIANTS:
            fkey = f"{key}_to_{_grid_tag(nlat, nlon)}_{variant}"
            out.append(
                {
                    "key": fkey,
                    "coarse_key": key,
                    "coarse_path": str(coarse_path),
                    "variant": str(variant),
                    "nlat": nlat,
                    "nlon": nlon,
                    "path": str(Path(cfg.scale.work_dir) / "transfer" / fkey),
                    "config": fine_dataset_config(meta, nlat, nlon, variant),
                    "batch_size": int(spec.get("generate_batch_size") or 4),
                }
            )
    return out


def ensure_fine_dataset(fd: dict, device: str = "cpu", progress: bool = False) -> Path:
    """Generate (or complete: resumable) the test split of fine dataset ``fd`` (:func:`fine_datasets`);
    returns its folder. The cost is added up over resumed runs in ``<folder>/.generation.json`` (wall and
    process CPU seconds, :func:`generation_cost`)."""
    path = Path(fd["path"])
    if is_complete(path):
        return path
    print(f"[transfer] generating {fd['key']} (test split only)", flush=True)
    t0, c0 = time.perf_counter(), time.process_time()
    generate(
        OmegaConf.create(
            {
                "dataset": {**fd["config"], "path": str(path)},
                "device": device,
                "batch_size": fd["batch_size"],
                "progress": progress,
                "splits": ["test"],
            }
        )
    )
    cost = generation_cost(path)
    write_json_atomic(
        path / ".generation.json",
        {
            "wall_s": cost["wall_s"] + time.perf_counter() - t0,
            "cpu_s": cost["cpu_s"] + time.process_time() - c0,
            "threads": torch.get_num_threads(),
        },
    )
    return path


def check_test_ids(fd: dict) -> None:
    """The fine test set must hold the coarse test split's trajectory ids (same n_trajectories and split_seed)."""
    fine, coarse = (json.loads((Path(p) / "splits.json").read_text())["test"] for p in (fd["path"], fd["coarse_path"]))
    if sorted(fine) != sorted(coarse):
        raise ValueError(
            f"{fd['path']}: test trajectory ids {fine} differ from the coarse test split {coarse} "
            f"of {fd['coarse_path']}; "
            "delete the fine folder and rerun dandelion-transfer"
        )


def generation_cost(path) -> dict:
    """``{"wall_s", "cpu_s", "threads"}`` spent generating the fine test set at ``path`` (zeros if unknown)."""
    try:
        return json.loads((Path(path) / ".generation.json").read_text())
    except (OSError, json.JSONDecodeError):
        return {"wall_s": 0.0, "cpu_s": 0.0, "threads": None}
