"""Advected persistence: the state itself moved along great circles before the network's increment is added.

A forecast step with the ``increment`` target is ``x_{t+1} = x_t + s * f(x)`` (:func:`dandelion.step.next_frame`):
persistence plus a learned increment. For a field carried by a flow, the increment must then encode the whole
advective change ``h(exp_p(-dt u)) - h(p)``, and every step's error in it is never corrected by anything that moves
the field. With advected persistence the step is the semi-Lagrangian one (Staniforth and Côté 1991, Mon. Wea. Rev.
119, 2206-2223, eq. 2.4: the value at the arrival point is the value at the departure point)

    x_{t+1}(p) = x_t(exp_p(d(p))) + s * f(x)(p),

with one displacement ``d`` per node shared by all channels: the tangent projection ``(D . e, D . n)`` of a
Cartesian 3-vector ``D``, a pointwise linear map of the network's input (zero at
initialisation, so the step starts as persistence plus increment, bit for bit). The data's vector fields reach the
network as Cartesian components (docs/ARCHITECTURE.md §3), so the departure point of a flow given among the inputs,
``D = -dt * velocity``, is one linear map of them. The map's output is in units of ``UNIT`` = 0.1 rad (about one grid
spacing at 32x64): a pointwise map's weights all move by about the learning rate per Adam step, and a displacement in
radians that moved so jitters by the order of a tenth of a grid spacing per step (an estimate); measured: a first
probe in radians on the transport dataset reached val VRMSE 0.04 at step 240, against 0.014 in these units
(docs/model.md, "Advected persistence"). The exponential map and the sampling are
the warp's (:mod:`dandelion.warp`): zero displacement is the identity bit for bit, across the poles too.
"""

from __future__ import annotations

import torch
import torch.nn as nn

from ..pointwise import Pointwise
from ..sphere import SphereGrid
from .layer import WARP_KERNELS, WarpSampling
from .sampler import SphereSampler

__all__ = ["StateAdvection", "UNIT"]

#: radians per unit of the displacement map's output (module docstring); fixed, so the weights mean one physical
#: displacement on every grid (resolution-free, as the model's other weights)
UNIT = 0.1


class StateAdvection(WarpSampling, nn.Module):
    """The displacement of advected persistence and the sampling of the state it moves (module docstring).

    Parameters
    ----------
    grid : SphereGrid
        The data grid (the state's and the features').
    in_channels : int
        Channels of the features the displacement is a linear map of.
    kernel : str
        The sampling kernel, one of :data:`~dandelion.warp.layer.WARP_KERNELS`.

    Shapes
    ------
    ``forward``: features ``(B, in_channels, nlat, nlon)`` -> Cartesian displacement ``(B, 3, nlat, nlon)`` (radians:
    ``UNIT`` times the linear map,
    any component normal to the sphere is dropped by the projection). ``advect``: state ``(B, C, nlat, nlon)`` and the
    Cartesian displacement -> the state sampled at the displaced points, ``(B, C, nlat, nlon)``.

    Raises
    ------
    ValueError
        For ``in_channels`` below 1 or an unknown kernel.
    """

    def __init__(self, grid: SphereGrid, in_channels: int, kernel: str = "auto"):
        super().__init__()
        if int(in_channels) < 1:
            raise ValueError(f"in_channels={in_channels} must be >= 1")
        if kernel not in WARP_KERNELS:
            raise ValueError(f"kernel={kernel!r}: choose one of {', '.join(WARP_KERNELS)}")
        self.kernel, self.heads = kernel, 1
        self.sampler = SphereSampler(grid)
        self.sampler.compile_kernels = False
        with torch.random.fork_rng(devices=[]):  # draws nothing from the global generator: a model's other
            self.vector = Pointwise(int(in_channels), 3)  # parameters initialise as without the advection
        nn.init.zeros_(self.vector.weight)
        nn.init.zeros_(self.vector.bias)
        # (2, 3, nlat, nlon): the east and north unit vectors of every node, onto which D is projected
        self.register_buffer("frame", torch.stack([grid.east, grid.north]).to(torch.float32), persistent=False)

    def extra_repr(self) -> str:
        return f"in_channels={self.vector.in_channels}"

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        return UNIT * self.vector(features)

    def advect(self, state: torch.Tensor, vector: torch.Tensor) -> torch.Tensor:
        """``state (B, C, nlat, nlon)`` read at ``exp_p(D . e, D . n)`` for the Cartesian ``vector`` ``D (B, 3, nlat,
        nlon)``; in the state's dtype promoted to float32 at least (as the warp's values).

        Raises
        ------
        ValueError
            If ``vector`` is not ``(B, 3, nlat, nlon)`` for the state's batch and grid.
        """
        if vector.shape[1] != 3 or vector.shape[0] != state.shape[0] or vector.shape[-2:] != state.shape[-2:]:
            raise ValueError(
                f"vector of shape {tuple(vector.shape)} must be (B, 3, nlat, nlon) for a state of shape "
                f"{tuple(state.shape)}"
            )
        d = torch.einsum("bkij,fkij->bfij", vector, self.frame.to(vector.dtype))
        return self._warp(state, d)
