"""Numerical PDE solvers on the sphere (import as ``dandelion.solvers``; DESIGN.md §5).

* :mod:`dandelion.solvers.spectral`: batched float64 spectral core (torch-harmonics transforms on a
  dealiased Gauss grid, Laplacian, Helmholtz velocity, exact synthesis on output grids);
* :mod:`dandelion.solvers.integrators`: generic IMEX / explicit Runge-Kutta steppers with an
  integrating factor for diagonal linear terms (ARS(2,2,2), ARS(3,4,3), RK4);
* :mod:`dandelion.solvers.shallow_water`: rotating shallow water (vorticity-divergence, tilted axis,
  invariants, CFL check);
* :mod:`dandelion.solvers.galewsky`: Galewsky and Williamson-2 initial conditions and the batched
  :class:`~dandelion.solvers.galewsky.GalewskySimulation`;
* further equations (Cahn-Hilliard, chained turbulence, primitive equations / Held-Suarez) build on
  the same core and integrators.
"""
