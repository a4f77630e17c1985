"""The options of the Dandelion network in three groups: architecture, execution, ablation.

docs/ARCHITECTURE.md §5 and docs/model.md. :class:`~dandelion.model.Dandelion` takes one frozen dataclass per group
(``architecture=``, ``execution=``, ``ablation=``) or the same options as plain keywords (``width=32``,
``compile_kernels=True``), the form ``build_model("dandelion", preset, **overrides)`` and the configs'
``model.overrides`` pass; :func:`group_options` sorts plain keywords into the groups, and :func:`option_names` lists
every key a preset may override (the registry's ``extra``, derived here rather than copied).

* :class:`DandelionArchitecture`: what the presets set (width, levels as multipliers, heads, blocks per level,
  displacement-network width), the pooling band limits (the zero-shot transfer keeps the trained ones) and the
  FiLM conditioning of docs/ARCHITECTURE.md §5 (off in the benchmark protocol).
* :class:`DandelionExecution`: how the same network is computed; same parameters, same state_dict, the same
  outputs (to rounding for the compiled kernels).
* :class:`DandelionAblation`: switches of the ablations and fidelity screens of docs/model.md; no preset turns one
  on, and the defaults are the network the presets build.
"""

from __future__ import annotations

import dataclasses
import numbers
from collections.abc import Sequence
from dataclasses import dataclass

from .registry import did_you_mean

__all__ = [
    "SMALL",
    "DandelionArchitecture",
    "DandelionExecution",
    "DandelionAblation",
    "group_options",
    "network_defaults",
    "execution_names",
    "option_names",
]

#: The ``small`` preset (:data:`dandelion.model.PRESETS` holds it under that name), which is also what
#: :class:`DandelionArchitecture` builds without arguments: the one copy of these numbers.
SMALL: dict = dict(
    width=32, multipliers=(1, 2, 4), heads=8, encoder_blocks=(1, 1, 2), decoder_blocks=(1, 1), offset_ratio=0.5
)


def _is_int(v) -> bool:
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def _ints(value, name: str) -> tuple[int, ...]:
    """``value`` as a tuple of ints. Raises ValueError naming ``name`` for a non-sequence or any entry that is not
    an integer (a float such as 1.5 or 2.0, a bool): a float would be truncated silently."""
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise ValueError(f"{name} must be a sequence of integers, got {value!r}")
    bad = [v for v in value if not _is_int(v)]
    if bad:
        raise ValueError(f"{name} must hold integers, got {list(value)!r}: {bad[0]!r} is not one; give whole numbers")
    return tuple(int(v) for v in value)


