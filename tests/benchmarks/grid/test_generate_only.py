"""``dandelion-benchmark generate_only=true``: the selected cells' datasets are generated (and completed on a second
call), and nothing is trained or scored."""

import tiny_model  # noqa: F401  (registers "_pointwise_test")
from omegaconf import OmegaConf
from tiny_scale import tiny_scale_overrides

from dandelion.benchmarks.grid import benchmark as B
from dandelion.datasets.folder import is_complete, load_splits


def test_generate_only_makes_the_datasets_and_trains_nothing(tmp_path):
    cfg = B.compose("benchmark", [*tiny_scale_overrides(tmp_path, "_pointwise_test", "1e-3"), "generate_only=true"])
    OmegaConf.set_struct(cfg, False)
    cfg.scale.datasets = {
        "sb_16x32": {"dataset": "solid_body", "generate_batch_size": 4, "overrides": {"n_seeds": 5, "n_frames": 6}}
    }
    out = B.benchmark(cfg)
    path = tmp_path / "work" / "sb_16x32"
    assert out["generated"] == {"sb_16x32": str(path)} and out["ran"] == 0
    assert is_complete(path)
    assert sum(len(load_splits(path)[s]) for s in ("train", "valid", "test")) == 10  # 2 omegas x 5 seeds
    assert not (tmp_path / "results").exists() or not list((tmp_path / "results").rglob("*.json"))
    assert not (tmp_path / "work" / "runs").exists()
    stamp = {p: p.stat().st_mtime_ns for p in path.rglob("*.h5")}
    assert len(stamp) == 10
    assert B.benchmark(cfg)["generated"] == {"sb_16x32": str(path)}  # complete: left as it is
    assert {p: p.stat().st_mtime_ns for p in path.rglob("*.h5")} == stamp
