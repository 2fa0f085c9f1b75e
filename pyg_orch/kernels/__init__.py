"""Numba kernels: plain module-level functions on NumPy arrays, no torch."""

from pyg_orch.kernels.threading_layer import load_tbb

# Before any kernel runs: Numba picks its threading layer once, at the first.
load_tbb()
