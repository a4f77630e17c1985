"""Generic time integrators for equations split into explicit, implicit and diagonal-linear parts.

Physics apart from time stepping (docs/ARCHITECTURE.md §1, after Dinosaur, google-research/dinosaur,
``time_integration.py``): an *equation* object exposes

* ``explicit_terms(state) -> state``: the non-stiff tendency ``N(u)`` (advection, Coriolis, ...);
* ``implicit_terms(state) -> state``: the stiff linear tendency ``G(u) = L u`` (gravity waves, ...);
* ``implicit_inverse(state, eta) -> state``: solves ``(I - eta L) x = state`` for ``x``;
* optionally ``linear_exponential(state, tau) -> state``: ``exp(tau D) state`` for a diagonal
  linear operator ``D`` (diffusion, hyperdiffusion) treated exactly by an integrating factor.
  ``D`` must commute with ``L`` (true for operators diagonal in the same spectral basis whose
  rate does not differ between the components that ``L`` couples).

The full equation is ``du/dt = N(u) + L u + D u``. States are any nesting of tensors, tuples,
lists, dicts and dataclasses (e.g. a frozen dataclass of spectral tensors); :func:`tree_map`
does the arithmetic. A leading batch dimension (the ensemble) passes through untouched.

Schemes
-------
* :func:`imex_runge_kutta` with an :class:`IMEXTableau`, e.g. :data:`ARS222` (Ascher, Ruuth &
  Spiteri 1997, *Appl. Numer. Math.* 25, 151-167, §2.6 "(2,2,2)", L-stable, second order; the
  family of Dedalus' RK222) and :data:`ARS343` (ibid. §2.7 "(3,4,3)", third order).
* :func:`explicit_runge_kutta` with a :class:`ButcherTableau`, e.g. :data:`RK4` (classical
  fourth order), treating ``N + L`` explicitly.
* :class:`SemiImplicitLeapfrog`: semi-implicit leapfrog with the Robert-Asselin-Williams filter
  (one explicit evaluation per step; the primitive-equation runs).
* :class:`ETDRK2`, :class:`ETDRK4`: exponential time differencing (Cox & Matthews 2002, *J. Comput.
  Phys.* 176, 430-455, eqs. 22 and 26-29) for ``du/dt = L u + N(u)`` with ``L`` diagonal and real,
  integrated exactly through the phi-functions (:func:`phi_functions`); defined in
  :mod:`dandelion.solvers.exponential` and re-exported here.

:func:`imex_amplification` evaluates a tableau's amplification factor on the scalar test equation
``u' = lambda_ex u + lambda_im u``, from which simulations derive scheme-specific step limits.

Integrating factor (Lawson 1967, *SIAM J. Numer. Anal.* 4, 372; "IF-RK"): with ``w = exp(-t D) u``
the scheme is applied to ``w``; written back in terms of ``u`` the stage values are

    U_i = E(c_i h) u_n + h sum_j a_ij E((c_i - c_j) h) N(U_j) + h sum_j ahat_ij E((c_i - c_j) h) L U_j,
    u_{n+1} = E(h) u_n + h sum_j b_j E((1 - c_j) h) N(U_j) + h sum_j bhat_j E((1 - c_j) h) L U_j,

with ``E(tau) = exp(tau D)``; the implicit term ``j = i`` is solved with ``implicit_inverse``.
Diffusion is thus exact (a pure decay ``E(h)`` for ``N = L = 0``) whatever its stiffness, and
for tableaux with non-decreasing ``c`` every factor is a decay.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from .exponential import ETDRK2, ETDRK4, phi_functions

__all__ = [
    "tree_map",
    "tree_add",
    "tree_scale",
    "tree_axpy",
    "tree_leaves",
    "IMEXTableau",
    "ButcherTableau",
    "ARS222",
    "ARS343",
    "RK4",
    "FORWARD_EULER",
    "IMEX_EULER",
    "imex_runge_kutta",
    "explicit_runge_kutta",
    "integrate",
    "make_stepper",
    "SCHEMES",
    "imex_amplification",
    "SemiImplicitLeapfrog",
    "phi_functions",
    "ETDRK2",
    "ETDRK4",
]


# ---------------------------------------------------------------------------- state arithmetic
def tree_map(fn: Callable, state: Any, *rest: Any) -> Any:
    """Apply ``fn`` leaf-wise to tensors in matching nested structures (tuple, list, dict, dataclass).

    Non-tensor leaves (numbers, None, strings) of the first structure are passed through unchanged.
    """
    if isinstance(state, torch.Tensor):
        return fn(state, *rest)
    if dataclasses.is_dataclass(state) and not isinstance(state, type):
        kw = {
            f.name: tree_map(fn, getattr(state, f.name), *[getattr(r, f.name) for r in rest])
            for f in dataclasses.fields(state)
            if f.init
        }
        return dataclasses.replace(state, **kw)
    if isinstance(state, tuple) and hasattr(state, "_fields"):  # namedtuple
        return type(state)(*[tree_map(fn, s, *[r[i] for r in rest]) for i, s in enumerate(state)])
    if isinstance(state, (tuple, list)):
        return type(state)(tree_map(fn, s, *[r[i] for r in rest]) for i, s in enumerate(state))
    if isinstance(state, dict):
        return {k: tree_map(fn, v, *[r[k] for r in rest]) for k, v in state.items()}
    return state


def tree_leaves(state: Any) -> list[torch.Tensor]:
    """All tensors of a nested state, in a fixed order."""
    out: list[torch.Tensor] = []
    tree_map(lambda x: out.append(x) or x, state)
    return out


def tree_add(a, b):
    """``a + b`` leaf-wise."""
    return tree_map(lambda x, y: x + y, a, b)


def tree_scale(a, s: float):
    """``s * a`` leaf-wise."""
    return tree_map(lambda x: x * s, a)


def tree_axpy(y, alpha: float, x):
    """``y + alpha * x`` leaf-wise."""
    return tree_map(lambda yy, xx: yy + alpha * xx, y, x)


# ---------------------------------------------------------------------------- tableaux
@dataclass(frozen=True)
class ButcherTableau:
    """Explicit Runge-Kutta tableau: ``a`` strictly lower triangular (s x s), weights ``b``, nodes ``c``."""

    a: tuple
    b: tuple
    c: tuple
    name: str = ""

    def __post_init__(self):
        s = len(self.b)
        if len(self.a) != s or len(self.c) != s or any(len(r) != s for r in self.a):
            raise ValueError(f"tableau {self.name!r}: a must be {s}x{s} and c of length {s}")
        if any(self.a[i][j] != 0 for i in range(s) for j in range(i, s)):
            raise ValueError(f"tableau {self.name!r}: explicit a must be strictly lower triangular")


@dataclass(frozen=True)
class IMEXTableau:
    """IMEX Runge-Kutta pair in the Ascher-Ruuth-Spiteri form (all stages share nodes ``c``).

    ``a_ex`` strictly lower triangular, ``a_im`` lower triangular (diagonally implicit), weights
    ``b_ex``, ``b_im``; all ``s x s`` including the explicit first stage ``U_1 = u_n``.
    """

    a_ex: tuple
    a_im: tuple
    b_ex: tuple
    b_im: tuple
    c: tuple
    name: str = ""

    def __post_init__(self):
        s = len(self.c)
        for nm, m in (("a_ex", self.a_ex), ("a_im", self.a_im)):
            if len(m) != s or any(len(r) != s for r in m):
                raise ValueError(f"tableau {self.name!r}: {nm} must be {s}x{s}")
        if len(self.b_ex) != s or len(self.b_im) != s:
            raise ValueError(f"tableau {self.name!r}: weights must have length {s}")
        if any(self.a_ex[i][j] != 0 for i in range(s) for j in range(i, s)):
            raise ValueError(f"tableau {self.name!r}: a_ex must be strictly lower triangular")
        if any(self.a_im[i][j] != 0 for i in range(s) for j in range(i + 1, s)):
            raise ValueError(f"tableau {self.name!r}: a_im must be lower triangular (DIRK)")


_g = 1.0 - 2.0**-0.5
_d = 1.0 - 1.0 / (2.0 * _g)
#: ARS(2,2,2): Ascher, Ruuth & Spiteri (1997), §2.6; gamma = 1 - 1/sqrt(2), delta = 1 - 1/(2 gamma).
#: Stiffly accurate in both parts, so a step costs 2 explicit and 2 implicit evaluations.
ARS222 = IMEXTableau(
    a_ex=((0, 0, 0), (_g, 0, 0), (_d, 1 - _d, 0)),
    a_im=((0, 0, 0), (0, _g, 0), (0, 1 - _g, _g)),
    b_ex=(_d, 1 - _d, 0),
    b_im=(0, 1 - _g, _g),
    c=(0, _g, 1.0),
    name="ars222",
)

_G = 0.4358665215084590  # root of 6x^3 - 18x^2 + 9x - 1 in (1/6, 1/2): L-stable SDIRK(3) diagonal
_b1 = -1.5 * _G**2 + 4 * _G - 0.25
_b2 = 1.5 * _G**2 - 5 * _G + 1.25
#: ARS(3,4,3): Ascher, Ruuth & Spiteri (1997), §2.7 (explicit part to 10 digits as published;
#: its rows are completed so that the row sums equal c exactly).
_a31 = 0.3212788860
_a42 = 0.5529291479
ARS343 = IMEXTableau(
    a_ex=((0, 0, 0, 0), (_G, 0, 0, 0), (_a31, (1 + _G) / 2 - _a31, 0, 0), (1 - 2 * _a42, _a42, _a42, 0)),
    a_im=((0, 0, 0, 0), (0, _G, 0, 0), (0, (1 - _G) / 2, _G, 0), (0, _b1, _b2, _G)),
    b_ex=(0, _b1, _b2, _G),
    b_im=(0, _b1, _b2, _G),
    c=(0, _G, (1 + _G) / 2, 1.0),
    name="ars343",
)

#: Classical fourth-order Runge-Kutta (Kutta 1901).
RK4 = ButcherTableau(
    a=((0, 0, 0, 0), (0.5, 0, 0, 0), (0, 0.5, 0, 0), (0, 0, 1.0, 0)),
    b=(1 / 6, 1 / 3, 1 / 3, 1 / 6),
    c=(0, 0.5, 0.5, 1.0),
    name="rk4",
)

#: Forward Euler (for tests and as the simplest member of the family).
FORWARD_EULER = ButcherTableau(a=((0,),), b=(1.0,), c=(0.0,), name="euler")

#: Forward-backward (IMEX) Euler in the Ascher-Ruuth-Spiteri form: ``U = (I - h L)^-1 (u + h N(u))``.
IMEX_EULER = IMEXTableau(
    a_ex=((0, 0), (1, 0)), a_im=((0, 0), (0, 1)), b_ex=(1, 0), b_im=(0, 1), c=(0, 1.0), name="imex_euler"
)


# ---------------------------------------------------------------------------- steppers
def _exp(equation, state, tau: float):
    if tau == 0.0 or not hasattr(equation, "linear_exponential"):
        return state
    return equation.linear_exponential(state, tau)


def imex_runge_kutta(tableau: IMEXTableau, equation, time_step: float) -> Callable:
    """Return ``step(state) -> state`` advancing one IMEX Runge-Kutta step of size ``time_step``.

    ``equation`` provides ``explicit_terms``, ``implicit_terms``, ``implicit_inverse(state, eta)``
    and optionally ``linear_exponential(state, tau)`` (see the module docstring for the scheme).
    Evaluations whose coefficients are all zero are skipped, and a stiffly accurate pair returns
    its last stage, so ARS(2,2,2) costs two explicit and two implicit evaluations per step.
    """
    h = float(time_step)
    T = tableau
    s = len(T.c)
    stiff_acc = tuple(T.b_ex) == tuple(T.a_ex[-1]) and tuple(T.b_im) == tuple(T.a_im[-1]) and T.c[-1] == 1.0
    need_N = [any(T.a_ex[i][j] != 0 for i in range(j + 1, s)) or (not stiff_acc and T.b_ex[j] != 0) for j in range(s)]
    need_G = [any(T.a_im[i][j] != 0 for i in range(j + 1, s)) or (not stiff_acc and T.b_im[j] != 0) for j in range(s)]

    def step(u):
        N: list = [None] * s
        G: list = [None] * s
        U = None
        for i in range(s):
            acc = _exp(equation, u, T.c[i] * h)
            for j in range(i):
                decay = (T.c[i] - T.c[j]) * h
                if T.a_ex[i][j] != 0:
                    acc = tree_axpy(acc, h * T.a_ex[i][j], _exp(equation, N[j], decay))
                if T.a_im[i][j] != 0:
                    acc = tree_axpy(acc, h * T.a_im[i][j], _exp(equation, G[j], decay))
            U = equation.implicit_inverse(acc, h * T.a_im[i][i]) if T.a_im[i][i] != 0 else acc
            if need_N[i]:
                N[i] = equation.explicit_terms(U)
            if need_G[i]:
                G[i] = equation.implicit_terms(U)
        if stiff_acc:
            return U
        out = _exp(equation, u, h)
        for j in range(s):
            decay = (1.0 - T.c[j]) * h
            if T.b_ex[j] != 0:
                out = tree_axpy(out, h * T.b_ex[j], _exp(equation, N[j], decay))
            if T.b_im[j] != 0:
                out = tree_axpy(out, h * T.b_im[j], _exp(equation, G[j], decay))
        return out

    return step


def explicit_runge_kutta(tableau: ButcherTableau, equation, time_step: float) -> Callable:
    """Return ``step(state) -> state`` of an explicit Runge-Kutta scheme on ``N + L`` (integrating
    factor for ``D`` where the equation has ``linear_exponential``). ``implicit_terms`` is optional."""
    h = float(time_step)
    T = tableau
    s = len(T.c)

    def rhs(U):
        f = equation.explicit_terms(U)
        if hasattr(equation, "implicit_terms"):
            f = tree_add(f, equation.implicit_terms(U))
        return f

    def step(u):
        K: list = [None] * s
        for i in range(s):
            acc = _exp(equation, u, T.c[i] * h)
            for j in range(i):
                if T.a[i][j] != 0:
                    acc = tree_axpy(acc, h * T.a[i][j], _exp(equation, K[j], (T.c[i] - T.c[j]) * h))
            K[i] = rhs(acc)
        out = _exp(equation, u, h)
        for j in range(s):
            if T.b[j] != 0:
                out = tree_axpy(out, h * T.b[j], _exp(equation, K[j], (1.0 - T.c[j]) * h))
        return out

    return step


#: Scheme names understood by :func:`make_stepper`.
SCHEMES = {"ars222": ARS222, "ars343": ARS343, "rk4": RK4, "euler": FORWARD_EULER, "imex_euler": IMEX_EULER}


def make_stepper(scheme: str, equation, time_step: float) -> Callable:
    """``step`` function for a scheme name in :data:`SCHEMES` (IMEX or explicit).

    Raises
    ------
    ValueError
        For an unknown scheme name (the message lists the known ones).
    """
    if scheme not in SCHEMES:
        raise ValueError(f"unknown time-stepping scheme {scheme!r}; use one of {sorted(SCHEMES)}")
    T = SCHEMES[scheme]
    if isinstance(T, IMEXTableau):
        return imex_runge_kutta(T, equation, time_step)
    return explicit_runge_kutta(T, equation, time_step)


def integrate(step: Callable, state: Any, n_steps: int, callback: Callable | None = None) -> Any:
    """Apply ``step`` ``n_steps`` times; ``callback(i, state)`` after each step if given."""
    for i in range(int(n_steps)):
        state = step(state)
        if callback is not None:
            callback(i, state)
    return state


class SemiImplicitLeapfrog:
    """Semi-implicit leapfrog with the Robert-Asselin-Williams (RAW) filter for an equation with
    ``explicit_terms``, ``implicit_terms`` and ``implicit_inverse``.

    ``x_{n+1} = (I - dt L)^{-1} [x_{n-1} + 2 dt N(x_n) + dt L x_{n-1}]`` (Hoskins & Simmons 1975;
    Durran, *Numerical Methods for Fluid Dynamics*, 2nd ed., §8.6.5), then the RAW filter (Williams
    2009, MWR 137, 2538-2546, eqs. 6-8) ``d = nu/2 (x_{n-1} - 2 x_n + x_{n+1})``, ``x_n += alpha d``,
    ``x_{n+1} -= (1 - alpha) d``. The first step after a (re)start is one ARS(2,2,2) step. ``post(x, tau)``
    (optional) is applied to every new state with the interval it spans (``2 dt`` for a leapfrog step,
    ``dt`` for the starter), e.g. an exact hyperdiffusion factor. Explicit terms are stable for
    frequencies ``|omega| dt <= 1`` (Durran §2.3.3), e.g. the inertial ``f dt <= 1``.
    """

    def __init__(self, equation, dt: float, *, nu: float = 0.05, alpha: float = 0.53, post: Callable | None = None):
        if not dt > 0:
            raise ValueError(f"dt={dt} must be positive")
        self.eq, self.dt, self.nu, self.alpha = equation, float(dt), float(nu), float(alpha)
        self.post = post
        self._starter = imex_runge_kutta(ARS222, equation, self.dt)
        self.prev = None

    def restart(self) -> None:
        """Forget the previous time level (the next step is a starter step)."""
        self.prev = None

    def step(self, x: torch.Tensor) -> torch.Tensor:
        """Advance the current state ``x`` by ``dt`` and return the new (filtered) state."""
        if self.prev is None:
            y = self._starter(x)
            if self.post is not None:
                y = self.post(y, self.dt)
            self.prev = x
            return y
        dt, eq = self.dt, self.eq
        rhs = self.prev + 2 * dt * eq.explicit_terms(x) + dt * eq.implicit_terms(self.prev)
        new = eq.implicit_inverse(rhs, dt)
        if self.post is not None:
            new = self.post(new, 2 * dt)
        d = 0.5 * self.nu * (self.prev - 2 * x + new)
        self.prev = x + self.alpha * d
        return new - (1.0 - self.alpha) * d


def imex_amplification(tableau: IMEXTableau, z_ex: torch.Tensor, z_im: torch.Tensor) -> torch.Tensor:
    """Amplification factor ``R`` of an IMEX tableau on ``u' = lambda_ex u + lambda_im u``.

    ``z_ex = h lambda_ex`` (explicit) and ``z_im = h lambda_im`` (implicit), any broadcastable shapes:
    stages ``U_i = 1 + sum_j a_ex_ij z_ex U_j + sum_j a_im_ij z_im U_j``,
    ``R = 1 + sum_j (b_ex_j z_ex + b_im_j z_im) U_j``.
    """
    T = tableau
    U: list = []
    for i in range(len(T.c)):
        acc = torch.ones_like(z_ex + z_im)
        for j in range(i):
            acc = acc + (T.a_ex[i][j] * z_ex + T.a_im[i][j] * z_im) * U[j]
        U.append(acc / (1.0 - T.a_im[i][i] * z_im))
    out = torch.ones_like(U[0])
    for j in range(len(T.c)):
        out = out + (T.b_ex[j] * z_ex + T.b_im[j] * z_im) * U[j]
    return out
