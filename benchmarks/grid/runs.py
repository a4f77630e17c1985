"""The pieces of one benchmark cell that call the jobs: dataset generation, the training command of a sweep run
and the training itself (or its reuse, or the wait for another process training it), the test rollout, and the
records kept of them (:mod:`dandelion.benchmarks.grid.benchmark` assembles a cell)."""

from __future__ import annotations

import json
import math
import shlex
import time
from importlib.resources import files
from pathlib import Path

from omegaconf import OmegaConf

from dandelion.benchmarks.grid.cells import dataset_spec, flatten_overrides, fmt_value, lr_tag, training_hash
from dandelion.benchmarks.grid.records import cost_fields
from dandelion.benchmarks.grid.torchrun import train_under_torchrun
from dandelion.checkpoint import load_checkpoint, preset_changes
from dandelion.cli.common import compose_config as compose
from dandelion.cli.rollout import rollout
from dandelion.cli.train import train
from dandelion.datasets.folder import is_complete
from dandelion.datasets.generate import generate
from dandelion.locks import LockHeldError, OutputLock
from dandelion.registry import import_plugins
from dandelion.runtime import DamagedFileError, device_name, write_json_atomic

__all__ = ["ensure_dataset"]


def _device(cfg) -> str:
    return device_name(cfg.get("device") or cfg.scale.get("device") or "cpu")


LOCK_POLL_S = 30.0  # seconds between looks at a dataset (or a run) another process is writing
WAIT_NOTE_S = 600.0  # seconds between repeats of the line naming the process waited for


def ensure_dataset(cfg, key: str) -> Path:
    """Generate (or complete) the dataset of grid key ``key``; returns its folder.

    A complete folder is left as it is (``dandelion-generate`` checks its fingerprint, so a folder made
    with another configuration is refused with a ValueError naming it). When another process is generating the
    same folder (two grid processes on one dataset: its lock is held), this one waits for it, polling every
    ``LOCK_POLL_S`` seconds, and then completes (or just uses) the folder.
    """
    spec = dataset_spec(cfg, key)
    path = Path(spec["path"])
    if is_complete(path):
        return path
    over = [f"dataset={spec['dataset']}", f"dataset.path={path}", *flatten_overrides(spec["overrides"], "dataset.")]
    gcfg = compose("generate", over)
    print(
        f"[benchmark] generating {key}: dandelion-generate {' '.join(over)} batch_size={spec['generate_batch_size']}",
        flush=True,
    )
    job = OmegaConf.create(
        {
            "dataset": OmegaConf.to_container(gcfg.dataset, resolve=True),
            "device": _device(cfg),
            "batch_size": spec["generate_batch_size"],
            "progress": bool(cfg.get("progress", False)),
        }
    )
    waited = False
    while True:
        try:
            generate(job)
            return path
        except LockHeldError as err:
            if not waited:
                print(f"[benchmark] {key}: {err}; waiting for it (polling every {LOCK_POLL_S:g} s)", flush=True)
            waited = True
            time.sleep(LOCK_POLL_S)
            if is_complete(path):
                return path


def _train_overrides(cfg, key: str, model: str, seed: int, lr: float, run_dir: Path, data_path: Path) -> list[str]:
    s = cfg.scale
    spec = dataset_spec(cfg, key)
    trainer = OmegaConf.to_container(s.trainer, resolve=True)
    trainer["lr"] = float(lr)
    trainer["progress"] = bool(cfg.get("progress", False))
    return [
        f"dataset={spec['dataset']}",
        f"dataset.path={data_path}",
        *_model_choice(model),
        f"model.preset={s.preset}",
        f"seed={int(seed)}",
        f"device={_device(cfg)}",
        f"run_dir={run_dir}",
        *flatten_overrides(trainer, "trainer."),
        *_plugins(cfg),
    ]


def _wait_for_run(run_dir: Path, err: LockHeldError) -> None:
    """Poll every ``LOCK_POLL_S`` seconds, indefinitely, until no live process holds ``run_dir``'s lock (a holder
    that ended, however, releases it); the holder is named again every ``WAIT_NOTE_S`` seconds."""
    print(
        f"[benchmark] waiting for the process training {run_dir} (polling every {LOCK_POLL_S:g} s): {err}", flush=True
    )
    noted = time.monotonic()
    while True:
        time.sleep(LOCK_POLL_S)
        try:
            OutputLock.check_free(run_dir, "dandelion-benchmark")
            return
        except LockHeldError as again:
            if time.monotonic() - noted >= WAIT_NOTE_S:
                print(f"[benchmark] still waiting: {again}", flush=True)
                noted = time.monotonic()


