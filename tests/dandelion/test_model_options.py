"""Tests of dandelion.model_options: Dandelion's options in three groups, plain keywords sorted into them."""

import dataclasses

import pytest
import torch

from dandelion.model import _EXTRA, PRESETS, Dandelion
from dandelion.model_options import (
    DandelionAblation,
    DandelionArchitecture,
    DandelionExecution,
    group_options,
    option_names,
)
from dandelion.registry import build_model


def test_every_option_belongs_to_exactly_one_group_and_the_registry_accepts_each():
    names = option_names()
    assert len(names) == len(set(names))
    assert set(_EXTRA) == set(names)
    for preset in PRESETS.values():  # every preset key is an architecture option
        assert set(preset) <= {f.name for f in dataclasses.fields(DandelionArchitecture)}


@pytest.mark.parametrize(
    "flat",
    [
        dict(width=8, multipliers=(1, 2), heads=2, encoder_blocks=(1, 1), decoder_blocks=(1,)),
        dict(width=8, multipliers=[1, 2], heads=2, encoder_blocks=[0, 1], decoder_blocks=[0], pool_lmax=[4]),
        dict(width=8, multipliers=(1, 2), heads=2, encoder_blocks=(1, 1), decoder_blocks=(1,), checkpoint_blocks=True),
        dict(width=8, multipliers=(1, 2), heads=2, encoder_blocks=(1, 1), decoder_blocks=(1,), spectral_lmax=4),
    ],
)
def test_groups_build_the_model_the_plain_keywords_build(flat):
    """The same options through the group objects give the same parameters and the same output, bit for bit."""
    groups = dict(zip(("architecture", "execution", "ablation"), group_options(dict(flat))))
    torch.manual_seed(0)
    a = Dandelion(3, 2, 8, 16, **flat)
    torch.manual_seed(0)
    b = Dandelion(3, 2, 8, 16, **groups)
    assert (a.architecture, a.execution, a.ablation) == (b.architecture, b.execution, b.ablation)
    sa, sb = a.state_dict(), b.state_dict()
    assert list(sa) == list(sb) and all(torch.equal(sa[k], sb[k]) for k in sa if torch.is_tensor(sa[k]))
    x = torch.randn(2, 3, 8, 16)
    assert torch.equal(a(x), b(x))


def test_build_model_takes_plain_overrides_of_every_group():
    m = build_model("dandelion", "tiny", 16, 4, 16, 32, width=8, compile_kernels=False, spectral_lmax=4)
    assert m.architecture.width == 8 and m.ablation.spectral_lmax == 4 and m.spectral is not None
    assert m.architecture.multipliers == tuple(PRESETS["tiny"]["multipliers"])


@pytest.mark.parametrize(
    "call,error,match",
    [
        (lambda: Dandelion(3, 2, 8, 16, widht=8), TypeError, "did you mean 'width'"),
        (lambda: Dandelion(3, 2, 8, 16, width=8, architecture=DandelionArchitecture()), TypeError, "one place"),
        (lambda: Dandelion(3, 2, 8, 16, compile_kernels=True, execution=DandelionExecution()), TypeError, "one place"),
        (lambda: DandelionArchitecture(multipliers=()), ValueError, "at least one level"),
        (lambda: DandelionArchitecture(encoder_blocks=(1, 1)), ValueError, "one encoder_blocks entry per level"),
        (lambda: DandelionArchitecture(pool_lmax=[4]), ValueError, "one band limit per pooling"),
        (lambda: DandelionArchitecture(heads=0), ValueError, "heads=0"),
        (lambda: DandelionArchitecture(multipliers="12"), ValueError, "sequence of integers"),
    ],
)
def test_bad_options_are_refused_with_the_fix(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_groups_are_frozen_and_sequences_become_tuples():
    arch = DandelionArchitecture(multipliers=[1, 2], encoder_blocks=[1, 1], decoder_blocks=[1], pool_lmax=[3])
    assert arch.multipliers == (1, 2) and arch.pool_lmax == (3,) and arch.widths() == [32, 64]
    with pytest.raises(dataclasses.FrozenInstanceError):
        arch.width = 4
    assert DandelionAblation() == DandelionAblation(spectral_lmax=0)
