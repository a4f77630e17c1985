"""How a trained benchmark model runs at another grid: the transfer rule of each model and the forecaster it builds.

Resolution-free models keep their weights; SFNO keeps its trained modes and Dandelion its trained pooling band
limits (:data:`TRANSFER_RULES`); any other resolution-dependent model is not transferable. Used by
``dandelion-transfer`` (:mod:`dandelion.benchmarks.transfer.zero_shot`).
"""

from __future__ import annotations

from dandelion.channels import ChannelLayout
from dandelion.checkpoint import (
    checkpoint_hyperparameters,
    config_from_checkpoint,
    layout_from_checkpoint,
    load_checkpoint,
    model_state,
)
from dandelion.forecast import Forecaster
from dandelion.grid_guard import allow_grid_change
from dandelion.registry import build_model
from dandelion.runtime import device_name

__all__ = ["TRANSFER_RULES", "RULE_REVISIONS", "transfer_rule", "transfer_forecaster"]


def _keep_trained_modes(model, spec: dict) -> tuple[dict, str]:
    return (
        {"lmax": int(model.lmax)},
        f"spectral weights kept for the trained degrees l < {int(model.lmax)} (lmax fixed); its SHTs run on the "
        "finer grid, so degrees above the trained band limit are not represented inside the network",
    )


def _keep_trained_band_limits(model, spec: dict) -> tuple[dict, str]:
    pool = [int(b) for b in model.pool_lmax]
    return (
        {"pool_lmax": pool},
        "same weights; warps are great-circle displacements in radians; each spectral pooling keeps its trained "
        f"band limit (pool_lmax {pool}, fixed as SFNO's lmax) instead of the finer level grids' "
        "(which would double them)",
    )


#: Model name -> ``f(model built on the training grid, model_spec) -> (build overrides, description)`` for a
#: model whose weights, or whose band limits, depend on the resolution but keep their meaning at another grid once
#: the overrides hold. SFNO keeps its trained modes; Dandelion its trained pooling band limits: built on a finer grid
#: it would otherwise pool at what the finer levels resolve, a different operator from the one trained (measured in
#: docs/decisions.md, "Zero-shot resolution transfer").
TRANSFER_RULES = {"sfno": _keep_trained_modes, "dandelion": _keep_trained_band_limits}

#: Model key of the scale's cells (``cell["model"]``, the registry name) -> revision of its transfer rule, part of its
#: records' hash (:func:`dandelion.benchmarks.transfer.zero_shot._transfer_hash`): a new revision makes that model's
#: records stale, and only that model's, also on a machine without the checkpoints (its cells are then pending until
#: ``retrain_missing=true``). A model without an entry is at its first rule, which adds nothing to the hash. Editing a
#: rule in :data:`TRANSFER_RULES` (or a model's build) needs a new revision here, else the records made under the old
#: rule count as current. The value is an opaque tag: it is hashed into the committed records as it stands.
RULE_REVISIONS = {"dandelion": "trained pooling band limits (pool_lmax), 2026-12-02"}

_RESOLUTION_FREE = {
    "disco": "same weights, filters rebuilt at the finer grid with the same cutoff radius in radians (theta_cutoff)",
    "flower2d": (
        "same weights: warp displacements are in normalised image coordinates (a fraction of the longitude turn and "
        "of the pole-to-pole rows), so they move as far in radians at every grid; its 2x2 strided down/up "
        "convolutions act per pixel, i.e. over half the angular distance at 2x resolution"
    ),
}


def _built_with(ckpt: dict, spec: dict) -> dict:
    """The hyper-parameters the checkpoint's network was built with (its record, so a preset changed since does not
    change it: :func:`dandelion.checkpoint.checkpoint_hyperparameters`), else its overrides."""
    return checkpoint_hyperparameters(ckpt) or dict(spec.get("overrides") or {})