def _train_one(cfg, key, model, seed, lr, data_path, run_dir: Path | None = None) -> dict:
    """Train (or resume, or reuse: ``result.json`` marks a finished run) one run of the scale's protocol; ``run_dir``
    defaults to the run's own folder under ``work_dir/runs`` (:func:`training_hash`). When another process is
    training the same run (its folder's lock is held: two grid processes, or ``train_rates`` beside the grid),
    this one waits for it (:func:`_wait_for_run`) and then reuses its result (or resumes it, if it ended early).
    The time spent waiting counts in the cell's ``minutes.train_wall``, not in any CPU-seconds. A run whose network
    its preset no longer builds (a preset changed since: :func:`_set_aside_superseded`) is moved aside and trained
    again."""
    if run_dir is None:
        run_dir = (
            Path(cfg.scale.work_dir) / "runs" / key / model / f"seed{seed}" / f"t{training_hash(cfg, key)}" / lr_tag(lr)
        )
    run_dir = Path(run_dir)
    over = _train_overrides(cfg, key, model, seed, lr, run_dir, data_path)
    command = "dandelion-train " + " ".join(shlex.quote(o) for o in over)
    done = run_dir / "result.json"
    import_plugins(cfg.scale.get("plugins") or [])  # a plugin model's preset table, for the check below
    _set_aside_superseded(run_dir)
    while True:
        if done.exists():
            try:
                res = json.loads(done.read_text())
                return {**res, "lr": float(lr), "command": command, "reused": True}
            except json.JSONDecodeError:
                pass  # a torn file: train again below
        try:
            OutputLock.check_free(run_dir, "dandelion-benchmark")
        except LockHeldError as err:  # another process trains this run: wait, then look for its result again
            _wait_for_run(run_dir, err)
            continue
        tcfg = compose("train", over)
        OmegaConf.set_struct(tcfg, False)
        if (run_dir / "last.pt").exists():  # an interrupted run continues exactly (train.py's resume)
            tcfg.resume = str(run_dir / "last.pt")
            print(f"[benchmark] resuming {run_dir}", flush=True)
        print(f"[benchmark] {command}", flush=True)
        try:
            nproc = int(cfg.get("nproc_per_node") or 1)  # >= 2: this run under torchrun (benchmarks/grid/torchrun.py)
            resume = [f"resume={tcfg.resume}"] if tcfg.get("resume") else []
            res = train(tcfg) if nproc < 2 else train_under_torchrun(over + resume, run_dir, nproc)
        except LockHeldError:  # taken by another process since the check above: wait for it on the next pass
            continue
        except FloatingPointError as err:  # diverged: recorded as such (and reused), the worst of any sweep
            res = {
                "run_dir": str(run_dir),
                "best": str(run_dir / "best.pt"),
                "last": str(run_dir / "last.pt"),
                "step": -1,
                "stopped": "diverged",
                "error": str(err),
                "train_loss": math.nan,
                "val_loss": math.nan,
                "val_vrmse": math.nan,
                "minutes": math.nan,
            }
            write_json_atomic(done, res)
            print(f"[benchmark] {run_dir}: diverged ({err}); recorded in {done}", flush=True)
        return {**res, "lr": float(lr), "command": command, "reused": False}


def _set_aside_superseded(run_dir: Path) -> None:
    """Rename ``run_dir`` to ``<name>.superseded-<UTC time>`` (nothing is deleted) when its checkpoint's network is
    not the one its preset builds now (:func:`dandelion.checkpoint.preset_changes`): the run folder's fingerprint
    (:func:`training_hash`) names the preset, not its hyper-parameters, so a changed preset would otherwise reuse (or
    resume) a run of the old network. A run being trained by another process (its lock held), or whose checkpoint is
    unreadable or carries no model spec, is left as it is."""
    ckpt = next((run_dir / n for n in ("last.pt", "best.pt") if (run_dir / n).exists()), None)
    if ckpt is None:
        return
    try:
        with OutputLock.folder(run_dir, "dandelion-benchmark"):  # no other process starts on it meanwhile
            changes = preset_changes(load_checkpoint(ckpt))
            if not changes:
                return
            aside = run_dir.with_name(f"{run_dir.name}.superseded-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}")
            run_dir.rename(aside)
    except LockHeldError:  # another process trains it: its checkpoints are of the network built now
        return
    except (DamagedFileError, ValueError, OSError):  # unreadable, no model spec, or moved by another process first
        return
    print(f"[benchmark] {run_dir} was trained with another network (saved, now: {changes}): moved to {aside}")


