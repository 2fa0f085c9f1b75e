"""The documentation's promises that a test can hold it to."""

from __future__ import annotations

import importlib.util
import re
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

import pyg_orch

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
PAGES = [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]

# The Python blocks the test does not run, each marked in its page by a
# `<!-- not run: why -->` line right above the fence. A new mark needs an entry
# here too, so no block is ever skipped silently.
NOT_RUN: dict[tuple[str, int], str] = {}

_BLOCK = re.compile(
    r"^(?:<!--\s*not run:\s*(?P<why>[^\n]*?)\s*-->[ \t]*\n(?:[ \t]*\n)*)?"
    r"```(?:python|py|python3)[ \t]*\n(?P<code>.*?)^```[ \t]*$",
    re.M | re.S,
)
_FENCE = re.compile(r"^[ \t]*```+[ \t]*(?:python|py|python3)\b", re.M)


@dataclass(frozen=True)
class Block:
    """One fenced Python block of a page."""

    page: str  # relative to the repository root
    number: int  # 1-based, in page order
    line: int  # line of the block's first code line in the page
    code: str
    why_not_run: str | None


def python_blocks(path: Path) -> list[Block]:
    """The page's ```python blocks, in order."""
    text = path.read_text()
    page = str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else path.name
    blocks = [
        Block(
            page,
            number,
            text.count("\n", 0, match.start("code")) + 1,
            match["code"],
            match["why"],
        )
        for number, match in enumerate(_BLOCK.finditer(text), start=1)
    ]
    # An indented or unclosed block would escape _BLOCK; fail instead of skipping it.
    fences = len(_FENCE.findall(text))
    assert len(blocks) == fences, f"{page}: {fences} fences, {len(blocks)} parsed"
    return blocks


def _run_block(block: Block, namespace: dict) -> None:
    # Padding with the lines above the block makes tracebacks name page lines.
    source = "\n" * (block.line - 1) + block.code
    code = compile(source, str(ROOT / block.page), "exec")
    try:
        exec(code, namespace)  # noqa: S102 - our own docs
        return
    except Exception as error:  # noqa: BLE001 - any failure of an example
        # Dropping this function's frame starts the traceback in the page.
        error.__traceback__ = error.__traceback__.tb_next
        trace = traceback.format_exception(error)
        message = (
            f"{block.page}, block {block.number} (line {block.line}) raised "
            f"{type(error).__name__}: {error}\n\n{''.join(trace)}"
        )
    pytest.fail(message, pytrace=False)  # outside `except`: no chained report


def _close_loaders(namespace: dict) -> None:
    # A page may leave a loader open, as a reader's session would; its
    # threads must not outlive the test.
    for value in namespace.values():
        if isinstance(value, pyg_orch.OrchNeighborLoader):
            value.close()


def _learns(out: str) -> None:
    assert float(out) > 0.7, "the quickstart's test accuracy"


def _reaches_the_stated_accuracy(out: str) -> None:
    # The README states the range its example's accuracy fell in over seeds.
    readme = (ROOT / "README.md").read_text()
    stated = re.search(r"seeds 0 to 4 gave (\d\.\d+) to (\d\.\d+)", readme)
    low, high = map(float, stated.groups())
    printed = float(re.fullmatch(r"test accuracy: ([\d.]+)\n", out)[1])
    assert low <= printed <= high, (printed, low, high)


# What a page's blocks print, checked after they ran.
OUTPUT_CHECKS: dict[str, Callable[[str], None]] = {
    "docs/quickstart.md": _learns,
    "README.md": _reaches_the_stated_accuracy,
}
PAGES_WITH_CODE = [
    str(path.relative_to(ROOT)) for path in PAGES if _FENCE.search(path.read_text())
]


def test_the_api_reference_documents_every_public_name():
    api = (DOCS / "api.md").read_text()
    documented = set(
        re.findall(r"^\.\. auto(?:class|function):: pyg_orch\.(\w+)", api, re.M)
    )
    assert documented == set(pyg_orch.__all__) - {"__version__"}
    assert "pyg_orch.__version__" in api


@pytest.mark.parametrize("page", PAGES_WITH_CODE)
def test_the_python_blocks_of_a_page_run_in_order(page, tmp_path, monkeypatch, capsys):
    """As a reader pasting the page's blocks in order into one session."""
    monkeypatch.chdir(tmp_path)
    torch.manual_seed(0)
    namespace = {"__name__": "__main__"}
    skipped = []
    try:
        for block in python_blocks(ROOT / page):
            if block.why_not_run is None:
                _run_block(block, namespace)
            else:
                skipped.append(f"block {block.number}: {block.why_not_run}")
    finally:
        _close_loaders(namespace)
    out = capsys.readouterr().out
    if page in OUTPUT_CHECKS:
        OUTPUT_CHECKS[page](out)
    if skipped:
        with capsys.disabled():
            print(f"\n{page}: not run: {skipped}")


