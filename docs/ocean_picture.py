"""Draw SST and upper-layer currents of one ``global_ocean`` trajectory file (land grey).

Usage: python docs/ocean_picture.py TRAJ.h5 OUT.png [frame]
"""

import sys

import h5py
import matplotlib
import numpy as np

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(path: str, out: str, frame: int = -1) -> None:
    with h5py.File(path, "r") as f:
        lat, lon = f["dimensions/lat"][()], f["dimensions/lon"][()]
        wet = f["mask/wet"][()].astype(bool)
        sst = f["t0_fields/theta"][0, frame]
        vel = f["t1_fields/velocity"][0, frame]
        day = f["dimensions/time"][frame] / 86400.0
    sst = np.where(wet, sst, np.nan)
    u, v = (np.where(wet, vel[..., k], np.nan) for k in (0, 1))
    fig, ax = plt.subplots(figsize=(10, 4.8))
    ax.set_facecolor("0.6")  # land
    im = ax.pcolormesh(lon, lat, sst, cmap="RdYlBu_r", shading="nearest", vmin=-2, vmax=30)
    step = max(1, len(lon) // 32)
    ax.quiver(lon[::step], lat[::step], u[::step, ::step], v[::step, ::step], scale=8.0, width=0.002)
    ax.set(
        xlabel="longitude (deg E)",
        ylabel="latitude (deg N)",
        ylim=(-90, 90),
        title=f"global_ocean: upper-layer temperature (degC) and currents, stored day {day:.0f} (land grey)",
    )
    fig.colorbar(im, ax=ax, shrink=0.8, label="theta (degC)")
    fig.tight_layout()
    fig.savefig(out, dpi=110)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else -1)
