"""A second process on a part of a sweep: ``dandelion-benchmark ... train_rates=[..]`` trains only the named sweep
runs and writes no cell, so that on a machine with cores to spare two rates of one sweep train at once; the grid
process reuses the finished runs and waits for running ones (:func:`dandelion.benchmarks.grid.runs._train_one`)."""

from __future__ import annotations

from dandelion.benchmarks.grid.cells import (
    cell_finished,
    cell_path,
    model_architecture,
    protocol_hash,
    resolved_trainer,
)
from dandelion.benchmarks.grid.lr_plan import on_ladder, sweep_plan
from dandelion.benchmarks.grid.runs import _loss, _train_one, ensure_dataset
from dandelion.cli.checks import UsageError

__all__ = ["check_rates", "train_rates"]


def check_rates(cfg) -> list[float] | None:
    """The rates of ``cfg.train_rates`` (None when unset); refuses (:class:`UsageError`) anything but a non-empty
    list of rates of ``scale.lr_ladder`` (no sweep would ever read the run of another rate), and refuses it beside
    ``generate_only``."""
    rates = cfg.get("train_rates")
    if rates is None:
        return None
    if cfg.get("generate_only"):
        raise UsageError("train_rates and generate_only=true exclude each other: give one of them")
    ladder = [float(x) for x in (cfg.scale.get("lr_ladder") or cfg.scale.get("lr_sweep") or [])]
    try:
        rates = [float(x) for x in rates]
    except (TypeError, ValueError):
        raise UsageError(f"train_rates={rates!r} must be a list of learning rates, e.g. 'train_rates=[1e-2]'") from None
    off = [lr for lr in rates if on_ladder(lr, ladder) is None]
    if not rates or off:
        raise UsageError(
            f"train_rates={rates}: {off or 'empty'}; give rates of scale.lr_ladder {ladder}, e.g. 'train_rates=[1e-2]'"
        )
    return rates


def train_rates(cfg, grid: list[dict]) -> list[dict]:
    """Train the sweep runs at the rates ``cfg.train_rates`` on the sweep seed of every (dataset, model) of ``grid``
    and write no cell. A (dataset, model) whose sweep seed's cell is already finished is skipped (the grid reads its
    sweep from that cell), and so is a rate outside a fixed bracket (a key with ``lr_from`` whose sweep is not
    widened: :func:`dandelion.benchmarks.grid.lr_plan.sweep_plan`), since the grid would never read either run; so is
    such a key whose source cell is not finished yet (its bracket is unknown). A ladder rate outside ``lr_sweep`` on
    a widening key is trained, whether or not the sweep will widen to it.
    With ``scale.sweep_seed`` null, the grid's seeds each. Returns one dict per run trained or reused: ``dataset``,
    ``model``, ``seed``, ``lr``, ``val_loss`` (inf: diverged), ``run_dir``, ``reused``.

    Raises
    ------
    UsageError
        From :func:`check_rates`.
    """
    s = cfg.scale
    rates = check_rates(cfg)
    start = sorted(float(x) for x in (s.get("lr_sweep") or []))
    ladder = sorted(float(x) for x in (s.get("lr_ladder") or start))
    seed0 = s.get("sweep_seed")
    out = []
    for key, model, seed in dict.fromkeys(
        (c["dataset"], c["model"], c["seed"] if seed0 is None else int(seed0)) for c in grid
    ):
        arch = model_architecture(model, str(s.preset))
        if cell_finished(
            cell_path(s.results_dir, key, model, seed), protocol_hash(cfg, key), resolved_trainer(cfg), arch
        ):
            print(
                f"[benchmark] {key} {model} seed {seed}: its cell is finished and holds the sweep; skipped", flush=True
            )
            continue
        try:
            plan = sweep_plan(cfg, key, model, seed, start, ladder)
        except RuntimeError as err:  # a 64x128 key whose 32x64 cell (lr_from) is not finished: the others go on
            print(f"[benchmark] {key} {model}: skipped, its bracket is not known yet ({err})", flush=True)
            continue
        for lr in rates:
            if not plan["widen"] and on_ladder(lr, plan["start"]) is None:
                print(
                    f"[benchmark] {key} {model}: lr {lr:g} is outside its bracket {plan['start']}; skipped", flush=True
                )
                continue
            res = _train_one(cfg, key, model, seed, lr, ensure_dataset(cfg, key))
            out.append(
                {"dataset": key, "model": model, "seed": seed, "lr": lr, "val_loss": _loss(res)}
                | {"run_dir": str(res.get("run_dir")), "reused": bool(res.get("reused"))}
            )
            print(f"[benchmark] {key} {model} seed {seed} lr {lr:g}: val_loss {out[-1]['val_loss']:.4g}", flush=True)
    return out
