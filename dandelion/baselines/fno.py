"""FNO baseline: neuraloperator's Fourier Neural Operator on the latitude-longitude image (planar).

Li, Kovachki, Azizzadenesheli, Liu, Bhattacharya, Stuart, Anandkumar 2021, "Fourier Neural Operator for
Parametric Partial Differential Equations" (ICLR), Sec. 4, eq. 4-5: a pointwise lift ``P``, ``n_layers``
Fourier layers ``v <- sigma(W v + F^{-1}(R . F v))`` (``R`` a complex weight per retained Fourier mode and
channel pair), a pointwise projection ``Q``. The layers are neuraloperator's (``neuralop`` 2.0): the lift
and projection :class:`~neuralop.layers.channel_mlp.ChannelMLP`, the Fourier layers
:class:`~neuralop.layers.fno_block.FNOBlocks` (spectral convolution, linear skip, channel MLP with
soft-gating skip, GELU), the padding :class:`~neuralop.layers.padding.DomainPadding`. They are taken from
a :class:`neuralop.models.FNO` built with the preset's arguments; this module holds them directly and
repeats ``FNO.forward`` (lift, pad, Fourier layers, unpad, project) because neuraloperator's ``BaseModel``
adds a ``_metadata`` entry of Python objects to every ``state_dict``, which
``torch.load(weights_only=True)`` refuses and which a parent module's strict load rejects.

The sphere is treated as a plane, as in :mod:`dandelion.baselines.flower2d`:

* the 2-D FFT of the ``(nlat, nlon)`` image is periodic in longitude (exact on the sphere) and, without
  padding, in latitude as well (the last row would be joined to the first); the presets zero-pad the
  latitude by ``domain_padding[0]`` of the rows on each side (Li et al. 2021 pad non-periodic domains),
  so no information crosses from one pole to the other, as Flower2D's zero padding beyond the rows;
* the unit position vector ``(x, y, z)`` of every node is appended to the input (as every model of the
  package), neuraloperator's own ``[0, 1]^2`` grid embedding is off;
* ``n_modes = (k_lat, k_lon)``: ``k_lat`` latitude wavenumbers (half of them negative) and
  ``k_lon // 2 + 1`` longitude wavenumbers ``0 .. k_lon // 2`` of the real FFT, whatever the grid.

Weights do not depend on the grid (``resolution_dependent = False``): the spectral weights have shape
``(hidden, hidden, k_lat, k_lon // 2 + 1)`` on every grid; on a grid with fewer wavenumbers than
``n_modes`` neuraloperator uses those available. Spectral weights are complex:
:func:`~dandelion.registry.count_parameters` counts two real scalars per entry.

``neuralop`` is imported when a model is built, not when this module is imported (its import takes a few
seconds and pulls in wandb), so the registry lists ``"fno"`` without it.
"""

from __future__ import annotations

import torch

from ..registry import register_preset_model
from .common import BaselineModel, preset_table

__all__ = ["PlanarFNO", "FNO_PRESETS"]

#: Presets. Four Fourier layers (Li et al. 2021); modes and width chosen to match Dandelion's presets
#: (16 in, 4 out channels; resolution-free; complex weights counted twice): tiny 6,607 vs 7,023;
#: small 154,941 vs 147,319 (12 x 12 modes, as Li et al. 2021); paper 17,879,108 vs 18,840,055.
FNO_PRESETS: dict[str, dict] = preset_table(
    dict(
        n_layers=4,
        lifting_channel_ratio=2,
        projection_channel_ratio=2,
        channel_mlp_expansion=0.5,
        domain_padding=(0.125, 0.0),
        position_channels=True,
    ),
    tiny=dict(hidden_channels=5, n_modes=(6, 8)),
    small=dict(hidden_channels=15, n_modes=(12, 12)),
    paper=dict(hidden_channels=64, n_modes=(32, 32)),
)


def _neuralop_fno():
    try:
        from neuralop.models import FNO
    except ImportError as err:  # pragma: no cover - depends on the environment
        raise ModuleNotFoundError(
            "fno: the FNO baseline needs neuraloperator (pip install 'dandelion-sphere[fno]')",
            name="neuralop",
        ) from err
    return FNO


