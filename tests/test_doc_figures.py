"""The docs' measured figures come from the saved benchmark outputs they name.

A prose paragraph (or table row) of README.md or docs/*.md that names a saved
output, ``docs/benchmarks/NAME.txt``, may only quote decimal figures printed in
that file; a decimal speed-up (``3.10x``) may only appear in prose that names the
file it comes from. Fenced blocks (pasted outputs, commands, code) are not prose.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SAVED = ROOT / "docs" / "benchmarks"
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

_FENCED = re.compile(r"^[ \t]*(`{3,}|~{3,}).*?^[ \t]*\1[ \t]*$", re.M | re.S)
_SAVED_NAME = re.compile(r"(?:docs/)?benchmarks/(\w+)\.txt")
# A decimal that is not part of a longer number or a version (0.6.18).
_DECIMAL = re.compile(r"(?<![\w.])\d+\.\d+(?![\d.])")
_SPEED_UP = re.compile(r"(?<![\w.])\d+\.\d+x\b")


def prose_units(page: Path) -> list[str]:
    """The page's paragraphs outside fenced blocks; a table row is its own unit."""
    text = _FENCED.sub("\n\n", page.read_text())
    units = []
    for paragraph in re.split(r"\n[ \t]*\n", text):
        lines = paragraph.strip().splitlines()
        if lines and all(line.lstrip().startswith("|") for line in lines):
            units.extend(lines)
        elif lines:
            units.append(" ".join(lines))
    return units


def _decimals(text: str) -> set[str]:
    return set(_DECIMAL.findall(text))


def _cases() -> list[tuple[str, str]]:
    return [
        (str(page.relative_to(ROOT)), unit)
        for page in PAGES
        for unit in prose_units(page)
        if _SAVED_NAME.search(unit) or _SPEED_UP.search(unit)
    ]


def test_the_pages_quote_saved_outputs():
    names = {name for _, unit in _cases() for name in _SAVED_NAME.findall(unit)}
    # The figures fixed in the issue: one source for the epoch, pipeline, gpu,
    # aggregate and sampler speed-ups, and the Cora comparison.
    assert {"epoch", "pipeline", "gpu", "aggregate", "sampler"} <= names
    assert "train_compare_cora" in names


@pytest.mark.parametrize(("page", "unit"), _cases())
def test_prose_figures_are_printed_in_the_saved_output_they_name(page, unit):
    names = _SAVED_NAME.findall(unit)
    assert names, f"{page}: a speed-up without a saved output named next to it: {unit}"
    printed: set[str] = set()
    for name in names:
        saved = SAVED / f"{name}.txt"
        assert saved.is_file(), f"{page} names {name}.txt, which is missing"
        text = saved.read_text()
        assert text.startswith("$ "), f"{name}.txt: the first line must be its command"
        printed |= _decimals(text)
    missing = sorted(_decimals(unit) - printed)
    assert not missing, (
        f"{page}: {missing} are not printed in {', '.join(set(names))}.txt: {unit}"
    )


def test_every_included_saved_output_exists():
    included = re.compile(r"literalinclude\}\s+benchmarks/(\w+)\.txt")
    for page in PAGES:
        for name in included.findall(page.read_text()):
            assert (SAVED / f"{name}.txt").is_file(), f"{page.name} includes {name}.txt"
