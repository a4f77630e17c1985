"""Checkpoints: atomic, loadable with ``torch.load(weights_only=True)``, enough to resume exactly.

A checkpoint is a dict of tensors and plain Python types only::

    format          "dandelion-checkpoint/1"
    model           state_dict of the bare model (DDP / torch.compile wrappers stripped)
    optimizer       optimizer.state_dict() or None
    scheduler       scheduler.state_dict() or None
    config_yaml     the resolved job configuration as YAML text
    stats           the dataset's normalisation statistics (stats.yaml)
    grid            {"nlat", "nlon", "grid"} of the data the model was trained on
    step, epoch     optimiser steps done; current epoch
    rng             RNG states as tensors (torch CPU, CUDA per device, numpy, Python), for exact resume
    versions        package versions (:func:`dandelion.runtime.versions`)
    extra           job-specific plain data (the trainer stores "model_spec" and "layout" here)

``model_spec`` = ``{"name", "preset", "in_channels", "out_channels", "overrides", "hyperparameters"}``, the
arguments of :func:`dandelion.build_model` apart from the grid, and every hyper-parameter the network was built with
(the preset's, the overrides, and the model's network defaults for the rest: the network is rebuilt from those, so a
later change of a preset, or a preset that later sets one of those defaults, does not change it;
:func:`checkpoint_hyperparameters`); ``layout`` =
:meth:`dandelion.channels.ChannelLayout.to_dict`. :func:`load_model` turns a checkpoint into a
:class:`dandelion.forecast.Forecaster` that forecasts as the model was trained.
"""

from __future__ import annotations

import os
import pickle
import random
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import torch
import yaml

from .channels import ChannelLayout
from .checkpoint_network import (
    LEGACY_OVERRIDES,
    checkpoint_hyperparameters,
    checkpoint_model_spec,
    network_differences,
    preset_changes,
)
from .disk import disk_error
from .forecast import Forecaster
from .grid_guard import allow_grid_change
from .registry import build_model, unwrap_model
from .runtime import DamagedFileError, device_name, plain, temp_path, versions

__all__ = [
    "save_checkpoint",
    "load_checkpoint",
    "model_from_checkpoint",
    "model_state",
    "checkpoint_hyperparameters",
    "preset_changes",
    "network_differences",
    "checkpoint_model_spec",
    "LEGACY_OVERRIDES",
    "layout_from_checkpoint",
    "config_from_checkpoint",
    "rng_state",
    "set_rng_state",
    "load_model",
    "FORMAT",
]

FORMAT = "dandelion-checkpoint/1"


