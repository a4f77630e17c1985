"""Generic integrators: convergence order on a split linear ODE, exact integrating factor, tree states."""

import math
from dataclasses import dataclass

import pytest
import torch

from dandelion.solvers.integrators import integrate, make_stepper, tree_map


@dataclass(frozen=True)
class Pair:
    a: torch.Tensor
    b: torch.Tensor


class SplitOscillator:
    """du/dt = (i w_n + i w_l + d) u  for each leaf, with N = i w_n u (explicit), L = i w_l u
    (implicit) and D = d (integrating factor). Exact solution u0 exp((i(w_n + w_l) + d) t)."""

    def __init__(self, wn, wl, d, nonlinear=False):
        self.wn, self.wl, self.d, self.nonlinear = wn, wl, d, nonlinear

    def explicit_terms(self, s):
        return tree_map(lambda x: 1j * self.wn * x, s)

    def implicit_terms(self, s):
        return tree_map(lambda x: 1j * self.wl * x, s)

    def implicit_inverse(self, s, eta):
        return tree_map(lambda x: x / (1 - eta * 1j * self.wl), s)

    def linear_exponential(self, s, tau):
        return tree_map(lambda x: x * math.exp(self.d * tau), s)


@pytest.mark.parametrize("scheme, order", [("ars222", 2), ("ars343", 3), ("rk4", 4), ("euler", 1)])
def test_convergence_order(scheme, order):
    eq = SplitOscillator(wn=1.3, wl=4.0, d=-2.0)
    u0 = Pair(torch.tensor([1.0 + 0j], dtype=torch.complex128), torch.tensor([0.5j], dtype=torch.complex128))
    T = 1.0

    def exact(x):
        return x * torch.exp(torch.tensor((1j * (1.3 + 4.0) - 2.0) * T))

    errs = []
    for n in (40, 80):
        out = integrate(make_stepper(scheme, eq, T / n), u0, n)
        errs.append(max((out.a - exact(u0.a)).abs().item(), (out.b - exact(u0.b)).abs().item()))
    observed = math.log2(errs[0] / errs[1])
    assert abs(observed - order) < 0.3, (scheme, errs, observed)


@pytest.mark.parametrize("scheme", ["ars222", "ars343", "rk4", "euler"])
def test_integrating_factor_is_exact_for_pure_decay(scheme):
    eq = SplitOscillator(wn=0.0, wl=0.0, d=-30.0)  # d*dt = -3: outside forward Euler stability, exact here
    u0 = (torch.ones(3, dtype=torch.complex128),)
    out = integrate(make_stepper(scheme, eq, 0.1), u0, 10)
    assert torch.allclose(out[0], torch.full((3,), math.exp(-30.0), dtype=torch.complex128), rtol=1e-12, atol=0)


def test_unknown_scheme_message():
    with pytest.raises(ValueError, match="unknown time-stepping scheme"):
        make_stepper("leapfrog9", SplitOscillator(1, 1, 0), 0.1)
