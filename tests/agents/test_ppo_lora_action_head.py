"""``action_head=standardized``: a learnt offset per action name from the standardised hidden state, added to each
action's log-likelihood. A fresh head is zero and draws nothing from torch's generator, so a run starts exactly
where it would without it; the head learns, travels with every checkpoint (names, weights, statistics), acts the
same in training and in ``play``, resumes bit for bit, and is refused where it cannot apply."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from llm_gym.agent import EnvConfig
from llm_gym.agents.ppo_lora.acting import act, strategy_for
from llm_gym.agents.ppo_lora.action_head import ACTION_HEAD_FILE, ActionHead, load_action_head, save_action_head
from llm_gym.agents.ppo_lora.config import PPOLoRAConfig
from llm_gym.agents.ppo_lora.policy import checkpoint_policy
from llm_gym.agents.ppo_lora.testing import resume_as_if_killed, tiny_config, train
from llm_gym.agents.ppo_lora.train import initial_actor_critic
from llm_gym.cli import build_app
from llm_gym.envs.catalog import EnvTraits
from llm_gym.training.curves import read_scalars
from llm_gym.training.loop import training_env

HIDDEN = 64
NAMES = ("NOOP", "FIRE", "RIGHT", "LEFT")
SHAPED = EnvConfig("LLMBreakout-text-v0", {"reward_shaping": 10})
SMALL = dict(num_envs=2, num_steps=8, minibatch_size=8, lora_rank=4, checkpoint_every=16, keep_checkpoints=5)


def test_a_fresh_head_is_zero_and_leaves_torchs_draws_alone() -> None:
    torch.manual_seed(3)
    expected = torch.rand(5)
    torch.manual_seed(3)
    head = ActionHead(HIDDEN, NAMES)
    assert torch.equal(torch.rand(5), expected)  # building it drew nothing a run would see
    states = torch.randn(6, HIDDEN) + 40.0
    assert torch.equal(head(states), torch.zeros(6, len(NAMES)))
    assert head.input_mode == "standardized"


def test_offsets_follow_the_names_and_unknown_names_get_none() -> None:
    head = ActionHead(HIDDEN, NAMES)
    torch.nn.init.normal_(head.weight)
    torch.nn.init.normal_(head.bias)
    states = torch.randn(2, HIDDEN)
    full = head(states).detach()
    rows = head.offsets(states, [("LEFT", "NOOP"), ("UP", "RIGHT")])
    assert torch.allclose(rows[0], full[0, [3, 0]].double())
    assert rows[1][0] == 0.0 and torch.isclose(rows[1][1], full[1, 2].double())
    seq_row, seq_name = torch.tensor([0, 0, 1, 1]), torch.tensor([3, 0, -1, 2])
    per_seq = head.seq_offsets(states, seq_row, seq_name).detach()
    assert torch.allclose(per_seq, torch.stack([full[0, 3], full[0, 0], torch.tensor(0.0), full[1, 2]]))


def test_the_head_travels_with_its_names_and_statistics(tmp_path: Path) -> None:
    head = ActionHead(HIDDEN, NAMES)
    with torch.no_grad(), head.observing():
        head(torch.randn(32, HIDDEN) * 0.1 + 5.0)
    head.fold_observed()
    torch.nn.init.normal_(head.weight)
    save_action_head(tmp_path, head)
    loaded = load_action_head(tmp_path, HIDDEN, "cpu")
    assert loaded is not None and loaded.names == NAMES and int(loaded.input_folds) == 1
    probe = torch.randn(3, HIDDEN) + 5.0
    assert torch.equal(loaded(probe), head(probe))
    assert load_action_head(tmp_path / "none", HIDDEN, "cpu") is None
    save_action_head(tmp_path / "none", None)  # no head: nothing written


def test_it_is_refused_where_it_cannot_apply() -> None:
    with pytest.raises(ValueError, match="action_head .* needs action_mode=score and rollout_backend=hf"):
        PPOLoRAConfig(action_head="standardized", action_mode="generate")
    with pytest.raises(ValueError, match="action_head .* needs action_mode=score and rollout_backend=hf"):
        PPOLoRAConfig(action_head="standardized", rollout_backend="vllm")


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from llm_gym.lm.testing import make_tiny_model

    return make_tiny_model(tmp_path_factory.mktemp("tiny"))


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory, model_dir: Path) -> tuple[Path, Path, PPOLoRAConfig]:
    """The same 3-update run with and without the head."""
    root = tmp_path_factory.mktemp("runs")
    config = tiny_config(model_dir, total_steps=48, action_head="standardized", **SMALL)
    train(root / "head", SHAPED, config)
    train(root / "plain", SHAPED, tiny_config(model_dir, total_steps=48, **SMALL))
    return root / "head", root / "plain", config


def test_a_run_starts_from_the_same_policy_and_its_head_learns(runs: tuple[Path, Path, PPOLoRAConfig]) -> None:
    head_run, plain_run, _ = runs
    with_head, without = read_scalars(head_run), read_scalars(plain_run)
    for name in NAMES:  # the first rollout (a zero head) is the plain run's, action for action
        key = f"policy/greedy_share/{name}"
        assert with_head[key][0][0] == without[key][0][0]
        assert with_head[key][1][0] == without[key][1][0]
    final = torch.load(head_run / "checkpoints" / "step_48" / ACTION_HEAD_FILE, weights_only=True)
    assert final["names"] == list(NAMES)  # Breakout's actions, legal at the first reset
    assert int(final["state"]["input_folds"]) == 3  # one fold per rollout
    assert final["state"]["weight"].abs().sum() > 0  # the policy gradient moved it from zero
    assert not (plain_run / "checkpoints" / "step_48" / ACTION_HEAD_FILE).exists()


def test_play_acts_with_the_head_as_training_did(runs: tuple[Path, Path, PPOLoRAConfig], tmp_path: Path) -> None:
    """A checkpoint whose head has large offsets: the training path and ``play``'s merged model give the same
    action probabilities (so the offsets are applied, and the same way, in both)."""
    head_run, _, config = runs
    env = training_env(SHAPED)
    ac = initial_actor_critic(config, EnvTraits.probe(env).instructions, head_run / "checkpoints" / "step_48")
    assert ac.action_head is not None
    torch.nn.init.normal_(ac.action_head.weight, std=0.5)  # offsets of a nat or more: impossible to miss
    ac.save(tmp_path)
    games = [env.make() for _ in range(3)]
    started = [g.reset(seed=100 + i) for i, g in enumerate(games)]
    observations, infos = [s[0] for s in started], [s[1] for s in started]
    decided = act(ac, strategy_for(config), observations, infos, env.env_id, generator=torch.Generator(), greedy=True)
    trained = np.array([p.numpy() for p in decided.probs])
    policy = checkpoint_policy(config, env, tmp_path)
    _, details = policy.act_with_details(observations, infos)
    played = np.array([d["probs"] for d in details])
    ac.set_action_head(None)
    plain = act(ac, strategy_for(config), observations, infos, env.env_id, generator=torch.Generator(), greedy=True)
    assert np.abs(trained - np.array([p.numpy() for p in plain.probs])).max() > 0.05  # the head matters here
    np.testing.assert_allclose(played, trained, atol=2e-4)
    for g in games:
        g.close()


def test_a_killed_run_resumes_to_the_same_head(runs: tuple[Path, Path, PPOLoRAConfig], tmp_path: Path) -> None:
    head_run, _, config = runs
    resumed = resume_as_if_killed(head_run, tmp_path / "killed", "step_16", SHAPED, config)
    final = torch.load(head_run / "checkpoints" / "step_48" / ACTION_HEAD_FILE, weights_only=True)
    again = torch.load(Path(resumed["checkpoint"]) / ACTION_HEAD_FILE, weights_only=True)
    assert again["names"] == final["names"]
    assert all(torch.equal(final["state"][k], again["state"][k]) for k in final["state"])


def test_export_carries_the_head_and_says_so(runs: tuple[Path, Path, PPOLoRAConfig], tmp_path: Path) -> None:
    head_run, _, _ = runs
    out = tmp_path / "adapter"
    result = CliRunner().invoke(build_app(), ["export", "-c", str(head_run), "--adapter-only", "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert (out / ACTION_HEAD_FILE).is_file()
    assert "action head" in result.output and "llm-gym play --checkpoint" in " ".join(result.output.split())