@dataclass(frozen=True)
class DandelionArchitecture:
    """The network's shape: the hyper-parameters of the presets (:data:`dandelion.model.PRESETS`) and two more;
    the defaults are the ``small`` preset's numbers (:data:`SMALL`), without the advected persistence the presets add
    (``advect_state`` below).

    Parameters
    ----------
    width : int
        Channels at level 0.
    multipliers : sequence of int
        Width multiplier of each level; ``levels = len(multipliers)``.
    heads : int
        Warp heads at every level; every level width must divide by it.
    encoder_blocks : sequence of int, one per level
        Warp blocks on the way down (the last entry is the bottom of the U); 0 leaves a level with pointwise
        maps only (the ``*_fast`` presets at level 0).
    decoder_blocks : sequence of int, one per level except the bottom
        Warp blocks on the way up, ``decoder_blocks[k]`` at level k.
    offset_ratio : float
        Width of each warp's displacement MLP as a fraction of the level width.
    pool_lmax : sequence of int, one per level except the bottom, optional
        Band limit (exclusive degree and order) of the spectral pooling between level ``k`` and
        ``k + 1``, both ways. Default: the largest both level grids resolve
        (:func:`~dandelion.spectral_pooling.pooling_band_limit`), so the band limits double with the grid. Giving
        the band limits of the grid a model was trained on keeps its coarse levels at the trained
        degrees on a finer grid (zero-shot resolution transfer: the convention of SFNO's fixed
        ``lmax``, Bonev et al. 2023, arXiv:2306.03838). Not part of the state_dict.
    cond_dim : int
        Number of scalar conditioning parameters for FiLM (0: off, the benchmark protocol).
    cartesian_displacement : bool
        Each warp head's displacement also follows a Cartesian 3-vector, a pointwise linear function of its features
        (zero at initialisation), projected onto the tangent plane (:class:`~dandelion.warp.TangentWarpS2`,
        ``cartesian``): "read upstream by -dt * velocity" is then linear in the Cartesian vector channels the data
        pipeline feeds every model. Default False (the presets as benchmarked in v2; docs/model.md, "Displacements
        in the data's frame", has the measurements deciding whether the presets take it).
    advect_state : bool
        Advected persistence (:mod:`dandelion.warp.advection`): the model's output carries three more channels, a
        Cartesian displacement (a pointwise linear map of the input, zero at
        initialisation), and a forecast step with the ``increment`` target moves the newest frame along it before
        adding the increment, ``x_{t+1} = x_t(exp_p(d)) + s * f`` (the semi-Lagrangian step;
        :func:`dandelion.step.next_frame`). Default False; Dandelion's presets ``small``, ``tiny`` and ``paper``
        set it (docs/model.md, "Advected persistence").

    Raises
    ------
    ValueError
        For a width or heads that is not an integer or is below 1, multipliers or block counts with a
        non-integer entry (a float is never truncated), no level, block counts that are negative or not one per
        level (one fewer on the way up), or a ``pool_lmax`` that is not one positive integer per pooling.
    """

    width: int = SMALL["width"]
    multipliers: Sequence[int] = SMALL["multipliers"]
    heads: int = SMALL["heads"]
    encoder_blocks: Sequence[int] = SMALL["encoder_blocks"]
    decoder_blocks: Sequence[int] = SMALL["decoder_blocks"]
    offset_ratio: float = SMALL["offset_ratio"]
    pool_lmax: Sequence[int] | None = None
    cond_dim: int = 0
    cartesian_displacement: bool = False
    advect_state: bool = False

    def __post_init__(self):
        multipliers = _ints(self.multipliers, "multipliers")
        encoder, decoder = _ints(self.encoder_blocks, "encoder_blocks"), _ints(self.decoder_blocks, "decoder_blocks")
        object.__setattr__(self, "multipliers", multipliers)
        object.__setattr__(self, "encoder_blocks", encoder)
        object.__setattr__(self, "decoder_blocks", decoder)
        levels = len(multipliers)
        for name in ("width", "heads"):
            if not _is_int(getattr(self, name)):
                raise ValueError(f"{name} must be an integer, got {getattr(self, name)!r}")
        if int(self.width) < 1 or int(self.heads) < 1:
            raise ValueError(f"width={self.width} and heads={self.heads} must both be >= 1")
        if levels < 1:
            raise ValueError("multipliers must name at least one level")
        if len(encoder) != levels or len(decoder) != levels - 1:
            raise ValueError(
                f"need one encoder_blocks entry per level ({levels}) and one decoder_blocks entry per level but the "
                f"bottom ({levels - 1}); got {encoder} and {decoder}"
            )
        if min((*encoder, *decoder)) < 0:
            raise ValueError(f"block counts must be >= 0, got {encoder} and {decoder}")
        pool = self.pool_lmax
        if pool is not None and (
            isinstance(pool, (str, bytes))
            or not isinstance(pool, Sequence)
            or len(pool) != levels - 1
            or not all(isinstance(b, numbers.Integral) and not isinstance(b, bool) and b >= 1 for b in pool)
        ):
            raise ValueError(
                f"pool_lmax needs one band limit per pooling, a positive integer each ({levels - 1} for {levels} "
                f"levels), got {pool!r}"
            )
        if pool is not None:
            object.__setattr__(self, "pool_lmax", tuple(int(b) for b in pool))
        object.__setattr__(self, "cartesian_displacement", bool(self.cartesian_displacement))
        object.__setattr__(self, "advect_state", bool(self.advect_state))

    @property
    def levels(self) -> int:
        """Number of U-Net levels, ``len(multipliers)``."""
        return len(self.multipliers)

    def widths(self) -> list[int]:
        """Channels of every level, ``int(width * multipliers[k])``."""
        return [int(self.width * m) for m in self.multipliers]

    def blocks_per_level(self) -> list[int]:
        """Warp blocks of every level, encoder and decoder together."""
        up = (*self.decoder_blocks, 0)
        return [int(e) + int(d) for e, d in zip(self.encoder_blocks, up)]


