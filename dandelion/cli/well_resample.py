"""``dandelion-well-resample src=DIR dst=NEW [grid=legendre-gauss nlat=N nlon=M]``: resample a folder in the Well's
layout to a supported latitude grid.

The command around :func:`dandelion.datasets.well_resample.resample_well_folder`.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from dandelion.cli.common import guard
from dandelion.datasets.well_resample import (
    resample_well_folder,
)


def main(argv=None):
    p = argparse.ArgumentParser(prog="dandelion-well-resample", description=__doc__.split("\n\n")[0])
    p.add_argument("args", nargs="+", help="src=DIR dst=NEW_DIR [grid=legendre-gauss] [nlat=N] [nlon=N]")
    args = list(p.parse_args(argv).args)
    debug = "--debug" in args
    kv = dict(a.split("=", 1) for a in args if a != "--debug" and "=" in a)
    unknown = sorted(set(kv) - {"src", "dst", "grid", "nlat", "nlon"})
    if unknown or "src" not in kv or "dst" not in kv:
        p.error(f"expected src=DIR dst=NEW_DIR [grid=..] [nlat=..] [nlon=..]; unknown {unknown}")
    if not (Path(kv["src"]) / "data" / "train").is_dir():
        p.exit(
            2,
            f"dandelion-well-resample: error: src={kv['src']} is not a folder in the Well's layout (no data/train): "
            "pass the dataset's folder, e.g. WELL/datasets/planetswe after `the-well-download --base-path WELL "
            "--dataset planetswe`\n",
        )
    with guard("dandelion-well-resample", debug):
        out = resample_well_folder(
            kv["src"],
            kv["dst"],
            kv.get("grid", "legendre-gauss"),
            int(kv["nlat"]) if "nlat" in kv else None,
            int(kv["nlon"]) if "nlon" in kv else None,
        )
    print(f"resampled {kv['src']} onto {kv.get('grid', 'legendre-gauss')} in {out}")


if __name__ == "__main__":
    main()
