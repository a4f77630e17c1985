"""The console scripts' entry points: ``--help`` answered before the job's module (and torch) is imported.

``dandelion-train --help`` used to import the whole package (torch, torch-harmonics) to print a page read from
``configs/train.yaml``; each entry point here prints :func:`dandelion.cli.help.help_text` itself for ``-h`` /
``--help`` and otherwise imports the job's module and calls its ``main`` with the same arguments
(``pyproject.toml``'s ``[project.scripts]``).
"""

from __future__ import annotations

import importlib
import sys

__all__ = ["train", "rollout", "export", "report", "generate"]


def _launcher(prog: str, module: str, config_name: str):
    def main(argv: list[str] | None = None):
        argv = list(sys.argv[1:] if argv is None else argv)
        if any(a in ("-h", "--help") for a in argv):
            from .help import help_text

            print(help_text(prog, config_name))
            return None
        return importlib.import_module(module).main(argv)

    main.__name__ = main.__qualname__ = config_name
    main.__doc__ = f"``{prog}``: ``--help`` from ``configs/{config_name}.yaml``, else ``{module}.main(argv)``."
    return main


train = _launcher("dandelion-train", "dandelion.cli.train", "train")
rollout = _launcher("dandelion-rollout", "dandelion.cli.rollout", "rollout")
export = _launcher("dandelion-export", "dandelion.cli.export", "export")
report = _launcher("dandelion-report", "dandelion.cli.report", "report")
generate = _launcher("dandelion-generate", "dandelion.cli.generate", "generate")
