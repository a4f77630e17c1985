"""What a training run is given, made uniform: the model (a module or a registered name) and the data (folders or
:class:`~dandelion.datasets.torch_dataset.WindowDataset` objects), for :class:`dandelion.training.trainer.Trainer`."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import torch.nn as nn

from dandelion.datasets.torch_dataset import WindowDataset
from dandelion.registry import resolved_hyperparameters, unwrap_model
from dandelion.runtime import DamagedFileError

__all__ = ["model_spec", "model_channels", "open_windows", "check_same_data", "config_record", "worker_errors"]

_SPEC_KEYS = ("name", "preset", "overrides")


def model_spec(model, in_channels: int, out_channels: int) -> dict | None:
    """The registry spec of ``model`` (None for an ``nn.Module``, which is trained as given).

    Parameters
    ----------
    model : an ``nn.Module``; a registered model name (``"dandelion"``, preset ``"small"``); or a mapping with
        ``name`` and optionally ``preset`` (default ``"small"``) and ``overrides`` (preset hyper-parameters), the
        layout of ``configs/model/*.yaml``.
    in_channels, out_channels : the channels the data needs (:func:`model_channels`).

    Returns
    -------
    ``{"name", "preset", "in_channels", "out_channels", "overrides", "hyperparameters"}`` (what checkpoints store;
    ``hyperparameters``: the preset with the overrides applied, :func:`dandelion.registry.resolved_hyperparameters`,
    None for a model without a preset table), or None.

    Raises
    ------
    TypeError / ValueError
        For another type, a mapping without ``name`` or with unknown keys; ValueError for an unknown preset or
        override of a registered model.
    """
    if isinstance(model, nn.Module):
        return None
    if isinstance(model, str):
        model = {"name": model}
    if not isinstance(model, Mapping):
        raise TypeError(
            f"model={type(model).__name__}: expected an nn.Module, a registered model name "
            "(dandelion.available_models()) or a mapping {'name': ..., 'preset': ..., 'overrides': {...}}"
        )
    extra = sorted(set(model) - set(_SPEC_KEYS))
    if extra or not model.get("name"):
        raise ValueError(
            f"model={dict(model)}: a model spec holds 'name' (required), 'preset' and 'overrides' "
            f"({'unknown keys ' + ', '.join(extra) if extra else 'no name given'})"
        )
    name, preset, overrides = (
        str(model["name"]),
        str(model.get("preset") or "small"),
        dict(model.get("overrides") or {}),
    )
    return {
        "name": name,
        "preset": preset,
        "in_channels": int(in_channels),
        "out_channels": int(out_channels),
        "overrides": overrides,
        "hyperparameters": resolved_hyperparameters(name, preset, overrides),
    }


def model_channels(data: WindowDataset, n_in: int = 4) -> tuple[int, int]:
    """``(in_channels, out_channels)`` of a model for ``data`` with ``n_in`` input frames: ``n_in * C`` (plus one,
    the land mask, for a masked dataset; :func:`dandelion.step.next_frame`) and ``C``, with ``C`` the channels of
    one normalised frame (:class:`dandelion.channels.ChannelLayout`)."""
    C = data.layout.n_channels
    return int(n_in) * C + (data.wet is not None), C


def open_windows(data, split: str, n_in: int, n_out: int, stride: int, role: str) -> WindowDataset:
    """The windows ``(n_in, n_out, stride)`` of ``data``: a dataset folder (its split ``split``) or a
    :class:`WindowDataset` (returned as it is when its windows match, else its folder and split reopened). A
    dataset returned as it is stays the caller's to close.

    Raises
    ------
    TypeError
        For another type (the message names the argument ``role``); the dataset's own errors for a bad folder.
    """
    if isinstance(data, WindowDataset):
        if (data.n_in, data.n_out, data.stride) == (n_in, n_out, stride):
            return data
        return WindowDataset(data.path, data.split, n_in=n_in, n_out=n_out, stride=stride)
    if isinstance(data, (str, os.PathLike)):
        return WindowDataset(Path(data), split, n_in=n_in, n_out=n_out, stride=stride)
    raise TypeError(
        f"{role}={type(data).__name__}: expected a dataset folder (str or Path, written by dandelion-generate) "
        "or a dandelion.datasets.torch_dataset.WindowDataset"
    )


def check_same_data(train: WindowDataset, valid: WindowDataset) -> None:
    """Refuse validation data on another grid or with other channels than the training data.

    Raises
    ------
    ValueError
        Naming both grids or both channel lists.
    """
    if train.grid.to_dict() != valid.grid.to_dict():
        raise ValueError(
            f"valid_data is on grid {valid.grid.to_dict()} but train_data on {train.grid.to_dict()}: "
            "validate on a split of the same dataset"
        )
    if train.layout.channels != valid.layout.channels:
        raise ValueError(
            f"valid_data has channels {valid.layout.channels} but train_data {train.layout.channels}: "
            "validate on a split of the same dataset"
        )


def config_record(trainer, model, device, resume) -> dict:
    """The record of a run built from Python, in the layout of ``train.yaml`` (dataset, model, trainer, device, seed,
    resume, run_dir, plugins): a registered model by its spec, a module by its class's qualified name."""
    spec = trainer.model_spec
    if spec is None:
        cls = type(unwrap_model(model))
        model_record = {"module": f"{cls.__module__}.{cls.__qualname__}"}
    else:
        model_record = {k: spec[k] for k in ("name", "preset", "overrides")}
    return {
        "dataset": {"name": trainer.train_sets[0].metadata.get("name"), "path": str(trainer.data_path)},
        "model": model_record,
        "trainer": trainer.options.to_dict(),
        "device": str(device),
        "seed": trainer.seed,
        "resume": None if resume is None else str(resume),
        "run_dir": str(trainer.run_dir),
        "plugins": [],
    }


def worker_errors(batches):
    """Iterate a DataLoader's ``batches``, re-raising a data error of a worker process (a damaged file, a non-finite
    frame: :class:`~dandelion.runtime.DamagedFileError`, ``ValueError``) as its own one line: torch wraps it in
    "Caught ... in DataLoader worker process N. Original Traceback ...", whose last line is the error itself."""
    try:
        yield from batches
    except (DamagedFileError, ValueError) as err:
        text = str(err).strip()
        if "Original Traceback" not in text:
            raise
        last = text.splitlines()[-1]
        raise type(err)(last.split(": ", 1)[1] if ": " in last else last) from None
