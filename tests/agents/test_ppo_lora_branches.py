"""ppo_lora's ``branch_fraction`` (llm_gym/training/branches.py) on tiny models and the real envs: a branched group's episodes
start together at a state the rollout visited earlier, reached again by replay; their advantages compare the
returns from there; a replay that misses its state is an error; the logs keep to games from a reset; a resumed
branching run continues exactly; settings that cannot branch are refused in one line."""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch
from safetensors.torch import load_file

import llm_gym  # noqa: F401  (registers the envs)
from llm_gym.agent import EnvConfig
from llm_gym.agents.ppo_lora.acting import strategy_for
from llm_gym.agents.ppo_lora.groups import GroupRollout, collect_groups
from llm_gym.agents.ppo_lora.model import ActorCritic
from llm_gym.agents.ppo_lora.rollout import RolloutActor, rollout_arrays
from llm_gym.agents.ppo_lora.testing import resume_as_if_killed, tiny_config, train
from llm_gym.envs.tasks import OptionsMix, TaskRange, UniformTaskSampler
from llm_gym.rl.advantages import leave_one_out
from llm_gym.stepping import EnvStepper, make_vector_env
from llm_gym.training.branches import Branches, BranchPoint, replay

TTT = "OpenSpiel-tic_tac_toe-v0"
G = 4


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from llm_gym.lm.testing import make_tiny_model

    return make_tiny_model(tmp_path_factory.mktemp("tiny-lm"), layers=2, hidden=32)


def _config(model: Path, **overrides):
    settings = dict(advantage="group", policy_loss="auto", num_envs=8, group_size=G, num_steps=8, minibatch_size=16,
                    lora_rank=4, eval_every=0, branch_fraction=1.0)  # fmt: skip
    return tiny_config(model, **{**settings, **overrides})


def _rollout(model: Path, seed: int = 5, sampler: OptionsMix | None = None) -> GroupRollout:
    config = _config(model)
    ac = ActorCritic(config, "rules")
    stepper = EnvStepper(make_vector_env(EnvConfig(TTT), 8), seed=seed, group_size=G, sampler=sampler)
    try:
        return collect_groups(
            RolloutActor(ac, strategy_for(config), torch.Generator().manual_seed(0)), stepper, config, TTT
        )
    finally:
        stepper.close()


