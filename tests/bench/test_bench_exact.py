"""Exact values as a bench metric (llm_gym/bench/exact.py): computed once per (entry, env) identity with the policy the
entry plays with, stored in the store's exact table, carried by --merge, rendered and escaped; an exact env that
cannot be walked is refused when the suite loads, and marking an env exact leaves its episodes' identity alone."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest
from bench_suites import HELDOUT, entry, env, suite  # tests/bench_suites.py
from typer.testing import CliRunner

from llm_gym.bench.entries import env_hash, resolve_entry
from llm_gym.bench.merge import merge_store
from llm_gym.bench.render import render_leaderboard
from llm_gym.bench.runner import resolve_entries, run_suite
from llm_gym.bench.store import EpisodeStore
from llm_gym.bench.store_file import has_exact_table
from llm_gym.bench.suite import SuiteEnv, load_suite
from llm_gym.bench.units import UnitPlayer
from llm_gym.cli import build_app
from llm_gym.errors import ConfigError
from llm_gym.training.exact import evaluate_exact

SUITE = suite(
    "exact values of small games",
    HELDOUT,
    env("ttt-random", "OpenSpiel-tic_tac_toe-v0", args={"opponent": "random"}, exact=True),
    env("kuhn-random", "OpenSpiel-kuhn_poker-v0", args={"opponent": "random"}, exact=True),
    env("kuhn-mcts", "OpenSpiel-kuhn_poker-v0", args={"opponent": "mcts", "mcts": {"simulations": 5}}),
    entry("random", agent="random", envs=["kuhn-*"]),
    entry("solver", agent="solver", envs=["ttt-*"]),
    entry("mcts", agent="mcts", set={"simulations": 5}, envs=["kuhn-*"]),
    episodes=2,
    num_envs=2,
)


def _suite(tmp_path: Path, text: str = SUITE, name: str = "exact.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def _values(db: Path) -> dict[tuple[str, str], tuple]:
    with EpisodeStore(db) as store:
        return {
            (r.entry, r.env_label): (r.entry_hash, r.env_hash, json.dumps(r.result, sort_keys=True), r.created_at)
            for r in store.exact_results()
        }


def test_exact_values_are_computed_once_per_identity_and_never_again(tmp_path: Path) -> None:
    suite = load_suite(_suite(tmp_path))
    db = tmp_path / "e.sqlite"
    with EpisodeStore(db) as store:
        first = run_suite(suite, store, progress=False)
        assert first.played == 2 * 5 and first.exact is not None
        # Only the exact envs: solver on tic-tac-toe, random and mcts on Kuhn poker (not on kuhn-mcts).
        assert (first.exact.planned, first.exact.already_stored, first.exact.computed) == (3, 0, 3)
        rows = {(r.entry, r.env_label): r for r in store.exact_results(suite.name)}
    assert set(rows) == {("solver", "ttt-random"), ("random", "kuhn-random"), ("mcts", "kuhn-random")}

    solver = rows[("solver", "ttt-random")].result
    assert solver["loss"] == 0 and solver["worst_return"] == 0  # the solver never loses, whatever the opponent does
    assert solver["greedy"] and solver["exploitability"] is None
    assert solver["win"] + solver["draw"] + solver["loss"] == pytest.approx(1)
    uniform = rows[("random", "kuhn-random")].result
    assert not uniform["greedy"] and uniform["expected_return"] == pytest.approx(0, abs=1e-12)  # read by its probs
    assert uniform["exploitability"] == pytest.approx(0.458333, abs=1e-5)  # open_spiel's, for the uniform policy
    assert uniform["best_response_return"] == pytest.approx(0.458333, abs=1e-5)
    # Stored under the identity of the entry's episodes, with where and how long it took.
    with EpisodeStore(db) as store:
        for (entry, label), row in rows.items():
            episode = next(r for r in store.episodes("entry=? AND env_label=?", (entry, label)))
            assert (row.entry_hash, row.env_hash) == (episode.entry_hash, episode.env_hash)
            assert row.machine["cpus"] >= 1 and row.seconds >= 0 and row.llm_gym_version == episode.llm_gym_version

    # The same values as evaluating the entry's policy directly (a fresh policy: the solver is deterministic).
    resolved, _ = resolve_entries(suite)
    policy, env_config = resolved["solver"].policy(suite.env("ttt-random"))
    direct = evaluate_exact(policy, env_config).as_dict()
    assert {k: v for k, v in direct.items() if k != "seconds"} == {k: v for k, v in solver.items() if k != "seconds"}

    before = _values(db)
    with EpisodeStore(db) as store:
        again = run_suite(suite, store, progress=False)
    assert again.played == 0 and again.exact is not None
    assert (again.exact.planned, again.exact.already_stored, again.exact.computed) == (3, 3, 0)
    assert _values(db) == before  # not recomputed: the same rows, the same times


def test_exact_values_use_the_policy_object_the_entry_plays_with(tmp_path: Path) -> None:
    """A tiny LM entry on Kuhn poker: its episodes and its exact evaluation share one loaded policy."""
    from llm_gym.bench.exact import run_exact
    from llm_gym.bench.runner import plan
    from llm_gym.lm.testing import make_tiny_model

    model = make_tiny_model(tmp_path / "model", layers=2, hidden=32)
    settings = f'{{ model = "{model}", action_mode = "score" }}'
    text = f'{SUITE}\n[[entries]]\nname = "tiny-lm"\nagent = "lm"\nset = {settings}\nenvs = ["kuhn-random"]\n'
    suite = load_suite(_suite(tmp_path, text)).select(entries=["tiny-lm"])
    with EpisodeStore(tmp_path / "e.sqlite") as store:
        resolved, _ = resolve_entries(suite, store)
        units, _ = plan(suite, resolved, store)
        player = UnitPlayer()
        for unit in units:
            player.play(suite.name, resolved[unit.entry], suite.env(unit.env_label), unit, False, lambda r, t: None)
        played_with = player.policy_for(resolved["tiny-lm"], suite.env("kuhn-random"))
        report = run_exact(suite, resolved, store, player.policy_for, {"cpus": 1}, progress=False)
        assert report.computed == 1 and player.policy_for(resolved["tiny-lm"], suite.env("kuhn-random")) is played_with
        (row,) = store.exact_results()
    policy, env_config = played_with
    direct = evaluate_exact(policy, env_config)  # greedy: the same answers again
    assert row.result["expected_return"] == pytest.approx(direct.expected_return)
    assert row.result["positions"] == direct.positions and row.result["greedy"]


def test_an_entry_whose_policy_cannot_be_walked_is_reported_and_the_rest_go_on(tmp_path: Path) -> None:
    """An LM that shows earlier turns (history) changes the env it plays: exact evaluation refuses that env for this
    entry alone, in one line; its episodes and the other entries' exact values are stored."""
    from llm_gym.lm.testing import make_tiny_model

    model = make_tiny_model(tmp_path / "model", layers=2, hidden=32)
    settings = f'{{ model = "{model}", action_mode = "score", history = 2 }}'
    text = f'{SUITE}\n[[entries]]\nname = "tiny-lm-history"\nagent = "lm"\nset = {settings}\nenvs = ["kuhn-random"]\n'
    suite = load_suite(_suite(tmp_path, text)).select(entries=["tiny-lm-history", "random"], envs=["kuhn-random"])
    with EpisodeStore(tmp_path / "e.sqlite") as store:
        report = run_suite(suite, store, progress=False)
        assert report.played == 4 and report.exact is not None
        assert report.exact.computed == 1 and list(report.exact.failed) == ["tiny-lm-history on kuhn-random"]
        assert "history" in report.exact.failed["tiny-lm-history on kuhn-random"]
        assert [r.entry for r in store.exact_results()] == ["random"]


