"""Every relative link in the README, the docs and the other READMEs points at a file that exists and, where it names
a heading (``page.md#anchor``), at a heading that page has: moving a section between pages must move its links too.
No page repeats a heading, and every table row has its header's number of cells. docs/index.md links every docs
page, every file under docs/results/ is shown by a page, and the README stays a short guide."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
DOC_PAGES = sorted(DOCS.rglob("*.md"))
PAGES = [ROOT / "README.md", ROOT / "agents" / "README.md", *sorted((ROOT / "plugins").glob("*/README.md")), *DOC_PAGES]
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


def link_targets(page: Path) -> set[Path]:
    """The files and folders a page's relative links point at (anchors dropped)."""
    paths = (target.partition("#")[0] for target in relative_links(page))
    return {(page.parent / path).resolve() for path in paths if path}


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


def test_the_index_links_every_docs_page() -> None:
    """docs/index.md is the map: a page it does not link is a page a reader cannot find (a new page goes in the
    index in the same commit)."""
    linked = link_targets(DOCS / "index.md")
    missing = [str(page.relative_to(DOCS)) for page in DOC_PAGES if page.name != "index.md" and page not in linked]
    assert not missing, "docs/index.md does not link " + ", ".join(missing)


def test_every_results_file_is_shown_by_a_page() -> None:
    """docs/results/ holds what a page shows (a link to the file, or to a folder that holds it), nothing else: an
    experiment's other outputs stay in git history."""
    shown = set().union(*(link_targets(page) for page in PAGES))
    unshown = [
        str(file.relative_to(DOCS))
        for file in sorted((DOCS / "results").rglob("*"))
        if file.is_file() and file not in shown and not shown.intersection(file.parents)
    ]
    assert not unshown, "no page links " + ", ".join(unshown)


def test_the_readme_is_a_short_guide() -> None:
    """At most 160 lines, and a command a newcomer can run (a shell block with ``llm-gym`` or ``make``) within the
    first 40, before any long reference."""
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 160, f"README.md has {len(lines)} lines; move reference text into docs/ (docs/index.md)"
    first = "\n".join(lines[:40])
    blocks = re.findall(r"^```(?:bash|sh|console)\n(.*?)^```", first, re.MULTILINE | re.DOTALL)
    commands = [line for block in blocks for line in block.splitlines() if re.match(r"(llm-gym|make) ", line)]
    assert commands, "README.md shows no llm-gym or make command in a shell block within its first 40 lines"
