"""Every relative link in the README and the docs points at a file that exists and, where it names a heading
(``page.md#anchor``), at a heading that page has: moving a section between pages must move its links too. No page
repeats a heading, and every table row has its header's number of cells."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)


def prose(page: Path) -> str:
    """A page's text with its code blocks blanked (their lines kept, so line numbers still match the file)."""
    return FENCE.sub(lambda block: "\n" * block.group().count("\n"), page.read_text())


def headings(page: Path) -> list[str]:
    """A page's heading lines outside code blocks, in order."""
    return [line.strip() for line in prose(page).splitlines() if line.startswith("#")]


def anchors(page: Path) -> set[str]:
    """GitHub's heading anchors of a page: lower case, punctuation other than - and _ dropped, spaces to -."""
    titles = (line.lstrip("#").strip().lower() for line in headings(page))
    return {re.sub(r"[^\w\- ]", "", title).replace(" ", "-") for title in titles}


def relative_links(page: Path) -> list[str]:
    return [t for t in LINK.findall(prose(page)) if not re.match(r"[a-z]+:", t)]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(page: Path) -> None:
    broken = []
    for target in relative_links(page):
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            broken.append(f"{target}: no such file")
        elif anchor and file.suffix == ".md" and anchor not in anchors(file):
            broken.append(f"{target}: {file.name} has no heading with that anchor")
    assert not broken, f"{page.relative_to(ROOT)}: " + "; ".join(broken)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_page_repeats_a_heading(page: Path) -> None:
    """A repeated heading makes ``page.md#anchor`` ambiguous (GitHub numbers the second one) and is how a pasted-twice
    block shows: an edit once duplicated about 100 lines of a page and every link still resolved."""
    repeated = sorted(h for h, n in Counter(headings(page)).items() if n > 1)
    assert not repeated, f"{page.relative_to(ROOT)} repeats " + "; ".join(repeated)


def ragged_table_rows(text: str) -> list[int]:
    """Line numbers of table rows whose cell count differs from their table's header row (an unescaped ``|`` splits
    a cell, in code spans too, as GitHub renders tables)."""
    ragged, header = [], None
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.startswith("|"):
            header = None
            continue
        cells = len(re.findall(r"(?<!\\)\|", line))
        if header is None:
            header = cells
        elif cells != header:
            ragged.append(number)
    return ragged


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_table_rows_have_their_header_cells(page: Path) -> None:
    """A row with an extra or a missing ``|`` shifts every later cell under the wrong column, and nothing else shows
    it: an edit once added a column to a results table and left one row with an empty cell before the new value."""
    ragged = ragged_table_rows(prose(page))
    assert not ragged, f"{page.relative_to(ROOT)}: table rows with the wrong number of cells at lines {ragged}"
