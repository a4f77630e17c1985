"""``dandelion-generate``: make a dataset folder from a scenario.

Usage::

    dandelion-generate dataset=galewsky dataset.path=DIR [dataset.nlat=32 dataset.nlon=64 dataset.lmax=21
                       dataset.n_trajectories=4 dataset.n_frames=24 dataset.seed=0] [device=cuda batch_size=8]
    torchrun --nproc_per_node=4 -m dandelion.cli.generate dataset=galewsky dataset.path=DIR device=cuda

What it does:

* builds the scenario named by ``dataset.name`` (see :mod:`dandelion.datasets.scenario`) and runs
  its trajectories in batches of ``batch_size`` per solver call on ``device``, with a tqdm bar;
* writes one HDF5 file per trajectory (:mod:`dandelion.datasets.storage`) into ``train/``,
  ``valid/`` or ``test/`` under a temporary name, renamed when complete;
* ``splits=[test]`` writes only the files of those splits (same split of trajectory ids as the whole
  dataset): a test set on another grid for models trained elsewhere;
* resumes: complete files are skipped (a damaged one is regenerated), temporary leftovers removed.
  The batches are a fixed partition of each rank's trajectory ids, so a resumed run computes every
  file in the same batch as an uninterrupted run and gives the same bytes (same batch_size, world
  size and device);
* records the cost of every finished batch (process CPU-seconds, wall seconds, threads, machine) under
  ``.generation_cost/`` and their sum in ``dataset.yaml`` (``generation_cost``,
  :func:`dandelion.datasets.generation_cost.generation_cost`), over every resumed piece;
* refuses a folder that holds a dataset made with another configuration (the fingerprint of the
  dataset config, all keys but ``path``, is kept in ``dataset.yaml``);
* shards trajectory ids across ranks under torchrun (``RANK``/``WORLD_SIZE``: rank r takes ids
  r, r + W, ...; a gloo process group provides the barriers); rank 0 writes the metadata, then after
  a barrier the train statistics, ``splits.json``, the final ``dataset.yaml`` and the checksums.
  Rerunning the same command on a finished or partly finished folder completes it.

:func:`generate` is the plain-Python entry point (``generate(cfg) -> Path``); ``main`` is the thin
hydra wrapper (``configs/generate.yaml``, ``configs/dataset/<name>.yaml``).
"""

from __future__ import annotations

import hashlib
import json
import shlex
import sys
import time
from collections.abc import Mapping
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm.auto import tqdm

from dandelion.locks import LockHeldError, OutputLock, noting_state
from dandelion.runtime import (
    ProcessGroup,
    check_device,
    plain,
    temp_leftovers,
    versions,
    write_json_atomic,
    write_yaml_atomic,
)

from .folder import SPLITS, load_metadata, split_of, write_checksums
from .generation_cost import generation_cost, record_batch_cost
from .scenario import SanityBoundError, Scenario, get_scenario
from .spinup import start_simulation
from .statistics import compute_stats
from .storage import CorruptFileError, TrajectoryWriter, open_trajectory, trajectory_filename

__all__ = ["generate", "check", "config_fingerprint", "build_scenario", "sweep_covered"]

_KNOWN_NAMES = {"train", "valid", "test", "dataset.yaml", "stats.yaml", "splits.json", "checksums.sha256"}


def build_scenario(dataset_cfg: Mapping[str, Any]) -> Scenario:
    """Instantiate the scenario named by ``dataset_cfg["name"]`` with that config.

    Raises ``ValueError`` if the name is missing or unknown.
    """
    name = dataset_cfg.get("name")
    if not name:
        raise ValueError("the dataset config has no 'name': pass dataset=NAME (e.g. dataset=galewsky)")
    return get_scenario(str(name), dataset_cfg.get("module"))(dataset_cfg)


