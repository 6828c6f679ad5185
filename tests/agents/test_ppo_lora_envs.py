"""ppo_lora on the other env families: OpenSpiel (score mode over a legal set that changes every turn, envs
snapshot for resume) and Trace-v0 (generate mode, the answer text is the action)."""

from __future__ import annotations

from pathlib import Path

import pytest

from llm_gym.agent import EnvConfig
from llm_gym.agents.ppo_lora import PPOLoRAAgent
from llm_gym.agents.ppo_lora.config import PPOLoRAConfig
from llm_gym.agents.ppo_lora.testing import tiny_config, train
from llm_gym.config import to_dict
from llm_gym.errors import UnsupportedEnvError
from llm_gym.runs import Run
from llm_gym.training.loop import load_envs


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from llm_gym.lm.testing import make_tiny_model

    return make_tiny_model(tmp_path_factory.mktemp("tiny-lm"), layers=2, hidden=32)


def test_openspiel_score_mode_over_varying_legal_actions(tmp_path: Path, model_dir: Path) -> None:
    config = tiny_config(
        model_dir, total_steps=24, num_envs=3, num_steps=4, minibatch_size=6, eval_episodes=2, eval_max_steps=5
    )
    summary, run = train(tmp_path / "run", "OpenSpiel-tic_tac_toe-v0", config)
    assert summary["env_steps"] == 24 and summary["episodes"] >= 3  # tic-tac-toe games end within 5 own moves
    checkpoint = Path(summary["checkpoint"])
    state = load_envs(checkpoint)
    # OpenSpiel snapshots hold live C++ states a state file cannot hold: the checkpoint says so, and a resume starts
    # new games.
    assert state["snapshots"] is None and len(state["observations"]) == 3
    assert all(info["legal_actions"] for info in state["infos"])
    resumed = Run.open(run.path)
    resumed.resumed_from = resumed.latest_checkpoint()
    more = PPOLoRAAgent(PPOLoRAConfig(**{**to_dict(config), "total_steps": 36})).train(
        EnvConfig("OpenSpiel-tic_tac_toe-v0"), resumed
    )
    resumed.close()
    assert more["env_steps"] == 36 and more["updates"] == 3


def test_trace_generate_mode_sends_the_answer_text(tmp_path: Path, model_dir: Path) -> None:
    config = tiny_config(
        model_dir, action_mode="generate", max_new_tokens=6, total_steps=4, num_envs=2, num_steps=2, minibatch_size=4
    )
    summary, _ = train(tmp_path / "run", "Trace-v0", config)
    assert summary["env_steps"] == 4 and summary["episodes"] == 4  # one answer per Trace task
    with pytest.raises(UnsupportedEnvError, match="action_mode=generate"):
        PPOLoRAAgent(PPOLoRAConfig(model=str(model_dir), total_steps=1)).train(
            EnvConfig("Trace-v0"), Run.create("Trace-v0", "ppo_lora", {}, path=tmp_path / "score-run")
        )
