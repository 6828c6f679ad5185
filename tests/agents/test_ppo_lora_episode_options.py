"""episode_options: a ppo_lora run trains each episode against one of several sets of reset options (here both
OpenSpiel opponents, real MCTS included), reports episodes and mean return per set, and refuses to share the
choice with a curriculum's sampler."""

from __future__ import annotations

from pathlib import Path

import pytest

from llm_gym.agent import EnvConfig
from llm_gym.agents.ppo_lora.testing import tiny_config
from llm_gym.agents.ppo_lora.testing import train as train_ppo
from llm_gym.envs.tasks import TaskRange, UniformTaskSampler
from llm_gym.errors import ConfigError
from llm_gym.runs import Run

TTT = "OpenSpiel-tic_tac_toe-v0"
MIX = ({"opponent": "random"}, {"opponent": "mcts", "mcts": {"simulations": 4}})


def test_training_episodes_draw_from_the_mix_and_are_tallied_per_set(tiny_model_dir: Path, tmp_path: Path) -> None:
    config = tiny_config(tiny_model_dir, total_steps=48, num_envs=4, num_steps=6, minibatch_size=8, kl_coef=0.0,
                         episode_options=MIX, seed=2)  # fmt: skip
    summary, _ = train_ppo(tmp_path / "run", TTT, config)
    tallies = summary["episode_options"]
    assert [t["options"] for t in tallies] == [dict(m) for m in MIX]
    assert all(t["episodes"] > 0 for t in tallies)  # both opponents played
    assert sum(t["episodes"] for t in tallies) == summary["episodes"]
    assert all(-1.0 <= t["mean_return"] <= 1.0 for t in tallies)

    plain, _ = train_ppo(tmp_path / "plain", TTT, tiny_config(tiny_model_dir, total_steps=8, num_envs=2, num_steps=4,
                                                               minibatch_size=4, kl_coef=0.0))  # fmt: skip
    assert plain["episode_options"] is None


def test_a_curriculum_and_episode_options_are_one_line(tiny_model_dir: Path, tmp_path: Path) -> None:
    from llm_gym.agents.ppo_lora import PPOLoRAAgent
    from llm_gym.config import to_dict

    config = tiny_config(tiny_model_dir, total_steps=8, num_envs=2, num_steps=4, episode_options=MIX)
    run = Run.create(TTT, "ppo_lora", to_dict(config), path=tmp_path / "run")
    try:
        with pytest.raises(ConfigError, match="curriculum's stages"):
            PPOLoRAAgent(config).train(EnvConfig(TTT), run, sampler=UniformTaskSampler(TaskRange(0, 0)))
    finally:
        run.close()