#: Dataset options added after datasets were made, whose unset value (None) makes exactly the dataset made before they
#: existed: left out of the fingerprint while unset, so that adding one does not orphan every existing folder.
_NEW_WHEN_SET = ("spinup_lmax", "spinup_fine_days", "spinup_fine_tau")


def config_fingerprint(dataset_cfg: Mapping[str, Any]) -> str:
    """SHA-256 (first 16 hex digits) of the resolved dataset config without ``path`` (nor the options of
    :data:`_NEW_WHEN_SET` while they are None): two runs with the same fingerprint make the same dataset."""
    d = {k: v for k, v in dataset_cfg.items() if k != "path" and not (k in _NEW_WHEN_SET and v is None)}
    return hashlib.sha256(json.dumps(d, sort_keys=True, default=str).encode()).hexdigest()[:16]


# ---------------------------------------------------------------------------------------------- main function
def _prepare(cfg):
    """The checks of :func:`generate` that need no solver work: returns ``(cfg, scenario, root, device,
    batch_size, resolved dataset config, fingerprint)``; raises ``ValueError`` naming the fix."""
    cfg = plain(cfg)
    dcfg = dict(cfg.get("dataset") or {})
    path = dcfg.get("path")
    if path in (None, "", "???"):
        raise ValueError("dataset.path is not set: pass dataset.path=DIR (the folder to write the dataset into)")
    try:
        scenario = build_scenario(dcfg)
    except (TypeError, ValueError) as err:
        raise ValueError(
            f"dataset={dcfg.get('name')}: {err} (fix the dataset.* overrides; "
            "`dandelion-generate dataset=NAME --cfg job` shows them)"
        ) from err
    scenario.validate_time_step()  # an unsafe step is refused before anything is written
    root = Path(path).expanduser().resolve()
    device = check_device(cfg.get("device") or "cpu")
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    _check_grid(scenario)
    batch_size = cfg.get("batch_size")
    batch_size = 4 if batch_size is None else int(batch_size)
    if batch_size < 1:
        raise ValueError(f"batch_size={batch_size} must be a positive integer")
    only = cfg.get("splits")
    if only is not None:
        bad = [x for x in only if x not in SPLITS]
        if bad or not only:
            raise ValueError(f"splits={only!r}: list some of {list(SPLITS)} (or null for all of them)")
        cfg["splits"] = [x for x in SPLITS if x in only]
    resolved = dict(scenario.cfg)
    resolved["path"] = str(root)
    return cfg, scenario, root, device, batch_size, resolved, config_fingerprint(resolved)


#: U-Net levels of the deepest Dandelion presets; each level halves nlon (dandelion.model, dandelion.spectral_pooling).
_UNET_LEVELS = 4
_WARNED_NLON: set[int] = set()


def _check_grid(scenario: Scenario) -> None:
    """Refuse a solver band limit beyond any use for the stored grid; say which models an nlon cannot train.

    A spectral solver's ``lmax`` above both the stored grid's band limit and the scenario's own default (the
    band limit its physics asks for) only buys degrees that are truncated away before storage, at a cost that
    grows like ``lmax**3``. An ``nlon`` that does not divide by ``2**(levels-1)`` is refused by the U-Net
    models (Dandelion, Flower2D) at training: said here, once, as a warning."""
    if scenario.band_limited:
        lmax, grid_lmax = int(scenario.cfg["lmax"]), scenario.grid.lmax
        bound = max(grid_lmax, int(scenario.default_lmax), int(scenario.min_lmax))
        if lmax > bound:
            raise ValueError(
                f"dataset.lmax={lmax} is above the band limit of the stored {scenario.grid.nlat}x{scenario.grid.nlon} "
                f"{scenario.grid.grid} grid ({grid_lmax}) and above the {scenario.name} default "
                f"({scenario.default_lmax}): "
                f"the extra degrees are truncated away before storage; use dataset.lmax<={bound} (or null), or raise "
                "dataset.nlat and dataset.nlon"
            )
    nlon, step = scenario.grid.nlon, 2 ** (_UNET_LEVELS - 1)
    if nlon % step and nlon not in _WARNED_NLON:  # check() and generate() both prepare: said once
        _WARNED_NLON.add(nlon)
        tqdm.write(
            f"dandelion-generate: warning: dataset.nlon={nlon} does not divide by {step}: the U-Net models (dandelion, "
            "flower2d) need nlon divisible by 2**(levels-1) (2, 4, 8 for 2, 3, 4 levels; the paper presets have 4) "
            f"and refuse it at training; SFNO and DISCO train on it. Choose nlon a multiple of {step} to train every "
            "model",
            file=sys.stderr,
        )


