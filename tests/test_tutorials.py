"""Every tutorial in docs/tutorials runs top to bottom and is stored clean.

The docs build (myst-nb) executes the notebooks too; this test catches a broken
tutorial without Sphinx.
"""

import json
import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
TUTORIALS = sorted((REPO / "docs" / "tutorials").glob("*.ipynb"))


def test_there_are_tutorials():
    assert TUTORIALS, "no notebooks in docs/tutorials"


@pytest.mark.parametrize("path", TUTORIALS, ids=lambda path: path.name)
def test_tutorial_is_stored_without_outputs(path):
    notebook = json.loads(path.read_text())
    assert notebook["metadata"]["kernelspec"]["name"] == "python3"
    title = notebook["cells"][0]
    assert title["cell_type"] == "markdown"
    assert "".join(title["source"]).startswith("# "), "the first cell is the title"
    for index, cell in enumerate(notebook["cells"]):
        if cell["cell_type"] != "code":
            continue
        assert cell["execution_count"] is None, f"cell {index} has an execution count"
        assert cell["outputs"] == [], f"cell {index} has outputs"


# The README's pytest runs the drop-in tutorial; the slow tests run the rest,
# which take 10 s to most of a minute each (and the docs build executes every
# notebook).
SLOW = {"hetero_and_links.ipynb", "pipeline.ipynb", "choosing_hot_set.ipynb"}


@pytest.mark.parametrize(
    "path",
    [
        pytest.param(path, marks=pytest.mark.slow) if path.name in SLOW else path
        for path in TUTORIALS
    ],
    ids=lambda path: path.name,
)
def test_tutorial_runs(path, tmp_path, monkeypatch):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    pytest.importorskip("matplotlib")
    # The kernel inherits this environment: no display, and this checkout's
    # pyg_orch even when it is not installed.
    monkeypatch.setenv("MPLBACKEND", "Agg")
    pythonpath = os.environ.get("PYTHONPATH")
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join(filter(None, [str(REPO), pythonpath]))
    )
    notebook = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(
        notebook,
        timeout=600,
        kernel_name="python3",
        resources={"metadata": {"path": str(tmp_path)}},
    )
    # Raises CellExecutionError, naming the cell and its traceback, on any error.
    client.execute()
    errors = [
        output
        for cell in notebook.cells
        if cell.cell_type == "code"
        for output in cell.outputs
        if output.output_type == "error"
    ]
    assert not errors
