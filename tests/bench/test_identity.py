"""The identity of stored episodes: an env's observation-text version keys the episodes of agents that read the text,
and nothing else (a real suite file, real agents resolved, a real SQLite store)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from bench_suites import HELDOUT, RANDOM, entry, env, store_draws, suite  # tests/bench_suites.py

from llm_gym.bench.entries import env_hash, resolve_entry, short_hash
from llm_gym.bench.runner import plan, resolve_entries
from llm_gym.bench.store import EpisodeRow, EpisodeStore
from llm_gym.bench.suite import SuiteEntry, SuiteEnv, load_suite
from llm_gym.envs.openspiel.catalog import text_versions

SUITE = suite(
    "a game whose text changed (kuhn poker) and one whose text did not (tic-tac-toe)",
    HELDOUT,
    env("kuhn", "OpenSpiel-kuhn_poker-v0", args={"opponent": "random"}),
    env("ttt", "OpenSpiel-tic_tac_toe-v0", args={"opponent": "random"}),
    RANDOM,
    entry("lm", agent="lm", set={"model": "smollm2-135m", "action_mode": "score"}),
    episodes=3,
)


def hash_before_text_versions(env: SuiteEnv) -> str:
    """The env hash as every store written before text versions holds it."""
    return short_hash({"id": env.env_id, "args": dict(env.args), "max_steps": env.max_steps})


def test_text_versions_name_the_games_whose_text_changed() -> None:
    assert text_versions("OpenSpiel-kuhn_poker-v0", {}) == {"kuhn_poker": 2}
    assert text_versions("OpenSpiel-tic_tac_toe-v0", {}) == {}
    assert text_versions("LLMBreakout-text-v0", {}) == {}
    assert text_versions("OpenSpiel-v0", {}) == {"goofspiel": 2}  # task 0, what a reset without a task id plays
    assert text_versions("OpenSpiel-v0", {}, [2_200_000_000, 2_400_000_000]) == {"kuhn_poker": 2}  # ttt, kuhn
    assert text_versions("OpenSpiel-v0", {"game": "leduc_poker"}) == {"leduc_poker": 2}


def test_only_text_reading_entries_on_changed_games_get_a_new_identity(tmp_path: Path) -> None:
    path = tmp_path / "suite.toml"
    path.write_text(SUITE)
    suite = load_suite(path)
    resolved, _ = resolve_entries(suite)
    assert not resolved["random"].reads_text and resolved["lm"].reads_text
    kuhn, ttt = suite.env("kuhn"), suite.env("ttt")
    assert env_hash(kuhn, reads_text=False) == hash_before_text_versions(kuhn)
    assert env_hash(ttt, reads_text=True) == hash_before_text_versions(ttt)
    assert env_hash(kuhn, reads_text=True) != hash_before_text_versions(kuhn)

    # A store written before the change: every episode of the suite, under the old env hash.
    template = EpisodeRow(
        suite=suite.name, split="heldout", entry="", entry_hash="", agent="", checkpoint_hash=None, env_label="",
        game="", env_id="", env_args="{}", env_hash="", task_id=None, seed=0, episode_return=0.0, raw_return=0.0,
        score=0.5, length=1, truncated=False, invalid_actions=0, decisions=1, tokens=None, wall_seconds=0.1,
        llm_gym_version="0.1.0",
    )  # fmt: skip
    with EpisodeStore(tmp_path / "e.sqlite") as store:
        for spec in suite.episodes():
            identity, env = resolved[spec.entry], suite.env(spec.env_label)
            store.add(
                replace(
                    template, entry=spec.entry, entry_hash=identity.entry_hash, agent=identity.agent_name,
                    env_label=env.label, env_id=env.env_id, env_hash=hash_before_text_versions(env), seed=spec.seed,
                )
            )  # fmt: skip
        units, stored = plan(suite, resolved, store)
    missing = {(u.entry, u.env_label): len(u) for u in units}
    assert missing == {("lm", "kuhn"): 3}  # replayed on the new text; random and the unchanged game stay stored
    assert stored == 9


def test_agents_that_act_from_info_alone_do_not_read_text() -> None:
    for agent in ("random", "mcts", "solver", "best_response"):
        assert not resolve_entry(SuiteEntry(name=agent, agent=agent)).reads_text
    assert resolve_entry(SuiteEntry(name="lm", agent="lm")).reads_text


# -- a config field added to an agent after its episodes were stored ----------------------------------------------


def test_a_field_added_with_its_default_keeps_the_stored_identity(tmp_path: Path) -> None:
    import dataclasses

    path = tmp_path / "suite.toml"
    path.write_text(SUITE)
    suite = load_suite(path).select(entries=["lm"], envs=["ttt"])
    now = resolve_entries(suite)[0]["lm"]
    # A store written before the lm agent had ``base_url``: its config and its hash lack the field.
    older_config = {k: v for k, v in dataclasses.asdict(now.config).items() if k != "base_url"}
    older_hash = short_hash({"agent": "lm", "config": older_config, "checkpoint": None})
    assert older_hash != now.entry_hash
    env = suite.env("ttt")
    with EpisodeStore(tmp_path / "e.sqlite") as store:
        store_draws(store, suite, env, "lm", older_hash, older_config)
        kept = resolve_entries(suite, store)[0]["lm"]
        assert kept.entry_hash == older_hash
        assert plan(suite, {"lm": kept}, store) == ([], 3)  # nothing to replay

        # The new field set away from its default, or a known field changed: a new set of episodes.
        for setting in ('base_url = "http://elsewhere:1/v1"', "temperature = 0.5"):
            changed = tmp_path / "changed.toml"
            changed.write_text(SUITE.replace('action_mode = "score" }', f'action_mode = "score", {setting} }}'))
            other = resolve_entries(load_suite(changed).select(entries=["lm"], envs=["ttt"]), store)[0]["lm"]
            assert other.entry_hash not in (older_hash, now.entry_hash)
        # Stored with a config that does not hash to its stored identity: never adopted.
        store.add_entry("lm", "0123456789abcdef", "lm", {**older_config, "seed": 1}, None, None, {"cpus": 1})
        assert resolve_entries(suite, store)[0]["lm"].entry_hash == older_hash
        # Once the store also holds the current identity (episodes played after the field existed), that one wins.
        store.add_entry("lm", now.entry_hash, "lm", dataclasses.asdict(now.config), None, None, {"cpus": 1})
        assert resolve_entries(suite, store)[0]["lm"].entry_hash == now.entry_hash


# -- speed-only fields (threads, an inference batch size): never part of an identity --------------------------------


def test_a_speed_only_setting_keeps_the_identity_and_stored_episodes(tmp_path: Path) -> None:
    """``threads`` and ``batch_size`` of the lm agent change how fast it plays, not what: setting them changes no
    identity, and episodes a store holds under other values of them (hashed before the fields were marked) stay the
    entry's episodes."""
    import dataclasses

    path = tmp_path / "suite.toml"
    path.write_text(SUITE)
    suite = load_suite(path).select(entries=["lm"], envs=["ttt"])
    now = resolve_entries(suite)[0]["lm"]

    def resolved(setting: str, store: EpisodeStore | None = None):
        changed = tmp_path / "changed.toml"
        changed.write_text(SUITE.replace('action_mode = "score" }', f'action_mode = "score", {setting} }}'))
        return resolve_entries(load_suite(changed).select(entries=["lm"], envs=["ttt"]), store)[0]["lm"]

    assert resolved("threads = 1").entry_hash == resolved("batch_size = 4, threads = 2").entry_hash == now.entry_hash
    assert resolved("greedy = false").entry_hash != now.entry_hash  # a field that plays still counts

    # A store written before threads was marked speed-only, by a run with threads = 4: its hash counts 4.
    stored_config = {**dataclasses.asdict(now.config), "threads": 4}
    stored_hash = short_hash({"agent": "lm", "config": stored_config, "checkpoint": None})
    with EpisodeStore(tmp_path / "e.sqlite") as store:
        store.add_entry("lm", stored_hash, "lm", stored_config, None, None, {"cpus": 1})
        for setting in ("threads = 1", "threads = 4", "batch_size = 8"):
            assert resolved(setting, store).entry_hash == stored_hash, setting
        assert resolved("temperature = 0.5, threads = 4", store).entry_hash != stored_hash

    # A store written before the lm agent had batch_size: a batch_size set now still finds its episodes.
    older_config = {k: v for k, v in dataclasses.asdict(now.config).items() if k != "batch_size"}
    older_hash = short_hash({"agent": "lm", "config": older_config, "checkpoint": None})
    with EpisodeStore(tmp_path / "older.sqlite") as store:
        store.add_entry("lm", older_hash, "lm", older_config, None, None, {"cpus": 1})
        assert resolved("batch_size = 8", store).entry_hash == older_hash


def test_the_committed_stores_entries_keep_their_identities(tmp_path: Path) -> None:
    """Every agent entry of the standard suite resolves to an identity the committed store holds: marking fields
    speed-only made no stored episode missing."""
    import shutil

    from llm_gym.bench.entries import REPO_ROOT

    committed = REPO_ROOT / "leaderboard" / "episodes.sqlite"
    shutil.copy(committed, tmp_path / "copy.sqlite")  # the store is only read; a copy keeps the repository untouched
    suite = load_suite("standard")
    with EpisodeStore(tmp_path / "copy.sqlite") as store:
        stored = store.entry_info()
        resolved, _ = resolve_entries(suite, store)
        agents = {name: entry for name, entry in resolved.items() if entry.checkpoint is None}
        assert agents, "the standard suite has agent entries to check"
        # (checkpoint entries hash the checkpoint files on this machine; a fresh clone has none of them)
        for name, entry in agents.items():
            assert (name, entry.entry_hash) in stored, name
