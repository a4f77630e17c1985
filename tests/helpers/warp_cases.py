"""Displacement fields that probe a warp kernel's hard cases, shared by the fused-kernel tests (Triton and C++)."""

from __future__ import annotations

import math

import torch

F64 = torch.float64


def warp_displacements(kind: str, n: int, nlat: int, nlon: int, dtype, g: torch.Generator) -> torch.Tensor:
    """``(n, 2, nlat, nlon)`` east/north displacements (radians) of one kind: ``small``, ``beyond_half_pi`` (walks
    across a pole), ``seam`` (over the 0/360 seam), ``poles`` (the rows next to the poles over them) or ``huge``
    (``|d| >= 20480`` rad)."""
    d = torch.randn(n, 2, nlat, nlon, generator=g, dtype=F64)
    if kind == "small":
        d *= 0.3
    elif kind == "beyond_half_pi":  # walks of 1.6 to 3 rad: across a pole and round the far side
        d *= (1.6 + 1.4 * torch.rand(n, 1, nlat, nlon, generator=g, dtype=F64)) / d.norm(dim=1, keepdim=True)
    elif kind == "seam":  # the first and last columns walk east/west over the 0/360 seam
        d *= 0.05
        d[:, 0, :, :2] = -2.5 * 2 * math.pi / nlon
        d[:, 0, :, -2:] = 2.5 * 2 * math.pi / nlon
    elif kind == "poles":  # the rows next to the poles walk north/south over them
        d *= 0.05
        d[:, 1, :2] += 0.4
        d[:, 1, -2:] -= 0.4
    elif kind == "huge":  # |d| = 5 * 2^k >= 20480 rad, past the float32 polynomial sine's range (the C library's);
        # Pythagorean components (3, 4) * 2^k make |d|^2 exact in float32, so both paths walk exactly |d|
        scale = 2.0 ** torch.randint(12, 15, (n, 1, nlat, nlon), generator=g).to(F64)
        swap = torch.rand(n, 1, nlat, nlon, generator=g) < 0.5
        d = torch.cat([torch.where(swap, 4.0, 3.0), torch.where(swap, 3.0, 4.0)], dim=1) * scale * d.sign()
    return d.to(dtype)


def assert_matches_eager(fused, v: torch.Tensor, d: torch.Tensor, sampler, w: torch.Tensor, tol: float) -> None:
    """A fused warp node ``fused.apply(v, d, sampler)`` equals the eager :class:`dandelion.warp.WarpSample` forward,
    and its gradients to the values and the displacements (against the cotangent ``w``), within ``tol`` of each
    reference's largest value."""
    from dandelion.warp import WarpSample

    out, ref = fused.apply(v, d, sampler), WarpSample.apply(v, d, sampler)
    torch.testing.assert_close(out, ref, rtol=0, atol=float(tol * ref.detach().abs().max()))
    got, want = torch.autograd.grad(out, (v, d), w), torch.autograd.grad(ref, (v, d), w)
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, rtol=0, atol=float(tol * b.detach().abs().max()))
