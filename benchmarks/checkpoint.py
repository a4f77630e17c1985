"""Checkpoints: atomic, loadable with ``torch.load(weights_only=True)``, enough to resume exactly.

A checkpoint is a dict of tensors and plain Python types only (DESIGN.md §7)::

    format          "dandelion-checkpoint/1"
    model           state_dict of the bare model (DDP / torch.compile wrappers stripped)
    optimizer       optimizer.state_dict() or None
    scheduler       scheduler.state_dict() or None
    config_yaml     the resolved job configuration as YAML text
    stats           the dataset's normalisation statistics (stats.yaml)
    grid            {"nlat", "nlon", "grid"} of the data the model was trained on
    step, epoch     optimiser steps done; current epoch
    rng             RNG states as tensors (torch CPU, CUDA per device, numpy, Python), for exact resume
    versions        package versions (dandelion, torch, torch_harmonics, numpy, h5py, python)
    extra           job-specific plain data (the trainer stores "model_spec" and "layout" here)

``model_spec`` = ``{"name", "preset", "in_channels", "out_channels", "overrides"}``, the arguments
of :func:`dandelion.build_model` apart from the grid; ``layout`` =
:meth:`dandelion.datasets.torch_dataset.ChannelLayout.to_dict`.
"""

from __future__ import annotations

import os
import platform
import random
from pathlib import Path

import numpy as np
import torch

__all__ = ["save_checkpoint", "load_checkpoint", "model_from_checkpoint", "model_state", "layout_from_checkpoint",
           "config_from_checkpoint", "rng_state", "set_rng_state", "package_versions", "FORMAT"]

FORMAT = "dandelion-checkpoint/1"


def package_versions() -> dict[str, str]:
    """Versions of the packages a checkpoint depends on, as strings."""
    out = {"python": platform.python_version(), "torch": str(torch.__version__), "numpy": str(np.__version__)}
    for name in ("dandelion", "torch_harmonics", "h5py"):
        try:
            out[name] = str(__import__(name).__version__)
        except Exception:  # pragma: no cover - optional packages
            out[name] = "unknown"
    return out


def _plain(obj):
    """Convert OmegaConf containers, numpy scalars/arrays and paths to types ``weights_only`` accepts."""
    try:
        from omegaconf import DictConfig, ListConfig, OmegaConf

        if isinstance(obj, (DictConfig, ListConfig)):
            obj = OmegaConf.to_container(obj, resolve=True)
    except ImportError:  # pragma: no cover
        pass
    if isinstance(obj, dict):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_plain(v) for v in obj)
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
    from omegaconf import OmegaConf

    return OmegaConf.to_yaml(OmegaConf.create(_plain(config)), resolve=True)


def rng_state() -> dict:
    """RNG states (torch CPU, CUDA, numpy, Python ``random``) as tensors and plain types."""
    np_state = np.random.get_state()
    py_state = random.getstate()
    out = {
        "torch": torch.get_rng_state(),
        "numpy": {"key": np_state[0], "state": torch.from_numpy(np_state[1].astype(np.int64)), "pos": int(np_state[2]),
                  "has_gauss": int(np_state[3]), "cached_gaussian": float(np_state[4])},
        "python": {"version": py_state[0], "state": list(py_state[1]), "gauss": py_state[2]},
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
    }
    return out


def set_rng_state(state: dict) -> None:
    """Restore what :func:`rng_state` returned (CUDA states only where the devices exist)."""
    torch.set_rng_state(state["torch"].cpu())
    n = state["numpy"]
    np.random.set_state((n["key"], n["state"].numpy().astype(np.uint32), n["pos"], n["has_gauss"], n["cached_gaussian"]))
    p = state["python"]
    random.setstate((p["version"], tuple(p["state"]), p["gauss"]))
    if state.get("cuda") and torch.cuda.is_available() and len(state["cuda"]) == torch.cuda.device_count():
        torch.cuda.set_rng_state_all([s.cpu() for s in state["cuda"]])


