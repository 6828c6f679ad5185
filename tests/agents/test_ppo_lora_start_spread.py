"""``start_spread``: before the first rollout each env plays its own random number of random legal steps, drawn from
a generator of the run's own (so the run is reproducible), logged at step 0 and kept out of total_steps; a resume
does not spread again; a curriculum or an env without legal actions gets a one-line error before any play."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from llm_gym.agent import EnvConfig
from llm_gym.agents.ppo_lora.config import PPOLoRAConfig
from llm_gym.agents.ppo_lora.model import VALUE_HEAD_FILE
from llm_gym.agents.ppo_lora.testing import resume_as_if_killed, tiny_config, train
from llm_gym.errors import ConfigError
from llm_gym.runs import Run
from llm_gym.training.curves import read_scalars
from llm_gym.training.loop import SPREAD_SEED_KEY

SHAPED = EnvConfig("LLMBreakout-text-v0", {"reward_shaping": 10})


def _head(summary: dict) -> torch.Tensor:
    """The value head's weights in a run's final checkpoint (they fit the returns of the states the run saw)."""
    return torch.load(Path(summary["checkpoint"]) / VALUE_HEAD_FILE, weights_only=True)["weight"]


SMALL = dict(num_envs=3, num_steps=4, minibatch_size=6, lora_rank=4, checkpoint_every=12, keep_checkpoints=5)


def test_a_spread_run_logs_its_draws_counts_only_learnt_steps_and_repeats(tmp_path: Path, tiny_model_dir: Path) -> None:
    config = tiny_config(tiny_model_dir, total_steps=24, start_spread=20, seed=3, **SMALL)
    summary, _ = train(tmp_path / "a", SHAPED, config)
    assert summary["env_steps"] == 24 and summary["updates"] == 2  # the spread's steps are not counted
    drawn = np.random.default_rng([SPREAD_SEED_KEY, 3]).integers(21, size=3)
    logged = read_scalars(tmp_path / "a")
    assert logged["spread/env_steps"][1][0] == drawn.sum() > 0
    assert logged["spread/max_env_steps"][1][0] == drawn.max()
    assert "spread/episodes_ended" in logged and "spread/seconds" in logged

    again, _ = train(tmp_path / "b", SHAPED, config)  # the same seed: the same spread, the same run
    assert torch.equal(_head(again), _head(summary))
    unspread, _ = train(tmp_path / "c", SHAPED, tiny_config(tiny_model_dir, total_steps=24, seed=3, **SMALL))
    assert "spread/env_steps" not in read_scalars(tmp_path / "c")
    assert not torch.equal(_head(unspread), _head(summary))  # other states, other returns to fit

    # A resume continues from the checkpoint's env states: no second spread.
    resumed = resume_as_if_killed(tmp_path / "a", tmp_path / "killed", "step_12", SHAPED, config)
    assert torch.equal(_head(resumed), _head(summary))


def test_start_spread_is_refused_with_a_curriculum_and_without_legal_actions(tmp_path: Path, tiny_model_dir: Path):
    from llm_gym.agents.curriculum import CurriculumAgent, CurriculumConfig
    from llm_gym.agents.ppo_lora.testing import tiny_settings
    from llm_gym.config import to_dict

    stages = ({"name": "only", "tasks": "0-3", "opponent": "random", "threshold": 1.0},)
    base = tiny_settings(tiny_model_dir, start_spread=4, **SMALL)
    config = CurriculumConfig(base="ppo_lora", base_config=base, total_steps=12, stages=stages)
    run = Run.create("OpenSpiel-tic_tac_toe-v0", "curriculum", to_dict(config), path=tmp_path / "curriculum")
    with pytest.raises(ConfigError, match="leave start_spread at 0 with a curriculum"):
        CurriculumAgent(config).train(EnvConfig("OpenSpiel-tic_tac_toe-v0"), run)
    run.close()

    generate = tiny_config(tiny_model_dir, action_mode="generate", max_new_tokens=4, total_steps=4, num_envs=2,
                           num_steps=2, minibatch_size=4, start_spread=3, seed=1)  # fmt: skip
    with pytest.raises(ConfigError, match="start_spread on Trace-v0: .*no legal actions"):
        train(tmp_path / "trace", "Trace-v0", generate)
    with pytest.raises(ValueError, match="start_spread must be >= 0"):
        PPOLoRAConfig(start_spread=-1)
