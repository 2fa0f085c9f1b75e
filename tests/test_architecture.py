"""The package's shape: wings that import only downward, no cycles, small parts.

The layering is a contract in ``pyproject.toml`` (``[tool.importlinter]``),
checked by ``lint-imports``; these tests run it, show that it catches an
upward import, look for import cycles in grimp's graph of the whole package,
and hold modules and classes to their size limits.
"""

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "pyg_orch"
MAX_MODULE_LINES = 700
MAX_CLASS_LINES = 400


def lint_imports(root):
    # In a child process, so that the package it analyses is the one at root.
    return subprocess.run(
        [sys.executable, "-c", "from importlinter.cli import lint_imports_command; "
         "lint_imports_command()", "--no-cache"],
        cwd=root, capture_output=True, text=True,
        env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"},
    )  # fmt: skip


def test_the_layers_contract_is_kept():
    result = lint_imports(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 kept, 0 broken" in result.stdout


def test_an_upward_import_breaks_the_contract(tmp_path):
    shutil.copytree(PACKAGE, tmp_path / "pyg_orch",
                    ignore=shutil.ignore_patterns("__pycache__", "data"))  # fmt: skip
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    # The hot cache (a lower wing) reaching up to the model.
    cache = tmp_path / "pyg_orch" / "hot" / "cache.py"
    cache.write_text(cache.read_text() + "\nfrom pyg_orch.nn.model import OrchModel\n")
    result = lint_imports(tmp_path)
    assert result.returncode != 0
    assert "BROKEN" in result.stdout
    assert "pyg_orch.hot.cache -> pyg_orch.nn.model" in result.stdout


def cycles(graph):
    # Strongly connected components of more than one module (Tarjan).
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(module):
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for imported in graph.find_modules_directly_imported_by(module):
            if imported not in index:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in on_stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            component = []
            while not component or component[-1] != module:
                component.append(stack.pop())
                on_stack.discard(component[-1])
            if len(component) > 1:
                found.append(sorted(component))

    for module in sorted(graph.modules):
        if module not in index:
            visit(module)
    return found


def test_no_module_of_the_package_imports_itself_back():
    graph = grimp.build_graph("pyg_orch", cache_dir=None)
    assert len(graph.modules) > 50
    assert cycles(graph) == []


def test_the_cycle_check_finds_a_cycle():
    graph = grimp.ImportGraph()
    for module in ("a", "b", "c"):
        graph.add_module(module)
    graph.add_import(importer="a", imported="b")
    graph.add_import(importer="b", imported="c")
    assert cycles(graph) == []
    graph.add_import(importer="c", imported="a")
    assert cycles(graph) == [["a", "b", "c"]]


def sizes():
    # (what, lines) of every module and class outside benchmark/.
    for path in sorted(PACKAGE.rglob("*.py")):
        if "benchmark" in path.relative_to(PACKAGE).parts:
            continue
        source = path.read_text()
        name = str(path.relative_to(ROOT))
        yield name, "module", len(source.splitlines())
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.ClassDef):
                lines = node.end_lineno - node.lineno + 1
                yield f"{name}:{node.name}", "class", lines


def test_no_module_or_class_outgrows_its_limit():
    limits = {"module": MAX_MODULE_LINES, "class": MAX_CLASS_LINES}
    measured = list(sizes())
    assert len(measured) > 60
    too_large = [f"{name} ({lines} lines)" for name, kind, lines in measured
                 if lines > limits[kind]]  # fmt: skip
    assert too_large == []