def test_blocks_are_parsed_with_their_mark_and_fail_with_their_place(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(
        "Text.\n\n```python\nx = 1\n```\n\n<!-- not run: needs CUDA -->\n"
        "```python\ny = z\n```\n\n```bash\nls\n```\n"
    )
    blocks = python_blocks(page)
    assert [(b.number, b.line, b.code, b.why_not_run) for b in blocks] == [
        (1, 4, "x = 1\n", None),
        (2, 9, "y = z\n", "needs CUDA"),
    ]
    with pytest.raises(pytest.fail.Exception, match=r"page.md, block 2 \(line 9\)"):
        _run_block(blocks[1], {})
    page.write_text("- item:\n\n  ```python\n  x = 1\n  ```\n")
    with pytest.raises(AssertionError, match="1 fences, 0 parsed"):
        python_blocks(page)


def test_the_blocks_not_run_are_exactly_the_marked_ones():
    marked = {
        (block.page, block.number): block.why_not_run
        for path in PAGES
        for block in python_blocks(path)
        if block.why_not_run is not None
    }
    print("python blocks not run:", marked or "none")
    assert marked == NOT_RUN
    assert "docs/quickstart.md" in PAGES_WITH_CODE and "README.md" in PAGES_WITH_CODE


def _check_anchors():
    # docs/ is not a package; .ci/run runs the file as a script.
    spec = importlib.util.spec_from_file_location(
        "check_anchors", DOCS / "check_anchors.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_anchor_checker_finds_dangling_anchors_only(tmp_path, capsys):
    (tmp_path / "_modules").mkdir()
    (tmp_path / "api.html").write_text(
        '<h1 id="top">API</h1><dl><dt id="pkg.mod.f">f</dt></dl>'
        '<a name="legacy"></a><a href="#top">up</a><a href="#gone">x</a>'
    )
    (tmp_path / "_modules" / "mod.html").write_text(
        '<a class="viewcode-back" href="../api.html#pkg.mod.f">[docs]</a>'
        '<a class="viewcode-back" href="../api.html#pkg.f">[docs]</a>'
        '<a href="../api.html#legacy">ok</a><a href="../missing.html#top">x</a>'
        '<a href="https://example.org/page.html#nowhere">external</a>'
        '<a href="../api.html">no anchor</a><a href="../_static/a.css#x">css</a>'
    )
    check = _check_anchors()
    assert check.dangling_anchors(tmp_path) == [
        "_modules/mod.html: ../api.html#pkg.f",
        "_modules/mod.html: ../missing.html#top",
        "api.html: #gone",
    ]
    assert check.main([str(tmp_path)]) == 1
    assert "../api.html#pkg.f" in capsys.readouterr().out
    (tmp_path / "api.html").write_text('<p id="gone"></p><p id="top"></p>')
    (tmp_path / "_modules" / "mod.html").write_text('<a href="../api.html#top">')
    assert check.main([str(tmp_path)]) == 0


def test_the_results_page_shows_every_saved_output_once_with_its_command():
    page = (DOCS / "benchmarks.md").read_text()
    tables = re.findall(r"literalinclude\} (benchmarks/\w+\.txt)", page)
    charts = re.findall(r"\]\((benchmarks/\w+\.png)\)", page)
    saved = DOCS / "benchmarks"
    assert sorted(tables) == sorted(f"benchmarks/{p.name}" for p in saved.glob("*.txt"))
    assert sorted(charts) == sorted(f"benchmarks/{p.name}" for p in saved.glob("*.png"))
    for table in tables:
        name = Path(table).stem
        first = (DOCS / table).read_text().splitlines()[0]
        assert first.startswith("$ "), f"{table}: the first line is its command"
        if "pyg_orch.benchmark" in first:
            # A variant's table (sampler_hetero) comes from its benchmark.
            benchmark = name.split("_")[0]
            assert first.startswith(f"$ python -m pyg_orch.benchmark {benchmark}")
    for chart in charts:
        assert (DOCS / chart).read_bytes()[:4] == b"\x89PNG"


def test_the_user_guide_quotes_no_measurement():
    # The hot/cold page is the guide; what runs measured is on the results page.
    guide = (DOCS / "hot_cold.md").read_text()
    assert "literalinclude" not in guide
    assert not re.search(r"\d+\.\d+ ?(ms|x\b|s per|points)", guide)
    assert len(guide.splitlines()) < 260


def test_benchmark_outputs_wrap_within_the_built_pages():
    css = (DOCS / "_static" / "wide_blocks.css").read_text()
    assert "div.highlight-text pre" in css and "pre-wrap" in css
    assert 'html_css_files = ["wide_blocks.css"]' in (DOCS / "conf.py").read_text()


def test_every_public_class_and_function_has_an_example():
    import importlib
    import inspect
    import pkgutil

    import pyg_orch

    # Every module but the benchmarks (a command line) and the kernels'
    # internals other than the aggregation's.
    names = [
        module.name
        for module in pkgutil.walk_packages(pyg_orch.__path__, "pyg_orch.")
        if not module.name.startswith(("pyg_orch.benchmark", "pyg_orch.kernels."))
    ] + ["pyg_orch.kernels.aggregate"]
    assert len(names) > 50
    missing = []
    for module_name in names:
        module = importlib.import_module(module_name)
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


def test_the_readme_starts_with_its_two_commands_and_ci_runs_the_second():
    readme = (ROOT / "README.md").read_text()
    first_block = re.search(r"```bash\n(.*?)```", readme, re.S)
    assert readme.index(first_block.group(0)) < readme.index("\n## ")
    install_and_train, install_and_test = first_block.group(1).splitlines()
    assert install_and_train == "pip install -e . && pyg-orch train"
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    # .ci/run runs the README's test command itself, then the slow tests.
    assert install_and_test in ci
    assert ci.index("pytest -m slow") > ci.index(install_and_test)
    # The README's command leaves the slow (and full) tests out, and says so
    # with times.
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert 'addopts = "--doctest-modules -m \\"not slow and not full\\"' in pyproject
    assert "`pytest -m full`" in readme
    assert re.search(r"`pytest` takes about \d+ min", readme)
    assert re.search(r"`pytest -m slow`[^.]*about \d+ min", readme)


def test_the_package_is_marked_typed_and_installs_the_marker():
    assert (ROOT / "pyg_orch" / "py.typed").is_file()
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert '"py.typed"' in pyproject.split("[tool.setuptools.package-data]")[1]
    assert "mypy --follow-imports=silent" in (ROOT / ".ci" / "run").read_text()
