"""ppo_lora's store of frozen-layer output per decision row (agents/ppo_lora/frozen_rows.py, ``frozen_cache_mb``):
a row met again skips the frozen layers, the numbers are the same whether a row came from the store or not (each row
is computed on its own, or with the rows of its shape when asked together), the store keeps to its budget, and a
changed system prompt empties it. Tiny model, real tic-tac-toe."""

from __future__ import annotations

import gymnasium as gym
import pytest
import torch

import llm_gym  # noqa: F401  (registers the envs)
from llm_gym.agents.ppo_lora.acting import act, strategy_for
from llm_gym.agents.ppo_lora.model import ActorCritic
from llm_gym.agents.ppo_lora.testing import tiny_config

TTT = "OpenSpiel-tic_tac_toe-v0"


@pytest.fixture(scope="module")
def ac(tmp_path_factory: pytest.TempPathFactory) -> ActorCritic:
    from llm_gym.lm.testing import make_tiny_model

    model = make_tiny_model(tmp_path_factory.mktemp("tiny-lm"), layers=3, hidden=32)
    return ActorCritic(tiny_config(model, trainable_layers=1, lora_rank=4, advantage="group"), "rules")


def _positions(count: int) -> tuple[list, list]:
    env = gym.make(TTT)
    observations, infos = [], []
    for seed in range(count):
        observation, info = env.reset(seed=seed)
        if seed % 2:  # a position one move in: other legal actions, another prompt
            observation, _, _, _, info = env.step(info["legal_actions"][seed % 3])
        observations.append(observation)
        infos.append(info)
    return observations, infos


def _decide(ac: ActorCritic, observations: list, infos: list):
    with torch.no_grad():
        return act(ac, strategy_for(ac.config), observations, infos, TTT, generator=torch.Generator().manual_seed(0))


def test_a_row_met_again_skips_the_frozen_layers_with_the_same_numbers(ac: ActorCritic) -> None:
    observations, infos = _positions(6)
    ac.frozen_rows.clear()
    ac.frozen_rows.budget = 0  # keep none: every row computed now
    cold = _decide(ac, observations, infos)
    ac.frozen_rows.budget = 2**30
    first = _decide(ac, observations, infos)
    hits, misses = ac.frozen_rows.hits, ac.frozen_rows.misses
    again = _decide(ac, list(reversed(observations)), list(reversed(infos)))  # other rows beside each, other order
    assert ac.frozen_rows.hits - hits == len(ac.frozen_rows.rows) > 0  # every distinct row from the store
    assert ac.frozen_rows.misses == misses  # nothing computed twice
    for decisions in (first, again):
        order = range(6) if decisions is first else reversed(range(6))
        for i, j in enumerate(order):
            assert torch.equal(decisions.probs[i], cold.probs[j]) and decisions.hidden[i].equal(cold.hidden[j])


def test_the_store_keeps_to_its_budget_and_forgets_on_a_new_system_prompt(ac: ActorCritic) -> None:
    observations, infos = _positions(8)
    ac.frozen_rows.clear()
    ac.frozen_rows.budget = 2**30
    _decide(ac, observations, infos)
    sizes = [row.numel() * row.element_size() for row in ac.frozen_rows.rows.values()]
    assert ac.frozen_rows.bytes == sum(sizes) and len(sizes) >= 2
    ac.frozen_rows.clear()
    ac.frozen_rows.budget = sizes[0] + sizes[1]  # room for about two rows: the most recent stay
    _decide(ac, observations, infos)
    assert 0 < ac.frozen_rows.bytes <= ac.frozen_rows.budget and len(ac.frozen_rows.rows) <= 2
    ac.use_instructions("other rules")
    assert not ac.frozen_rows.rows and ac.frozen_rows.bytes == 0
    ac.use_instructions("rules")


def _decide_together(ac: ActorCritic, observations: list, infos: list):
    with torch.no_grad():
        return act(ac, strategy_for(ac.config), observations, infos, TTT, generator=torch.Generator().manual_seed(0),
                   together=True)  # fmt: skip


def test_rows_asked_together_run_by_length_and_depend_on_the_call_only(ac: ActorCritic) -> None:
    observations, infos = _positions(8)  # four openings (one length) and four positions one move in
    ac.frozen_rows.clear()
    ac.frozen_rows.budget = 0
    alone = _decide(ac, observations, infos)
    calls = []
    run = ac.frozen_rows.run
    ac.frozen_rows.run = lambda batch: calls.append(batch.input_ids.shape[0]) or run(batch)
    try:
        cold = _decide_together(ac, observations, infos)  # nothing kept: every group computed
        assert sum(calls) == len({tuple(p) for p in cold.prompts}) and max(calls) > 1  # one batch per length
        ac.frozen_rows.budget = 2**30
        _decide_together(ac, observations[:3], infos[:3])  # other calls fill the store with other batches' numbers
        _decide(ac, observations, infos)  # and rows computed alone, kept apart
        calls.clear()
        warm = _decide_together(ac, observations, infos)
        assert calls  # a group with a row the store lacked ran again, whole
        calls.clear()
        again = _decide_together(ac, list(reversed(observations)), list(reversed(infos)))
        assert not calls  # every row from the store
    finally:
        ac.frozen_rows.run = run
    for i in range(8):
        assert warm.hidden[i].equal(cold.hidden[i]) and again.hidden[7 - i].equal(cold.hidden[i])
        assert torch.equal(warm.probs[i], cold.probs[i])
        # A batch rounds differently from a row alone, by rounding only.
        assert torch.allclose(cold.hidden[i], alone.hidden[i], atol=1e-5)
        assert torch.allclose(cold.probs[i], alone.probs[i], atol=1e-5)
