"""``action_prior=calibrated``: per-action offsets that cancel the LM's prior over action names. The fit makes each
action's mean probability over the calibration states that of a uniform choice and keeps the state-to-state
differences; a run fits them on real Breakout states, keeps them in every checkpoint, and the checkpoint plays with
exactly the probabilities training acted with; a resumed or warm-started run keeps them; export copies them."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from llm_gym.agent import EnvConfig, act_with_details
from llm_gym.agents.ppo_lora.calibration import (
    ACTION_BIAS_FILE,
    fit_action_bias,
    load_action_bias,
    mean_probabilities,
)
from llm_gym.agents.ppo_lora.testing import tiny_config, train
from llm_gym.errors import CheckpointError
from llm_gym.training.checkpoints import load_policy

ENV = "LLMBreakout-text-v0"
NAMES = ["NOOP", "FIRE", "RIGHT", "LEFT"]


def _log_softmax(x: np.ndarray) -> np.ndarray:
    return x - np.logaddexp.reduce(x, axis=-1, keepdims=True)


def test_the_fit_equalises_mean_probabilities_and_keeps_state_differences() -> None:
    # Breakout-like: LEFT at 1-2%, RIGHT about half, FIRE about 40%, with a little state dependence.
    rng = np.random.default_rng(0)
    prior = np.log(np.array([0.08, 0.40, 0.505, 0.015]))
    logits = prior + 0.5 * rng.standard_normal((200, 4))
    rows = [(NAMES, _log_softmax(row)) for row in logits]
    assert mean_probabilities(rows)["LEFT"] < 0.05
    bias = fit_action_bias(rows)
    assert sorted(bias) == sorted(NAMES)
    after = mean_probabilities(rows, bias)
    assert after == pytest.approx(dict.fromkeys(NAMES, 0.25), abs=1e-6)
    assert sum(bias.values()) == pytest.approx(0.0, abs=1e-9)
    assert bias["LEFT"] > bias["RIGHT"]
    # An offset per action moves every state's log-odds between two actions by the same amount.
    calibrated = [_log_softmax(lp + np.array([bias[n] for n in NAMES])) for _, lp in rows]
    for (_, lp), new in zip(rows[:5], calibrated[:5], strict=True):
        assert (new[3] - new[2]) - (lp[3] - lp[2]) == pytest.approx(bias["LEFT"] - bias["RIGHT"])


def test_a_uniform_policy_needs_no_offsets_and_legal_sets_may_differ() -> None:
    rows = [(NAMES, np.log(np.full(4, 0.25)))] * 10
    assert all(abs(v) < 1e-9 for v in fit_action_bias(rows).values())
    # A board game: the legal moves change from state to state. The target is each move's mean probability under a
    # uniform choice among the legal ones.
    rows = [
        (["a", "b", "c"], np.log([0.8, 0.1, 0.1])),
        (["a", "b"], np.log([0.9, 0.1])),
        (["b", "c"], np.log([0.5, 0.5])),
    ]
    after = mean_probabilities(rows, fit_action_bias(rows))
    assert after == pytest.approx(
        {"a": (1 / 3 + 1 / 2) / 3, "b": (1 / 3 + 1 / 2 + 1 / 2) / 3, "c": (1 / 3 + 1 / 2) / 3}, abs=1e-6
    )


def test_bad_settings_and_a_broken_offsets_file_are_one_line(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="needs action_mode=score"):
        tiny_config(None, action_prior="calibrated", action_mode="generate")
    with pytest.raises(ValueError, match="calibration_states must be >= 1"):
        tiny_config(None, action_prior="calibrated", calibration_states=0)
    assert load_action_bias(tmp_path) == {} and load_action_bias(None) == {}
    (tmp_path / ACTION_BIAS_FILE).write_text("[1, 2]")
    with pytest.raises(CheckpointError, match="rewrite or remove it"):
        load_action_bias(tmp_path)


@pytest.fixture(scope="module")
def calibrated_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, object, dict]:
    from llm_gym.lm.testing import make_tiny_model

    root = tmp_path_factory.mktemp("calibrated")
    model = make_tiny_model(root / "model", layers=2, hidden=32, init_std=0.3)
    config = tiny_config(
        model, total_steps=32, num_envs=2, num_steps=8, minibatch_size=16, update_epochs=1, lora_rank=4,
        action_prior="calibrated", calibration_states=24, checkpoint_every=16, keep_checkpoints=4,
    )  # fmt: skip
    summary, run = train(root / "run", ENV, config)
    return Path(summary["checkpoint"]), config, summary


def _breakout_states(n: int) -> tuple[list, list]:
    import gymnasium as gym

    env = gym.make(ENV)
    observations, infos = [], []
    observation, info = env.reset(seed=3)
    for step in range(n):
        observations.append(observation)
        infos.append(info)
        observation, _, terminated, truncated, info = env.step(1 if step == 0 else 2 + step % 2)
        if terminated or truncated:
            observation, info = env.reset()
    env.close()
    return observations, infos


def test_a_calibrated_run_keeps_its_offsets_and_plays_as_it_trained(calibrated_run) -> None:
    from llm_gym.agents.ppo_lora.acting import act, strategy_for
    from llm_gym.agents.ppo_lora.train import initial_actor_critic
    from llm_gym.training.curves import read_scalars

    checkpoint, config, summary = calibrated_run
    bias = json.loads((checkpoint / ACTION_BIAS_FILE).read_text())
    assert sorted(bias) == sorted(NAMES) and summary["action_bias"] == pytest.approx(bias)
    assert any(abs(v) > 1e-3 for v in bias.values()), "a random tiny model has a prior over the names"
    scalars = read_scalars(checkpoint.parent.parent)
    after = [float(scalars[f"calibration/prob_after/{name}"][1][0]) for name in NAMES]
    assert float(scalars["calibration/seconds"][1][0]) > 0
    assert after == pytest.approx([0.25] * 4, abs=1e-4)
    # Every checkpoint carries the same offsets (fitted once, before the first rollout).
    for step in ("step_16", "step_32"):
        assert load_action_bias(checkpoint.parent / step) == pytest.approx(bias)

    observations, infos = _breakout_states(6)
    policy, _ = load_policy(checkpoint, EnvConfig(ENV))
    actions, details = act_with_details(policy, observations, infos)
    # The training path (unmerged adapter, offsets from the checkpoint, as --resume builds it) gives the same policy.
    ac = initial_actor_critic(config, policy.traits.instructions, checkpoint)
    assert ac.action_bias == pytest.approx(bias)
    with torch.no_grad():
        decisions = act(ac, strategy_for(config), observations, infos, ENV, generator=torch.Generator(), greedy=True,
                        keep_hidden=False)  # fmt: skip
    assert actions == decisions.actions
    played = [float(np.log(d["probs"][c])) for d, c in zip(details, decisions.choice.tolist(), strict=True)]
    assert played == pytest.approx(decisions.logprob.tolist(), abs=1e-4)
    # Without the offsets the same adapter gives other probabilities.
    ac.set_action_bias({})
    with torch.no_grad():
        plain = act(ac, strategy_for(config), observations, infos, ENV, generator=torch.Generator(), greedy=True,
                    keep_hidden=False)  # fmt: skip
    assert not np.allclose(plain.logprob.numpy(), decisions.logprob.numpy(), atol=1e-3)


def test_a_warm_start_keeps_the_offsets_and_export_copies_them(calibrated_run, tmp_path: Path) -> None:
    from llm_gym.cli import build_app
    from llm_gym.training.curves import read_scalars

    checkpoint, config, _ = calibrated_run
    bias = load_action_bias(checkpoint)
    warm = dataclasses.replace(config, init_adapter=str(checkpoint), total_steps=16)
    summary, run = train(tmp_path / "warm", ENV, warm)
    assert summary["action_bias"] == pytest.approx(bias)
    assert not any(key.startswith("calibration/") for key in read_scalars(run.path)), "no second fit"

    out = tmp_path / "exported"
    result = CliRunner().invoke(build_app(), ["export", "-c", str(checkpoint), "--adapter-only", "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert json.loads((out / ACTION_BIAS_FILE).read_text()) == pytest.approx(bias)
    assert "calibrated its prior" in " ".join(result.output.split())


def test_the_update_recomputes_the_rollouts_offset_log_probabilities(calibrated_run) -> None:
    # The PPO ratio is the offset policy's: a stored decision re-packed for the update gets its offsets back, so the
    # recomputed log-probability of the action taken is the one the rollout stored (ratio 1 before any step).
    from llm_gym.agents.ppo_lora.model import ActorCritic
    from llm_gym.agents.ppo_lora.rollout import RolloutActor, collect
    from llm_gym.agents.ppo_lora.strategies import choice_logprobs, strategy_for
    from llm_gym.agents.ppo_lora.update import flatten_decisions, stored_batch
    from llm_gym.envs.catalog import EnvTraits
    from llm_gym.stepping import EnvStepper, make_vector_env

    checkpoint, config, _ = calibrated_run
    # A fresh LoRA (it starts as the base model) with the run's offsets: policy and reference are the same policy.
    ac = ActorCritic(config, EnvTraits.probe(EnvConfig(ENV)).instructions)
    ac.set_action_bias(load_action_bias(checkpoint))
    stepper = EnvStepper(make_vector_env(EnvConfig(ENV), 2, text_actions=False), seed=5)
    stepper.reset()
    try:
        actor = RolloutActor(ac, strategy_for(config), torch.Generator().manual_seed(0), with_reference=True)
        rollout = collect(actor, stepper, dataclasses.replace(config, num_steps=3), ENV, torch.zeros(2))
    finally:
        stepper.close()
    flat = flatten_decisions(rollout)
    index = list(range(len(flat["prompts"])))
    batch, hidden = stored_batch(ac, flat, index)
    assert batch.seq_bias is not None
    with torch.no_grad():
        out, _ = ac.top(hidden, batch, "train")
    logp = choice_logprobs(out, batch, len(index))
    taken = logp.gather(1, torch.tensor(flat["choice"])[:, None]).squeeze(1)
    assert taken.tolist() == pytest.approx(flat["logprob"], abs=1e-4)
    # The reference (the adapter switched off) carries the same offsets, so the KL to it starts at 0.
    reference = torch.stack(flat["reference"])
    torch.testing.assert_close(reference, logp.cpu(), atol=1e-4, rtol=0)
