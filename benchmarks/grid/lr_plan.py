"""Which learning rates a cell's sweep starts from, and whether it may widen.

Two rules, chosen per dataset key of the scale (``configs/scale/<scale>.yaml``, ``datasets.<key>``):

* the default (no ``lr_from``): the scale's ``lr_sweep``, widened along ``lr_ladder`` while the best rate is at an
  edge of the rates tried (:func:`dandelion.benchmarks.grid.benchmark.sweep_lr`);
* ``lr_from: <other key>`` (the 64x128 keys of the cpu scale name their 32x64 key): the rate chosen for the same
  model at that key (its sweep seed's finished cell) and its two neighbours on ``lr_ladder``, kept as a bracket:
  never widened, so a best rate at an edge is reported as such (``inside`` false in the cell's
  ``lr_selection``) rather than chased. A model listed in ``lr_fixed_models`` of the key trains at that rate
  alone (DISCO at 64x128: its CPU kernel is the slowest of the grid).

The source cell must be finished first; the grid runs the keys in the order the scale lists them, so listing
each 32x64 key before its 64x128 key is enough.
"""

from __future__ import annotations

import json
import math

from dandelion.benchmarks.grid.cells import (
    cell_finished,
    cell_path,
    dataset_spec,
    model_architecture,
    protocol_hash,
    resolved_trainer,
)

__all__ = ["SweepPlan", "sweep_plan"]


class SweepPlan(dict):
    """``start`` (rates trained first, sorted), ``widen`` (whether the ladder may extend them), ``source`` (None, or
    ``{"key", "cell", "lr"}``: the cell whose chosen rate the bracket is built around) and ``rule`` (one line saying
    which rule applied, for the cell's ``selection`` text)."""


def on_ladder(lr: float, ladder: list[float]) -> int | None:
    return next((i for i, x in enumerate(ladder) if math.isclose(x, lr, rel_tol=1e-9)), None)


def sweep_plan(cfg, key: str, model: str, sweep_seed: int, start: list[float], ladder: list[float]) -> SweepPlan:
    """The sweep plan of ``(key, model)`` on ``sweep_seed``; ``start`` and ``ladder`` are the scale's sorted
    ``lr_sweep`` and ``lr_ladder`` (the default rule's plan).

    Raises
    ------
    ValueError
        If ``lr_from`` names a key the scale does not have, or the source cell's rate is not on the ladder.
    RuntimeError
        If the source cell is not finished under its current protocol (run that key first: the message gives the
        command).
    """
    spec = dataset_spec(cfg, key)
    src = spec.get("lr_from")
    if not src:
        return SweepPlan(
            start=list(start),
            widen=True,
            source=None,
            rule="swept (widened along the ladder until the best rate is inside the tried rates)",
        )
    if src not in cfg.scale.datasets:
        raise ValueError(
            f"scale.datasets.{key}.lr_from={src!r} is not a dataset key of scale={cfg.scale.name}: "
            f"choose from {list(cfg.scale.datasets)}"
        )
    path = cell_path(cfg.scale.results_dir, src, model, sweep_seed)
    if not cell_finished(
        path, protocol_hash(cfg, src), resolved_trainer(cfg), model_architecture(model, str(cfg.scale.preset))
    ):
        raise RuntimeError(
            f"cell {key}/{model}: its rates are bracketed around the rate chosen at {src}, whose cell {path} is not "
            f"finished under the current protocol; run it first: dandelion-benchmark scale={cfg.scale.name} "
            f"'only.datasets=[{src}]' 'only.models=[{model}]' 'scale.seeds=[{sweep_seed}]'"
        )
    lr = float(json.loads(path.read_text())["lr"])
    i = on_ladder(lr, ladder)
    if i is None:
        raise ValueError(f"the rate {lr:g} chosen at {src} ({path}) is not on scale.lr_ladder {ladder}: add it")
    source = {"key": src, "cell": str(path), "lr": lr}
    if model in [str(m) for m in (spec.get("lr_fixed_models") or [])]:
        return SweepPlan(start=[lr], widen=False, source=source, rule=f"the rate chosen at {src}, not swept here")
    bracket = [ladder[j] for j in (i - 1, i, i + 1) if 0 <= j < len(ladder)]
    return SweepPlan(
        start=bracket,
        widen=False,
        source=source,
        rule=f"the rate chosen at {src} and its two ladder neighbours, kept as a bracket (not widened)",
    )
