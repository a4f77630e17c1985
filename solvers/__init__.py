"""Numerical PDE solvers on the sphere (import as ``dandelion.solvers``).

Physics apart from time stepping (after Dinosaur): equation objects hold the physics, one module the
schemes, one driver the stepping.

* :mod:`dandelion.solvers.spectral_core`: batched float64 spectral core (torch-harmonics transforms on a
  dealiased Gauss grid, Laplacian, Helmholtz velocity, exact synthesis on output grids);
* :mod:`dandelion.solvers.integrators`: every time integrator (IMEX and explicit Runge-Kutta with an
  integrating factor, semi-implicit leapfrog with the RAW filter, exponential time differencing);
* :mod:`dandelion.solvers.time_stepping`: the one driver (landing on target times, stability limits,
  non-finite checks) behind every simulation's ``advance_to``;
* equations and their simulations: :mod:`~dandelion.solvers.shallow_water` with
  :mod:`~dandelion.solvers.galewsky`, :mod:`~dandelion.solvers.cahn_hilliard`,
  :mod:`~dandelion.solvers.chained_turbulence`, :mod:`~dandelion.solvers.primitive_equations` (vertical
  operators in :mod:`~dandelion.solvers.sigma_coordinates`, the Jablonowski-Williamson state in
  :mod:`~dandelion.solvers.baroclinic_wave`) with :mod:`~dandelion.solvers.held_suarez`.
"""