def test_exact_values_survive_a_merge_once_each(tmp_path: Path) -> None:
    path = _suite(tmp_path)
    here, old, there = tmp_path / "here.sqlite", tmp_path / "old.sqlite", tmp_path / "there.sqlite"
    for db in (here, old):  # the older kind of store: episodes only, no exact table
        with EpisodeStore(db) as store:
            run_suite(load_suite(path).select(envs=["kuhn-mcts"]), store, progress=False)
            assert not has_exact_table(store.conn)
    with EpisodeStore(there) as store:
        run_suite(load_suite(path), store, progress=False)
        # The same store also holds another suite, with an exact value of its own.
        another = _suite(tmp_path, SUITE.replace('name = "solver"', 'name = "solver-b"'), "another.toml")
        run_suite(load_suite(another).select(entries=["solver-b"]), store, progress=False)
        assert len(store.exact_results()) == 4
    theirs = {key: value for key, value in _values(there).items() if key[0] != "solver-b"}

    with EpisodeStore(here) as store:
        report = merge_store(store, there, "exact")
        assert report.exact == 3 and report.left_out == {"another": 2}  # suite exact's values only
        assert merge_store(store, there, "exact").exact == 0  # idempotent
        assert {name for name, _ in store.entry_info()} == {"random", "solver", "mcts"}
    assert _values(here) == theirs  # rows as they were computed there: the same values, times and identities

    # An older store without the table merged into one with it adds no exact value and changes none.
    with EpisodeStore(there) as store:
        assert merge_store(store, old, "exact").exact == 0
    assert {key: value for key, value in _values(there).items() if key[0] != "solver-b"} == theirs