def check(cfg) -> Path:
    """Everything :func:`generate` checks before integrating, writing nothing: the scenario and its
    configuration, the device, and that ``dataset.path`` is new, empty or holds the same dataset.

    Returns the dataset folder; raises ``ValueError`` naming the problem and the fix.
    """
    _cfg, _scenario, root, _device, _batch, resolved, fingerprint = _prepare(cfg)
    _claim(root, {"fingerprint": fingerprint}, resolved, write=False)
    OutputLock.check_free(root, "dandelion-generate")  # a writer now: refused here, before any work
    return root


def generate(cfg) -> Path:
    """Generate (or resume, or finish) a dataset folder.

    Parameters
    ----------
    cfg : OmegaConf DictConfig or mapping
        ``dataset`` (the dataset config: ``name``, ``path``, ``nlat``, ``nlon``, ``grid``, ``lmax``,
        ``n_trajectories``, ``n_frames``, ``seed``, scenario keys), ``device`` (default ``"cpu"``),
        ``batch_size`` (trajectories per solver call, default 4), ``progress`` (tqdm bar, default True).

    Returns
    -------
    Path of the dataset folder.

    Raises
    ------
    ValueError
        If ``dataset.path`` is missing, the configuration is impossible, the solver step is unsafe
        (:meth:`Scenario.validate_time_step`, before anything is written), the folder holds a
        dataset made with another configuration (or unrelated files), or a step of the finite-volume
        solver exceeds its Courant limit during the run (the message names the trajectory).
    FloatingPointError
        If a trajectory becomes non-finite (or, in the finite-volume solver, its depth non-positive) during
        the run; the message names its id and parameters.
    SanityBoundError
        If a stored field leaves a physical bound the scenario declares (:meth:`Scenario.sanity_bounds`);
        the files of that batch are not written (no file is marked complete).
    """
    cfg, scenario, root, device, batch_size, resolved, fingerprint = _prepare(cfg)
    progress = bool(cfg.get("progress", True))
    dist = ProcessGroup(timeout=timedelta(days=7))  # gloo, for barriers; each rank picks its own GPU below
    if device.startswith("cuda") and dist.world_size > 1 and device == "cuda":
        device = f"cuda:{dist.local_rank}"
    lock = None
    try:
        refusal = None
        if dist.rank == 0:  # one writer per folder: a second run into it is refused, naming this one
            try:
                _claim(root, {"fingerprint": fingerprint}, resolved, write=False)
                lock = OutputLock.folder(root, "dandelion-generate").acquire()
            except (LockHeldError, ValueError) as err:  # broadcast, so that no rank waits for rank 0
                refusal = err
        refused = dist.broadcast(None if refusal is None else (type(refusal).__name__, str(refusal)))
        if refusal is not None:
            raise refusal
        if refused is not None:  # every other rank: the same type and message
            kind, message = refused
            raise (LockHeldError if kind == LockHeldError.__name__ else ValueError)(message)
        with noting_state(f"state in {root} (finished trajectory files are kept); rerun the same command to continue"):
            _generate_locked(cfg, scenario, root, device, batch_size, resolved, fingerprint, progress, dist)
    finally:
        if lock is not None:
            lock.release()
        dist.close()
    return root