def _model_choice(model: str) -> list[str]:
    """``model=NAME`` when configs/model/NAME.yaml exists, else the default group entry renamed (plugin models)."""
    if files("dandelion.configs").joinpath("model", f"{model}.yaml").is_file():
        return [f"model={model}"]
    return [f"model.name={model}"]


def _plugins(cfg) -> list[str]:
    plugins = list(cfg.scale.get("plugins") or [])
    return [f"plugins={fmt_value(plugins)}"] if plugins else []


def _evaluate(cfg, key, checkpoint: Path, data_path: Path, out_dir: Path) -> tuple[dict, str]:
    e = cfg.scale.evaluation
    spec = dataset_spec(cfg, key)
    over = [
        f"checkpoint={checkpoint}",
        f"dataset={spec['dataset']}",
        f"dataset.path={data_path}",
        f"device={_device(cfg)}",
        f"split={e.get('split', 'test')}",
        f"n_steps={int(e.n_steps)}",
        f"init_stride={int(e.get('init_stride', 1))}",
        f"max_inits={fmt_value(e.get('max_inits'))}",
        f"batch_size={int(e.get('batch_size', 8))}",
        f"output_dir={out_dir}",
        "save_forecasts=false",
        "sample=false",
        "plots=false",
        f"progress={fmt_value(bool(cfg.get('progress', False)))}",
        f"spectra_leads=[1,{min(5, int(e.n_steps))},{int(e.n_steps)}]",
        *_plugins(cfg),
    ]
    # the grid re-scores its own runs: their rollout folder is the benchmark's to replace
    r = rollout(compose("rollout", [*over, "overwrite=true"]))
    return r["results"], "dandelion-rollout " + " ".join(shlex.quote(o) for o in over)


def _read_curve(run_dir) -> list[dict]:
    """The validation curve of a training run: ``[{step, phase, train_loss, val_loss, val_vrmse}, ...]`` from its
    ``metrics.jsonl`` (one record per epoch; empty when the file is missing).

    Raises
    ------
    ValueError
        For a file that records an epoch again after a complete record of it, or a step that does not grow (a file
        appended to by a rerun of a killed run before the trainer rewrote it on resume): the curve would hold an epoch
        twice. The message names the file and the fix."""
    path = Path(run_dir) / "metrics.jsonl"
    if not path.exists():
        return []
    out, done, last_step = [], set(), -1
    for line in path.read_text().splitlines():
        try:
            r = json.loads(line)
        except json.JSONDecodeError:
            continue  # a torn last line of a killed run
        epoch, step = r.get("epoch"), r.get("step")
        if epoch in done or (step is not None and step <= last_step):
            raise ValueError(
                f"{path} records epoch {epoch} (step {step}) twice: it was appended to by a rerun of a killed run; "
                "resume the run once more (the trainer rewrites metrics.jsonl to its checkpoint's history), or retrain"
            )
        if r.get("epoch_complete", True):
            done.add(epoch)
        last_step = step if step is not None else last_step
        out.append({k: r.get(k) for k in ("step", "phase", "train_loss", "val_loss", "val_vrmse")})
    return out


def _loss(run: dict) -> float:
    v = float(run.get("val_loss", math.nan))
    return v if math.isfinite(v) else math.inf  # a diverged run is the worst


def _run_record(r: dict) -> dict:
    return {
        "lr": float(r["lr"]),
        "val_loss": float(r["val_loss"]),
        "val_vrmse": float(r["val_vrmse"]),
        "train_loss": float(r["train_loss"]),
        "steps": int(r["step"]),
        "stopped": r.get("stopped"),
        "minutes": float(r.get("minutes", 0.0)),
        "run_dir": r["run_dir"],
        "reused": bool(r.get("reused")),
        "curve": r.get("curve", []),
        **cost_fields(r),  # valid_over_train, train_cpu_seconds, train_threads (dandelion.benchmarks.grid.records)
    }


def _benchmark_command(cfg) -> str:
    return "dandelion-benchmark " + " ".join(shlex.quote(a) for a in (cfg.get("_argv") or [f"scale={cfg.scale.name}"]))
