"""The command-line jobs: each ``dandelion-*`` entry point is a thin hydra wrapper in this package.

:mod:`dandelion.cli.common` holds what every job shares (composing and checking overrides before any work,
one-line errors with exit status 2, each job's own ``--help``); the job modules (``train``, ``rollout``,
``export``, ``report``, ``generate``, ``verify``, ``well_resample``, ``quickstart``) build the Python API's
objects from a composed configuration and call them; :mod:`dandelion.cli.launch` holds the console scripts'
entry points. Nothing below this package imports it.

:mod:`dandelion.cli.common`'s names are re-exported here on first use (PEP 562), so that importing
``dandelion.cli.launch`` for ``--help`` does not import torch.
"""


def __getattr__(name: str):
    import importlib
    import importlib.util

    # dunders and submodules (``from dandelion.cli import launch``) are the import system's business
    if name.startswith("__") or importlib.util.find_spec(f"{__name__}.{name}") is not None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    common = importlib.import_module(f"{__name__}.common")
    if name in common.__all__:
        return getattr(common, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
