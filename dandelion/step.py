"""One forecast step: what the network sees, what it outputs, and the next normalised frame made of them.

The two choices fixed at training time, ``target`` (:data:`TARGETS`) and ``inputs`` (:data:`INPUTS`), and the land
mask and forcing conventions are described in :mod:`dandelion.forecast`, which chains these steps into rollouts
and re-exports every name here.
"""

from __future__ import annotations

import torch

from .registry import unwrap_model

__all__ = [
    "TARGETS",
    "INPUTS",
    "WET_SHARE_MIN",
    "nonzero_scale",
    "difference_window",
    "next_frame",
    "advected",
    "increment_step",
]

#: What the network outputs: the next normalised frame, or the scaled normalised increment.
TARGETS = ("frame", "increment")
#: What the network sees: the window of normalised frames, or the older frames as differences to the newest.
INPUTS = ("frames", "differences")


def nonzero_scale(scale: torch.Tensor) -> torch.Tensor:
    """The increment scale with zeros (fields that never change) read as 1, for dividing by it."""
    return torch.where(scale > 0, scale, torch.ones_like(scale))


def difference_window(x: torch.Tensor, n_channels: int, scale: torch.Tensor) -> torch.Tensor:
    """Re-express a frame window as differences: ``[(x_{t-k} - x_t) / scale for k = n_in-1..1] + [x_t]``.

    ``x`` : (B, n_in*C, nlat, nlon), frame-major, oldest first; ``scale`` : (C,) (the increment scale;
    0 is read as 1). Same shape out, the same information (invertible), but the frame-to-frame changes,
    a few percent of a field's spread, arrive at unit size instead of as small differences of large,
    nearly equal inputs (``inputs=differences``).
    """
    n_in = x.shape[1] // n_channels
    if n_in == 1:
        return x
    s = nonzero_scale(scale.to(device=x.device, dtype=x.dtype)).repeat(n_in - 1).reshape(1, -1, 1, 1)
    last = x[:, -n_channels:]
    return torch.cat([(x[:, :-n_channels] - last.repeat(1, n_in - 1, 1, 1)) / s, last], dim=1)


def next_frame(
    model,
    x: torch.Tensor,
    n_channels: int,
    increment_scale: torch.Tensor | None = None,
    input_scale: torch.Tensor | None = None,
    wet: torch.Tensor | None = None,
) -> torch.Tensor:
    """The next normalised frame from a window, for either target and input form.

    ``x`` : (B, n_in*C, nlat, nlon) frame-major window (last C channels = newest frame ``x_t``).
    The network sees ``x`` (``input_scale=None``, ``inputs=frames``) or :func:`difference_window` of
    it (``inputs=differences``). Returns its output (target ``frame``, ``increment_scale=None``) or
    ``x_t + increment_scale[c] * output`` (target ``increment``; ``increment_scale`` of shape (C,),
    :meth:`ChannelLayout.increment_scale`), shape (B, C, nlat, nlon); the increment is added in the
    output's dtype promoted to at least float32.

    A model with ``advects_state`` (Dandelion's ``advect_state``: :mod:`dandelion.warp.advection`) gives three more
    output channels (the last three), a Cartesian displacement, and the increment is added to ``x_t`` moved along
    it (read at ``exp_p(d)``, :func:`advected`; land is never read): ``x_t(exp_p(d)) + increment_scale[c] * output``,
    the semi-Lagrangian step; ValueError for target ``frame``. The model may be wrapped (DDP, ``torch.compile``):
    :func:`dandelion.registry.unwrap_model` finds it.

    ``wet`` : (nlat, nlon) bool ocean mask of a masked dataset, or None. The network then gets it as one more
    input channel (last), and land points of the result are the newest input frame's (module docstring).
    """
    inp = x if input_scale is None else difference_window(x, n_channels, input_scale)
    if wet is not None:
        wet = wet.to(device=x.device)
        inp = torch.cat([inp, wet.to(inp.dtype).expand(inp.shape[0], 1, *wet.shape)], dim=1)
    last = x[:, -n_channels:]
    out = model(inp)
    core = unwrap_model(model)
    if getattr(core, "advects_state", False):  # advected persistence (dandelion.warp.advection)
        if increment_scale is None:
            raise ValueError(
                "a model with advect_state moves the newest frame and adds an increment: train it with "
                "target=increment (target=frame has no frame to move)"
            )
        out, base = out[:, :-3], advected(core, last, out[:, -3:], wet)
    else:
        base = last
    out = increment_step(out, base, n_channels, increment_scale)
    return out if wet is None else torch.where(wet, out, last.to(out.dtype))


#: the least wet share of the bilinear stencil at a departure point for the advected value to be used there (below
#: it, next to land, the newest frame's own value is kept)
WET_SHARE_MIN = 0.25


def advected(core, last: torch.Tensor, vector: torch.Tensor, wet: torch.Tensor | None = None) -> torch.Tensor:
    """The newest frame ``last (B, C, nlat, nlon)`` moved along the Cartesian displacement ``vector (B, 3, nlat,
    nlon)`` by the model ``core``'s sampler (:meth:`dandelion.model.Dandelion.advect`).

    On a masked dataset (``wet`` (nlat, nlon) bool) land is never read: the frame is sampled as
    ``sample(last * wet) / sample(wet)``, the wet points of the bilinear stencil only, and where their share is below
    :data:`WET_SHARE_MIN` (a departure point among land cells) the node keeps its own value. Returns ``(B, C, nlat,
    nlon)`` in ``last``'s dtype promoted to float32 at least.
    """
    if wet is None:
        return core.advect(last, vector)
    w = wet.to(device=last.device, dtype=torch.promote_types(last.dtype, torch.float32))
    w = w.expand(last.shape[0], 1, *wet.shape)
    moved = core.advect(torch.cat([last * w, w], dim=1), vector)
    share = moved[:, -1:]
    inside = share >= WET_SHARE_MIN
    return torch.where(inside, moved[:, :-1] / share.clamp_min(WET_SHARE_MIN), last.to(moved.dtype))


def increment_step(
    out: torch.Tensor, last: torch.Tensor, n_channels: int, increment_scale: torch.Tensor | None
) -> torch.Tensor:
    """The step's frame from the network's output ``out (B, C, nlat, nlon)``: ``out`` itself (target ``frame``,
    ``increment_scale`` None), else ``last + increment_scale[c] * out`` (target ``increment``; ``last``: the newest
    frame, advected or not, ``(B, C, nlat, nlon)``; ``increment_scale`` of shape ``(C,)``), added in the output's
    dtype promoted to float32 at least (a bf16 output under autocast is added in float32)."""
    if increment_scale is None:
        return out
    dt = torch.promote_types(out.dtype, torch.float32)  # bf16 (autocast) outputs are added in float32
    s = increment_scale.to(device=out.device, dtype=dt).reshape(1, n_channels, 1, 1)
    return last.to(dt) + s * out.to(dt)
