"""Checkpoints: atomic writes, plain contents that load with weights_only=True, wrappers stripped."""

import pytest
import tiny_model
import torch
import torch.nn as nn

from dandelion import build_model
from dandelion import checkpoint as ck

GRID = {"nlat": 9, "nlon": 16, "grid": "equiangular"}
STATS = {"h": {"kind": "scalar", "mean": 1.0, "std": 2.0}}
CONFIG = {"model": {"name": "_pointwise_test", "preset": "tiny", "in_channels": 8, "out_channels": 2, "overrides": {}}}


class Wrapper(nn.Module):  # stands for DistributedDataParallel: the model sits in .module
    def __init__(self, module):
        super().__init__()
        self.module = module


def _model():
    torch.manual_seed(0)
    return tiny_model.PointwiseTest(8, 2)


def _walk(obj):
    if isinstance(obj, dict):
        for k, v in obj.items():
            assert isinstance(k, (str, int))
            yield from _walk(v)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            yield from _walk(v)
    else:
        yield obj


def test_contents_are_plain_and_wrappers_are_stripped(tmp_path):
    model = _model()
    opt = torch.optim.AdamW(model.parameters())
    model(torch.randn(1, 8, 9, 16)).sum().backward()
    opt.step()
    path = ck.save_checkpoint(
        tmp_path / "a.pt", model=Wrapper(model), optimizer=opt, config=CONFIG, stats=STATS, grid=GRID, step=3, epoch=1
    )
    ckpt = ck.load_checkpoint(path)
    assert not any(k.startswith("module.") for k in ckpt["model"])
    assert all(isinstance(v, (torch.Tensor, str, int, float, bool, type(None))) for v in _walk(ckpt))
    assert ckpt["step"] == 3 and ckpt["epoch"] == 1 and ckpt["grid"] == GRID and ckpt["stats"] == STATS
    # rebuilt from the stored config (no model_spec in extra): same outputs
    rebuilt = ck.model_from_checkpoint(ckpt)
    x = torch.randn(2, 8, 9, 16)
    assert torch.equal(rebuilt(x), model(x))
    with pytest.raises(ValueError, match="allow_resolution_change"):
        ck.model_from_checkpoint(ckpt, grid="legendre-gauss", nlat=8)


def test_rng_state_round_trip():
    state = ck.rng_state()
    a = (torch.rand(3), __import__("numpy").random.rand(2).tolist(), __import__("random").random())
    ck.set_rng_state(state)
    b = (torch.rand(3), __import__("numpy").random.rand(2).tolist(), __import__("random").random())
    assert torch.equal(a[0], b[0]) and a[1:] == b[1:]


def test_save_is_atomic(tmp_path, monkeypatch):
    path = ck.save_checkpoint(
        tmp_path / "last.pt", model=_model(), config=CONFIG, stats=STATS, grid=GRID, step=1, epoch=0
    )
    before = path.read_bytes()

    def broken_save(obj, f, *a, **k):
        with open(f, "wb") as fh:
            fh.write(b"partial")
        raise OSError("disk full")

    monkeypatch.setattr(ck.torch, "save", broken_save)
    with pytest.raises(OSError, match="disk full"):
        ck.save_checkpoint(path, model=_model(), config=CONFIG, stats=STATS, grid=GRID, step=2, epoch=0)
    assert path.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == ["last.pt"]


def test_load_errors_name_the_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.pt"):
        ck.load_checkpoint(tmp_path / "nope.pt")
    torch.save({"weights": torch.zeros(2)}, tmp_path / "other.pt")
    with pytest.raises(ValueError, match="other.pt"):
        ck.load_checkpoint(tmp_path / "other.pt")


def test_checkpoint_without_grid_record_loads_and_is_still_checked(tmp_path):
    """A Dandelion checkpoint written before the model recorded its grid in the state_dict still loads."""
    spec = {"name": "dandelion", "preset": "tiny", "in_channels": 8, "out_channels": 2, "overrides": {}}
    torch.manual_seed(0)
    model = build_model("dandelion", "tiny", 8, 2, 9, 16, "equiangular", advect_state=False)  # as then built
    path = ck.save_checkpoint(
        tmp_path / "old.pt",
        model=model,
        config=CONFIG,
        stats=STATS,
        grid=GRID,
        step=1,
        epoch=0,
        extra={"model_spec": spec},
    )
    ckpt = ck.load_checkpoint(path)
    del ckpt["model"]["_extra_state"]  # the older format
    x = torch.randn(1, 8, 9, 16)
    with torch.no_grad():
        assert torch.equal(ck.model_from_checkpoint(ckpt)(x), model.eval()(x))
    # the filled-in record is the checkpoint's grid: another grid type is refused unless asked for
    with pytest.raises(ValueError, match="legendre-gauss"):
        ck.model_from_checkpoint(ckpt, nlat=8, grid="legendre-gauss")
    assert (
        ck.model_from_checkpoint(ckpt, nlat=8, grid="legendre-gauss", allow_resolution_change=True).grid
        == "legendre-gauss"
    )