def _generate_locked(cfg, scenario, root, device, batch_size, resolved, fingerprint, progress, dist) -> None:
    """The body of :func:`generate`, run while rank 0 holds the folder's lock."""
    meta = {
        **scenario.describe(),
        "fingerprint": fingerprint,
        "complete": False,
        "config": {"dataset": resolved, "device": device, "batch_size": batch_size},
        "command": shlex.join(sys.argv),
        "versions": versions(),
    }
    meta["sweep_covered"] = sweep_covered(scenario)
    reachable = sweep_covered(scenario, scenario.n_sweep) if scenario.n_trajectories < scenario.n_sweep else {}
    narrow = {k: v for k, v in meta["sweep_covered"].items() if len(v) < len(reachable.get(k, v))}
    if narrow and dist.rank == 0:
        print(
            f"[generate] note: ids 0..{scenario.n_trajectories - 1} (row-major over the sweep, the seed fastest) cover "
            "a corner of the sweep: "
            + "; ".join(f"{k} in {v} of {reachable[k]}" for k, v in narrow.items())
            + " (raise n_trajectories, or lower n_seeds, to span it)",
            file=sys.stderr,
        )
    splits = scenario.make_splits(seed=int(resolved.get("split_seed", 42)))
    _claim(root, meta, resolved, write=dist.rank == 0)  # every rank refuses a mismatch by itself
    if dist.rank == 0:
        write_json_atomic(root / "splits.json", splits)
    dist.barrier()
    only = cfg.get("splits")  # e.g. [test]: a test set on another grid; the split itself is that of the full dataset
    wanted = sorted(i for sp in (only or SPLITS) for i in splits[sp])
    if only is not None:
        meta["generated_splits"] = list(only)
    ids = wanted[dist.rank :: dist.world_size]
    _run(
        scenario,
        root,
        ids,
        split_of(splits),
        batch_size=batch_size,
        device=device,
        progress=progress,
        desc=f"{scenario.name}" + (f" rank {dist.rank}" if dist.world_size > 1 else ""),
    )
    dist.barrier()
    if dist.rank == 0:
        _finalise(root, scenario, meta, splits)
    dist.barrier()


def _claim(root: Path, meta: dict, resolved: dict, *, write: bool = True) -> None:
    """Check that ``root`` is empty, absent, or holds a dataset of the same fingerprint; write the
    provisional dataset.yaml if there is none."""
    if (root / "dataset.yaml").is_file():
        old = load_metadata(root)
        if old.get("fingerprint") != meta["fingerprint"]:
            old_cfg = dict((old.get("config") or {}).get("dataset") or {})
            diff = [
                f"{k}: {old_cfg.get(k)!r} -> {resolved.get(k)!r}"
                for k in sorted(set(old_cfg) | set(resolved))
                if k != "path" and old_cfg.get(k) != resolved.get(k)
            ]
            raise ValueError(
                f"{root} holds a dataset made with a different configuration (fingerprint "
                f"{old.get('fingerprint')} != {meta['fingerprint']}; differences: {'; '.join(diff) or 'unknown'}). "
                "Choose another dataset.path, or delete that folder to regenerate it"
            )
        return
    if root.exists():
        if not root.is_dir():
            raise ValueError(f"dataset.path {root} is a file, not a folder: choose another dataset.path")
        foreign = sorted(p.name for p in root.iterdir() if p.name not in _KNOWN_NAMES and not p.name.startswith("."))
        if foreign:
            raise ValueError(
                f"{root} is not empty and holds no dataset.yaml (found {foreign[:5]}): "
                "choose an empty or new folder for dataset.path"
            )
    if write:
        root.mkdir(parents=True, exist_ok=True)
        for s in SPLITS:
            (root / s).mkdir(exist_ok=True)
        write_yaml_atomic(root / "dataset.yaml", meta)


def _is_complete(path: Path, trajectory_id: int, n_frames: int) -> bool:
    if not path.is_file():
        return False
    try:
        with open_trajectory(path) as f:
            return int(f.attrs["trajectory_id"]) == trajectory_id and f["dimensions"]["time"].shape[0] == n_frames
    except (CorruptFileError, OSError):
        return False


