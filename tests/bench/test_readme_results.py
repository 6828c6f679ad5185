"""The README's results table is generated from the committed episode store: every number in it is a leaderboard
cell (llm_gym/bench/readme.py), so it can neither drift from the leaderboard nor be edited by hand."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from llm_gym.bench.entries import REPO_ROOT
from llm_gym.bench.readme import END, START, load_spec, readme_block, table_from_store, write_into_readme
from llm_gym.bench.store import EpisodeStore
from llm_gym.errors import ConfigError
from llm_gym.testing import error_line, invoke

README = REPO_ROOT / "README.md"
STORE = REPO_ROOT / "leaderboard" / "episodes.sqlite"


def test_the_readme_table_is_what_the_store_gives(tmp_path: Path) -> None:
    shutil.copy(STORE, tmp_path / "episodes.sqlite")  # only read; a copy keeps the repository untouched
    with EpisodeStore(tmp_path / "episodes.sqlite") as store:
        generated = table_from_store(store, load_spec())
    assert readme_block(README) == generated, (
        "README.md's results table differs from the store: run "
        "`llm-gym bench --suite standard --render-only --readme README.md` (never edit the numbers by hand)"
    )


def test_every_row_links_an_entry_of_the_leaderboard() -> None:
    leaderboard = (REPO_ROOT / "leaderboard" / "leaderboard.md").read_text()
    for row in load_spec().rows:
        assert f"| {row.entry} |" in leaderboard, row.entry


def test_the_cli_writes_the_table_between_the_markers(tmp_path: Path) -> None:
    shutil.copy(STORE, tmp_path / "episodes.sqlite")
    readme = tmp_path / "README.md"
    readme.write_text(f"# title\n\nbefore\n\n{START} -->\n| stale | numbers |\n{END}\n\nafter\n")
    args = ["bench", "--suite", "standard", "--db", str(tmp_path / "episodes.sqlite"), "--readme", str(readme)]
    result = invoke(*args, "--render-only", "--out", str(tmp_path / "board"))
    assert result.exit_code == 0, result.output
    text = readme.read_text()
    assert text.startswith("# title\n\nbefore\n\n") and text.endswith("\n\nafter\n") and "stale" not in text
    assert readme_block(readme) == readme_block(README)
    assert write_into_readme(readme, readme_block(README)) is False  # unchanged: nothing rewritten

    readme.write_text("# no table here\n")
    assert "no such file with a generated results table" in error_line(invoke(*args, "--render-only"))
    with pytest.raises(ConfigError, match="no generated results table"):
        write_into_readme(readme, "x")


def test_a_cell_leads_with_the_stored_exact_value_of_its_entry(tmp_path: Path) -> None:
    from llm_gym.bench.store import ExactRow

    shutil.copy(STORE, tmp_path / "episodes.sqlite")
    spec = load_spec()
    row = next(r for r in spec.rows if any(label.startswith("tic_tac_toe-vs-random") for label in r.envs))
    with EpisodeStore(tmp_path / "episodes.sqlite") as store:
        before = table_from_store(store, spec)
        result = {"expected_return": 0.8125, "win": 0.9, "draw": 0.0125, "loss": 0.0875}
        store.add_exact(ExactRow(row.entry, "h", "tic_tac_toe-vs-random", "e", spec.suite, result, 1.0, {}, "0"))
        after = table_from_store(store, spec)
    line = next(line for line in after.splitlines() if f"`{row.entry}`" in line)
    first_env = line.split(" | ")[2].split(" / ")[0]  # a row may name several envs: "a / b"
    assert first_env.startswith("exact +0.812 (") and first_env.endswith(")")  # the sampled W/D/L stays beside it
    assert [a for a, b in zip(before.splitlines(), after.splitlines(), strict=True) if a != b] == [
        next(line for line in before.splitlines() if f"`{row.entry}`" in line)
    ]
