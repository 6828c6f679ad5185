"""The one acting function of ``ppo_lora`` (CleanRL's ``get_action_and_value``): :func:`act` decides for a batch of
envs, and serves the rollout (sampled, with the reference), the greedy evaluation (:class:`LivePolicy`) and, through
the strategy's :meth:`~llm_gym.agents.ppo_lora.strategies.Strategy.losses`, the PPO update, which re-runs the same
packed forward on the stored inputs. The action modes are strategies (:mod:`llm_gym.agents.ppo_lora.strategies`); what
a decision keeps is in :mod:`llm_gym.agents.ppo_lora.decisions`.

With a rollout engine (``rollout_backend=vllm``) the engine picks the action and the training model's forward
recomputes its log-probability; the engine's own is kept beside it (``Decisions.engine_logprob``) to measure how far
the two are apart. Rows that show the same prompt with the same continuations share one forward (:func:`merged_rows`).
Prompts carry the episode's earlier turns where the env adds them (``history=K``, :mod:`llm_gym.envs.history`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch

from llm_gym.agent import DecisionDetails, DetailedPolicy
from llm_gym.agents.ppo_lora.decisions import Continuations, Decisions, Prompts, Sampling
from llm_gym.agents.ppo_lora.frozen_rows import row_key
from llm_gym.agents.ppo_lora.model import ActorCritic
from llm_gym.agents.ppo_lora.strategies import Strategy, strategy_for
from llm_gym.envs.history import TURNS_KEY
from llm_gym.envs.protocol import step_instructions
from llm_gym.lm.backends import LMBackend
from llm_gym.lm.prompts import Turns

__all__ = ["LivePolicy", "act", "identity", "merged_rows", "row_key", "rules_of", "strategy_for", "turns_of"]


def act(
    ac: ActorCritic,
    strategy: Strategy,
    observations: Sequence[Any],
    infos: Sequence[Mapping[str, Any]],
    env_id: str,
    *,
    generator: torch.Generator,
    greedy: bool = False,
    with_reference: bool = False,
    keep_hidden: bool = True,
    engine: LMBackend | None = None,
    together: bool = False,
) -> Decisions:
    """Decide for every row at once: frozen layers once, trainable layers for the policy and the value, and
    (``with_reference``) once more as the reference policy (``kl_reference``). With an ``engine`` (serving the
    current adapter), the engine picks the actions and the forward recomputes their log-probabilities.
    ``together``: the frozen layers run the rows of equal length as one batch (for a caller that asks the same
    batches every time: agents/ppo_lora/frozen_rows.py)."""
    parts = Prompts(list(observations), rules_of(ac, infos), turns_of(infos))
    prompts = ac.encode(parts.observations, parts.rules, parts.turns)
    how = Sampling(greedy, generator)
    rows = len(prompts)
    picked, engine_logprob = None, torch.full((rows,), float("nan"))
    if engine is None:
        options, continuations = strategy.candidates(ac, prompts, infos, env_id, how)
    else:
        pick = strategy.from_engine(engine, ac, parts, infos, env_id, how)
        options, continuations, picked, engine_logprob = pick.options, pick.continuations, pick.choice, pick.logprob
    ids, uses_prefix = [p.ids for p in prompts], [p.uses_prefix for p in prompts]
    # Rows that show the same prompt with the same continuations (a group's first observation, a state many envs
    # reach) run once; every row still draws its own action.
    distinct, inverse = merged_rows(ids, uses_prefix, continuations) if strategy.merges_identical else identity(rows)
    batch, hidden, frozen = ac.bottom_rows(
        [ids[j] for j in distinct],
        [uses_prefix[j] for j in distinct],
        [continuations[j] for j in distinct],
        together,
    )
    out, values = ac.top(hidden, batch, "rollout")
    actions, choice, logprob, token_logprobs, probs = strategy.choose(out, batch, options, how, picked, inverse)
    reference = [torch.empty(0)] * rows
    if with_reference:
        distinct_reference = strategy.reference(
            ac.top(hidden, batch, "reference")[0], batch, [continuations[j] for j in distinct]
        )
        reference = [distinct_reference[j] for j in inverse.tolist()]
    # One tensor per distinct row (the frozen-row store's own, never written to), shared by the rows merged into it.
    kept = [frozen[j] for j in inverse.tolist()] if keep_hidden else []
    values = values[inverse.to(values.device)]
    return Decisions(
        prompts=[p.ids for p in prompts],
        uses_prefix=[p.uses_prefix for p in prompts],
        continuations=continuations,
        hidden=kept,
        actions=actions,
        choice=choice,
        logprob=logprob,
        token_logprobs=token_logprobs,
        reference=reference,
        values=values.cpu(),
        engine_logprob=engine_logprob.float(),
        probs=probs,
    )


def merged_rows(
    prompts: Sequence[Sequence[int]], uses_prefix: Sequence[bool], continuations: Continuations
) -> tuple[list[int], torch.Tensor]:
    """(the first row of each distinct (prompt, prefix use, continuations), each row's index among them): rows with
    equal ones compute the same forward, so one pass serves them all."""
    first: dict[tuple, int] = {}
    distinct: list[int] = []
    inverse = []
    for i, (ids, prefix, rows) in enumerate(zip(prompts, uses_prefix, continuations, strict=True)):
        key = row_key(ids, prefix, rows)
        if key not in first:
            first[key] = len(distinct)
            distinct.append(i)
        inverse.append(first[key])
    return distinct, torch.tensor(inverse, dtype=torch.long)


def identity(rows: int) -> tuple[list[int], torch.Tensor]:
    """:func:`merged_rows` where no row is merged."""
    return list(range(rows)), torch.arange(rows)


def rules_of(ac: ActorCritic, infos: Sequence[Mapping[str, Any]]) -> list[str]:
    """Each row's system prompt: its task's rules where the env gives them per task (a curriculum across games)."""
    return [step_instructions(info, ac.builder.instructions) for info in infos]


def turns_of(infos: Sequence[Mapping[str, Any]]) -> list[Turns]:
    """Each row's earlier turns of its episode, where the env keeps them (``history=K``); none otherwise."""
    return [tuple(info.get(TURNS_KEY, ())) for info in infos]


class LivePolicy(DetailedPolicy):
    """Greedy (or, ``greedy=False``, sampled) actions of the adapter being trained, through :func:`act` (the
    periodic evaluation)."""

    def __init__(self, ac: ActorCritic, strategy: Strategy, env_id: str, seed: int = 0, greedy: bool = True) -> None:
        self.ac, self.strategy, self.env_id, self.greedy = ac, strategy, env_id, greedy
        self.generator = torch.Generator().manual_seed(seed)

    @torch.no_grad()
    def act_with_details(
        self, observations: Sequence[Any], infos: Sequence[Mapping[str, Any]]
    ) -> tuple[list[Any], list[DecisionDetails]]:
        """The actions and, in score mode, each decision's probabilities over the legal actions (what an exact
        evaluation of the sampling policy reads)."""
        decisions = act(
            self.ac, self.strategy, observations, infos, self.env_id, generator=self.generator, greedy=self.greedy,
            keep_hidden=False,
        )  # fmt: skip
        details = [DecisionDetails(probs=p.tolist()) if p.numel() else DecisionDetails() for p in decisions.probs]
        return decisions.actions, details