def transfer_rule(ckpt: dict) -> dict:
    """How the checkpoint's model runs at another grid: ``{"transferable", "treatment" | "reason", "overrides"}``.

    Resolution-free models (``resolution_dependent = False``, :mod:`dandelion.grid_guard`) keep their weights;
    a model with a rule in :data:`TRANSFER_RULES` is rebuilt with the rule's overrides (SFNO: keep the trained modes;
    Dandelion: keep the trained pooling band limits); any other resolution-dependent model is not transferable and
    the reason says why.
    """
    spec = ckpt["extra"]["model_spec"]
    g = ckpt["grid"]
    model = build_model(
        spec["name"],
        spec["preset"],
        int(spec["in_channels"]),
        int(spec["out_channels"]),
        int(g["nlat"]),
        int(g["nlon"]),
        str(g["grid"]),
        **_built_with(ckpt, spec),
    )
    name = str(spec["name"])
    if name in TRANSFER_RULES:
        over, text = TRANSFER_RULES[name](model, spec)
        return {"transferable": True, "treatment": text, "overrides": over}
    if not getattr(model, "resolution_dependent", True):
        return {
            "transferable": True,
            "treatment": _RESOLUTION_FREE.get(name, "same weights (resolution_dependent = False)"),
            "overrides": {},
        }
    return {
        "transferable": False,
        "overrides": {},
        "reason": f"{type(model).__name__} has resolution-dependent weights (resolution_dependent = True) and no "
        "transfer rule in dandelion.benchmarks.transfer.rules.TRANSFER_RULES",
    }


def transfer_forecaster(
    checkpoint, dataset, device: str = "cpu", ckpt: dict | None = None, overrides: dict | None = None
) -> tuple[Forecaster | None, dict]:
    """The checkpoint's model as a :class:`~dandelion.forecast.Forecaster` on ``dataset``'s grid, normalised
    with the CHECKPOINT's statistics; returns ``(forecaster or None, rule)`` (:func:`transfer_rule`). ``overrides``
    (build hyper-parameters, e.g. Dandelion's ``pool_lmax``) apply on top of the rule's, for diagnostics.

    Raises
    ------
    ValueError
        If the dataset's fields differ from the checkpoint's, the grid types differ, or one of the two has a wet mask
        and the other none. A masked model gets the dataset's own mask (the finer grid's land) as its input channel.
    """
    ckpt = load_checkpoint(checkpoint) if ckpt is None else ckpt
    layout = layout_from_checkpoint(ckpt)
    if dataset.layout.fields != layout.fields:
        raise ValueError(
            f"checkpoint {checkpoint} was trained on fields {layout.fields} but {dataset.path} has "
            f"{dataset.layout.fields}"
        )
    if dataset.grid.grid != str(ckpt["grid"]["grid"]):
        raise ValueError(
            f"checkpoint {checkpoint} was trained on a {ckpt['grid']['grid']!r} grid, {dataset.path} is "
            f"{dataset.grid.grid!r}: the transfer changes the resolution only"
        )
    rule = transfer_rule(ckpt)
    if not rule["transferable"]:
        return None, rule
    spec = ckpt["extra"]["model_spec"]
    model = build_model(
        spec["name"],
        spec["preset"],
        int(spec["in_channels"]),
        int(spec["out_channels"]),
        dataset.grid.nlat,
        dataset.grid.nlon,
        dataset.grid.grid,
        **{**_built_with(ckpt, spec), **rule["overrides"], **dict(overrides or {})},
    )
    with allow_grid_change(model):  # PyTorch still checks every weight shape
        model.load_state_dict(model_state(ckpt, model))
    extra = ckpt.get("extra", {})
    layout = ChannelLayout(
        layout.fields, layout.stats, dataset.grid, stats_source=f"checkpoint {checkpoint}", levels=layout.levels
    )
    n_in = extra.get("n_in")
    if n_in is None:  # as dandelion.checkpoint.load_model: the trainer's n_in, else the input channels per frame
        n_in = (config_from_checkpoint(ckpt).get("trainer") or {}).get("n_in") or int(
            spec["in_channels"]
        ) // layout.n_channels
    wet = extra.get("wet")
    if (wet is None) != (getattr(dataset, "wet", None) is None):
        raise ValueError(
            f"checkpoint {checkpoint} was trained {'without' if wet is None else 'with'} a wet mask but {dataset.path} "
            f"{'has one' if wet is None else 'has none'}: the transfer needs the same kind of dataset"
        )
    # a masked model gets the finer grid's own mask (land rasterised there) as its constant input channel
    fc = Forecaster(
        model.eval(),
        layout,
        int(n_in),
        name=str(spec["name"]),
        checkpoint=checkpoint,
        target=extra.get("target", "frame"),
        inputs=extra.get("inputs", "frames"),
        wet=None if wet is None else dataset.wet,
    )
    return fc.to(device_name(device)).eval(), rule
