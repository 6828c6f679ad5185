"""The committed leaderboard/ is generated: rendering the committed episode store again gives every file of it byte
for byte (leaderboard.md, index.html, results.jsonl, the plots, the trajectory viewer and its data files). A change
to the renderer re-renders leaderboard/ in the same commit (`llm-gym bench --suite standard --render-only
--leaderboard`), and a hand edit of a generated file fails here."""

from __future__ import annotations

import shutil
from pathlib import Path

from llm_gym.bench.entries import REPO_ROOT
from llm_gym.bench.render import render_leaderboard
from llm_gym.bench.store import EpisodeStore

COMMITTED = REPO_ROOT / "leaderboard"
STORE = "episodes.sqlite"


def files_under(folder: Path) -> dict[str, bytes]:
    return {
        str(path.relative_to(folder)): path.read_bytes()
        for path in sorted(folder.rglob("*"))
        if path.is_file() and not path.name.startswith(STORE)
    }


def test_the_committed_leaderboard_is_its_store_rendered(tmp_path: Path) -> None:
    shutil.copy(COMMITTED / STORE, tmp_path / STORE)  # the store is only read; a copy keeps the repository untouched
    with EpisodeStore(tmp_path / STORE) as store:
        render_leaderboard(store, "standard", tmp_path)
    rendered, committed = files_under(tmp_path), files_under(COMMITTED)
    assert sorted(rendered) == sorted(committed), "files differ: " + ", ".join(
        sorted(set(rendered).symmetric_difference(committed))
    )
    stale = [name for name in committed if committed[name] != rendered[name]]
    assert not stale, (
        "leaderboard/ differs from a render of its store (`llm-gym bench --suite standard --render-only --leaderboard`): "
        + ", ".join(stale)
    )
