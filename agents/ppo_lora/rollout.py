"""Collecting a rollout: every step is one batched LM call for all envs (score or generate mode), and what the
update needs to recompute each decision is kept: the prompt, the scored continuations, the frozen layers' output,
the action, its log-probability, the value and the reference policy's log-probabilities."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from llm_gym.agents.ppo_lora.config import PPOLoRAConfig
from llm_gym.agents.ppo_lora.envs import EnvPool, FinishedEpisode
from llm_gym.agents.ppo_lora.model import ActorCritic
from llm_gym.envs.protocol import legal_choices
from llm_gym.lm.generation import generate, stop_token_ids
from llm_gym.lm.scoring import categorical_logprobs


@dataclass
class Decisions:
    """One batched decision for a list of rows (envs)."""

    prompts: list[list[int]]
    uses_prefix: list[bool]
    continuations: list[list[list[int]]]
    """Score mode: every legal action's tokens; generate mode: the one sampled answer."""
    hidden: list[torch.Tensor]
    """Per row, the frozen layers' output for its packed tokens (n_i, H)."""
    actions: list[Any]
    """What each env is stepped with: an action id (score) or the answer text (generate)."""
    choice: torch.Tensor
    """(rows,) index of the chosen continuation (score mode; 0 in generate mode)."""
    logprob: torch.Tensor
    """(rows,) log pi(action): the chosen choice's (score) or the answer's summed token log-probs (generate)."""
    token_logprobs: list[torch.Tensor]
    """generate mode: per row, each answer token's log-prob (empty in score mode)."""
    reference: list[torch.Tensor]
    """Per row, the reference's log-probs: over the choices (score) or of each answer token (generate); empty
    tensors when the KL term is off."""
    values: torch.Tensor
    """(rows,) value estimates."""


def decide(
    ac: ActorCritic,
    observations: list[Any],
    infos: list[dict[str, Any]],
    env_id: str,
    *,
    mode: str,
    generator: torch.Generator,
    with_reference: bool = False,
) -> Decisions:
    """Sample a decision for every row at once: frozen layers once, trainable layers for the policy and the value,
    and (``with_reference``) once more with the adapter disabled."""
    prompts = ac.encode(observations)
    if mode == "score":
        legal = [legal_choices(info, env_id) for info in infos]
        continuations = [ac.choices(names) for _, names in legal]
    else:
        texts, continuations = _sample_answers(ac, prompts, generator)
    batch = ac.pack([p.ids for p in prompts], [p.uses_prefix for p in prompts], continuations)
    hidden = ac.bottom(batch)
    out, values = ac.top(hidden, batch, "rollout")
    ref = ac.top(hidden, batch, "reference")[0] if with_reference else None
    rows = len(prompts)
    common = {
        "prompts": [p.ids for p in prompts],
        "uses_prefix": [p.uses_prefix for p in prompts],
        "continuations": continuations,
        "hidden": [hidden[i, :n].clone() for i, n in enumerate(batch.row_lengths.tolist())],
        "values": values.cpu(),
    }
    nothing = [torch.empty(0)] * rows
    if mode == "score":
        logp = categorical_logprobs(out.seq_logprobs, batch.seq_row, rows).cpu()
        choice = torch.multinomial(logp.exp(), 1, generator=generator).squeeze(1)
        reference = nothing
        if ref is not None:
            ref_logp = categorical_logprobs(ref.seq_logprobs, batch.seq_row, rows).cpu()
            reference = [ref_logp[i, : len(continuations[i])] for i in range(rows)]
        return Decisions(
            **common,
            actions=[legal[i][0][int(choice[i])] for i in range(rows)],
            choice=choice,
            logprob=logp.gather(1, choice[:, None]).squeeze(1),
            token_logprobs=nothing,
            reference=reference,
        )
    token_rows = batch.seq_row[batch.target_seq]
    token_logprobs = _per_row(out.token_logprobs, token_rows, rows)
    return Decisions(
        **common,
        actions=texts,
        choice=torch.zeros(rows, dtype=torch.long),
        logprob=torch.stack([t.sum() for t in token_logprobs]),
        token_logprobs=token_logprobs,
        reference=_per_row(ref.token_logprobs, token_rows, rows) if ref is not None else nothing,
    )