def _plain(obj):
    """Convert mappings and sequences (OmegaConf's containers included: reading their items resolves them), numpy
    scalars/arrays and paths to types ``weights_only`` accepts."""
    if type(obj).__module__.startswith("omegaconf"):
        obj = plain(obj)
    if isinstance(obj, Mapping):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, tuple):
        return tuple(_plain(v) for v in obj)
    if isinstance(obj, Sequence) and not isinstance(obj, (str, bytes)):
        return [_plain(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return torch.from_numpy(obj.copy())
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, Path):
        return str(obj)
    return obj


def _config_yaml(config) -> str:
    if isinstance(config, str):
        return config
    return yaml.safe_dump(_plain(config), sort_keys=False)


def rng_state() -> dict:
    """RNG states (torch CPU, CUDA, numpy, Python ``random``) as tensors and plain types."""
    np_state = np.random.get_state()
    py_state = random.getstate()
    out = {
        "torch": torch.get_rng_state(),
        "numpy": {
            "key": np_state[0],
            "state": torch.from_numpy(np_state[1].astype(np.int64)),
            "pos": int(np_state[2]),
            "has_gauss": int(np_state[3]),
            "cached_gaussian": float(np_state[4]),
        },
        "python": {"version": py_state[0], "state": list(py_state[1]), "gauss": py_state[2]},
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
    }
    return out


def set_rng_state(state: dict) -> None:
    """Restore what :func:`rng_state` returned (CUDA states only where the devices exist)."""
    torch.set_rng_state(state["torch"].cpu())
    n = state["numpy"]
    np.random.set_state(
        (n["key"], n["state"].numpy().astype(np.uint32), n["pos"], n["has_gauss"], n["cached_gaussian"])
    )
    p = state["python"]
    random.setstate((p["version"], tuple(p["state"]), p["gauss"]))
    if state.get("cuda") and torch.cuda.is_available() and len(state["cuda"]) == torch.cuda.device_count():
        torch.cuda.set_rng_state_all([s.cpu() for s in state["cuda"]])


def save_checkpoint(
    path,
    *,
    model,
    optimizer=None,
    scheduler=None,
    config,
    stats: dict,
    grid: dict,
    step: int,
    epoch: int,
    extra: dict | None = None,
) -> Path:
    """Write a checkpoint atomically (temporary file in the same folder, then ``os.replace``).

    Parameters
    ----------
    path : destination file (its folder is created).
    model : the model, possibly wrapped (DDP, ``torch.compile``): the bare model's state is saved.
    optimizer, scheduler : saved with their ``state_dict()`` when given.
    config : the resolved job config (dict or OmegaConf), stored as YAML text.
    stats : normalisation statistics; grid : ``{"nlat", "nlon", "grid"}``.
    step, epoch : training progress. extra : more plain data (tensors allowed).

    Returns the path written.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    ckpt = {
        "format": FORMAT,
        "model": unwrap_model(model).state_dict(),
        "optimizer": optimizer.state_dict() if optimizer is not None else None,
        "scheduler": scheduler.state_dict() if scheduler is not None else None,
        "config_yaml": _config_yaml(config),
        "stats": _plain(stats),
        "grid": _plain(grid),
        "step": int(step),
        "epoch": int(epoch),
        "rng": rng_state(),
        "versions": versions(),
        "extra": _plain(extra or {}),
    }
    tmp = temp_path(path)
    try:
        torch.save(ckpt, tmp)
        os.replace(tmp, path)
    except (OSError, RuntimeError) as err:  # torch wraps a failed write of its zip writer in a RuntimeError
        wrapped = disk_error(err, path, "checkpoint")  # a full disk, a size limit, a read-only folder: one line
        if wrapped is not None:
            raise wrapped from err
        raise
    finally:
        if tmp.exists():
            tmp.unlink()
    return path


def load_checkpoint(path, map_location="cpu") -> dict:
    """Load a checkpoint with ``torch.load(weights_only=True)`` (no arbitrary code runs).

    Raises
    ------
    FileNotFoundError
        If ``path`` does not exist.
    ValueError
        If the file is not a Dandelion checkpoint (no ``format`` key of this module).
    DamagedFileError
        If torch cannot read the file (truncated, garbage, or holding objects ``weights_only`` refuses); the message
        names the file and the fix.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(
            f"checkpoint {path} does not exist: pass the best.pt or last.pt of a dandelion-train run directory"
        )
    try:
        ckpt = torch.load(path, map_location=map_location, weights_only=True)
    except (RuntimeError, OSError, EOFError, ValueError, pickle.UnpicklingError) as err:
        # torch's own text advises weights_only=False, which would run the file's code: never passed on
        raise DamagedFileError(
            f"checkpoint {path} is not readable ({_why(err)}): pass the best.pt or last.pt of a dandelion-train run, "
            "or retrain; last.pt and best.pt are written atomically, so the other one of the run may be sound"
        ) from err
    if not isinstance(ckpt, dict) or ckpt.get("format") != FORMAT:
        raise ValueError(
            f"{path} is not a dandelion checkpoint (format {FORMAT!r}); was it written by dandelion-train?"
        )
    return ckpt


def _why(err: BaseException) -> str:
    """A short cause for an unreadable checkpoint, without torch's advice to load it unsafely."""
    if isinstance(err, pickle.UnpicklingError):
        return "it holds objects other than tensors and plain data, or is not a torch file"
    text = " ".join(str(err).split())
    if "zip archive" in text or "central directory" in text or isinstance(err, EOFError):
        return "truncated or not a torch zip archive"
    return text[:120]


def config_from_checkpoint(ckpt: dict):
    """The stored job configuration as a plain ``dict`` (parsed from its YAML text)."""
    return yaml.safe_load(ckpt["config_yaml"]) or {}


def layout_from_checkpoint(ckpt: dict):
    """The :class:`~dandelion.channels.ChannelLayout` the model was trained with."""
    if "layout" not in ckpt.get("extra", {}):
        raise ValueError("checkpoint has no channel layout (extra['layout']): it was not written by dandelion-train")
    return ChannelLayout.from_dict(ckpt["extra"]["layout"])


def model_state(ckpt: dict, model: torch.nn.Module) -> dict:
    """The checkpoint's model state_dict, ready for ``model.load_state_dict`` (``model`` the bare model).

    Checkpoints written before a model recorded its grid in the state_dict (the ``_extra_state`` of
    :mod:`dandelion.grid_guard`) lack that entry; it is filled from the checkpoint's own ``grid``, so
    the grid check still runs against the grid the weights were trained on.
    """
    state = ckpt["model"]
    missing = [k for k in model.state_dict() if k.endswith("_extra_state") and k not in state]
    if not missing:
        return state
    saved = _saved_grid(ckpt)
    return {**state, **{k: dict(saved) for k in missing}}


def model_from_checkpoint(
    ckpt,
    nlat: int | None = None,
    nlon: int | None = None,
    grid: str | None = None,
    allow_resolution_change: bool = False,
) -> torch.nn.Module:
    """Rebuild the model with :func:`dandelion.build_model` and load its weights (eval mode, CPU).

    This is the bare network. A checkpoint trained with ``trainer.target=increment`` (the default;
    ``ckpt["extra"]["target"]``) outputs the normalised increment, not the next frame: forecast with
    :func:`load_model` (a :class:`~dandelion.forecast.Forecaster` that applies it) or
    :func:`dandelion.step.next_frame`. A Dandelion with ``advect_state`` outputs three more channels, the displacement
    along which ``next_frame`` moves the newest frame.

    Parameters
    ----------
    ckpt : a dict from :func:`load_checkpoint`, or a path.
    nlat, nlon, grid : the grid to run on; None keeps the checkpoint's.
    allow_resolution_change : permit a grid different from the training grid; only for models
        whose weights do not depend on the resolution (``resolution_dependent = False``).

    Raises
    ------
    ValueError
        If the requested grid differs from the checkpoint's and ``allow_resolution_change`` is
        False, or the model is resolution-dependent (e.g. SFNO); the message names both grids.
    """
    if not isinstance(ckpt, dict):
        ckpt = load_checkpoint(ckpt)
    spec = checkpoint_model_spec(ckpt)
    saved = _saved_grid(ckpt)
    want = {
        "nlat": int(nlat) if nlat is not None else saved["nlat"],
        "nlon": int(nlon) if nlon is not None else saved["nlon"],
        "grid": str(grid) if grid is not None else saved["grid"],
    }
    changed = want != saved
    if changed and not allow_resolution_change:
        raise ValueError(
            f"checkpoint was trained on grid {saved} but {want} was requested: use data on the training grid, "
            "or pass allow_resolution_change=True for a model whose weights do not depend on the resolution"
        )
    hyper = checkpoint_hyperparameters(ckpt)  # the network as saved, whatever its preset says now
    model = build_model(
        spec["name"],
        spec["preset"],
        int(spec["in_channels"]),
        int(spec["out_channels"]),
        want["nlat"],
        want["nlon"],
        want["grid"],
        **(hyper if hyper is not None else dict(spec.get("overrides") or {})),
    )
    if changed and getattr(model, "resolution_dependent", True):
        raise ValueError(
            f"model {spec['name']!r} has resolution-dependent weights: it cannot run on {want} after training on "
            f"{saved}; evaluate it on its training grid"
        )
    if changed:
        with allow_grid_change(model):
            model.load_state_dict(model_state(ckpt, model))
    else:
        model.load_state_dict(model_state(ckpt, model))
    return model.eval()


def _saved_grid(ckpt: dict) -> dict:
    """The grid a checkpoint's model was trained on, ``{"nlat", "nlon", "grid"}``."""
    return {"nlat": int(ckpt["grid"]["nlat"]), "nlon": int(ckpt["grid"]["nlon"]), "grid": str(ckpt["grid"]["grid"])}


def _check_dataset(ckpt: dict, checkpoint, layout: ChannelLayout, dataset, allow_resolution_change: bool) -> dict:
    """The dataset's grid (``SphereGrid.to_dict``) once its fields, grid and land mask are found to suit ``ckpt``.

    Raises
    ------
    ValueError
        As :func:`load_model`, and for a land mask that differs from the one the model was trained with.
    """
    saved = _saved_grid(ckpt)
    data_fields = dataset.layout.fields
    if data_fields != layout.fields:
        raise ValueError(
            f"checkpoint {checkpoint} was trained on fields {layout.fields} but the dataset {dataset.path} has "
            f"{data_fields}: "
            "evaluate it on a dataset with the same fields"
        )
    want = dataset.grid.to_dict()
    if want != saved:
        what = ", ".join(k for k in ("grid", "nlat", "nlon") if want[k] != saved[k])
        if not allow_resolution_change:
            raise ValueError(
                f"checkpoint {checkpoint} was trained on {saved} but the dataset {dataset.path} is on {want} "
                f"({what} differ): use data on the training grid, or pass allow_resolution_change=true for a "
                "model whose weights do not depend on the resolution"
            )
    wet, data_wet = ckpt.get("extra", {}).get("wet"), getattr(dataset, "wet", None)
    if (wet is None) != (data_wet is None) or (
        wet is not None and not torch.equal(torch.as_tensor(wet, dtype=torch.bool), data_wet)
    ):
        theirs = (
            "a different one" if data_wet is not None and wet is not None else "one" if data_wet is not None else "none"
        )
        raise ValueError(
            f"checkpoint {checkpoint} was trained {'with' if wet is not None else 'without'} a land mask but the "
            f"dataset {dataset.path} has {theirs}: evaluate a model on data with the mask it was trained with"
        )
    return want


def load_model(checkpoint, device="cpu", dataset=None, allow_resolution_change: bool = False) -> Forecaster:
    """Load a ``dandelion-train`` checkpoint as a :class:`~dandelion.forecast.Forecaster` on ``device``.

    Parameters
    ----------
    checkpoint : path of ``best.pt`` / ``last.pt``.
    device : torch device (``"cpu"``, ``"cuda"``, ...; ``"auto"`` = CUDA if available); weights are mapped there.
    dataset : optional, the data to run on (a :class:`dandelion.datasets.torch_dataset.WindowDataset`):
        the model is then built on that grid and checked against it.
    allow_resolution_change : run a model whose weights do not depend on the resolution on another
        grid than it was trained on.

    Raises
    ------
    ValueError
        If the data's fields differ from the checkpoint's (names the fields), or its grid or
        resolution differs (names both) and ``allow_resolution_change`` is false or the model's
        weights depend on the resolution.
    """
    device = device_name(device)
    ckpt = load_checkpoint(checkpoint, map_location="cpu")
    layout = layout_from_checkpoint(ckpt)
    if dataset is not None:
        want = _check_dataset(ckpt, checkpoint, layout, dataset, allow_resolution_change)
        model = model_from_checkpoint(
            ckpt,
            nlat=want["nlat"],
            nlon=want["nlon"],
            grid=want["grid"],
            allow_resolution_change=allow_resolution_change,
        )
        layout = ChannelLayout(
            layout.fields, layout.stats, dataset.grid, stats_source=f"checkpoint {checkpoint}", levels=layout.levels
        )
    else:
        model = model_from_checkpoint(ckpt)
    extra = ckpt.get("extra", {})
    spec = extra.get("model_spec", {})
    n_in = extra.get("n_in")
    if n_in is None:
        cfg = config_from_checkpoint(ckpt)
        n_in = (cfg.get("trainer") or {}).get("n_in") or int(spec["in_channels"]) // layout.n_channels
    name = spec.get("name", "model")
    # checkpoints from before these options predicted frames from frames
    return (
        Forecaster(
            model,
            layout,
            int(n_in),
            name=name,
            checkpoint=checkpoint,
            target=extra.get("target", "frame"),
            inputs=extra.get("inputs", "frames"),
            wet=extra.get("wet"),
        )
        .to(device)
        .eval()
    )
