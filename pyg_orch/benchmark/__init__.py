"""Benchmarks that measure pyg_orch against plain PyG in the same run.

Run ``python -m pyg_orch.benchmark --help`` for the list.
"""
