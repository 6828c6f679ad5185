"""ppo_lora with advantage=exact on tiny models: the policy is asked about every position of the game tree once per
update, the return it reports for the policy is the exact evaluation's, no value head is built, the exact return
rises over the updates, a resumed run continues exactly, and what cannot go with it is refused in one line."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from llm_gym.agent import EnvConfig
from llm_gym.agents.ppo_lora.acting import LivePolicy, strategy_for
from llm_gym.agents.ppo_lora.exact_update import collect_tree, exact_update
from llm_gym.agents.ppo_lora.model import ActorCritic
from llm_gym.agents.ppo_lora.rollout import RolloutActor
from llm_gym.agents.ppo_lora.testing import resume_as_if_killed, tiny_config, train
from llm_gym.errors import ConfigError
from llm_gym.training.curves import read_events
from llm_gym.training.exact import evaluate_exact
from llm_gym.training.position_tree import PositionTree

KUHN = "OpenSpiel-kuhn_poker-v0"


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from llm_gym.lm.testing import make_tiny_model

    return make_tiny_model(tmp_path_factory.mktemp("tiny-lm"), layers=2, hidden=32)


def _exact(model: Path, **overrides):
    settings = dict(advantage="exact", policy_loss="auto", minibatch_size=8, lora_rank=4, learning_rate=3e-2, target_temperature=1.0,
                    update_epochs=2, lr_schedule="constant", eval_every=0, checkpoint_every=12, keep_checkpoints=10)  # fmt: skip
    return tiny_config(model, **{**settings, **overrides})


def test_every_position_is_asked_once_and_its_return_is_the_exact_evaluation_s(model: Path) -> None:
    config = _exact(model)
    env = EnvConfig(KUHN)
    tree = PositionTree(env)
    ac = ActorCritic(config, tree.positions[0][1]["instructions"])
    assert ac.value_head is None
    strategy = strategy_for(config)
    actor = RolloutActor(ac, strategy, torch.Generator().manual_seed(0), False, None)
    rollout = collect_tree(actor, tree, config, KUHN)
    assert rollout.size == len(tree) == 12
    for target, (_, info) in zip(rollout.targets, tree.positions, strict=True):
        assert len(target) == len(info["legal_actions"]) and float(target.sum()) == pytest.approx(1.0, abs=1e-5)
    sampled = evaluate_exact(LivePolicy(ac, strategy, KUHN, greedy=False), env, greedy=False)
    assert rollout.start_return == pytest.approx(sampled.expected_return, abs=1e-4)


def test_a_position_with_one_legal_action_is_not_asked_and_the_return_is_still_exact(model: Path) -> None:
    config = _exact(model, minibatch_size=256)
    env = EnvConfig("OpenSpiel-tic_tac_toe-v0")
    tree = PositionTree(env)
    ac = ActorCritic(config, tree.positions[0][1]["instructions"])
    strategy = strategy_for(config)
    rollout = collect_tree(RolloutActor(ac, strategy, torch.Generator().manual_seed(0), False, None), tree, config,
                           env.env_id)  # fmt: skip
    forced = [i for i, (_, info) in enumerate(tree.positions) if len(info["legal_actions"]) == 1]
    assert len(forced) == 888 and rollout.size == len(tree) == 13_306  # an env step per position, asked or not
    assert sorted([*rollout.asked, *forced]) == list(range(len(tree)))
    assert sum(len(d.actions) for d in rollout.decisions) == len(rollout.targets) == 13_306 - 888
    # The return counts the unasked positions' only action with probability 1: it is the exact return of the policy.
    probs = [np.ones(1) if len(info["legal_actions"]) == 1 else None for _, info in tree.positions]
    for i, row in zip(rollout.asked, (p for d in rollout.decisions for p in d.probs), strict=True):
        probs[i] = row.double().numpy()
    assert rollout.start_return == pytest.approx(tree.action_values(probs).start_return, abs=1e-9)


class _Recording(LivePolicy):
    """The live policy, keeping every observation it was asked about."""

    asked: list[str]

    def act_with_details(self, observations, infos):  # type: ignore[no-untyped-def]
        self.asked = [*getattr(self, "asked", []), *observations]
        return super().act_with_details(observations, infos)


def test_the_focus_is_what_the_greedy_evaluation_asks_and_is_trained_again(tmp_path: Path, model: Path) -> None:
    config = _exact(model, exact_focus_epochs=2, update_epochs=1, learning_rate=0.0)
    env = EnvConfig(KUHN)
    tree = PositionTree(env)
    ac = ActorCritic(config, tree.positions[0][1]["instructions"])
    strategy = strategy_for(config)
    rollout = collect_tree(
        RolloutActor(ac, strategy, torch.Generator().manual_seed(0), False, None), tree, config, KUHN
    )
    greedy = _Recording(ac, strategy, KUHN, greedy=True)
    evaluate_exact(greedy, env)
    assert sorted(tree.positions[rollout.asked[k]][0] for k in rollout.focus) == sorted(greedy.asked)
    assert 0 < len(rollout.focus) < len(tree)
    metrics = exact_update(ac, torch.optim.SGD(ac.trainable_parameters(), lr=0.0), rollout, config,
                           torch.Generator().manual_seed(0), 0.0)  # fmt: skip
    # One pass of 12 positions in minibatches of 8, then two of the focus.
    assert metrics["optimizer_steps"] == 2 + 2 * -(-len(rollout.focus) // 8)
    assert metrics["focus_positions"] == len(rollout.focus)


def test_an_exact_run_raises_its_exact_return_and_counts_a_step_per_position(tmp_path: Path, model: Path) -> None:
    summary, run = train(tmp_path / "run", KUHN, _exact(model, total_steps=12 * 8, exact_weights="visits"))
    assert summary["env_steps"] == 96 and summary["updates"] == 8 and summary["advantage"] == "exact"
    assert not (Path(summary["checkpoint"]) / "value_head.pt").exists()
    returns = [e.value for e in read_events(run.path / "tb").Scalars("exact/policy_return")]
    assert len(returns) == 8
    # A small step along the exact policy gradient (visit-weighted, soft target) does not lose return, and gains.
    assert all(b > a - 2e-3 for a, b in zip(returns, returns[1:], strict=False)), returns
    assert returns[-1] > returns[0] + 5e-3, returns


def test_a_resumed_exact_run_continues_exactly(tmp_path: Path, model: Path) -> None:
    config = _exact(model, total_steps=12 * 3)
    summary, _ = train(tmp_path / "whole", KUHN, config)
    resumed = resume_as_if_killed(tmp_path / "whole", tmp_path / "killed", "step_12", KUHN, config)
    assert resumed["env_steps"] == summary["env_steps"] == 36
    final = Path(summary["checkpoint"]).name
    a = load_file(tmp_path / "whole" / "checkpoints" / final / "adapter" / "adapter_model.safetensors")
    b = load_file(tmp_path / "killed" / "checkpoints" / final / "adapter" / "adapter_model.safetensors")
    for key in a:
        assert torch.equal(a[key], b[key]), key


def test_what_does_not_go_with_exact_is_refused_in_one_line(tmp_path: Path, model: Path) -> None:
    with pytest.raises(ValueError, match="advantage=exact .* action_mode=generate does not go with it"):
        _exact(model, action_mode="generate")
    with pytest.raises(ValueError, match="start_spread does not go with it"):
        _exact(model, start_spread=2)
    with pytest.raises(ConfigError, match="opponent=random"):  # before the model loads
        train(tmp_path / "mcts", EnvConfig(KUHN, {"opponent": "mcts"}), _exact(model, total_steps=12))
