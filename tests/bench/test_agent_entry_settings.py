"""An ``agent = NAME`` entry's ``set`` is checked as ``llm-gym play --agent NAME --set`` checks it: a training-only
field is refused in one line naming the entry and its suite (the untrained policy never reads it, yet it would change
the entry's identity), before anything is played; the committed suites have no such setting. Real suite files, real
agents resolved, a real SQLite store."""

from __future__ import annotations

from pathlib import Path

import pytest
from bench_suites import HELDOUT, RANDOM, Raw, entry, env, suite  # tests/bench_suites.py
from typer.testing import CliRunner

from llm_gym.bench.entries import REPO_ROOT, resolve_entry
from llm_gym.bench.runner import resolve_entries
from llm_gym.bench.store import EpisodeStore
from llm_gym.bench.suite import SuiteEntry, load_suite
from llm_gym.cli import build_app

SUITE = suite(
    "a baseline beside an agent entry with settings",
    HELDOUT,
    env("ttt", "OpenSpiel-tic_tac_toe-v0", args={"opponent": "random"}),
    RANDOM,
    entry("learner", agent="AGENT", set=Raw("SETTINGS")),
    episodes=2,
    max_steps=10,
)


def bench(tmp_path: Path, agent: str, settings: str):
    path = tmp_path / "mine.toml"
    path.write_text(SUITE.replace("AGENT", agent).replace("SETTINGS", settings))
    db = tmp_path / "e.sqlite"
    result = CliRunner().invoke(build_app(), ["bench", "--suite", str(path), "--db", str(db), "--no-progress"])
    return result, db


@pytest.mark.parametrize(
    ("agent", "settings", "expected"),
    [
        (
            "ppo_lora",
            "{ learning_rate = 0.1 }",
            "error: learning_rate=0.1 only affects training, not how an untrained ppo_lora plays: drop it from the set "
            "of entry 'learner' in suite 'mine' (to train with it: llm-gym train --agent ppo_lora --set "
            "learning_rate=0.1)",
        ),
        (
            "lm",
            '{ model = "smollm2-135m", num_envs = 4 }',
            "error: num_envs=4 only affects training, not how lm plays: drop it from the set of entry 'learner' in "
            "suite 'mine' (the entry's own num_envs (beside set) or the suite's sets how many envs it plays at once)",
        ),
        (
            "curriculum",
            "{ window = 5, base_config = { learning_rate = 0.1, threads = 1 } }",
            "error: base_config.learning_rate=0.1, window=5 only affect training, not how an untrained curriculum "
            "plays: drop them from the set of entry 'learner' in suite 'mine' (to train with them: llm-gym train "
            """--agent curriculum --set window=5 --set base_config='{"learning_rate": 0.1}')""",
        ),
    ],
)
def test_a_training_only_setting_of_an_agent_entry_is_one_line(
    tmp_path: Path, agent: str, settings: str, expected: str
) -> None:
    result, db = bench(tmp_path, agent, settings)
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert result.exit_code == 2 and lines == [expected], result.output
    with EpisodeStore(db) as store:
        assert list(store.episodes()) == [], "nothing is played before every entry checks out"


def test_settings_an_untrained_policy_reads_are_taken(tmp_path: Path) -> None:
    """A training-only field at its default, a speed-only one and one that plays are all accepted; only the last
    changes the identity (the suite then plays, the store holds its episodes)."""

    def identity(agent: str, **settings: object) -> str:
        return resolve_entry(SuiteEntry(name="learner", agent=agent, settings=settings), "mine").entry_hash

    plain = identity("lm")
    assert identity("lm", num_envs=8, threads=2, batch_size=4) == plain  # num_envs = 8 is lm's default
    assert identity("lm", temperature=0.5) != plain
    curriculum = identity("curriculum")
    assert identity("curriculum", base_config={"threads": 2}) == curriculum  # speed-only for ppo_lora
    assert identity("curriculum", base_config={"advantage": "group"}) == curriculum  # ppo_lora's default
    assert identity("curriculum", base_config={"quantize": "int8"}) != curriculum

    result, db = bench(tmp_path, "mcts", "{ simulations = 4, total_steps = 10000 }")
    assert result.exit_code == 0, result.output
    with EpisodeStore(db) as store:
        assert sorted({row.entry for row in store.episodes()}) == ["learner", "random"]


PLAYED_ELSEWHERE = {("smoke", "mcts"), ("smoke", "lm-smollm2-135m-generate")}
"""Smoke entries named as standard's but with cheaper settings (fewer simulations, shorter answers): the committed
store (rendered from the standard suite) holds none of their episodes."""


def test_no_entry_of_a_committed_suite_is_refused_and_stored_identities_stay(tmp_path: Path) -> None:
    """Every committed suite resolves (the lm entries set num_envs = 8, its default), and every agent entry of a
    committed suite that the committed store holds episodes of keeps the identity they are stored under."""
    import shutil

    shutil.copy(REPO_ROOT / "leaderboard" / "episodes.sqlite", tmp_path / "copy.sqlite")  # only read; a copy
    with EpisodeStore(tmp_path / "copy.sqlite") as store:
        stored = store.entry_info()
        checked = []
        for path in sorted((REPO_ROOT / "benchmarks" / "suites").glob("*.toml")):
            suite = load_suite(path.stem)
            resolved, _ = resolve_entries(suite, store)
            for name, entry in resolved.items():
                if entry.checkpoint is None and (suite.name, name) not in PLAYED_ELSEWHERE:
                    assert (name, entry.entry_hash) in stored, f"{path.stem}: {name}"
                    checked.append(f"{suite.name}/{name}")
    assert len(checked) == 17, checked  # constant-left counts twice: in atari and in standard, which includes it
