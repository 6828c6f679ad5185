"""Render ``leaderboard/`` from the episode store alone: leaderboard.md, index.html, plots/, trajectories/,
results.jsonl. Everything here is generated; rerunning replaces it (the store file beside it is left alone)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import shutil
import uuid
from html import escape as escape_html
from pathlib import Path

from llm_gym.atomic import writing
from llm_gym.bench.render.exact import exact_tables, write_exact_lines
from llm_gym.bench.render.html import render_html
from llm_gym.bench.render.markdown import escape_markdown, render_markdown
from llm_gym.bench.render.plots import aggregate_plot, curve_plot, family_plot
from llm_gym.bench.render.tables import all_tables
from llm_gym.bench.render.viewer import write_episode, write_viewer
from llm_gym.bench.store import EpisodeStore, machines_of
from llm_gym.bench.summary import Leaderboard, summarise
from llm_gym.errors import ConfigError

GENERATED_FILES = ("leaderboard.md", "index.html", "results.jsonl")
GENERATED_DIRS = ("plots", "trajectories")


def render_leaderboard(store: EpisodeStore, suite: str, out: str | Path) -> Path:
    """Write the leaderboard of ``suite``'s stored episodes into ``out``; returns the index.html path."""
    out = Path(out)
    rows = list(store.episodes("suite = ?", (suite,)))
    if not rows:
        raise ConfigError(
            f"the store {store.path} holds no episodes of suite {suite!r}; run `llm-gym bench --suite {suite}` first"
        )
    board = summarise(suite, rows, store.entry_info(), store.trajectory_ids())
    # Everything is rendered into a hidden folder beside the old leaderboard, then moved into place: a full disk or
    # an unwritable --out is one line naming it, and the previous leaderboard stays whole.
    with writing(out, "the previous leaderboard is kept"):
        out.mkdir(parents=True, exist_ok=True)
        staging = out / f".render-{uuid.uuid4().hex[:8]}"
        try:
            staging.mkdir()
            _render_into(staging, store, suite, rows, board)
            _move_into_place(staging, out)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return out / "index.html"


def _render_into(out: Path, store: EpisodeStore, suite: str, rows: list, board: Leaderboard) -> None:
    (out / "plots").mkdir()
    plots = _plots(board, out / "plots")
    exact = store.exact_results(suite)
    tables = all_tables(board) + exact_tables(board, exact)
    by_id = {r.id: r for r in rows}
    if board.trajectories:
        (out / "trajectories").mkdir()
        write_viewer(out / "trajectories")
        for episode_id, *_ in board.trajectories:
            write_episode(by_id[episode_id], store.trajectory(episode_id), out / "trajectories")
    intro = _intro(board)
    footer = _footer()
    shown = f"`{suite}`" if re.fullmatch(r"[A-Za-z0-9_.+-]+", suite) else escape_markdown(suite)
    header = f"# llm-gym leaderboard: suite {shown}\n\n{escape_html(intro, quote=False)}\n"
    render_markdown(header, tables, plots, footer, out / "leaderboard.md")
    render_html(f"llm-gym leaderboard: suite {suite}", intro, tables, plots, footer, out / "index.html")
    with (out / "results.jsonl").open("w") as handle:
        for row in sorted(rows, key=lambda r: r.id or 0):
            handle.write(json.dumps(dataclasses.asdict(row), sort_keys=True, default=str) + "\n")
        write_exact_lines(handle, exact)


def _move_into_place(staging: Path, out: Path) -> None:
    """Replace the generated files and folders of ``out`` by those of ``staging`` (a folder renamed aside first)."""
    for name in GENERATED_DIRS:
        old = out / f".old-{name}-{uuid.uuid4().hex[:8]}"
        if (out / name).exists():
            os.rename(out / name, old)
        if (staging / name).exists():
            os.rename(staging / name, out / name)
        shutil.rmtree(old, ignore_errors=True)
    for name in GENERATED_FILES:
        os.replace(staging / name, out / name)


def _plots(board: Leaderboard, directory: Path) -> dict[str, list[Path]]:
    plots: dict[str, list[Path]] = {}
    made = aggregate_plot(board, directory / "aggregate.svg")
    if made:
        plots["aggregate"] = [made]
    for family in ("atari", "openspiel", "trace"):
        made = family_plot(board, family, directory / f"{family}.svg")
        if made:
            plots[family] = [made]
    for entry in board.entries:
        training = board.entry_info.get(entry, {}).get("training") or {}
        made = curve_plot(
            entry,
            training.get("curve") or [],
            directory / f"curve-{_file_name(entry)}.svg",
            training.get("curve_metric"),
            training.get("curve_x"),
        )
        if made:
            plots.setdefault("training", []).append(made)
    return plots


def _file_name(name: str) -> str:
    """``name`` as one safe file name (an entry name from a merged store may hold ``/`` or ``..``); a name that had
    to change gets a short hash, so two entries never share a file."""
    safe = re.sub(r"[^A-Za-z0-9_.+-]", "-", name).strip(".") or "entry"
    return safe if safe == name else f"{safe}-{hashlib.sha256(name.encode()).hexdigest()[:8]}"


def _intro(board: Leaderboard) -> str:
    machines = {
        json.dumps(m, sort_keys=True) for i in board.entry_info.values() for m in machines_of(i.get("machine") or {})
    }
    where = "; ".join(
        f"{m.get('processor')} x{m.get('cpus')}"
        + (f" + {', '.join(m['gpus'])}" if m.get("gpus") else "")
        + f" ({m.get('platform')})"
        for m in map(json.loads, sorted(machines))
    )
    return (
        f"Generated by `llm-gym bench --suite {board.suite} --leaderboard` from {board.episodes} stored episodes "
        f"({len(board.entries)} entries, {len(board.envs)} envs). Every entry plays the same seeds and task ids. "
        "Entries are ranked against each other only on the envs every one of them played; the per-env tables show "
        f"everyone. Benchmarked on: {where or 'unknown'}."
    )


def _footer() -> str:
    return (
        "Method: means with percentile-bootstrap 95% CIs (2000 resamples); win and exact-match rates with Wilson 95% "
        "intervals; aggregate = interquartile mean with a stratified bootstrap CI (rliable's estimator, Agarwal et "
        "al. 2021, implemented with NumPy/SciPy). Atari human-normalised scores use the random and human scores of "
        "Mnih et al. 2015 (Nature 518, Extended Data Table 2). Never edit these files by hand: they are regenerated "
        "from the episode store."
    )