def _level_kwargs(scenario: Scenario) -> dict:
    """TrajectoryWriter's level arguments for a leveled scenario (``levels``, ``level_units``,
    ``level_fields`` class attributes, e.g. ``held_suarez``); empty for 2-D scenarios."""
    levels = getattr(scenario, "levels", None)
    if levels is None:
        return {}
    return {
        "levels": [float(x) for x in levels],
        "level_units": str(getattr(scenario, "level_units", "hPa")),
        "level_fields": list(getattr(scenario, "level_fields", scenario.fields)),
    }


def _run(
    scenario: Scenario,
    root: Path,
    ids: list[int],
    split: dict[int, str],
    *,
    batch_size: int,
    device: str,
    progress: bool,
    desc: str,
) -> None:
    """Generate the missing files among ``ids`` in fixed batches of ``batch_size``."""
    paths = {i: root / split[i] / trajectory_filename(i) for i in ids}
    for p in paths.values():  # leftovers of an interrupted run (this rank's ids; the folder's lock is held)
        for tmp in temp_leftovers(p):
            tmp.unlink(missing_ok=True)
    missing = set()
    for i, p in paths.items():
        if not _is_complete(p, i, scenario.n_frames):
            if p.exists():
                tqdm.write(f"dandelion-generate: {p} is damaged or incomplete; regenerating it")
                p.unlink()
            missing.add(i)
    batches = [ids[k : k + batch_size] for k in range(0, len(ids), batch_size)]
    todo = [b for b in batches if any(i in missing for i in b)]
    times, stored = scenario.solver_times(), scenario.stored_times()
    grid, out_grid = scenario.grid, scenario.output_grid  # out_grid: the stored band limit (config output_lmax)
    mask = scenario.static_mask() if hasattr(scenario, "static_mask") else None  # masked datasets only
    bar = tqdm(
        total=sum(len(b) for b in todo) * len(times), desc=desc, unit="frame", disable=not progress, smoothing=0.1
    )
    try:
        for batch in todo:
            clock = (time.process_time(), time.perf_counter())
            params = [scenario.parameters(i) for i in batch]
            tensors = {k: torch.tensor([p[k] for p in params], dtype=torch.float64, device=device) for k in params[0]}
            sim = start_simulation(scenario, tensors, device=device)  # at lmax, or after a coarse spin-up
            writers = {}
            try:
                for i, p in zip(batch, params):
                    if i in missing:
                        writers[i] = TrajectoryWriter(
                            paths[i],
                            dataset_name=scenario.name,
                            grid=grid,
                            lmax=scenario.stored_lmax,
                            trajectory_id=i,
                            times=stored,
                            time_units=scenario.time_units,
                            scalars={k: (v, scenario.units_of(k)) for k, v in p.items()},
                            fields={k: v.to_dict() for k, v in scenario.fields.items()},
                            mask=mask,
                            **_level_kwargs(scenario),
                        )
                for k, t in enumerate(times):
                    try:
                        sim.advance_to(float(t))
                        values = scenario.stored_fields(sim.fields(out_grid))
                        for j in range(len(batch)):
                            for name, a in values.items():
                                if not np.isfinite(a[j]).all():
                                    raise FloatingPointError(f"non-finite {name} in trajectory {j} of the batch")
                    except FloatingPointError as e:
                        raise FloatingPointError(
                            f"{scenario.name}: a trajectory became non-finite or unstable before t={t} "
                            f"({scenario.time_units}) "
                            f"in the batch of trajectory ids {batch} (batch index in the solver's message): {e}. "
                            "Parameters: "
                            + "; ".join(f"id {i}: {p}" for i, p in zip(batch, params))
                            + ". Lower the time step or raise the band limit / diffusion"
                        ) from e
                    bad = scenario.sanity_violations(values)
                    if bad:
                        raise SanityBoundError(
                            f"{scenario.name}: at t={t:g} ({scenario.time_units}) "
                            + "; ".join(f"trajectory {batch[j]} {why} (parameters {params[j]})" for j, why in bad)
                            + ". No file of this batch is marked complete: lower the time step or check the settings"
                        )
                    for j, i in enumerate(batch):
                        if i in writers:
                            writers[i].write_frame(k, {name: a[j] for name, a in values.items()})
                    bar.update(len(batch))
                for w in writers.values():
                    w.close()
                record_batch_cost(root, batch, clock)
            except BaseException:
                for w in writers.values():
                    w.abort()
                raise
    finally:
        bar.close()