def save_checkpoint(path, *, model, optimizer=None, scheduler=None, config, stats: dict, grid: dict, step: int, epoch: int,
                    extra: dict | None = None) -> Path:
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
    from dandelion.registry import unwrap_model

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
        "versions": package_versions(),
        "extra": _plain(extra or {}),
    }
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        torch.save(ckpt, tmp)
        os.replace(tmp, path)
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
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"checkpoint {path} does not exist: pass the best.pt or last.pt of a dandelion-train run directory")
    ckpt = torch.load(path, map_location=map_location, weights_only=True)
    if not isinstance(ckpt, dict) or ckpt.get("format") != FORMAT:
        raise ValueError(f"{path} is not a dandelion checkpoint (format {FORMAT!r}); was it written by dandelion-train?")
    return ckpt


def config_from_checkpoint(ckpt: dict):
    """The stored job configuration as an OmegaConf ``DictConfig``."""
    from omegaconf import OmegaConf

    return OmegaConf.create(ckpt["config_yaml"])


def layout_from_checkpoint(ckpt: dict):
    """The :class:`~dandelion.datasets.torch_dataset.ChannelLayout` the model was trained with."""
    from dandelion.datasets.torch_dataset import ChannelLayout

    if "layout" not in ckpt.get("extra", {}):
        raise ValueError("checkpoint has no channel layout (extra['layout']): it was not written by dandelion-train")
    return ChannelLayout.from_dict(ckpt["extra"]["layout"])


def _model_spec(ckpt: dict) -> dict:
    spec = ckpt.get("extra", {}).get("model_spec")
    if spec is None:
        cfg = config_from_checkpoint(ckpt)
        m = cfg.get("model", {})
        spec = {"name": m.get("name"), "preset": m.get("preset"), "in_channels": m.get("in_channels"),
                "out_channels": m.get("out_channels"), "overrides": dict(m.get("overrides") or {})}
    missing = [k for k in ("name", "preset", "in_channels", "out_channels") if spec.get(k) is None]
    if missing:
        raise ValueError(f"checkpoint lacks the model's {missing}: it was not written by dandelion-train")
    return spec


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
    saved = {"nlat": int(ckpt["grid"]["nlat"]), "nlon": int(ckpt["grid"]["nlon"]), "grid": str(ckpt["grid"]["grid"])}
    return {**state, **{k: dict(saved) for k in missing}}


def model_from_checkpoint(ckpt, nlat: int | None = None, nlon: int | None = None, grid: str | None = None,
                          allow_resolution_change: bool = False) -> torch.nn.Module:
    """Rebuild the model with :func:`dandelion.build_model` and load its weights (eval mode, CPU).

    This is the bare network. A checkpoint trained with ``trainer.target=increment`` (the default;
    ``ckpt["extra"]["target"]``) outputs the normalised increment, not the next frame: forecast with
    :func:`dandelion.api.load_model` (a ``Forecaster`` that applies it) or
    :func:`dandelion.benchmarks.train.next_frame`.

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
    from dandelion.registry import build_model

    if not isinstance(ckpt, dict):
        ckpt = load_checkpoint(ckpt)
    spec = _model_spec(ckpt)
    saved = {"nlat": int(ckpt["grid"]["nlat"]), "nlon": int(ckpt["grid"]["nlon"]), "grid": str(ckpt["grid"]["grid"])}
    want = {"nlat": int(nlat) if nlat is not None else saved["nlat"], "nlon": int(nlon) if nlon is not None else saved["nlon"],
            "grid": str(grid) if grid is not None else saved["grid"]}
    changed = want != saved
    if changed and not allow_resolution_change:
        raise ValueError(f"checkpoint was trained on grid {saved} but {want} was requested: use data on the training grid, "
                         "or pass allow_resolution_change=True for a model whose weights do not depend on the resolution")
    model = build_model(spec["name"], spec["preset"], int(spec["in_channels"]), int(spec["out_channels"]), want["nlat"],
                        want["nlon"], want["grid"], **dict(spec.get("overrides") or {}))
    if changed and getattr(model, "resolution_dependent", True):
        raise ValueError(f"model {spec['name']!r} has resolution-dependent weights: it cannot run on {want} after training on "
                         f"{saved}; evaluate it on its training grid")
    if changed:
        from dandelion.grid_guard import allow_grid_change

        with allow_grid_change(model):
            model.load_state_dict(model_state(ckpt, model))
    else:
        model.load_state_dict(model_state(ckpt, model))
    return model.eval()
