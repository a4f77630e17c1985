"""Where the warp heads look: do a trained Dandelion's displacements follow the flow?

``python -m dandelion.benchmarks.ablation.alignment CHECKPOINT DATASET_DIR [--field velocity] [--windows 64]
[--figure PATH] [--json PATH]``

A warp head that transports information reads its features upstream: its displacement at a node should be
``-dt * u``, the frame interval times the flow velocity there (``u`` the vector field named by ``--field``, east and
north components; ``dt = dt_frame`` of the dataset, over the sphere's radius where ``u`` is in m/s). For every
:class:`~dandelion.warp.TangentWarpS2` layer of the model (one per block, at the block's grid level), on ``--windows``
test windows evenly spaced over the split, this measures each head's area-weighted cosine with ``-dt * u``::

    cos_h = sum_w <d_h, t> / sqrt(sum_w |d_h|^2 * sum_w |t|^2),    t = -dt * u,

summed over the windows and the level's nodes with the quadrature weights ``w`` (east and north components, radians),
and the same for the head's **flow-dependent part** ``d_h - <d_h>``, its displacement less its mean over the windows
at each node (the static stencil every head starts from, :class:`~dandelion.warp.TangentWarpS2`'s ring, would
otherwise dominate). The velocity reaches coarser levels as its three Cartesian components, spectrally resampled
(:class:`~dandelion.spectral_pooling.SpectralResample`, as the model pools) and projected on that grid's east and
north vectors. Per layer the best-aligned head (largest ``cos_h``) is reported with its cosine and its RMS length
relative to ``|t|``'s (1: the length of the upstream step). ``--figure`` draws the finest layer's best head beside
``-dt * u`` for the first window.

A model with advected persistence (``advect_state``, :class:`~dandelion.warp.advection.StateAdvection`) is measured
the same way: its one displacement, which moves the newest frame, is the record named ``advection`` (one head, the
data's grid), listed first, and it is the one drawn by ``--figure``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import torch

from dandelion.checkpoint import load_model
from dandelion.datasets.torch_dataset import WindowDataset
from dandelion.runtime import write_json_atomic
from dandelion.spectral_pooling import SpectralResample
from dandelion.warp import TangentWarpS2
from dandelion.warp.advection import StateAdvection

__all__ = ["head_alignment", "alignment_figure", "main"]

EARTH_RADIUS = 6.37122e6  # m, the shallow-water solver's (solvers/shallow_water.py)


def _cartesian(grid, east_north: torch.Tensor) -> torch.Tensor:
    """``(B, 2, nlat, nlon)`` east/north components -> ``(B, 3, nlat, nlon)`` Cartesian vectors on ``grid``."""
    e, n = grid.east.to(east_north), grid.north.to(east_north)  # (3, nlat, nlon)
    return east_north[:, :1] * e + east_north[:, 1:2] * n


def _tangent(grid, xyz: torch.Tensor) -> torch.Tensor:
    """``(B, 3, nlat, nlon)`` Cartesian vectors -> their ``(B, 2, nlat, nlon)`` east/north components on ``grid``."""
    e, n = grid.east.to(xyz), grid.north.to(xyz)
    return torch.stack([(xyz * e).sum(1), (xyz * n).sum(1)], dim=1)


def _cosines(a: torch.Tensor, t: torch.Tensor, w: torch.Tensor, d: torch.Tensor) -> list[float]:
    """Per head, the area-weighted cosine of ``a (W, heads, 2, nlat, nlon)`` with ``t (W, 1, 2, nlat, nlon)`` (weights
    ``w``); NaN for a head whose ``a`` is zero up to rounding against its displacement ``d`` (a static offset's
    flow-dependent part follows nothing)."""
    aa = (w * (a * a).sum(2)).sum((0, 2, 3))
    num = (w * (a * t).sum(2)).sum((0, 2, 3))
    den = torch.sqrt(aa * (w * (t * t).sum(2)).sum((0, 2, 3)))
    small = aa <= 1e-20 * (w * (d * d).sum(2)).sum((0, 2, 3)).clamp_min(1e-300)
    return torch.where(small, torch.nan, num / den).tolist()


class _Tap:
    """Records the displacements ``(B*heads, 2, nlat, nlon)`` of one warp layer at each forward."""

    def __init__(self, layer: TangentWarpS2):
        self.layer, self.seen = layer, []
        self._orig = layer.displacements

        def tapped(x):
            d = self._orig(x)
            self.seen.append(d.detach().double())
            return d

        layer.displacements = tapped

    def close(self):
        self.layer.displacements = self._orig


class _AdvectionTap:
    """Records the east/north components ``(B, 2, nlat, nlon)`` of the advected-persistence displacement."""

    def __init__(self, module: StateAdvection):
        grid = module.sampler.grid
        self.seen = []
        self._hook = module.register_forward_hook(lambda m, i, out: self.seen.append(_tangent(grid, out.double())))

    def close(self):
        self._hook.remove()


@torch.no_grad()
def head_alignment(
    forecaster, dataset: WindowDataset, field: str = "velocity", n_windows: int = 64, radius: float | None = None
) -> dict:
    """Per warp layer, every head's area-weighted cosine with the upstream step ``-dt * u`` (module docstring).

    Parameters
    ----------
    forecaster : a Dandelion :class:`~dandelion.forecast.Forecaster` (:func:`dandelion.checkpoint.load_model`).
    dataset : a split with the vector field ``field`` among its fields.
    n_windows : windows evenly spaced over the split (all if fewer).
    radius : the sphere's radius in the velocity's length unit, which turns ``dt * u`` into radians (None: 1 for a
        non-dimensional field, Earth's 6.37122e6 m for one in ``m/s``; the cosines do not depend on it, the RMS
        length ratio does).

    Returns
    -------
    dict with ``dt``, ``n_windows`` and ``layers``: one record per warp layer in forward order (``name``, ``nlat``,
    ``nlon``, ``cos`` and ``cos_flow`` per head, ``best_head``, ``best_cos``, ``best_cos_flow``, ``best_rms_ratio``),
    and ``sample``: the first window's finest-layer displacement of the best head and ``-dt * u`` (numpy, for
    :func:`alignment_figure`).

    Raises
    ------
    ValueError
        If the model has no warp layer (nor advected persistence), or ``field`` is not a vector field of the dataset.
    """
    if field not in dataset.layout.vectors:
        raise ValueError(f"{field!r} is not a vector field of the dataset (vectors: {list(dataset.layout.vectors)})")
    modules = list(forecaster.model.named_modules())
    layers = [("advection", m) for _, m in modules if isinstance(m, StateAdvection)]
    layers += [(n, m) for n, m in modules if isinstance(m, TangentWarpS2)]
    if not layers:
        raise ValueError("the model has no TangentWarpS2 layer: head alignment applies to Dandelion models")
    if radius is None:
        units = str(((dataset.metadata.get("fields") or {}).get(field) or {}).get("units", "1"))
        radius = EARTH_RADIUS if units == "m/s" else 1.0
    dt = float(dataset.metadata["dt_frame"]) / float(radius)
    idx = np.unique(np.linspace(0, len(dataset) - 1, min(n_windows, len(dataset))).round().astype(int))
    fine = dataset.grid
    taps = [_AdvectionTap(m) if isinstance(m, StateAdvection) else _Tap(m) for _, m in layers]
    resamplers = {}
    targets = {i: [] for i in range(len(layers))}
    try:
        for i in idx:
            item = dataset[int(i)]
            f, t0 = dataset.window(int(i))
            u = dataset.read_frames(f, t0 + dataset.n_in - 1, t0 + dataset.n_in)[field]  # (1, nlat, nlon, 2)
            u = torch.from_numpy(np.asarray(u, dtype=np.float64)).permute(0, 3, 1, 2)  # (1, 2, nlat, nlon)
            xyz = _cartesian(fine, -dt * u)
            forecaster(item["x"][None].to(forecaster.device))
            for k, (_, m) in enumerate(layers):
                g = m.sampler.grid
                if g.shape != fine.shape:
                    key = g.shape
                    if key not in resamplers:
                        resamplers[key] = SpectralResample(fine, g).double()
                    targets[k].append(_tangent(g, resamplers[key](xyz)))
                else:
                    targets[k].append(_tangent(g, xyz))
    finally:
        for t in taps:
            t.close()
    out = []
    sample = None
    for k, ((name, m), tap) in enumerate(zip(layers, taps)):
        g = m.sampler.grid
        w = g.weights.to(torch.float64).reshape(1, 1, g.nlat, -1)  # (1, 1, nlat, 1)
        d = torch.stack([s.reshape(-1, m.heads, 2, g.nlat, g.nlon)[0] for s in tap.seen])  # (W, heads, 2, ...)
        t = torch.cat(targets[k])[:, None]  # (W, 1, 2, nlat, nlon)
        flow = d - d.mean(0, keepdim=True)

        cos, cos_flow = _cosines(d, t, w, d), _cosines(flow, t, w, d)
        best = int(np.nanargmax(cos))
        rms = float(torch.sqrt((w * (d[:, best] ** 2).sum(1)).sum() / (w * (t[:, 0] ** 2).sum(1)).sum()))
        out.append(
            {
                "name": name,
                "nlat": g.nlat,
                "nlon": g.nlon,
                "heads": m.heads,
                "cos": cos,
                "cos_flow": cos_flow,
                "best_head": best,
                "best_cos": cos[best],
                "best_cos_flow": cos_flow[best],
                "best_rms_ratio": rms,
            }
        )
        if sample is None or g.nlat > sample["nlat"]:
            sample = {"name": name, "nlat": g.nlat, "d": d[0, best].numpy(), "t": t[0, 0].numpy(), "grid": g}
    return {"dt": dt, "radius": float(radius), "n_windows": len(idx), "field": field, "layers": out, "sample": sample}


def alignment_figure(result: dict, path, title: str = "") -> Path:
    """Two panels (east/north arrows on a longitude-latitude map, one arrow scale): the finest layer's best head (or
    the advection's displacement) and ``-dt * u``."""
    from dandelion.reporting.plotting import pyplot, save_figure

    plt = pyplot()

    s = result["sample"]
    g = s["grid"]
    lat, lon = np.degrees(g.lat.numpy()), np.degrees(g.lon.numpy())
    step = max(1, g.nlat // 16)
    lo, la = np.meshgrid(lon[::step], lat[::step])
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.4), sharey=True)
    which = "advected persistence's displacement" if s["name"] == "advection" else f"best head of {s['name']}"
    scale = 20 * float(np.abs(np.hypot(s["t"][0], s["t"][1])).max() or 1.0)  # one arrow scale for both panels
    for ax, (vec, label) in zip(axes, ((s["d"], which), (s["t"], "-dt * u (upstream step)"))):
        ax.quiver(
            lo,
            la,
            vec[0][::step, ::step],
            vec[1][::step, ::step],
            np.hypot(vec[0], vec[1])[::step, ::step],
            scale=scale,
            scale_units="width",
        )
        ax.set_title(label, fontsize=9)
        ax.set_xlabel("longitude (deg)")
    axes[0].set_ylabel("latitude (deg)")
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return save_figure(fig, path, dpi=110)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("checkpoint")
    p.add_argument("dataset")
    p.add_argument("--split", default="test")
    p.add_argument("--field", default="velocity")
    p.add_argument("--windows", type=int, default=64)
    p.add_argument("--figure", default=None)
    p.add_argument("--title", default="")
    p.add_argument("--json", default=None)
    p.add_argument("--radius", type=float, default=None)
    a = p.parse_args(argv)
    data = WindowDataset(a.dataset, a.split, n_in=4, n_out=1)
    fc = load_model(a.checkpoint, dataset=data)
    if data.n_in != fc.n_in:
        data = WindowDataset(a.dataset, a.split, n_in=fc.n_in, n_out=1)
    res = head_alignment(fc, data, a.field, a.windows, a.radius)
    for r in res["layers"]:
        print(
            f"{r['name']:24s} {r['nlat']:3d}x{r['nlon']:<3d} best head {r['best_head']}: cos {r['best_cos']:+.3f}, "
            f"flow-dependent part {r['best_cos_flow']:+.3f}, rms length / |dt u| {r['best_rms_ratio']:.2f}"
        )
    if a.figure:
        print("wrote", alignment_figure(res, a.figure, a.title))
    if a.json:
        rec = {k: v for k, v in res.items() if k != "sample"}
        rec.update({"checkpoint": str(a.checkpoint), "dataset": str(a.dataset), "split": a.split})
        write_json_atomic(Path(a.json), rec)


if __name__ == "__main__":
    main()
