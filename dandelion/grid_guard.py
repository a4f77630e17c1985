"""Resolution guard: a model's state_dict remembers the grid it was built on.

Every model of the package (Dandelion and the baselines) mixes in :class:`GridGuard`. It stores the
data grid ``(nlat, nlon, grid)`` in the module's ``state_dict`` as PyTorch "extra state" (the key
``<prefix>_extra_state``, a plain ``dict`` of ``str``/``int``/``bool``, so checkpoints still load with
``torch.load(weights_only=True)``), and checks it when a state_dict is loaded:

* a model whose weight shapes depend on the grid (``resolution_dependent = True``, e.g. SFNO, whose
  spectral weights have one entry per degree ``l < lmax``) refuses a state_dict saved at another
  ``(nlat, nlon)`` with a ``ValueError`` naming the saved and the requested grids; this catches the
  silent case too, where two resolutions happen to give the same weight shapes;
* every model refuses a state_dict saved on another grid TYPE (``"equiangular"`` vs
  ``"legendre-gauss"``): a mismatch is an error, never a silent reinterpretation (docs/ARCHITECTURE.md §3);
* resolution-free models (``resolution_dependent = False``) accept another ``(nlat, nlon)`` of the
  same grid type: the same weights run on every resolution.

Both refusals can be lifted on purpose with :func:`allow_grid_change` (e.g. fine-tuning a
Legendre-Gauss model on equiangular data), which a checkpoint loader can expose as an option.

Use (in a model's ``__init__``, after ``nn.Module.__init__``)::

    class MyModel(GridGuard, nn.Module):
        resolution_dependent = False

        def __init__(self, ..., nlat, nlon, grid):
            super().__init__()
            self.init_grid_guard(nlat, nlon, grid)

The check runs inside ``load_state_dict`` (``set_extra_state`` is called by PyTorch for the module
that owns the extra state), before PyTorch reports shape mismatches, so the user sees the grid
message first. A state_dict made before the guard existed has no ``_extra_state`` key: with
``strict=True`` PyTorch reports it missing, with ``strict=False`` nothing is checked.
"""

from __future__ import annotations

import contextlib

import torch.nn as nn

__all__ = ["GridGuard", "allow_grid_change"]


class GridGuard:
    """Mixin storing ``(nlat, nlon, grid)`` in the state_dict and checking it on load.

    Attributes
    ----------
    resolution_dependent : bool (class attribute)
        True when weight shapes depend on the grid; then loading at another ``(nlat, nlon)`` raises.
    grid_spec : dict
        ``{"nlat": int, "nlon": int, "grid": str}`` of the grid this module was built on.
    grid_guard_strict : bool
        Set False (see :func:`allow_grid_change`) to accept a state_dict from another grid.
    """

    resolution_dependent: bool = False
    grid_guard_strict: bool = True

    def init_grid_guard(self, nlat: int, nlon: int, grid: str) -> None:
        """Record the data grid; call once in ``__init__`` after ``nn.Module.__init__``."""
        self.grid_spec = {"nlat": int(nlat), "nlon": int(nlon), "grid": str(grid)}

    # -- torch.nn.Module extra-state protocol --------------------------------------------------
    def get_extra_state(self) -> dict:
        return {
            "model": type(self).__name__,
            "nlat": self.grid_spec["nlat"],
            "nlon": self.grid_spec["nlon"],
            "grid": self.grid_spec["grid"],
            "resolution_dependent": bool(self.resolution_dependent),
        }

    def set_extra_state(self, state) -> None:
        if not isinstance(state, dict) or not {"nlat", "nlon", "grid"} <= set(state):
            raise ValueError(
                f"{type(self).__name__}: the state_dict's '_extra_state' is {state!r}, expected a dict with "
                "nlat, nlon and grid (was it saved by this package's model?)"
            )
        if not self.grid_guard_strict:
            return
        saved = (int(state["nlat"]), int(state["nlon"]), str(state["grid"]))
        here = (self.grid_spec["nlat"], self.grid_spec["nlon"], self.grid_spec["grid"])
        name = type(self).__name__
        if saved[2] != here[2]:
            raise ValueError(
                f"{name}: the state_dict was saved on grid (nlat, nlon, grid) = {saved} but this model is built on "
                f"{here}: the grid type differs ({saved[2]!r} vs {here[2]!r}). Build the model on a {saved[2]!r} grid, "
                "or wrap the load in dandelion.grid_guard.allow_grid_change(model) if the change is intended."
            )
        if self.resolution_dependent and saved[:2] != here[:2]:
            raise ValueError(
                f"{name}: the state_dict was saved at (nlat, nlon, grid) = {saved} but this model is built at "
                f"{here}; {name}'s weight shapes depend on the resolution, so its weights cannot be used at "
                f"another one. Build the model at nlat={saved[0]}, nlon={saved[1]}, grid={saved[2]!r} "
                "(and regrid the data), or train a new model at the requested resolution."
            )


@contextlib.contextmanager
def allow_grid_change(model: nn.Module):
    """Context manager lifting the grid check of every guarded module in ``model``.

    Example::

        with allow_grid_change(model):
            model.load_state_dict(state_dict)

    Weight shapes must still agree (PyTorch checks them); for a resolution-dependent model at another
    resolution they usually do not.
    """
    guarded = [m for m in model.modules() if isinstance(m, GridGuard)]
    old = [m.grid_guard_strict for m in guarded]
    try:
        for m in guarded:
            m.grid_guard_strict = False
        yield model
    finally:
        for m, o in zip(guarded, old):
            m.grid_guard_strict = o
