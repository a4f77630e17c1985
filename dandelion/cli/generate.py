"""``dandelion-generate``: generate a dataset folder (configs/generate.yaml, configs/dataset/<name>.yaml).

The hydra job around :func:`dandelion.datasets.generate.generate`.
"""

from __future__ import annotations

import os

from dandelion.cli.common import run
from dandelion.datasets.generate import (
    check,
    generate,
)


# ---------------------------------------------------------------------------------------------- hydra CLI
def _job(cfg) -> None:
    root = generate(cfg)
    if int(os.environ.get("RANK", 0)) == 0:
        print(f"dandelion-generate: dataset written to {root}")


def main(argv: list[str] | None = None) -> None:
    """Console entry point ``dandelion-generate`` (hydra overrides on the command line; ``--help``)."""
    run("dandelion-generate", "generate", _job, check=lambda cfg, overrides: check(cfg), argv=argv)


if __name__ == "__main__":
    main()