@dataclass(frozen=True)
class DandelionExecution:
    """How the network is computed; neither option changes the parameters, the state_dict or what is computed.

    Parameters
    ----------
    checkpoint_blocks : bool
        Activation checkpointing (recomputation) of every warp block while gradients are on
        (``torch.utils.checkpoint``, non-reentrant; Chen et al. 2016, arXiv:1604.06174): a block keeps
        only its input for backward and runs its forward again there, trading about one more forward
        of the blocks for their saved activations. Outputs and gradients are those of the plain model (the
        recomputation repeats the same operations). Off by default (the cost tables in benchmarks/results measure
        it off and on).
    compile_kernels : bool
        Evaluate the elementwise chains of every warp (exponential-map indices and their Jacobian) and every area
        norm (statistics, affine map, backward) with ``torch.compile``'d kernels (the first step on a grid compiles
        them, some 10 s per kernel and U-Net level on one CPU core; a C++ compiler is needed on the CPU). Outputs
        and gradients equal those of the eager model up to rounding (the eager default keeps zero displacement the
        identity bit for bit). Falls back to the eager kernels with a warning when compilation fails. Off by
        default.
    warp_kernel : str
        The warps' sampling kernel: ``auto`` (default: the fused Triton kernel on CUDA, the fused C++ kernel on
        the CPU, compiled on first use and cached; the eager one where neither runs), ``eager``, ``triton`` or
        ``cpp`` (:data:`~dandelion.warp.WARP_KERNELS`); all equal to float32 rounding.

    Raises
    ------
    ValueError
        For a ``warp_kernel`` not in :data:`~dandelion.warp.WARP_KERNELS`.
    """

    checkpoint_blocks: bool = False
    compile_kernels: bool = False
    warp_kernel: str = "auto"

    def __post_init__(self):
        object.__setattr__(self, "checkpoint_blocks", bool(self.checkpoint_blocks))
        object.__setattr__(self, "compile_kernels", bool(self.compile_kernels))
        if self.warp_kernel not in ("auto", "eager", "triton", "cpp"):
            raise ValueError(f"warp_kernel={self.warp_kernel!r}: choose one of auto, eager, triton, cpp")