def _sample_answers(
    ac: ActorCritic, prompts: list[Any], generator: torch.Generator
) -> tuple[list[str], list[list[list[int]]]]:
    generations = generate(
        ac.model,
        prompts,
        ac.full_prefix(),
        max_new_tokens=ac.config.max_new_tokens,
        stop_ids=stop_token_ids(ac.tokenizer, ac.model),
        pad_id=ac.pad_id,
        temperature=1.0,  # the policy itself: PPO's ratios need the log-probs it samples from
        generator=generator,
    )
    texts = [ac.tokenizer.decode(g.tokens, skip_special_tokens=True) for g in generations]
    return texts, [[g.tokens] for g in generations]


def _per_row(values: torch.Tensor, rows_of: torch.Tensor, rows: int) -> list[torch.Tensor]:
    values = values.detach().cpu()
    return [values[rows_of == i] for i in range(rows)]


@dataclass
class Rollout:
    """``num_steps`` x ``num_envs`` decisions and what the envs returned."""

    decisions: list[Decisions] = field(default_factory=list)
    rewards: list[torch.Tensor] = field(default_factory=list)
    dones: list[torch.Tensor] = field(default_factory=list)
    """dones[t][i]: the observation at step t started a new episode (CleanRL's convention, as compute_gae wants)."""
    truncated_values: list[torch.Tensor] = field(default_factory=list)
    finished: list[FinishedEpisode] = field(default_factory=list)
    invalid: int = 0
    raw_reward: float = 0.0
    """The game's own reward summed over the rollout (seen before any episode ends)."""
    last_value: torch.Tensor | None = None
    last_done: torch.Tensor | None = None

    def stacked(self) -> dict[str, torch.Tensor]:
        return {
            "rewards": torch.stack(self.rewards),
            "dones": torch.stack(self.dones),
            "values": torch.stack([d.values for d in self.decisions]),
            "truncated_values": torch.stack(self.truncated_values),
        }


def values_of(ac: ActorCritic, observations: list[Any]) -> torch.Tensor:
    """V(s) for observations only (bootstrapping): the prompt with a one-token continuation the value ignores."""
    prompts = ac.encode(observations)
    end = ac.builder.answer_end_ids or [ac.pad_id]
    batch = ac.pack([p.ids for p in prompts], [p.uses_prefix for p in prompts], [[end]] * len(prompts))
    return ac.top(ac.bottom(batch), batch, "rollout")[1].cpu()


def collect(
    ac: ActorCritic,
    pool: EnvPool,
    config: PPOLoRAConfig,
    env_id: str,
    generator: torch.Generator,
    next_done: torch.Tensor,
    with_reference: bool,
) -> Rollout:
    """Step every env ``config.num_steps`` times with the current policy."""
    rollout = Rollout()
    for _ in range(config.num_steps):
        decisions = decide(
            ac,
            list(pool.observations),
            list(pool.infos),
            env_id,
            mode=config.action_mode,
            generator=generator,
            with_reference=with_reference,
        )
        result = pool.step(decisions.actions)
        truncated_values = torch.zeros(len(pool))
        if result.final_observations:
            index = sorted(result.final_observations)
            truncated_values[index] = values_of(ac, [result.final_observations[i] for i in index])
        rollout.decisions.append(decisions)
        rollout.rewards.append(torch.as_tensor(result.rewards * config.reward_scale, dtype=torch.float32))
        rollout.dones.append(next_done)
        rollout.truncated_values.append(truncated_values)
        rollout.finished.extend(result.finished)
        rollout.invalid += result.invalid
        rollout.raw_reward += result.raw_reward
        next_done = torch.as_tensor(result.terminated | result.truncated, dtype=torch.float32)
    rollout.last_value = values_of(ac, list(pool.observations))
    rollout.last_done = next_done
    return rollout


def rollout_arrays(rollout: Rollout) -> dict[str, np.ndarray]:
    """Per-episode numbers of a rollout for logging."""
    return {
        "returns": np.array([e.episode_return for e in rollout.finished]),
        "raw_returns": np.array([e.raw_return for e in rollout.finished]),
        "lengths": np.array([e.length for e in rollout.finished]),
    }
