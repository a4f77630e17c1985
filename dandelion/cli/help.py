"""The jobs' ``--help`` and configuration composing, light enough for ``dandelion-* --help`` to import nothing else.

:mod:`dandelion.cli.launch` answers ``--help`` from here without importing torch or the jobs;
:mod:`dandelion.cli.common` re-exports these names (``compose_config``, ``help_text``).
"""

from __future__ import annotations

from importlib import resources

from hydra import compose, initialize_config_module
from hydra.core.global_hydra import GlobalHydra
from omegaconf import DictConfig

__all__ = ["CONFIG_MODULE", "compose_config", "help_text"]

CONFIG_MODULE = "dandelion.configs"


def compose_config(name: str, overrides: list[str] | None = None, return_hydra_config: bool = False) -> DictConfig:
    """``configs/<name>.yaml`` composed with ``overrides`` (hydra's compose API, no run folder, no logging setup).

    Works inside an initialised hydra context too (then that context's search path is used).
    """
    overrides = list(overrides or [])
    if GlobalHydra.instance().is_initialized():
        return compose(config_name=name, overrides=overrides, return_hydra_config=return_hydra_config)
    with initialize_config_module(config_module=CONFIG_MODULE, version_base="1.3"):
        return compose(config_name=name, overrides=overrides, return_hydra_config=return_hydra_config)


def _group_options(group: str) -> list[str]:
    if GlobalHydra.instance().is_initialized():
        return sorted(GlobalHydra.instance().config_loader().get_group_options(group))
    with initialize_config_module(config_module=CONFIG_MODULE, version_base="1.3"):
        return sorted(GlobalHydra.instance().config_loader().get_group_options(group))


def _own_groups(name: str) -> dict[str, str | None]:
    """The config groups of ``configs/<name>.yaml``'s defaults list, with their default choices."""
    cfg = compose_config(name, [], return_hydra_config=True)
    return {g: c for g, c in cfg.hydra.runtime.choices.items() if not g.startswith("hydra")}


def _yaml_text(name: str) -> str:
    return resources.files(CONFIG_MODULE).joinpath(f"{name}.yaml").read_text()


def _split_yaml(text: str) -> tuple[list[str], list[str]]:
    """The leading comment block (without '# ') and the body lines without the defaults and hydra blocks."""
    lines = text.splitlines()
    head = []
    while lines and lines[0].startswith("#"):
        head.append(lines.pop(0)[1:].removeprefix(" "))
    body, skip = [], False
    for line in lines:
        if line and not line[0].isspace() and not line.startswith("#"):
            skip = line.split(":", 1)[0] in ("defaults", "hydra")
        if not skip:
            body.append(line)
    while body and not body[0].strip():
        body.pop(0)
    while body and not body[-1].strip():
        body.pop()
    return head, body


def help_text(prog: str, name: str, intro: str | None = None) -> str:
    """The ``--help`` of a job: usage (the header of ``configs/<name>.yaml``), its own config groups with
    their options, its own keys with their defaults and comments."""
    head, body = _split_yaml(_yaml_text(name))
    parts = [intro.strip() if intro else "\n".join(head).strip(), ""]
    groups = _own_groups(name)
    if groups:
        parts.append("Config groups (GROUP=OPTION):")
        for g, default in reversed(list(groups.items())):  # in the order of the defaults list
            opts = [f"{o} (default)" if o == default else o for o in _group_options(g)]
            parts.append(f"  {g}: {', '.join(opts)}" + (" (none by default)" if default is None else ""))
        parts.append(f"  (the keys of an option: {prog} GROUP=OPTION --cfg job)")
        parts.append("")
    parts += ["Keys (KEY=VALUE; default and meaning):", *("  " + line if line else "" for line in body), ""]
    parts.append(f"{prog} [KEY=VALUE ...] --cfg job   prints the composed configuration without running the job.")
    parts.append(
        "Errors print one line and exit with status 2; --debug (or HYDRA_FULL_ERROR=1) shows the traceback. "
        f"Hydra's own flags: {prog} --hydra-help."
    )
    return "\n".join(parts)
