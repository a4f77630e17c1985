"""The warp on the sphere: the exponential map, pole-aware bilinear sampling, the warp index and the layer.

docs/ARCHITECTURE.md §5. A warp head predicts, at every grid node x with local frame (east e, north n), a
displacement d = (d_e, d_n) in radians and reads its value features at the point reached by walking
|d| along the great circle leaving x in direction d (the exponential map of the unit sphere),

    y = cos|d| x + sin|d| (d_e e + d_n n) / |d|.

The value at y is interpolated bilinearly in (row, column) index space of the grid: longitude is
periodic (a wrapped column) and colatitude is mapped to a fractional row through the grid's own row
table (non-uniform on Gaussian grids). Across a pole, the neighbour of a point is the mirrored row
at longitude + pi: the image handed to :func:`torch.nn.functional.grid_sample` carries one ghost
row beyond each pole (the row nearest the pole that is not a pole row, at colatitude -theta or
2*pi - theta, rolled by half a turn), so no point is ever clamped to a border.

Numerical care (each item has bitten public code):

* ``sin|d| / |d|`` and ``cos|d|`` are evaluated at ``|d|`` clamped below at the machine epsilon,
  where both equal the first term of their Taylor series (1) in working precision, so values and
  gradients are finite at zero displacement (:func:`~dandelion.warp.expmap.cos_sinc`);
* the colatitude and longitude of y are computed as increments over the node's own coordinates,
  ``delta_theta = atan2(sin(theta_y - theta_x), cos(theta_y - theta_x))`` and
  ``delta_lon = atan2(y.e, y.h)`` (h the horizontal outward unit vector of the node's meridian); the
  square root and the longitude ``atan2`` are guarded (a mask with zero
  gradient) when y is within ``8 eps`` of a pole: there the node's own longitude is kept, so a
  pole-row column j is never sent to column j + nlon/2 by a rounding error;
* zero displacement is bit-exactly the identity, pole rows included: the increments are exactly
  zero, the column index is the node's integer column plus the increment, and the padded image has
  ``2**k + 1`` rows and columns so that grid_sample's normalisation ``(g + 1) * (size - 1) / 2``
  (``align_corners=True``) maps integer indices to themselves without rounding.

Modules, bottom up:

* :mod:`~dandelion.warp.expmap`: the exponential map (:func:`exp_map`), ``cos|d|`` and ``sin|d|/|d|``;
* :mod:`~dandelion.warp.padding`: the ghost-padded image (:class:`GhostPad`);
* :mod:`~dandelion.warp.index`: THE warp index and its Jacobian (:func:`warp_index`), differentiable
  (:class:`WarpIndex`) and optionally compiled (:func:`index_of_warp`);
* :mod:`~dandelion.warp.sampler`: :class:`SphereSampler` (per-grid tables, sampling at indices or points)
  and :func:`sample_sphere`;
* :mod:`~dandelion.warp.sample`: the fused sampling node :class:`WarpSample` (index, sampling and analytic
  backward in one autograd node);
* :mod:`~dandelion.warp.triton_sample`: the same node as one Triton kernel each way (:class:`TritonWarpSample`,
  chosen on CUDA);
* :mod:`~dandelion.warp.cpp_sample`: the same node as one C++ kernel each way (:class:`CppWarpSample`, compiled on
  first use from ``csrc/`` and chosen on the CPU);
* :mod:`~dandelion.warp.layer`: the multi-head layer :class:`TangentWarpS2`;
* :mod:`~dandelion.warp.advection`: advected persistence (:class:`StateAdvection`), the forecast step's move of the
  newest frame along one displacement before the network's increment is added.
"""

from .advection import StateAdvection
from .cpp_sample import CppWarpSample
from .expmap import exp_map
from .index import WarpIndex, index_of_warp, warp_index
from .layer import WARP_KERNELS, TangentWarpS2, set_warp_kernel
from .padding import GhostPad
from .sample import WarpSample
from .sampler import SphereSampler, sample_sphere

__all__ = [
    "CppWarpSample",
    "GhostPad",
    "SphereSampler",
    "StateAdvection",
    "TangentWarpS2",
    "TritonWarpSample",
    "WARP_KERNELS",
    "WarpIndex",
    "WarpSample",
    "exp_map",
    "index_of_warp",
    "sample_sphere",
    "set_warp_kernel",
    "warp_index",
]


def __getattr__(name: str):
    # read on first use (PEP 562): the Triton kernels' module imports triton (~75 MB resident), which only CUDA runs
    if name == "TritonWarpSample":
        from .triton_sample import TritonWarpSample

        return TritonWarpSample
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
