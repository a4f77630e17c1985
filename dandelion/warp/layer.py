"""The multi-head tangent warp layer: each head reads its value features along its own great circle.

docs/ARCHITECTURE.md §5. A warp head predicts, at every grid node x with local frame (east e, north n), a
displacement d = (d_e, d_n) in radians and reads its value features at the point reached by walking
|d| along the great circle leaving x in direction d (the exponential map of the unit sphere). The
exponential map, the sampler and the fused sampling node are the other modules of :mod:`dandelion.warp`
(whose docstring lists the numerical care taken at zero displacement and across the poles).
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn

from ..pointwise import Pointwise
from ..sphere import SphereGrid
from .cpp_sample import CppWarpSample
from .cpp_sample import load as load_cpp
from .cpp_sample import usable as cpp_usable
from .sample import WarpSample
from .sampler import SphereSampler

__all__ = ["TangentWarpS2", "WarpSampling", "WARP_KERNELS", "set_warp_kernel"]

#: the warp's sampling kernels: ``auto`` (Triton on CUDA where triton is installed, the C++ kernel on the CPU where
#: it builds, eager elsewhere), ``eager`` (:class:`~dandelion.warp.sample.WarpSample`), ``triton``
#: (:class:`~dandelion.warp.triton_sample.TritonWarpSample`), ``cpp``
#: (:class:`~dandelion.warp.cpp_sample.CppWarpSample`)
WARP_KERNELS = ("auto", "eager", "triton", "cpp")


class WarpSampling:
    """The sampling-kernel dispatch every warp shares: which fused node samples the values on which device.

    A mixin for :class:`torch.nn.Module` subclasses that set ``self.kernel`` (one of :data:`WARP_KERNELS`),
    ``self.heads`` and ``self.sampler`` (:class:`~dandelion.warp.sampler.SphereSampler`):
    :class:`TangentWarpS2` and :class:`~dandelion.warp.advection.StateAdvection`.
    """

    def uses_triton(self, device: torch.device) -> bool:
        """Whether a forward on ``device`` runs the fused Triton kernel.

        ``kernel="auto"``: on CUDA, where triton is installed and the kernels pass their one check per device
        (:func:`~dandelion.warp.triton_sample.usable_on`; a failure is warned about once and the eager path runs).
        """
        if self.kernel == "auto":
            if device.type != "cuda":
                return False
            from .triton_sample import AVAILABLE, usable_on  # imports triton (~75 MB resident): only on CUDA

            return AVAILABLE and usable_on(device)
        return self.kernel == "triton"

    def uses_cpp(self, device: torch.device, dtype: torch.dtype) -> bool:
        """Whether a forward on ``device`` with values of ``dtype`` runs the fused C++ kernel.

        ``kernel="auto"``: on the CPU, where the kernel builds and passes its one check per process
        (:func:`~dandelion.warp.cpp_sample.usable`; a failure is warned about once and the eager path runs),
        where the values' working dtype (float32 at least) is the sampler's, and unless ``compile_kernels``
        asked for the eager path's ``torch.compile``'d index. ``kernel="cpp"`` raises ValueError for that dtype
        mismatch and RuntimeError where the kernel cannot be built.
        """
        work = torch.promote_types(dtype, torch.float32)
        fits = device.type == "cpu" and work == self.sampler.sin_colat.dtype
        if self.kernel == "auto":
            return fits and not self.sampler.compile_kernels and cpp_usable()
        if self.kernel != "cpp":
            return False
        if not fits:
            raise ValueError(
                f"kernel='cpp' runs on the CPU with values in the sampler's dtype ({self.sampler.sin_colat.dtype}); "
                f"got {dtype} values on {device}: move the model (model.to(dtype)) or use kernel='eager'"
            )
        if load_cpp() is None:
            raise RuntimeError(
                "kernel='cpp': the fused C++ warp kernel could not be built (see the warning); use 'eager'"
            )
        return True

    def _warp(self, values: torch.Tensor, d: torch.Tensor) -> torch.Tensor:
        """Sample ``values (B, channels, nlat, nlon)``, head ``h`` owning ``channels / heads`` of them, with the
        displacements ``d (B*heads, 2, nlat, nlon)`` (east, north; radians); same shape out."""
        b, c, nlat, nlon = values.shape
        if self.uses_triton(values.device):  # values stay in their (autocast) dtype; the index runs in float32
            from .triton_sample import triton_warp_sample  # triton is imported on the first Triton warp only

            v = values.reshape(b * self.heads, c // self.heads, nlat, nlon)
            return triton_warp_sample(v, d, self.sampler).reshape(b, c, nlat, nlon)
        work = torch.promote_types(values.dtype, torch.float32)
        fused = CppWarpSample if self.uses_cpp(values.device, values.dtype) else WarpSample
        with torch.autocast(device_type=values.device.type, enabled=False):
            v = values.to(work).reshape(b * self.heads, c // self.heads, nlat, nlon)
            return fused.apply(v, d.to(work), self.sampler).reshape(b, c, nlat, nlon)


class TangentWarpS2(WarpSampling, nn.Module):
    """Multi-head tangent warp: each head reads its value features along its own great circle.

    ``out[h] = V_h(x)(exp_p(d_h(x)))`` at every node ``p``, with ``V`` a pointwise linear map
    (``channels -> channels``, head ``h`` owning ``channels / heads`` of them) and ``d_h`` a pointwise
    MLP (``channels -> hidden -> GELU -> 2 per head``) giving ``(d_e, d_n)`` in radians. The heads are
    folded into the batch for one sampling call (docs/ARCHITECTURE.md §5).

    With ``cartesian=True`` each head also predicts a Cartesian vector ``D_h(x)`` (a pointwise linear map,
    ``channels -> 3 per head``, zero at initialisation) whose tangent projection ``(D_h . e, D_h . n)`` is added to
    ``d_h``. The data's vector fields reach the network as Cartesian components (docs/ARCHITECTURE.md §3), so a
    displacement that follows the flow (read upstream by ``-dt * velocity``) is then linear in the inputs; in the
    local frame it needs products of the inputs with the position-dependent frame, which the narrow MLP
    approximates poorly (docs/model.md, "Displacements in the data's frame").

    Parameters
    ----------
    grid : SphereGrid
        Grid of the input.
    channels, heads : int
        ``channels`` must divide by ``heads``.
    hidden : int
        Width of the displacement MLP.
    init_radius : float
        Scale of the initial displacements, radians: head ``h`` starts displaced by
        ``init_radius * (1 + h % 3)`` in direction ``2*pi*h/heads`` (weights of the MLP's last layer
        start small), so the heads look around from the first step.
    compile_kernels : bool
        Evaluate the exponential map's indices and their Jacobian with a ``torch.compile``'d kernel
        (:func:`~dandelion.warp.index.index_of_warp`), equal to the eager path up to rounding.
    offset_gain : float
        Factor on the default initial weights of the displacement MLP's last layer (0.1: the heads start close
        to their ring of displacements; 1.0: PyTorch's default scale, input-dependent initial displacements as in
        Flower's reference code).
    cartesian : bool
        Add the Cartesian displacement term above (default False: the layer and its parameters are the stock ones;
        with True, the stock parameters draw the same initial values, and at initialisation the layer computes
        exactly what the stock layer computes).
    kernel : str
        The sampling kernel, one of :data:`WARP_KERNELS` (default ``auto``: Triton on CUDA, the C++ kernel on
        the CPU, eager where neither runs). The fused Triton kernel keeps the values in the autocast dtype and
        equals the eager path to float32 rounding; the eager path and the C++ kernel run values and indices in
        float32 at least (the C++ kernel equals the eager path to float32 rounding too). On the CPU, ``auto``
        compiles the C++ kernel on its first use in a process where no build is cached (about a minute, once per
        machine; :mod:`dandelion.warp.cpp_sample`); ``eager`` never compiles anything. Settable after
        construction (``layer.kernel = "eager"``).

    Shapes
    ------
    input ``(B, channels, nlat, nlon)``, output ``(B, channels, nlat, nlon)``.
    """

    def __init__(
        self,
        grid: SphereGrid,
        channels: int,
        heads: int,
        hidden: int,
        init_radius: float,
        compile_kernels: bool = False,
        offset_gain: float = 0.1,
        kernel: str = "auto",
        cartesian: bool = False,
    ):
        super().__init__()
        if channels % heads:
            raise ValueError(f"channels={channels} must divide by heads={heads}")
        if kernel not in WARP_KERNELS:
            raise ValueError(f"kernel={kernel!r}: choose one of {', '.join(WARP_KERNELS)}")
        self.kernel = kernel
        self.channels, self.heads = channels, heads
        self.sampler = SphereSampler(grid)
        self.sampler.compile_kernels = bool(compile_kernels)
        self.value = Pointwise(channels, channels)
        self.offset = nn.Sequential(Pointwise(channels, hidden), nn.GELU(), Pointwise(hidden, 2 * heads))
        with torch.no_grad():
            last = self.offset[-1]
            last.weight.mul_(float(offset_gain))
            h = torch.arange(heads, dtype=torch.float64)
            ang, rad = 2 * math.pi * h / heads, init_radius * (1 + h % 3)
            last.bias.copy_(torch.stack([rad * torch.cos(ang), rad * torch.sin(ang)], dim=1).reshape(-1))
        self.cartesian = None
        if cartesian:
            with torch.random.fork_rng(devices=[]):  # draws nothing from the global generator: the other parameters
                self.cartesian = Pointwise(channels, 3 * heads)  # initialise as in the stock layer
            nn.init.zeros_(self.cartesian.weight)
            nn.init.zeros_(self.cartesian.bias)
            # (2, 3, nlat, nlon): the east and north unit vectors of every node, onto which D is projected
            self.register_buffer("frame", torch.stack([grid.east, grid.north]).to(torch.float32), persistent=False)

    def extra_repr(self) -> str:
        return f"channels={self.channels}, heads={self.heads}, cartesian={self.cartesian is not None}"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self._warp(self.value(x), self.displacements(x))

    def displacements(self, x: torch.Tensor) -> torch.Tensor:
        """Per-head displacements ``(B*heads, 2, nlat, nlon)`` (east, north; radians) of the input ``x``.

        The one place a head's displacement is formed: the local MLP's ``(d_e, d_n)`` plus, with ``cartesian``, the
        tangent projection of the head's Cartesian vector.
        """
        b, c, nlat, nlon = x.shape
        d = self.offset(x)
        if self.cartesian is not None:
            vec = self.cartesian(x).reshape(b, self.heads, 3, nlat, nlon)
            d = d.reshape(b, self.heads, 2, nlat, nlon) + torch.einsum(
                "bhkij,fkij->bhfij", vec, self.frame.to(vec.dtype)
            )
        return d.reshape(b * self.heads, 2, nlat, nlon)

    def warp(self, values: torch.Tensor, d_east: torch.Tensor, d_north: torch.Tensor) -> torch.Tensor:
        """Sample ``values (B, channels, nlat, nlon)`` with per-head displacements ``(B*heads, nlat, nlon)``.

        The index arithmetic runs in float32 at least, also under autocast (in bfloat16 a column index of a
        1440-column grid would be off by several columns); so do the eager path's values.
        """
        return self._warp(values, torch.stack([d_east, d_north], dim=1))


def set_warp_kernel(model: nn.Module, kernel: str) -> int:
    """Set the sampling kernel (one of :data:`WARP_KERNELS`) of every warp in ``model`` (every :class:`WarpSampling`:
    the :class:`TangentWarpS2` layers and a :class:`~dandelion.warp.advection.StateAdvection`).

    Returns the number of warp layers set (0 for a model without warps).

    Raises
    ------
    ValueError
        For a kernel not in :data:`WARP_KERNELS`.
    """
    if kernel not in WARP_KERNELS:
        raise ValueError(f"kernel={kernel!r}: choose one of {', '.join(WARP_KERNELS)}")
    layers = [m for m in model.modules() if isinstance(m, WarpSampling)]
    for layer in layers:
        layer.kernel = kernel
    return len(layers)
