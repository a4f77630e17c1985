"""dataset.split_ratios: the (train, valid, test) fractions of a dataset's split, checked, grouped where the scenario
groups (shock caps: by seed), and absent from the fingerprint while unset."""

import pytest
from omegaconf import OmegaConf

from dandelion.cli.common import compose_config
from dandelion.datasets.folder import make_splits
from dandelion.datasets.generate import build_scenario, config_fingerprint


def _dataset(name, *over):
    cfg = compose_config("generate", [f"dataset={name}", "dataset.path=unused", *over])
    return OmegaConf.to_container(cfg.dataset)


def test_ratios_set_the_split_sizes_and_keep_every_id_once():
    s = make_splits(50, ratios=[0.6, 0.2, 0.2])
    assert s["counts"] == {"train": 30, "valid": 10, "test": 10}
    assert sorted(s["train"] + s["valid"] + s["test"]) == list(range(50))


@pytest.mark.parametrize("bad", [[0.5, 0.5], [0.5, 0.5, 0.1], [0.9, 0.1, 0.0], "x"])
def test_bad_ratios_are_refused_naming_the_fix(bad):
    with pytest.raises(ValueError, match="split_ratios=.*sum to 1"):
        build_scenario({**_dataset("galewsky"), "split_ratios": bad})


def test_unset_ratios_leave_the_fingerprint_and_the_default_split():
    d = _dataset("galewsky", "dataset.n_trajectories=20")
    s = build_scenario(d)
    assert "split_ratios" not in s.cfg  # absent: datasets made before the option keep their fingerprint
    assert s.make_splits()["counts"] == {"train": 16, "valid": 2, "test": 2}
    t = build_scenario(_dataset("galewsky", "dataset.n_trajectories=20", "dataset.split_ratios=[0.6,0.2,0.2]"))
    assert t.make_splits()["counts"] == {"train": 12, "valid": 4, "test": 4}
    assert config_fingerprint(t.cfg) != config_fingerprint(s.cfg)


def test_shock_caps_split_by_seed_with_the_ratios():
    s = build_scenario(_dataset("shock_caps", "dataset.split_ratios=[0.6,0.2,0.2]"))
    sp = s.make_splits()
    seeds = sp["seeds"]
    assert {k: len(v) for k, v in seeds.items()} == {"train": 12, "valid": 4, "test": 4}
    assert not set(seeds["train"]) & set(seeds["test"]) and not s.split_problems(sp)
