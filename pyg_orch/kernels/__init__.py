"""Numba kernels: plain module-level functions on NumPy arrays, no torch."""
