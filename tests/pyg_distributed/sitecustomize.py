# The processes PyG's distributed tests spawn run no pytest plugin: Python
# imports this module at start-up from PYTHONPATH (set by
# tests/test_pyg_distributed_suite.py), and it opens the same gates.
import pyg_dist_gates  # noqa: F401
