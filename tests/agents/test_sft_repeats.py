"""sft runs a demo that a batch repeats (the same prompt and answer) once and counts it as often: on real Kuhn poker
demos of the best response (about 10 distinct decisions, returns that differ between the copies), the merged batch
gives the same losses (the value loss included) and the same gradients as one row per demo, from fewer rows; and a
micro-batch holds ``micro_batch_size`` distinct rows."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from sft_demos import sft_settings  # tests/agents/sft_demos.py

from llm_gym.agent import EnvConfig
from llm_gym.agents.ppo_lora.model import ActorCritic
from llm_gym.agents.sft.batches import Batches, accumulate
from llm_gym.agents.sft.data import DemoEncoder
from llm_gym.demos.format import read_demos
from llm_gym.envs.catalog import EnvTraits

KUHN = "OpenSpiel-kuhn_poker-v0"


def _gradients(ac: ActorCritic) -> list[torch.Tensor]:
    return [p.grad.clone() if p.grad is not None else torch.zeros_like(p) for p in ac.trainable_parameters()]


@pytest.mark.parametrize("choices", [False, True], ids=["answer loss", "choice loss"])
def test_repeated_demos_run_once_with_the_same_loss_and_gradient(
    tiny_model_dir: Path, kuhn_demos: Path, choices: bool
) -> None:
    config = sft_settings(tiny_model_dir, kuhn_demos, value_coef=0.5, choice_loss_coef=1.0 if choices else 0.0)
    ac = ActorCritic(config.as_ppo_lora(), EnvTraits.probe(EnvConfig(KUHN)).instructions)
    records = read_demos(kuhn_demos)
    examples = [DemoEncoder(ac.builder, True).encode(r, r.return_to_go) for r in records]
    merged = Batches(ac, examples, batch_size=8, with_choices=choices)
    separate = Batches(ac, examples, batch_size=8, with_choices=choices, merge_repeats=False)
    index = list(range(len(examples)))
    groups = merged.repeats(index)
    assert len(groups) < len(index) / 2  # Kuhn's best response repeats its decisions
    assert sorted(i for group in groups for i in group) == index
    # The copies of some decision ended differently, so the value loss has a spread the merged row must keep.
    assert any(len({examples[i].return_to_go for i in group}) > 1 for group in groups)

    results = {}
    for name, data in (("merged", merged), ("separate", separate)):
        ac.model.zero_grad(set_to_none=True)
        ac.value_head.zero_grad(set_to_none=True)
        losses = data.losses(ac, index, config, train=True)
        losses["loss"].backward()
        results[name] = ({k: float(v.detach()) for k, v in losses.items()}, _gradients(ac))
    (merged_losses, merged_grads), (separate_losses, separate_grads) = results["merged"], results["separate"]
    assert merged_losses.keys() == separate_losses.keys()
    for key, value in separate_losses.items():
        assert merged_losses[key] == pytest.approx(value, rel=1e-5, abs=1e-7), key
    assert any(float(g.abs().sum()) > 0 for g in separate_grads)
    for merged_grad, separate_grad in zip(merged_grads, separate_grads, strict=True):
        torch.testing.assert_close(merged_grad, separate_grad, rtol=1e-4, atol=1e-6)


def test_a_micro_batch_is_distinct_rows(tiny_model_dir: Path, kuhn_demos: Path) -> None:
    config = sft_settings(tiny_model_dir, kuhn_demos, value_coef=0.5, minibatch_size=32, micro_batch_size=3)
    ac = ActorCritic(config.as_ppo_lora(), EnvTraits.probe(EnvConfig(KUHN)).instructions)
    records = read_demos(kuhn_demos)
    data = Batches(ac, [DemoEncoder(ac.builder, True).encode(r, r.return_to_go) for r in records], batch_size=32)
    index = list(range(min(32, len(records))))
    rows: list[int] = []
    packed = data._pack

    def counting_pack(model: ActorCritic, rows_index: list[int]) -> object:
        rows.append(len(rows_index))
        return packed(model, rows_index)

    data._pack = counting_pack  # type: ignore[method-assign]
    scalars = accumulate(data, ac, index, config)
    groups = data.repeats(index)
    assert rows == [min(3, len(groups) - start) for start in range(0, len(groups), 3)]
    with torch.no_grad():
        whole = data.losses(ac, index, config, train=True)
    assert scalars["train/loss"] == pytest.approx(float(whole["loss"]), rel=1e-5)
    assert scalars["train/answer_loss"] == pytest.approx(float(whole["answer_loss"]), rel=1e-5)
