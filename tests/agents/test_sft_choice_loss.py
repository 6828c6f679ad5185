"""sft's choice loss on tiny random models: the packed loss is the cross-entropy of the demo's answer under score
mode's softmax over every legal action's sequence log-likelihood (checked against full forward passes of the plain
model), the answer loss beside it is unchanged, training with it raises the rate at which the answer ranks first,
and demos that list no legal actions are refused in one line."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import torch
from sft_demos import sft_settings  # tests/agents/sft_demos.py

from llm_gym.agent import EnvConfig
from llm_gym.agents.ppo_lora.model import ActorCritic
from llm_gym.agents.sft import SFTAgent
from llm_gym.agents.sft.batches import Batches
from llm_gym.agents.sft.config import SFTConfig
from llm_gym.agents.sft.data import DemoEncoder
from llm_gym.config import to_dict
from llm_gym.demos.format import read_demos
from llm_gym.demos.record import record_demos
from llm_gym.envs.catalog import EnvTraits
from llm_gym.errors import ConfigError
from llm_gym.plugins import get_agent
from llm_gym.runs import Run

TTT = "OpenSpiel-tic_tac_toe-v0"


@pytest.fixture(scope="module")
def ttt_demos(tmp_path_factory: pytest.TempPathFactory) -> Path:
    env = EnvConfig(TTT)
    out = tmp_path_factory.mktemp("demos") / "ttt.jsonl"
    record_demos(get_agent("solver")().policy(env), env, 8, out, source={"agent": "solver"})
    return out


def _actor_critic(config: SFTConfig) -> ActorCritic:
    return ActorCritic(config.as_ppo_lora(), EnvTraits.probe(EnvConfig(TTT)).instructions)


def _full_forward_choice_logp(ac: ActorCritic, record) -> torch.Tensor:
    """log pi(action) over the record's legal actions, from one full forward pass per action."""
    prompt = ac.builder.encode([record.messages[1]["content"]])[0].ids
    scores = []
    with torch.no_grad():
        for name in record.choices:
            answer = ac.builder.choice_ids(name, True)
            logits = ac.model(torch.tensor([prompt + answer])).logits[0].float()
            logp = torch.log_softmax(logits[len(prompt) - 1 : -1], -1)
            scores.append(logp[torch.arange(len(answer)), torch.tensor(answer)].sum())
    return torch.log_softmax(torch.stack(scores), 0)


def test_the_choice_loss_is_the_answers_cross_entropy_among_the_legal_actions(
    tiny_model_dir: Path, ttt_demos: Path
) -> None:
    config = sft_settings(tiny_model_dir, ttt_demos, value_coef=0.0, choice_loss_coef=1.0)
    ac = _actor_critic(config)
    records = read_demos(ttt_demos)[:6]
    assert all(r.answer in r.choices and len(r.choices) > 1 for r in records)
    encoder = DemoEncoder(ac.builder, True)
    examples = [encoder.encode(r) for r in records]
    with_choices = Batches(ac, examples, batch_size=4, with_choices=True)
    answers_only = Batches(ac, examples, batch_size=4)
    with torch.no_grad():
        losses = with_choices.losses(ac, range(6), config, train=True)
        plain = answers_only.losses(ac, range(6), config, train=True)
    logps = [_full_forward_choice_logp(ac, r) for r in records]
    expected = -sum(float(lp[r.choices.index(r.answer)]) for lp, r in zip(logps, records, strict=True)) / 6
    assert float(losses["choice_loss"]) == pytest.approx(expected, rel=1e-4)
    assert float(losses["answer_loss"]) == pytest.approx(float(plain["answer_loss"]), rel=1e-5)
    assert float(losses["loss"]) == pytest.approx(float(plain["loss"]) + expected, rel=1e-4)
    assert "choice_loss" not in plain

    # choice_target=best: any move the solver values as highly as its own counts, so the loss is -log of their sum.
    best = dataclasses.replace(config, choice_target="best")
    with torch.no_grad():
        relaxed = with_choices.losses(ac, range(6), best, train=True)["choice_loss"]
    expected_best = 0.0
    for lp, record in zip(logps, records, strict=True):
        top = max(record.choice_values)
        assert record.choice_values[record.choices.index(record.answer)] == top  # the solver plays a best move
        expected_best -= float(torch.logsumexp(lp[[v == top for v in record.choice_values]], 0)) / 6
    assert float(relaxed) == pytest.approx(expected_best, rel=1e-4)
    assert float(relaxed) < float(losses["choice_loss"])  # some positions have more than one best move


def test_training_with_the_choice_loss_ranks_the_answers_first(
    tiny_model_dir: Path, ttt_demos: Path, tmp_path: Path
) -> None:
    config = sft_settings(tiny_model_dir, ttt_demos, epochs=4, choice_loss_coef=1.0, validation_fraction=0.0)
    run = Run.create(TTT, "sft", to_dict(config), path=tmp_path / "run")
    try:
        SFTAgent(config).train(EnvConfig(TTT), run)
    finally:
        run.close()
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    scalars = EventAccumulator(str(run.path / "tb"))
    scalars.Reload()
    accuracy = [e.value for e in scalars.Scalars("train_epoch/choice_accuracy")]
    loss = [e.value for e in scalars.Scalars("train_epoch/choice_loss")]
    assert len(accuracy) == 4 and accuracy[-1] > accuracy[0] and loss[-1] < loss[0]


def test_demos_without_legal_actions_are_refused_in_one_line(
    tiny_model_dir: Path, ttt_demos: Path, tmp_path: Path
) -> None:
    stripped = tmp_path / "old.jsonl"
    lines = [json.loads(line) for line in ttt_demos.read_text().splitlines()]
    stripped.write_text(
        "".join(json.dumps({k: v for k, v in d.items() if k not in ("choices", "choice_values")}) + "\n" for d in lines)
    )
    config = sft_settings(tiny_model_dir, stripped, choice_loss_coef=1.0)
    with pytest.raises(
        ConfigError, match=r"choice_loss_coef needs demos that list their legal actions .*`llm-gym demos`"
    ):
        SFTAgent(config).train(EnvConfig(TTT), Run.create(TTT, "sft", to_dict(config), path=tmp_path / "run"))
    with pytest.raises(ConfigError, match="needs action_mode=score"):
        generate = dataclasses.replace(config, demos=str(ttt_demos), action_mode="generate")
        SFTAgent(generate).train(EnvConfig(TTT), Run.create(TTT, "sft", to_dict(generate), path=tmp_path / "g"))
    unvalued = tmp_path / "unvalued.jsonl"
    unvalued.write_text("".join(json.dumps({**d, "choice_values": []}) + "\n" for d in lines))
    config = sft_settings(tiny_model_dir, unvalued, choice_loss_coef=1.0, choice_target="best")
    with pytest.raises(ConfigError, match="choice_target=best needs the demonstrator's value of each legal action"):
        SFTAgent(config).train(EnvConfig(TTT), Run.create(TTT, "sft", to_dict(config), path=tmp_path / "u"))
    with pytest.raises(ValueError, match="choice_loss_coef must be >= 0"):
        sft_settings(tiny_model_dir, ttt_demos, choice_loss_coef=-1.0)
