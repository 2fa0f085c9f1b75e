"""PyG 2.8.0's own loader tests pass with PyG's classes and with pyg_orch's loaders.

``tests/pyg_loader`` holds PyG's ``test_neighbor_loader.py``,
``test_link_neighbor_loader.py`` and ``test_cluster.py``, unchanged. They run
twice, each time in a process of its own with the one line a user adds,
``import pyg_orch`` (``pyg_loader/pyg_gates.py``, which also lifts PyG's
skips for a missing pyg-lib or METIS, and nothing else):

* as they are: PyG's ``NeighborLoader``, ``LinkNeighborLoader`` and
  ``ClusterData`` sample and partition through pyg_orch's backend;
* with the two loaders replaced by pyg_orch's drop-ins,
  ``OrchNeighborLoader`` and ``OrchLinkNeighborLoader`` (a copy of the files
  with the import and the loaders' names in ``str(loader)`` changed).
"""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

SUITE = Path(__file__).parent / "pyg_loader"
TESTS = Path(__file__).parent

# The only skips allowed: two tests compare the compiled ops of pyg-lib and
# torch-sparse with each other (they call torch.ops.torch_sparse themselves;
# torch-sparse cannot be installed here).
SKIP_REASON = re.compile(
    r"Packages \{'(pyg_lib|torch_sparse)', '(pyg_lib|torch_sparse)'\} not found"
)
ALLOWED_SKIPS = 2
# PyG's class and pyg_orch's drop-in for each loader file.
DROP_INS = {
    "pyg_test_neighbor_loader.py": ("NeighborLoader", "OrchNeighborLoader"),
    "pyg_test_link_neighbor_loader.py": (
        "LinkNeighborLoader",
        "OrchLinkNeighborLoader",
    ),
}


def run_suite(folder: Path, files: list[str]) -> tuple[int, str]:
    """Runs PyG's tests in ``folder``; returns how many passed, and the output."""
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-c", str(folder / "pytest.ini"),
         *files, "-q", "-rs", "-p", "no:cacheprovider", "-W", "ignore"],
        capture_output=True, text=True, cwd=folder, timeout=900,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(folder), str(TESTS)]),
             "FULL_TEST": "1"},
    )  # fmt: skip
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-6000:]
    summary = output.strip().splitlines()[-1]
    assert "failed" not in summary and "error" not in summary, summary
    skipped = re.findall(r"SKIPPED \[\d+\] (\S+):(\d+): (.*)", output)
    assert len(skipped) <= ALLOWED_SKIPS, skipped
    for _, _, reason in skipped:
        assert SKIP_REASON.fullmatch(reason), reason
    return int(re.search(r"(\d+) passed", summary).group(1)), summary


def test_pyg_loader_tests_pass_with_pyg_classes():
    passed, summary = run_suite(SUITE, [])
    assert passed == 91, summary  # every test of the three files but the skips


def test_pyg_loader_tests_pass_against_orch_loaders(tmp_path):
    for path in SUITE.iterdir():
        if path.is_file():
            shutil.copy(path, tmp_path / path.name)
    for name, (pyg, orch) in DROP_INS.items():
        text = (SUITE / name).read_text()
        changed = text.replace(
            f"from torch_geometric.loader import {pyg}\n",
            f"from pyg_orch import {orch} as {pyg}\n",
        ).replace(f"str(loader) == '{pyg}()'", f"str(loader) == '{orch}()'")
        assert changed.count(orch) >= 3, name  # the import and str(loader)
        (tmp_path / name).write_text(changed)
    passed, summary = run_suite(tmp_path, list(DROP_INS))
    assert passed == 87, summary  # every test of the two files but the skips
