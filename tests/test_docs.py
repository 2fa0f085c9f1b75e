"""The documentation's promises that a test can hold it to."""

import re
from pathlib import Path

import pyg_orch

DOCS = Path(__file__).resolve().parents[1] / "docs"


def test_the_api_reference_documents_every_public_name():
    api = (DOCS / "api.md").read_text()
    documented = set(
        re.findall(r"^\.\. auto(?:class|function):: pyg_orch\.(\w+)", api, re.M)
    )
    assert documented == set(pyg_orch.__all__) - {"__version__"}
    assert "pyg_orch.__version__" in api


def test_the_quickstart_loop_runs_and_learns(capsys):
    quickstart = (DOCS / "quickstart.md").read_text()
    code = re.findall(r"```python\n(.*?)```", quickstart, re.S)
    assert len(code) == 1
    exec(compile(code[0], "quickstart.md", "exec"), {})  # noqa: S102 - our own docs
    assert float(capsys.readouterr().out) > 0.7


def test_every_saved_benchmark_starts_with_its_command():
    page = (DOCS / "benchmarks.md").read_text()
    tables = re.findall(r"literalinclude\} (benchmarks/\w+\.txt)", page)
    charts = re.findall(r"\]\((benchmarks/\w+\.png)\)", page)
    assert len(tables) == 5 and len(charts) == 4
    for table in tables:
        name = Path(table).stem
        first = (DOCS / table).read_text().splitlines()[0]
        assert first.startswith(f"$ python -m pyg_orch.benchmark {name}")
    for chart in charts:
        assert (DOCS / chart).read_bytes()[:4] == b"\x89PNG"


def test_every_public_class_and_function_has_an_example():
    import importlib
    import inspect

    modules = [
        "hotness", "cache", "pipeline", "loader", "model", "sampling",
        "datasets", "train", "kernels.aggregate", "validation", "distributed",
        "checkpoint",
    ]  # fmt: skip
    missing = []
    for short in modules:
        module = importlib.import_module(f"pyg_orch.{short}")
        for name, value in vars(module).items():
            public = not name.startswith("_") and (
                inspect.isfunction(value) or inspect.isclass(value)
            )
            if public and value.__module__ == module.__name__:
                if "Example" not in (inspect.getdoc(value) or ""):
                    missing.append(f"{module.__name__}.{name}")
    assert missing == []


def test_the_guarantees_page_quotes_the_real_case_counts():
    from test_properties import FUZZ_EXAMPLES
    from test_validation import BAD_INPUTS

    page = (DOCS / "guarantees.md").read_text()
    assert f"holds {len(BAD_INPUTS)} bad-input cases" in page
    assert f"{FUZZ_EXAMPLES:,} cases" in page