def test_a_store_without_exact_values_opens_and_renders_without_being_changed(tmp_path: Path) -> None:
    path = _suite(tmp_path)
    db = tmp_path / "e.sqlite"
    with EpisodeStore(db) as store:
        run_suite(load_suite(path).select(envs=["kuhn-mcts"]), store, progress=False)
    with EpisodeStore(db) as store:
        render_leaderboard(store, "exact", tmp_path / "board")
        assert not has_exact_table(store.conn)  # reading and rendering write no table
    assert "Exact values" not in (tmp_path / "board" / "leaderboard.md").read_text()
    lines = (tmp_path / "board" / "results.jsonl").read_text().splitlines()
    assert lines and all("kind" not in json.loads(line) for line in lines)


def test_exact_values_are_rendered_per_env_and_escaped(tmp_path: Path) -> None:
    hostile = "<script>alert(1)</script>|`x`[y](javascript:z)"
    text = SUITE.replace('name = "random"', f'name = "{hostile}"').replace(
        'label = "kuhn-random"', 'label = "kuhn-<b>random</b>"'
    )
    suite = load_suite(_suite(tmp_path, text))
    with EpisodeStore(tmp_path / "e.sqlite") as store:
        run_suite(suite, store, progress=False)
        render_leaderboard(store, suite.name, tmp_path / "board")
    markdown = (tmp_path / "board" / "leaderboard.md").read_text()
    page = (tmp_path / "board" / "index.html").read_text()
    section = markdown[markdown.index("## Exact values") :]
    assert "### ttt-random: exact values" in section and "### kuhn-&lt;b&gt;random&lt;/b&gt;: exact values" in section
    # The solver: a draw at worst against an adversary that knows it, never a loss against random.
    assert "| solver | solver | greedy | 0.9556 | 95.56% | 4.44% | 0.00% | 0.0000 | 545 |" in section
    assert "| worst vs adversary |" in section
    assert "| share of best response |" in section and "| exploitability |" in section
    assert "&lt;script&gt;alert(1)&lt;/script&gt;\\|\\`x\\`[y\\](javascript:z)" in section
    for raw in ("<script", "<b>"):
        assert raw not in markdown, raw
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page and "<script" not in page
    assert page.index("Exact values") > page.index("OpenSpiel (opponent ladder)")
    exact_lines = [json.loads(line) for line in (tmp_path / "board" / "results.jsonl").read_text().splitlines()]
    exact_lines = [line for line in exact_lines if line.get("kind") == "exact"]
    assert {(line["entry"], line["env_label"]) for line in exact_lines} == {
        ("solver", "ttt-random"), (hostile, "kuhn-<b>random</b>"), ("mcts", "kuhn-<b>random</b>"),
    }  # fmt: skip
    assert all(line["result"]["positions"] > 0 for line in exact_lines)