def _finalise(root: Path, scenario: Scenario, meta: dict, splits: dict) -> None:
    """Check all files are there, then write stats.yaml, splits.json, dataset.yaml and checksums.

    With ``generated_splits`` in ``meta`` (config ``splits``, e.g. ``[test]``) only those splits' files
    exist; stats.yaml is then computed from the first of them and dataset.yaml says so (``stats_split``):
    such a folder is a test set for a model normalised with its own training statistics."""
    made = list(meta.get("generated_splits") or SPLITS)
    rel = [f"{s}/{trajectory_filename(i)}" for s in made for i in splits[s]]
    missing = [r for r in rel if not (root / r).is_file()]
    if missing:
        raise RuntimeError(
            f"{len(missing)} trajectory files are missing in {root} (e.g. {missing[:3]}): "
            "a rank failed; rerun the same command to finish the dataset"
        )
    fields = {k: v.to_dict() for k, v in scenario.fields.items()}
    stats_split = "train" if "train" in made else made[0]
    if stats_split != "train":
        meta = {**meta, "stats_split": stats_split}
    train = [root / stats_split / trajectory_filename(i) for i in splits[stats_split]]
    # our per-field entries plus the Well's keys (mean, std, ... per field, so the Well's loader can normalise the
    # files too), from one read of the statistics split (train unless only other splits were generated)
    stats = compute_stats(train, fields, well=True)
    write_yaml_atomic(root / "stats.yaml", stats)
    write_json_atomic(root / "splits.json", splits)
    write_yaml_atomic(
        root / "dataset.yaml",
        {
            **meta,
            "parameter_stats": _parameter_stats(scenario, splits[stats_split]),
            "generation_cost": generation_cost(root),
            "complete": True,
        },
    )
    write_checksums(root, rel + ["dataset.yaml", "splits.json", "stats.yaml"])


def sweep_covered(scenario: Scenario, n: int | None = None) -> dict[str, list[float]]:
    """Values of each sweep axis that the trajectory ids ``0..n-1`` hold (``n`` = None: the dataset's
    ``n_trajectories``; ``scenario.n_sweep``: every value the sweep reaches, which for a scenario that drops
    cells, such as chained turbulence's single-degree ones, can be fewer than the axis lists).

    Ids run row-major over the axes with the seed fastest (:meth:`Scenario.sweep_index`), so fewer ids than the
    sweep take a corner of it (e.g. Galewsky's first 160 of 960 ids are all ``u_max`` 60 m/s); dataset.yaml keeps
    this as ``sweep_covered`` next to the full ``sweep``."""
    ids = [scenario.sweep_index(i) for i in range(scenario.n_trajectories if n is None else int(n))]
    return {k: sorted({float(d[k]) for d in ids}) for k in scenario.axes()}


def _parameter_stats(scenario: Scenario, train_ids) -> dict:
    """Mean and (population) std over the train trajectories of every parameter (for conditioning;
    the Well keeps one such entry per scalars/ parameter, docs/datasets/README.md)."""
    params = [scenario.parameters(i) for i in train_ids]
    out = {}
    for k in params[0]:
        v = np.array([p[k] for p in params], dtype=np.float64)
        out[k] = {"mean": float(v.mean()), "std": float(v.std())}
    return out
