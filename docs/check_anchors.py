"""Finds links in built HTML whose ``#anchor`` does not exist on the local page.

Sphinx's ``-W`` does not catch these: a viewcode ``[docs]`` back-link or a
hand-written ``page.html#id`` can point at an id that no page defines, and the
browser silently lands at the top of the page.

Usage: ``python docs/check_anchors.py docs/_build/html`` (exit status 1 and one
line per dangling anchor if there are any).
"""

from __future__ import annotations

import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit


class _Page(HTMLParser):
    """Collects the ids a page defines and the hrefs it links to."""

    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()
        self.hrefs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        # `<a name=...>` is the pre-HTML5 way of defining an anchor.
        for key in ("id", "name") if tag == "a" else ("id",):
            if values.get(key):
                self.ids.add(values[key])
        if tag == "a" and values.get("href"):
            self.hrefs.append(values["href"])


def _parse(path: Path) -> _Page:
    page = _Page()
    page.feed(path.read_text(encoding="utf-8", errors="replace"))
    return page


def _local_target(page: Path, href: str) -> tuple[Path, str] | None:
    """The local HTML file and fragment an href points at, or None."""
    url = urlsplit(href)
    if url.scheme or url.netloc or not url.fragment:
        return None  # another site, or no anchor to check
    target = (page.parent / unquote(url.path)).resolve() if url.path else page
    if target.suffix != ".html":
        return None
    return target, unquote(url.fragment)


def dangling_anchors(root: Path) -> list[str]:
    """Lists ``page: href`` for every link to a missing id on a local page.

    Args:
        root: The HTML output directory of a Sphinx build.

    Returns:
        One ``"source.html: href"`` string per dangling link, sorted; a link to
        a page that does not exist counts as dangling too.
    """
    root = Path(root).resolve()
    pages = {path: _parse(path) for path in sorted(root.rglob("*.html"))}
    dangling = []
    for path, page in pages.items():
        for href in page.hrefs:
            target = _local_target(path, href)
            if target is None:
                continue
            target_page = pages.get(target[0])
            if target_page is None or target[1] not in target_page.ids:
                dangling.append(f"{path.relative_to(root)}: {href}")
    return sorted(set(dangling))


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python docs/check_anchors.py HTML_DIR", file=sys.stderr)
        return 2
    root = Path(argv[0])
    if not root.is_dir():
        print(f"{root} is not a directory", file=sys.stderr)
        return 2
    dangling = dangling_anchors(root)
    for line in dangling:
        print(line)
    print(f"{len(dangling)} dangling anchor(s) in {root}", file=sys.stderr)
    return 1 if dangling else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