def test_a_branched_group_starts_together_at_a_state_the_rollout_visited_and_compares_returns_from_there(
    model: Path,
) -> None:
    rollout = _rollout(model)
    rows: dict[int, list[int]] = {}
    for row, episode in enumerate(rollout.episode_of):
        rows.setdefault(episode, []).append(row)
    assert rollout.branched and set(rows) - rollout.branched  # the first groups start at resets, later ones branch
    groups = {e // G for e in rollout.branched}
    assert all({g * G + k for k in range(G)} <= rollout.branched for g in groups)  # whole groups branch
    advantages = rollout.advantages(_config(model))
    for group in groups:
        members = [group * G + k for k in range(G)]
        first = {rollout.keys[rows[e][0]] for e in members}
        assert len(first) == 1  # the identical prompt: one state, replayed into every env of the group
        # ... that an earlier episode saw at a decision other than its first.
        visited = {rollout.keys[r] for e, rs in rows.items() if e < members[0] for r in rs[1:]}
        assert first <= visited
        # Advantages: the return from the branch point (the group's own decisions) minus the others' mean.
        returns = torch.tensor([sum(rollout.row_rewards[r] for r in rows[e]) for e in members])
        expected = leave_one_out(returns, torch.zeros(G, dtype=torch.long))
        for e, value in zip(members, expected, strict=True):
            assert torch.allclose(advantages[rows[e]], value.expand(len(rows[e])))
    # The per-episode logs count the games played from a reset only.
    assert len(rollout_arrays(rollout)["returns"]) == len(set(rows) - rollout.branched)


def test_a_branching_rollout_is_the_same_from_the_same_seed(model: Path) -> None:
    a, b = _rollout(model), _rollout(model)
    assert a.keys == b.keys and a.branched == b.branched and a.row_rewards == b.row_rewards


def test_a_resumed_branching_run_continues_exactly(tmp_path: Path, model: Path) -> None:
    config = _config(model, num_steps=4, total_steps=150, checkpoint_every=1, keep_checkpoints=10)
    summary, _ = train(tmp_path / "whole", TTT, config)
    checkpoints = sorted((tmp_path / "whole" / "checkpoints").glob("step_*"), key=lambda p: int(p.name[5:]))
    assert len(checkpoints) >= 3
    resumed = resume_as_if_killed(tmp_path / "whole", tmp_path / "killed", checkpoints[0].name, TTT, config)
    assert resumed["train_history"] == summary["train_history"]
    final = Path(summary["checkpoint"]).name
    a = load_file(tmp_path / "whole" / "checkpoints" / final / "adapter" / "adapter_model.safetensors")
    b = load_file(tmp_path / "killed" / "checkpoints" / final / "adapter" / "adapter_model.safetensors")
    assert all(torch.equal(a[key], b[key]) for key in a)


@pytest.mark.parametrize("env_id", [TTT, "OpenSpiel-kuhn_poker-v0", "LLMBreakout-text-v0"])
def test_a_seed_and_the_actions_reproduce_a_visited_state_and_a_miss_is_an_error(env_id: str) -> None:
    env = gym.make(env_id)
    rng = np.random.default_rng(0)
    observation, info = env.reset(seed=11)
    actions = []
    for _ in range(2 if env_id.startswith("OpenSpiel") else 40):
        action = int(rng.choice(info["legal_actions"]))
        observation, _, terminated, truncated, info = env.step(action)
        actions.append(action)
        if terminated or truncated:
            break
    again, info_again = replay(gym.make(env_id), BranchPoint(11, None, tuple(actions), observation))
    assert np.array_equal(again, observation) if isinstance(again, np.ndarray) else again == observation
    assert info_again["legal_actions"] == info["legal_actions"]
    with pytest.raises(RuntimeError, match="did not reproduce a visited state"):
        replay(gym.make(env_id), BranchPoint(12 if env_id != TTT else 11, None, tuple(actions[:-1]), observation))


def test_settings_that_cannot_branch_are_refused(model: Path) -> None:
    with pytest.raises(ValueError, match="needs a value in \\[0, 1\\] and a group estimator"):
        _config(model, advantage="gae")
    with pytest.raises(ValueError, match="needs a value in \\[0, 1\\]"):
        _config(model, branch_fraction=1.5)
    with pytest.raises(ValueError, match="use --set vector=sync"):
        Branches(EnvStepper(make_vector_env(EnvConfig(TTT), 2, kind="async"), group_size=2), 0.5, 0)
    sampler = UniformTaskSampler(TaskRange(0, 1))
    with pytest.raises(ValueError, match="does not go with a task sampler"):
        Branches(EnvStepper(make_vector_env(EnvConfig(TTT), 2), group_size=2, sampler=sampler), 0.5, 0)


def test_branching_goes_with_an_options_mix_and_its_tallies_keep_to_games_from_a_reset(model: Path) -> None:
    """episode_options (both opponents) with branch_fraction: a branched group replays its point with the point's
    options (the replay checks the observation it reaches), and only the games from a reset are tallied."""
    mix = OptionsMix([{"opponent": "random"}, {"opponent": "mcts", "mcts": {"simulations": 2}}], seed=0)
    rollout = _rollout(model, sampler=mix)
    assert rollout.branched, "branch_fraction=1 branches every group after the first states were visited"
    from_reset = [e for e in rollout.finished if e.index not in rollout.branched]
    assert sum(t["episodes"] for t in mix.tallies()) == len(from_reset) > 0
    assert all(e.options in mix.choices for e in rollout.finished)