class PlanarFNO(BaselineModel):
    """FNO on the lat-lon image: ``(B, in_channels, nlat, nlon) -> (B, out_channels, nlat, nlon)``.

    Parameters
    ----------
    in_channels, out_channels : int
        Input channels (frames folded into channels) and output channels.
    nlat, nlon, grid :
        The data grid; the grid type enters only through the position channels and the grid guard.
    hidden_channels, n_layers : int
        Width and number of Fourier layers (neuraloperator's names).
    n_modes : (int, int)
        Retained wavenumbers ``(k_lat, k_lon)`` (see the module docstring), each >= 2.
    lifting_channel_ratio, projection_channel_ratio, channel_mlp_expansion : float
        Hidden widths of the lift, the projection and the channel MLPs as fractions of ``hidden_channels``.
    domain_padding : (float, float)
        Zero padding on each side as a fraction of the rows and of the columns; ``(0, 0)`` none.
    position_channels : bool
        Append the unit position vector as 3 input channels.

    Raises
    ------
    ValueError
        For a bad grid or channel count, ``n_modes`` not two integers >= 2, or a padding fraction
        outside ``[0, 1)``.
    ModuleNotFoundError
        If neuraloperator is not installed.
    """

    model_name = "fno"
    resolution_dependent = False

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        nlat: int,
        nlon: int,
        grid: str = "equiangular",
        *,
        hidden_channels: int = 16,
        n_modes=(12, 12),
        n_layers: int = 4,
        lifting_channel_ratio: float = 2,
        projection_channel_ratio: float = 2,
        channel_mlp_expansion: float = 0.5,
        domain_padding=(0.125, 0.0),
        position_channels: bool = True,
    ):
        super().__init__()
        c_in = self.init_interface(in_channels, out_channels, nlat, nlon, grid, position_channels, nlat_min=2)
        modes = tuple(int(m) for m in n_modes)
        if len(modes) != 2 or min(modes) < 2:
            raise ValueError(f"fno: n_modes={tuple(n_modes)} must be two wavenumber counts (k_lat, k_lon), each >= 2")
        pad = [float(p) for p in domain_padding]
        if len(pad) != 2 or not all(0.0 <= p < 1.0 for p in pad):
            raise ValueError(f"fno: domain_padding={tuple(domain_padding)} must be two fractions in [0, 1)")
        #: The arguments of ``neuralop.models.FNO`` whose layers this model holds (plain data).
        self.fno_kwargs = dict(
            n_modes=modes,
            in_channels=c_in,
            out_channels=self.out_channels,
            hidden_channels=int(hidden_channels),
            n_layers=int(n_layers),
            lifting_channel_ratio=lifting_channel_ratio,
            projection_channel_ratio=projection_channel_ratio,
            positional_embedding=None,
            channel_mlp_expansion=channel_mlp_expansion,
            domain_padding=pad if sum(pad) > 0 else None,
        )
        fno = _neuralop_fno()(**self.fno_kwargs)
        self.n_layers = int(n_layers)
        self.lifting = fno.lifting
        self.fno_blocks = fno.fno_blocks
        self.projection = fno.projection
        self.domain_padding = fno.domain_padding  # holds no parameters or buffers (None without padding)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x`` : ``(B, in_channels, nlat, nlon)`` -> ``(B, out_channels, nlat, nlon)``; ValueError otherwise."""
        x = self.lifting(self.prepare_input(x))  # the steps of neuralop.models.FNO.forward
        if self.domain_padding is not None:
            x = self.domain_padding.pad(x)
        for k in range(self.n_layers):
            x = self.fno_blocks(x, k)
        if self.domain_padding is not None:
            x = self.domain_padding.unpad(x)
        return self.projection(x)


#: Builds :class:`PlanarFNO` from a preset (:data:`FNO_PRESETS`) and overrides of its keys.
build_fno = register_preset_model("fno", PlanarFNO, FNO_PRESETS)