@dataclass(frozen=True)
class DandelionAblation:
    """Switches of the ablations of docs/model.md; the defaults build the presets' network.

    None is on in a preset: the spectral path was not kept after the full-budget ablations (docs/model.md,
    "Spectral path": it broke the Galewsky rollouts and gained only where it doubled the model), and the
    reference-code screens (norm groups, initial displacement scale, a norm after resampling) and the frozen warps
    are screens, not preset changes (docs/model.md, "Fidelity to the reference implementations").

    Parameters
    ----------
    spectral_lmax : int
        Degrees (exclusive) of the spectral path, a per-degree linear map of the input in the spherical-harmonic
        domain (:class:`~dandelion.degree_mixing.DegreeMixS2`), zero-initialised, resolution-free (a grid resolving
        fewer degrees uses the first ones). 0 (default): no spectral path.
    spectral_into : str
        ``"head"`` (default): the path maps the input to the level-0 width and is added to the features entering
        the head's area norm (``spectral_lmax * in_channels * width`` parameters); ``"output"``: it maps the input
        to the output channels and is added to the output (``spectral_lmax * in_channels * out_channels``).
    spectral_anchors : int
        0 (default): one matrix per degree; ``K >= 2``: ``K`` anchor matrices linearly interpolated in the degree
        (``spectral_lmax`` replaced by ``K`` in the counts above).
    spectral_from : str
        ``"input"`` (default): the path reads the network's input; ``"lift"``: the lifted features (level-0
        width), so its size does not grow with the input channels (``in_channels`` replaced by ``width`` above).
    fixed_displacements : bool
        Every warp head keeps its initial displacement (``init_radius * (1 + h % 3)`` in direction
        ``2*pi*h/heads``, :class:`~dandelion.warp.TangentWarpS2`) for good: the displacement network's output
        layer is zero and its parameters are frozen (``requires_grad=False``, not counted, not trained), so the
        warps are a fixed stencil and only what they read is learned. Default False.
    norm_groups : int
        Groups of every area norm of the warp blocks (and of the resampling norms), default 1 (one statistic over
        all channels of a level); must divide the width of every level it normalises. The reference code uses
        GroupNorm with as many groups as heads.
    offset_gain : float
        Initial scale of the displacement networks' last layer (default 0.1, :class:`~dandelion.warp.TangentWarpS2`).
    resample_norm : bool
        An area norm and a GELU after every spectral down- and up-sampling (default False), as the reference code
        follows its resampling with GroupNorm and GELU.
    """

    spectral_lmax: int = 0
    spectral_into: str = "head"
    spectral_anchors: int = 0
    spectral_from: str = "input"
    fixed_displacements: bool = False
    norm_groups: int = 1
    offset_gain: float = 0.1
    resample_norm: bool = False


_GROUPS = {"architecture": DandelionArchitecture, "execution": DandelionExecution, "ablation": DandelionAblation}


def option_names() -> tuple[str, ...]:
    """Every option of the three groups by name: the keys ``build_model("dandelion", ...)`` accepts as overrides."""
    return tuple(f.name for cls in _GROUPS.values() for f in dataclasses.fields(cls))


def network_defaults() -> dict:
    """The architecture and ablation options at their defaults (the execution options do not change the network)."""
    out = {}
    for cls in (DandelionArchitecture, DandelionAblation):
        for f in dataclasses.fields(cls):
            out[f.name] = f.default if f.default is not dataclasses.MISSING else f.default_factory()
    return out


def execution_names() -> tuple[str, ...]:
    """The options of :class:`DandelionExecution`: how the network runs (kernels, checkpointing), not what it is."""
    return tuple(f.name for f in dataclasses.fields(DandelionExecution))


def group_options(
    options: dict,
    architecture: DandelionArchitecture | None = None,
    execution: DandelionExecution | None = None,
    ablation: DandelionAblation | None = None,
) -> tuple[DandelionArchitecture, DandelionExecution, DandelionAblation]:
    """The three groups from plain keyword ``options`` (and any group given whole).

    Raises
    ------
    TypeError
        For an option that belongs to no group (with the closest name), or one given both plainly and through
        its group's object.
    ValueError
        The errors of the groups' checks.
    """
    given = {"architecture": architecture, "execution": execution, "ablation": ablation}
    known = option_names()
    unknown = sorted(set(options) - set(known))
    if unknown:
        hint = did_you_mean(unknown, known)
        raise TypeError(f"Dandelion got unknown option(s) {unknown}{hint}; the options are {sorted(known)}")
    out = []
    for group, cls in _GROUPS.items():
        mine = {f.name: options[f.name] for f in dataclasses.fields(cls) if f.name in options}
        if given[group] is not None and mine:
            raise TypeError(f"{sorted(mine)} given both as keywords and inside {group}=: give them in one place")
        out.append(given[group] if given[group] is not None else cls(**mine))
    return tuple(out)