def test_bench_reports_exact_values_on_the_command_line(tmp_path: Path) -> None:
    path = _suite(tmp_path)
    args = ["bench", "--suite", str(path), "--entry", "solver", "--out", str(tmp_path / "board"), "--json"]
    first = CliRunner().invoke(build_app(), args)
    assert first.exit_code == 0, first.output
    assert json.loads(first.output)["exact"] == {
        "planned": 1, "already_stored": 0, "computed": 1, "seconds": json.loads(first.output)["exact"]["seconds"],
        "failed": {},
    }  # fmt: skip
    again = CliRunner().invoke(build_app(), args[:-1])
    assert again.exit_code == 0 and "exact values: 0 computed, 1 already stored" in again.output


@pytest.mark.parametrize(
    ("env", "says"),
    [
        ('id = "OpenSpiel-tic_tac_toe-v0"\nargs = { opponent = "mcts" }', "uniformly random opponent"),
        ('id = "LLMBreakout-text-v0"', "walks OpenSpiel game trees"),
        ('id = "OpenSpiel-kuhn_poker-v0"\ntask_ids = [0, 1]', "drop task_ids or exact"),
        ('id = "OpenSpiel-tic_tac_toe-v0"\nmax_steps = 3', "max_steps = 3 cuts episodes"),
        ('id = "OpenSpiel-tic_tac_toe-v0"\nargs = { history = 2 }', "drop history="),
    ],
)
def test_an_exact_env_that_cannot_be_walked_is_refused_when_the_suite_loads(
    tmp_path: Path, env: str, says: str
) -> None:
    text = f'[[envs]]\nlabel = "bad"\n{env}\nexact = true\n\n[[entries]]\nname = "random"\nagent = "random"\n'
    with pytest.raises(ConfigError, match="bad.*exact = true, but") as raised:
        load_suite(_suite(tmp_path, text))
    assert says in str(raised.value) and "\n" not in str(raised.value)


def test_exact_must_be_true_or_false(tmp_path: Path) -> None:
    text = '[[envs]]\nid = "OpenSpiel-kuhn_poker-v0"\nexact = "yes"\n\n[[entries]]\nname = "r"\nagent = "random"\n'
    with pytest.raises(ConfigError, match="exact must be a bool"):
        load_suite(_suite(tmp_path, text))


def test_marking_an_env_exact_keeps_its_episodes_identity(tmp_path: Path) -> None:
    plain = SuiteEnv("ttt", "OpenSpiel-tic_tac_toe-v0", {"opponent": "random"})
    marked = SuiteEnv("ttt", "OpenSpiel-tic_tac_toe-v0", {"opponent": "random"}, exact=True)
    assert env_hash(plain) == env_hash(marked) and env_hash(plain, False) == env_hash(marked, False)
    # The committed store's episodes of the standard suite's exact envs keep the hashes they were stored under.
    from llm_gym.bench.entries import REPO_ROOT

    standard = load_suite("standard")
    exact_envs = [env for env in standard.envs if env.exact]
    assert {env.label for env in exact_envs} == {"tic_tac_toe-vs-random", "kuhn_poker-vs-random"}
    copy = tmp_path / "committed.sqlite"  # a copy: reading a WAL store leaves files beside it
    shutil.copy(REPO_ROOT / "leaderboard" / "episodes.sqlite", copy)
    store = sqlite3.connect(f"file:{copy}?mode=ro", uri=True)
    try:
        for name in ("random", "mcts", "lm-smollm2-135m"):
            identity = resolve_entry(standard.entry(name), standard.name)
            for env in exact_envs:
                stored = store.execute(
                    "SELECT DISTINCT env_hash FROM episodes WHERE entry=? AND env_label=?", (name, env.label)
                ).fetchall()
                assert stored == [(env_hash(env, identity.reads_text),)], (name, env.label)
    finally:
        store.close()
