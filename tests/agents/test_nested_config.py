"""A config field holding another agent's settings (``nested_agent_config``: the curriculum's ``base_config``) is seen
through by every per-field check: the base learner's own markers decide. A tiny real curriculum run (ppo_lora on a
tiny random model) is the checkpoint, played through the real CLI, a real suite file and a real SQLite store."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
from bench_suites import HELDOUT, Raw, entry, env, suite  # tests/bench_suites.py

from llm_gym.agent import EnvConfig
from llm_gym.agents.curriculum import CurriculumAgent, CurriculumConfig
from llm_gym.config import apply_overrides, nested_agent_fields, to_dict
from llm_gym.plugins import agents
from llm_gym.runs import Run
from llm_gym.testing import error_line, invoke
from llm_gym.training.setting_checks import field_settings

ENV = "OpenSpiel-v0"
PLAY = ("--episodes", "1", "--max-steps", "2", "--json")
ROLLOUT = {"num_envs": 2, "num_steps": 8, "minibatch_size": 16, "update_epochs": 1, "lora_rank": 4}
STAGE = {"name": "ttt", "tasks": "2200000000", "opponent": "random", "threshold": 1.0}


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """16 env steps of a curriculum around ppo_lora (LoRA r4, threads 1) on a tiny random model."""
    from llm_gym.agents.ppo_lora.testing import tiny_settings
    from llm_gym.lm.testing import make_tiny_model

    root = tmp_path_factory.mktemp("curriculum")
    model = make_tiny_model(root / "model", layers=2, hidden=32)
    config = CurriculumConfig(
        base_config=tiny_settings(model, **ROLLOUT), total_steps=16, stages=(STAGE,), replay_share=0
    )
    run = Run.create(ENV, "curriculum", to_dict(config), path=root / "run")
    try:
        CurriculumAgent(config).train(EnvConfig(ENV), run)
    finally:
        run.close()
    assert Run.open(root / "run").latest_checkpoint() is not None
    return root / "run"


def test_nested_agent_configs_are_declared_and_seen_through() -> None:
    for name, agent_cls in agents().items():
        for field, agent_field in nested_agent_fields(agent_cls.Config).items():
            config = agent_cls.Config()
            assert isinstance(getattr(config, field), dict), f"{name}.{field} holds settings as a table"
            assert getattr(config, agent_field) in agents(), f"{name}.{agent_field} names an agent by default"
    assert nested_agent_fields(CurriculumConfig) == {"base_config": "base"}
    settings = field_settings(CurriculumAgent, CurriculumConfig(base_config={"threads": 2}))
    assert "base_config" not in settings
    lr, threads, rank = (settings[f"base_config.{k}"] for k in ("learning_rate", "threads", "lora_rank"))
    assert (lr.effect, threads.effect, threads.value, rank.held) == ("training", "speed", 2, True)
    assert settings["base"].held and settings["window"].effect == "training"


def test_set_of_a_nested_config_changes_the_keys_it_names() -> None:
    trained = CurriculumConfig(base_config={"model": "m", "lora_rank": 4})
    played = apply_overrides(trained, {"base_config": '{"threads": 2}'})
    assert played.base_config == {"model": "m", "lora_rank": 4, "threads": 2}
    assert apply_overrides(CurriculumConfig(), {"base_config": {"threads": 2}}).base_config == {"threads": 2}


def test_play_refuses_training_only_and_held_keys_of_base_config(run_dir: Path) -> None:
    def play(settings: str):
        return invoke("play", "--checkpoint", str(run_dir), "--set", f"base_config={settings}", *PLAY)

    line = error_line(play('{"learning_rate": 0.1}'))
    assert line == (
        f"error: base_config.learning_rate=0.1 only affects training, not how {run_dir} plays: drop it from "
        f"--set/--config (to train on with it: llm-gym train --resume {run_dir} --set "
        f"base_config={shlex.quote(json.dumps({'learning_rate': 0.1}))})"
    )
    line = error_line(play('{"lora_rank": 8}'))
    assert f"{run_dir} was trained with base_config.lora_rank=4, which its checkpoint holds" in line
    assert "drop base_config.lora_rank from --set/--config" in line
    line = error_line(play('{"model": "smollm2-135m"}'))
    assert "its weights play only on that model; drop base_config.model from --set/--config" in line
    line = error_line(invoke("play", "--checkpoint", str(run_dir), "--set", "base=nanogpt_ppo", *PLAY))
    assert "trained with base='ppo_lora', which its checkpoint holds" in line
    line = error_line(play('{"learnin_rate": 0.1}'))
    assert "unknown key 'learnin_rate' for PPOLoRAConfig; did you mean learning_rate" in line
    # A speed-only key of the base learner plays (the rest of the saved base_config stays).
    played = play('{"threads": 2}')
    assert played.exit_code == 0, played.output
    assert len(json.loads(played.stdout)["episodes"]) == 1


def test_train_resume_refuses_a_held_key_of_base_config(run_dir: Path) -> None:
    before = (run_dir / "config.json").read_text()
    line = error_line(invoke("train", "--resume", str(run_dir), "--set", 'base_config={"lora_rank": 8}'))
    assert line == (
        "error: a resume cannot change base_config.lora_rank (4 -> 8): the checkpoints hold their shapes; start a "
        "new run to change them"
    )
    line = error_line(invoke("train", "--resume", str(run_dir), "--set", "base=nanogpt_ppo"))
    assert "a resume cannot change base ('ppo_lora' -> 'nanogpt_ppo')" in line
    assert (run_dir / "config.json").read_text() == before, "nothing in the run changes"


SUITE = suite(
    "a curriculum checkpoint played with the base learner's settings",
    HELDOUT,
    env("ttt", "OpenSpiel-tic_tac_toe-v0", args={"opponent": "random"}),
    entry("curriculum", checkpoint="RUN", splits=["heldout"], set=Raw("SETTINGS")),
    episodes=1,
    max_steps=4,
    num_envs=1,
)


def entry_hash(run_dir: Path, tmp_path: Path, settings: str) -> str:
    from llm_gym.bench.runner import resolve_entries
    from llm_gym.bench.suite import load_suite

    path = tmp_path / "suite.toml"
    path.write_text(SUITE.replace("RUN", str(run_dir)).replace("SETTINGS", settings))
    return resolve_entries(load_suite(path))[0]["curriculum"].entry_hash


def test_a_bench_checkpoint_entry_sees_through_base_config(run_dir: Path, tmp_path: Path) -> None:
    """Speed-only keys of the base learner leave the entry's identity as it was; a key that plays (quantize) is a
    new identity and reaches the policy; a training-only key is refused in one line, naming the entry and suite,
    before anything is played or stored."""
    from llm_gym.bench.entries import resolve_entry
    from llm_gym.bench.store import EpisodeStore
    from llm_gym.bench.suite import load_suite
    from llm_gym.lm.quantize import quantized_linear_count

    plain = entry_hash(run_dir, tmp_path, "{}")
    assert entry_hash(run_dir, tmp_path, "{ base_config = { threads = 2 } }") == plain
    assert entry_hash(run_dir, tmp_path, "{ base_config = { threads = 1, dtype = 'float32' } }") == plain
    assert entry_hash(run_dir, tmp_path, "{ base_config = { quantize = 'int8' } }") != plain
    suite = load_suite(tmp_path / "suite.toml")
    policy, _ = resolve_entry(suite.entries[0]).policy(suite.envs[0])
    assert quantized_linear_count(policy.backend.model) == 2 * 7  # every decoder Linear of both layers

    (tmp_path / "suite.toml").write_text(
        SUITE.replace("RUN", str(run_dir)).replace("SETTINGS", "{ base_config = { learning_rate = 0.1 } }")
    )
    db = tmp_path / "e.sqlite"
    line = error_line(invoke("bench", "--suite", str(tmp_path / "suite.toml"), "--db", str(db), "--no-progress"))
    assert line == (
        f"error: base_config.learning_rate=0.1 only affects training, not how {run_dir} plays: drop it from the set "
        "of entry 'curriculum' in suite 'suite'"
    )
    with EpisodeStore(db) as store:
        assert list(store.episodes()) == []
