"""ppo_lora with the critic-free group estimators on tiny models: no value head is built, trained or saved; a rollout
holds whole episodes of complete groups with the advantages the estimator computes by hand; rows with one prompt
share one forward pass and get the log-probabilities separate passes give; a resumed run continues exactly; and the
group estimator learns a bandit."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from llm_gym.agent import EnvConfig
from llm_gym.agents.ppo_lora.acting import act, merged_rows, strategy_for
from llm_gym.agents.ppo_lora.groups import GroupRollout, collect_groups
from llm_gym.agents.ppo_lora.model import ActorCritic
from llm_gym.agents.ppo_lora.rollout import RolloutActor
from llm_gym.agents.ppo_lora.testing import resume_as_if_killed, tiny_config, train
from llm_gym.rl.advantages import leave_one_out
from llm_gym.stepping import EnvStepper, make_vector_env

TTT = "OpenSpiel-tic_tac_toe-v0"
KUHN = "OpenSpiel-kuhn_poker-v0"


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from llm_gym.lm.testing import make_tiny_model

    return make_tiny_model(tmp_path_factory.mktemp("tiny-lm"), layers=2, hidden=32)


def _groups(model: Path, **overrides):
    settings = dict(advantage="group", policy_loss="auto", num_envs=8, group_size=4, num_steps=4, minibatch_size=16, lora_rank=4,
                    eval_every=0, checkpoint_every=32, keep_checkpoints=10)  # fmt: skip
    return tiny_config(model, **{**settings, **overrides})


def test_a_group_estimator_builds_trains_and_saves_no_value_head(tmp_path: Path, model: Path) -> None:
    config = _groups(model, total_steps=40)
    ac = ActorCritic(config, "rules")
    assert ac.value_head is None
    lora = [p for p in ac.model.parameters() if p.requires_grad]
    assert len(ac.trainable_parameters()) == len(lora)
    summary, run = train(tmp_path / "run", TTT, config)
    checkpoint = Path(summary["checkpoint"])
    assert not (checkpoint / "value_head.pt").exists() and (checkpoint / "adapter").is_dir()
    assert summary["advantage"] == "group" and summary["env_steps"] >= 40
    # Warm-starting a group run from it needs no value head either.
    warm = _groups(model, total_steps=8, init_adapter=str(checkpoint))
    summary, _ = train(tmp_path / "warm", TTT, warm)
    assert summary["env_steps"] >= 8


@pytest.mark.parametrize("estimator", ["group", "step_group"])
def test_a_rollout_holds_whole_episodes_of_complete_groups_with_their_advantages(model: Path, estimator: str) -> None:
    config = _groups(model, advantage=estimator, num_steps=3, gamma=0.9)
    ac = ActorCritic(config, "rules")
    stepper = EnvStepper(make_vector_env(EnvConfig(KUHN), 8), seed=5, group_size=4)
    generator = torch.Generator().manual_seed(0)
    rollout = collect_groups(RolloutActor(ac, strategy_for(config), generator), stepper, config, KUHN)
    stepper.close()
    assert isinstance(rollout, GroupRollout) and rollout.size >= config.rollout_size
    episodes = sorted(e.index for e in rollout.finished)
    assert episodes == list(range(len(episodes))) and len(episodes) % 4 == 0  # complete groups, every one finished
    assert set(rollout.episode_of) == set(episodes)
    for episode in rollout.finished:  # a group's episodes were dealt the same cards: the same seed
        assert episode.seed == 5 + episode.index // 4
    # By hand: episode returns, leave-one-out within groups of 4; step_group adds the same within (group, prompt).
    returns = {e.index: e.stats.episode_return for e in rollout.finished}
    rows = torch.tensor(rollout.episode_of)
    index = sorted(returns)
    per_episode = leave_one_out(torch.tensor([returns[e] for e in index]), torch.tensor(index) // 4)
    expected = torch.tensor([float(per_episode[index.index(int(e))]) for e in rows])
    if estimator == "step_group":
        togo, seen = [], {}
        for row in reversed(range(len(rows))):  # reward-to-go, walking each episode backwards
            e = int(rows[row])
            seen[e] = rollout.row_rewards[row] + 0.9 * seen.get(e, 0.0)
            togo.append(seen[e])
        togo.reverse()
        anchors = {}
        labels = [
            anchors.setdefault((int(e) // 4, key), len(anchors)) for e, key in zip(rows, rollout.keys, strict=True)
        ]
        expected = expected + leave_one_out(torch.tensor(togo), torch.tensor(labels))
    assert rollout.advantages(config).tolist() == pytest.approx(expected.tolist(), abs=1e-6)


def test_rows_with_one_prompt_share_a_forward_with_the_log_probs_of_separate_ones(model: Path) -> None:
    config = _groups(model, kl_coef=0.05)
    ac = ActorCritic(config, "rules")
    strategy = strategy_for(config)
    envs = make_vector_env(EnvConfig(TTT), 4)
    stepper = EnvStepper(envs, seed=3, group_size=2)
    stepper.reset()
    observations, infos = stepper.observations, stepper.infos
    # Rows 0/1 and 2/3 are groups: two distinct prompts among four rows.
    prompts = [p.ids for p in ac.encode(observations)]
    _, continuations = strategy.candidates(ac, prompts, infos, TTT, None)
    distinct, inverse = merged_rows(prompts, [True] * 4, continuations)
    assert distinct == [0, 2] and inverse.tolist() == [0, 0, 1, 1]
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        shared = act(ac, strategy, observations, infos, TTT, generator=generator, with_reference=True)
        alone = [
            act(ac, strategy, [observations[i]], [infos[i]], TTT, generator=generator, with_reference=True)
            for i in range(4)
        ]
    stepper.close()
    for i in range(4):
        torch.testing.assert_close(shared.probs[i], alone[i].probs[0])
        torch.testing.assert_close(shared.reference[i], alone[i].reference[0])
        assert shared.hidden[i].shape == alone[i].hidden[0].shape
    assert shared.hidden[0] is shared.hidden[1]  # one tensor for the merged rows, not a copy each


def test_an_update_over_merged_rows_equals_one_over_separate_rows(tmp_path: Path, model: Path) -> None:
    # The same run twice, once with merging turned off: the adapters after two updates are the same.
    from llm_gym.agents.ppo_lora import strategies

    config = _groups(model, total_steps=40, kl_coef=0.05, learning_rate=1e-2)
    merged, _ = train(tmp_path / "merged", KUHN, config)
    strategies.ScoreMode.merges_identical = False
    try:
        separate, _ = train(tmp_path / "separate", KUHN, config)
    finally:
        strategies.ScoreMode.merges_identical = True
    a = load_file(Path(merged["checkpoint"]) / "adapter" / "adapter_model.safetensors")
    b = load_file(Path(separate["checkpoint"]) / "adapter" / "adapter_model.safetensors")
    assert a.keys() == b.keys()
    for key in a:
        torch.testing.assert_close(a[key], b[key], rtol=1e-4, atol=1e-6)


def test_a_resumed_group_run_continues_exactly(tmp_path: Path, model: Path) -> None:
    config = _groups(model, total_steps=120, kl_coef=0.05, checkpoint_every=1)
    summary, _ = train(tmp_path / "whole", TTT, config)
    checkpoints = sorted((tmp_path / "whole" / "checkpoints").glob("step_*"), key=lambda p: int(p.name[5:]))
    assert len(checkpoints) >= 3
    resumed = resume_as_if_killed(tmp_path / "whole", tmp_path / "killed", checkpoints[0].name, TTT, config)
    assert resumed["env_steps"] == summary["env_steps"] and resumed["episodes"] == summary["episodes"]
    final = Path(summary["checkpoint"]).name
    a = load_file(tmp_path / "whole" / "checkpoints" / final / "adapter" / "adapter_model.safetensors")
    b = load_file(tmp_path / "killed" / "checkpoints" / final / "adapter" / "adapter_model.safetensors")
    for key in a:
        assert torch.equal(a[key], b[key]), key
    assert resumed["train_history"] == summary["train_history"]


def test_group_settings_that_need_a_value_head_are_refused(model: Path) -> None:
    with pytest.raises(ValueError, match="group_size must be >= 2 and divide num_envs"):
        _groups(model, num_envs=6, group_size=4)
    with pytest.raises(ValueError, match="value_warmup_updates does not go with advantage=group"):
        _groups(model, value_warmup_updates=1)
    with pytest.raises(ValueError, match="start_spread does not go with advantage=step_group"):
        _groups(model, advantage="step_group", start_spread=3)


def test_eval_exact_logs_the_greedy_policys_exact_values(tmp_path: Path, model: Path) -> None:
    config = _groups(model, total_steps=32, eval_every=16, eval_episodes=2, eval_exact=True)
    summary, _ = train(tmp_path / "run", KUHN, config)
    history = summary["exact_eval_history"]
    assert [step for step, *_ in history][0] == 0 and len(history) >= 2  # before training, then each evaluation
    for _, expected, win, loss in history:
        assert -2.0 <= expected <= 2.0 and 0.0 <= loss <= 1.0 - win + 1e-9
    with pytest.raises(Exception, match="--opponent random"):
        train(tmp_path / "mcts", EnvConfig(TTT, {"opponent": "mcts"}), config)
    assert not list((tmp_path / "mcts").glob("checkpoints/step_*"))  # refused before any training
