"""results_dir and work_dir do not depend on the current directory (dandelion.benchmarks.paths)."""

from pathlib import Path

import pytest

from dandelion.benchmarks import paths as P
from dandelion.benchmarks.budget import study
from dandelion.benchmarks.grid import benchmark as B
from dandelion.benchmarks.transfer import zero_shot
from dandelion.cli.common import UsageError

CHECKS = {"benchmark": B.check, "budget": study.check, "transfer": zero_shot.check}


def test_this_checkout_is_found():
    root = P.checkout_root()
    assert root is not None and (root / "benchmarks" / "paths.py").is_file()


@pytest.mark.parametrize("job", sorted(CHECKS))
def test_configured_dirs_resolve_against_the_checkout_from_another_cwd(job, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cfg = B.compose(job, ["scale=cpu"])
    CHECKS[job](cfg, ["scale=cpu"])
    root = P.checkout_root()
    assert Path(cfg.scale.results_dir) == root / "benchmarks" / "results" / "cpu"
    assert Path(cfg.scale.work_dir) == root / "data" / "benchmark" / "cpu_v2"  # v2's datasets (v1: cpu_v1's own)


def test_a_path_given_on_the_command_line_is_the_users(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    over = ["scale=cpu", "scale.results_dir=mine", f"scale.work_dir={tmp_path / 'work'}"]
    cfg = B.compose("benchmark", over)
    B.check(cfg, over)
    assert Path(cfg.scale.results_dir) == tmp_path / "mine"
    assert Path(cfg.scale.work_dir) == tmp_path / "work"


def test_from_the_checkout_root_the_paths_stay_as_configured(monkeypatch):
    monkeypatch.chdir(P.checkout_root())
    cfg = B.compose("benchmark", ["scale=cpu"])
    B.check(cfg, ["scale=cpu"])
    assert cfg.scale.results_dir == "benchmarks/results/cpu"  # records keep paths that name no machine's folders


@pytest.mark.parametrize("job", sorted(CHECKS))
def test_without_a_checkout_a_relative_path_is_refused_naming_the_option(job, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(P, "checkout_root", lambda: None)  # the package installed outside a checkout
    cfg = B.compose(job, ["scale=cpu"])
    with pytest.raises(UsageError) as err:
        CHECKS[job](cfg, ["scale=cpu"])
    msg = str(err.value)
    assert "\n" not in msg and "scale.results_dir=DIR" in msg
    over = ["scale=cpu", f"scale.results_dir={tmp_path / 'r'}"]
    cfg = B.compose(job, over)
    with pytest.raises(UsageError, match=r"scale\.work_dir=DIR"):
        CHECKS[job](cfg, over)


def test_the_dry_run_from_another_cwd_lists_the_committed_cells_as_finished(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    over = [
        "scale=cpu_v1",  # the archived v1 grid, whose cells are committed
        "only.datasets=[galewsky_32x64]",
        "only.models=[dandelion,sfno,disco,flower2d]",
        "dry_run=true",
    ]
    cfg = B.compose("benchmark", over)
    out = B.benchmark(cfg)
    # v1's Dandelion cells are of the stock network, stale since the presets took advected persistence
    state = {c["model"]: c["state"] for c in out["cells"]}
    assert state["dandelion"] == "stale" and len(out["cells"]) == 12
    out["cells"] = [c for c in out["cells"] if c["model"] != "dandelion"]
    assert len(out["cells"]) == 9 and all(c["state"] == "finished" for c in out["cells"])
    assert not (tmp_path / "benchmarks").exists() and not (tmp_path / "data").exists()
