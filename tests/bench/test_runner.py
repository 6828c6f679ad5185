from __future__ import annotations

from pathlib import Path

import pytest

from llm_gym.bench.runner import run_suite
from llm_gym.bench.store import EpisodeStore
from llm_gym.bench.suite import load_suite


def test_a_suite_runs_once_and_a_rerun_plays_nothing(tiny_suite: Path, tmp_path: Path) -> None:
    suite = load_suite(tiny_suite)
    expected = {(s.entry, s.env_label, s.seed, s.task_id) for s in suite.episodes()}
    with EpisodeStore(tmp_path / "e.sqlite") as store:
        first = run_suite(suite, store, progress=False)
        assert (first.planned, first.already_stored, first.played) == (len(expected), 0, len(expected))
        again = run_suite(suite, store, progress=False)
        assert (again.already_stored, again.played) == (len(expected), 0)
        rows = list(store.episodes())
    assert {(r.entry, r.env_label, r.seed, r.task_id) for r in rows} == expected
    breakout = [r for r in rows if r.env_label == "breakout"]
    assert all(r.length == 20 and r.truncated for r in breakout)  # the suite's step cap
    assert all(r.raw_return is not None and r.score is not None for r in rows)
    ttt = [r for r in rows if r.env_label == "ttt-random"]
    assert all(r.score in (0.0, 0.5, 1.0) and r.raw_return in (-1.0, 0.0, 1.0) for r in ttt)
    assert {r.llm_gym_version for r in rows} == {"0.1.0"} and all(r.wall_seconds > 0 for r in rows)
    with EpisodeStore(tmp_path / "e.sqlite") as store:
        info = store.entry_info()
    assert {key[0] for key in info} == {"random", "scripted"}
    assert all(v["machine"]["cpus"] >= 1 for v in info.values())


def test_recorded_trajectories_carry_the_policys_probabilities(tiny_suite: Path, tmp_path: Path) -> None:
    suite = load_suite(tiny_suite).select(entries=["random"], envs=["ttt-random"])
    with EpisodeStore(tmp_path / "e.sqlite") as store:
        run_suite(suite, store, record=True, progress=False)
        rows = list(store.episodes())
        trajectories = [store.trajectory(r.id) for r in rows]
    for row, trajectory in zip(rows, trajectories, strict=True):
        steps = trajectory["steps"]
        assert len(steps) == row.length
        assert sum(s["reward"] for s in steps) == pytest.approx(row.episode_return)
        for step in steps:
            assert step["action"] in step["legal_ids"]
            assert len(step["probs"]) == len(step["legal"]) == len(step["legal_ids"])
            assert sum(step["probs"]) == pytest.approx(1.0)  # uniform over the legal moves
            assert "Board" in step["observation"] or step["observation"]


def test_a_changed_setting_is_a_new_set_of_episodes(tiny_suite: Path, tmp_path: Path) -> None:
    db = tmp_path / "e.sqlite"
    suite = load_suite(tiny_suite).select(entries=["random"], envs=["ttt-random"])
    with EpisodeStore(db) as store:
        run_suite(suite, store, progress=False)
    changed = tmp_path / "changed.toml"
    changed.write_text(
        tiny_suite.read_text().replace('agent = "random"\n', 'agent = "random"\nset = { seed = 5 }\n', 1)
    )
    with EpisodeStore(db) as store:
        report = run_suite(load_suite(changed).select(entries=["random"], envs=["ttt-random"]), store, progress=False)
        assert report.already_stored == 0 and report.played == 3
        assert store.count() == 6


def test_the_player_reports_every_env_step_for_the_progress_bar(tiny_suite: Path, tmp_path: Path) -> None:
    from llm_gym.bench.runner import plan, resolve_entries
    from llm_gym.bench.units import UnitPlayer

    suite = load_suite(tiny_suite).select(entries=["random"], envs=["breakout"])
    with EpisodeStore(tmp_path / "e.sqlite") as store:
        resolved, _ = resolve_entries(suite, store)
        units, _ = plan(suite, resolved, store)
    env = next(e for e in suite.envs if e.label == "breakout")
    steps: list[int] = []
    rows = []
    for unit in units:
        UnitPlayer().play(suite.name, resolved[unit.entry], env, unit, False, lambda r, _: rows.append(r), steps.append)
    assert rows and sum(steps) == sum(r.length for r in rows)  # every env step, across lockstep batches
    assert max(steps) <= max(u.num_envs for u in units)  # one report per lockstep step, one count per env acting
