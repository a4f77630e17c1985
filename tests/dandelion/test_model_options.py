"""Tests of dandelion.model_options: Dandelion's options in three groups, plain keywords sorted into them."""

import dataclasses

import pytest
import torch

from dandelion.model import PRESETS, Dandelion
from dandelion.model_options import (
    SMALL,
    DandelionAblation,
    DandelionArchitecture,
    DandelionExecution,
    option_names,
)
from dandelion.registry import build_model, count_parameters


def test_every_option_belongs_to_exactly_one_group_and_the_registry_accepts_each():
    """Each option name sits in one group, and ``build_model`` takes each one (at its default) as an override."""
    per_group = [
        {f.name for f in dataclasses.fields(c)} for c in (DandelionArchitecture, DandelionExecution, DandelionAblation)
    ]
    assert sum(map(len, per_group)) == len(set().union(*per_group)) == len(option_names())
    defaults = {
        f.name: f.default
        for c in (DandelionArchitecture, DandelionExecution, DandelionAblation)
        for f in dataclasses.fields(c)
    }
    for name, value in defaults.items():
        m = build_model("dandelion", "small", 3, 2, 16, 32, **{name: value})  # small: the defaults
        group = next(g for g, names in zip(("architecture", "execution", "ablation"), per_group) if name in names)
        assert getattr(getattr(m, group), name) == (tuple(value) if isinstance(value, tuple) else value)
    for preset in PRESETS.values():  # every preset key is an architecture option
        assert set(preset) <= per_group[0]


def test_the_architecture_defaults_are_the_small_preset():
    arch = DandelionArchitecture()
    assert {k: getattr(arch, k) for k in SMALL} == SMALL
    # the preset is those numbers with advected persistence on top (a choice of the presets, not of the class)
    assert {k: v for k, v in PRESETS["small"].items() if k != "advect_state"} == SMALL


FLAT = dict(width=8, multipliers=(1, 2), heads=2, encoder_blocks=(1, 1), decoder_blocks=(1,))


@pytest.mark.parametrize(
    "flat, groups",
    [
        (FLAT, dict(architecture=DandelionArchitecture(**FLAT))),
        (
            {**FLAT, "encoder_blocks": [0, 1], "decoder_blocks": [0], "pool_lmax": [4]},
            dict(
                architecture=DandelionArchitecture(
                    **{**FLAT, "encoder_blocks": (0, 1), "decoder_blocks": (0,)}, pool_lmax=(4,)
                )
            ),
        ),
        (
            {**FLAT, "checkpoint_blocks": True},
            dict(architecture=DandelionArchitecture(**FLAT), execution=DandelionExecution(checkpoint_blocks=True)),
        ),
        (
            {**FLAT, "spectral_lmax": 4},
            dict(architecture=DandelionArchitecture(**FLAT), ablation=DandelionAblation(spectral_lmax=4)),
        ),
    ],
)
def test_plain_keywords_build_the_model_the_hand_made_groups_build(flat, groups):
    """The plain keywords (sorted by :func:`group_options`) against groups made by hand, without it: the same
    parameters and the same output, bit for bit."""
    torch.manual_seed(0)
    a = Dandelion(3, 2, 8, 16, **flat)
    torch.manual_seed(0)
    b = Dandelion(3, 2, 8, 16, **groups)
    assert (a.architecture, a.execution, a.ablation) == (b.architecture, b.execution, b.ablation)
    sa, sb = a.state_dict(), b.state_dict()
    assert list(sa) == list(sb) and all(torch.equal(sa[k], sb[k]) for k in sa if torch.is_tensor(sa[k]))
    x = torch.randn(2, 3, 8, 16)
    assert torch.equal(a(x), b(x))


@pytest.mark.parametrize(
    "extra, added",
    [
        (dict(checkpoint_blocks=True), 0),  # execution: the same parameters
        (dict(spectral_lmax=4), 4 * 3 * 8),  # spectral_lmax * in_channels * width (DandelionAblation)
        (dict(spectral_lmax=4, spectral_into="output"), 4 * 3 * 2),  # spectral_lmax * in_channels * out_channels
        (dict(spectral_lmax=5, spectral_anchors=2), 2 * 3 * 8),  # K anchors replace spectral_lmax
    ],
)
def test_each_option_adds_the_parameters_its_docstring_counts(extra, added):
    base = count_parameters(Dandelion(3, 2, 8, 16, **FLAT))
    assert count_parameters(Dandelion(3, 2, 8, 16, **FLAT, **extra)) - base == added


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
        # a float is never truncated (int(16 * 1.5) would build 24 channels, int(1.5) 16)
        (lambda: DandelionArchitecture(width=16, multipliers=[1, 1.5]), ValueError, "multipliers must hold integers"),
        (lambda: DandelionArchitecture(multipliers=[1, 2.0, 4]), ValueError, "multipliers must hold integers"),
        (lambda: DandelionArchitecture(encoder_blocks=(1, 1.5, 2)), ValueError, "encoder_blocks must hold integers"),
        (lambda: DandelionArchitecture(decoder_blocks=(1, True)), ValueError, "decoder_blocks must hold integers"),
        (lambda: DandelionArchitecture(width=16.5), ValueError, "width must be an integer"),
        (lambda: DandelionArchitecture(heads=True), ValueError, "heads must be an integer"),
        (lambda: build_model("dandelion", "tiny", 3, 2, 8, 16, multipliers=[1, 1.5]), ValueError, "multipliers"),
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
