"""The two action modes of ``ppo_lora`` as two small strategies, each owning its sampling, log-probabilities,
entropy and KL, so no loop branches on the mode:

* :class:`ScoreMode`: a categorical over the legal actions from each action name's likelihood as the whole answer
  (one sample per decision; the KL to the reference is exact, a sum over the actions);
* :class:`GenerateMode`: a sampled answer (text; the env, or :class:`llm_gym.actions.TextActions`, parses it), one
  PPO sample per answer token, full-vocabulary entropy per token, the k3 estimate of the KL on the sampled tokens.

With a rollout engine (``rollout_backend=vllm``, :mod:`llm_gym.agents.ppo_lora.engine`) the engine picks the action
(:meth:`Strategy.from_engine`: it samples the answer, or scores the legal actions and one is drawn from its
probabilities) and the training model's forward recomputes that action's log-probability, the value and the
reference, so the PPO ratio is the training model's own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import numpy as np
import torch

from llm_gym.agents.ppo_lora.config import PPOLoRAConfig
from llm_gym.agents.ppo_lora.decisions import Choice, Continuations, EnginePick, Forward, Prompts, Sampling, Stored
from llm_gym.agents.ppo_lora.model import ActorCritic
from llm_gym.envs.protocol import legal_choices
from llm_gym.lm.backends import GenerateRequest, LMBackend, ScoreRequest
from llm_gym.lm.forward import PackedOutput
from llm_gym.lm.generation import generate, stop_token_ids
from llm_gym.lm.packing import PackedBatch
from llm_gym.lm.policy import with_action_bias
from llm_gym.lm.scoring import categorical_entropy, categorical_kl, categorical_logprobs, choice_table
from llm_gym.rl import PPOLosses, ppo_losses, target_policy_loss


class Strategy(Protocol):
    """An action mode: what to score, how to choose, and the PPO terms of a recomputed forward."""

    text_actions: bool
    """The env is stepped with answer texts (discrete envs get :class:`~llm_gym.actions.TextActions`)."""
    merges_identical: bool
    """Rows with the same prompt and the same continuations share one forward pass (:func:`merged_rows`)."""

    def candidates(
        self, ac: ActorCritic, prompts: list[Any], infos: Sequence[Mapping[str, Any]], env_id: str, how: Sampling
    ) -> tuple[list[Any], Continuations]:
        """(what each row may do, the token continuations to score for it)."""
        ...

    def from_engine(
        self, engine: LMBackend, ac: ActorCritic, prompts: Prompts, infos: Sequence[Mapping[str, Any]], env_id: str,
        how: Sampling,
    ) -> EnginePick:  # fmt: skip
        """The engine's decision for every row (``rollout_backend=vllm``)."""
        ...

    def choose(
        self, out: PackedOutput, batch: PackedBatch, options: list[Any], how: Sampling, picked: torch.Tensor | None,
        inverse: torch.Tensor,
    ) -> Choice:  # fmt: skip
        """The decision of every row from the policy's forward over the distinct rows (``inverse[i]``: row i's
        distinct row; ``picked``: the continuation the engine chose, whose log-probability the forward gives)."""
        ...

    def reference(self, out: PackedOutput, batch: PackedBatch, continuations: Continuations) -> list[torch.Tensor]:
        """Per row, the reference policy's log-probs (for the KL term)."""
        ...

    def losses(
        self, forward: Forward, stored: Stored, config: PPOLoRAConfig, entropy_coef: float
    ) -> tuple[PPOLosses, torch.Tensor]:
        """The PPO losses (with the entropy bonus at ``entropy_coef``, which moves with ``entropy_target``) and the
        KL to the reference of a minibatch, from the recomputed forward over its distinct rows
        (``forward.inverse``)."""
        ...


def _ppo(config: PPOLoRAConfig, entropy_coef: float, *terms: torch.Tensor) -> PPOLosses:
    # Advantages arrive normalised (over the rollout or the optimizer step, per config.advantage_norm: update.py).
    return ppo_losses(
        *terms,
        clip_coef=config.clip_coef,
        value_clip_coef=config.value_clip_coef or None,
        value_coef=config.value_coef,
        entropy_coef=entropy_coef,
        normalize_advantages=False,
    )


def choice_logprobs(out: PackedOutput, batch: PackedBatch, rows: int) -> torch.Tensor:
    """(rows, choices) the policy's log-probabilities over each row's choices: a softmax of their log-likelihoods,
    each offset by the batch's per-action bias where it has one (``action_prior=calibrated``) and by the pass's
    action-head offsets where it has them (``action_head=standardized``)."""
    seq = out.seq_logprobs
    if batch.seq_bias is not None:
        seq = seq + batch.seq_bias.to(seq.device, seq.dtype)
    if out.seq_offset is not None:  # action_head=standardized: the state-dependent offsets of this pass
        seq = seq + out.seq_offset.to(seq.device, seq.dtype)
    return categorical_logprobs(seq, batch.seq_row, rows)


class ScoreMode:
    """A categorical over the legal actions, from each action name's likelihood as the whole answer (offset per
    action where the run calibrated the prior over action names: :mod:`llm_gym.agents.ppo_lora.calibration`)."""

    text_actions = False
    merges_identical = True  # a row's continuations are its legal actions: the same observation, the same row

    def candidates(
        self, ac: ActorCritic, prompts: list[Any], infos: Sequence[Mapping[str, Any]], env_id: str, how: Sampling
    ) -> tuple[list[Any], Continuations]:
        legal = [legal_choices(info, env_id) for info in infos]
        return [ids for ids, _ in legal], [ac.choices(names) for _, names in legal]

    def from_engine(
        self, engine: LMBackend, ac: ActorCritic, prompts: Prompts, infos: Sequence[Mapping[str, Any]], env_id: str,
        how: Sampling,
    ) -> EnginePick:  # fmt: skip
        legal = [legal_choices(info, env_id) for info in infos]
        requests = [
            ScoreRequest(rules, observation, tuple(names), turns)
            for observation, rules, turns, (_, names) in zip(
                prompts.observations, prompts.rules, prompts.turns, legal, strict=True
            )
        ]
        choices, logprobs = [], []
        for loglik, (_, names) in zip(engine.score(requests), legal, strict=True):
            loglik = with_action_bias(loglik, names, ac.action_bias)  # as pack() offsets the training forward
            logp = torch.from_numpy(loglik - np.logaddexp.reduce(loglik))
            pick = logp.argmax() if how.greedy else torch.multinomial(logp.exp(), 1, generator=how.generator)[0]
            choices.append(int(pick))
            logprobs.append(float(logp[pick]))
        options = [ids for ids, _ in legal]
        continuations = [ac.choices(names) for _, names in legal]
        return EnginePick(options, continuations, torch.tensor(choices), torch.tensor(logprobs))

    def choose(
        self, out: PackedOutput, batch: PackedBatch, options: list[Any], how: Sampling, picked: torch.Tensor | None,
        inverse: torch.Tensor,
    ) -> Choice:  # fmt: skip
        rows = len(options)
        logp = choice_logprobs(out, batch, int(inverse.max()) + 1).cpu()[inverse]  # each row draws on its own
        if picked is not None:
            sampled = picked
        elif how.greedy:
            sampled = logp.argmax(1)
        else:
            sampled = torch.multinomial(logp.exp(), 1, generator=how.generator)
        choice = sampled.reshape(rows)
        actions = [options[i][int(choice[i])] for i in range(rows)]
        probs = [logp[i, : len(options[i])].exp() for i in range(rows)]
        return actions, choice, logp.gather(1, choice[:, None]).squeeze(1), [torch.empty(0)] * rows, probs

    def reference(self, out: PackedOutput, batch: PackedBatch, continuations: Continuations) -> list[torch.Tensor]:
        rows = len(continuations)
        logp = choice_logprobs(out, batch, rows).cpu()
        return [logp[i, : len(continuations[i])] for i in range(rows)]

    def losses(
        self, forward: Forward, stored: Stored, config: PPOLoRAConfig, entropy_coef: float
    ) -> tuple[PPOLosses, torch.Tensor]:
        out, batch = forward.out, forward.batch
        rows, device = len(stored.choice), forward.values.device
        inverse = forward.inverse.to(device)
        logp = choice_logprobs(out, batch, int(inverse.max()) + 1)[inverse]
        values = forward.values[inverse]
        new = logp.gather(1, torch.tensor(stored.choice, device=device)[:, None]).squeeze(1)
        old = torch.tensor(stored.logprob, device=device)
        entropy = categorical_entropy(logp)
        losses = _ppo(
            config, entropy_coef, new, old, stored.advantages, values, stored.old_values, stored.returns, entropy
        )
        if config.loss == "target":  # the improvement step's cross-entropy instead of the clipped ratio
            old_probs = torch.zeros_like(logp)
            for i, row in enumerate(stored.probs):
                old_probs[i, : len(row)] = row.to(device, old_probs.dtype)
            choice = torch.tensor(stored.choice, device=device)
            target = target_policy_loss(logp, old_probs, choice, stored.advantages, config.target_temperature)
            losses.loss = losses.loss - losses.policy_loss + target
            losses.policy_loss = target
        kl = torch.zeros((), device=device)
        if stored.reference[0].numel():
            lengths = torch.tensor([len(r) for r in stored.reference], device=device)
            row_of = torch.repeat_interleave(torch.arange(rows, device=device), lengths)
            reference = choice_table(torch.cat(stored.reference).to(device), row_of, rows)
            kl = categorical_kl(logp, reference).mean()
        return losses, kl


class GenerateMode:
    """A sampled answer; one PPO sample per answer token."""

    text_actions = True
    merges_identical = False  # every row samples its own answer

    def candidates(
        self, ac: ActorCritic, prompts: list[Any], infos: Sequence[Mapping[str, Any]], env_id: str, how: Sampling
    ) -> tuple[list[Any], Continuations]:
        prefix = ac.full_prefix()
        with ac.adapter_compute():  # the LoRA products as the update's forward computes them
            generations = generate(
                ac.model,
                prompts,
                prefix,
                max_new_tokens=ac.config.max_new_tokens,
                stop_ids=stop_token_ids(ac.tokenizer, ac.model),
                pad_id=ac.pad_id,
                temperature=0.0 if how.greedy else 1.0,  # the policy itself: PPO's ratios need the log-probs it samples
                generator=how.generator,
            )
        texts = [ac.tokenizer.decode(g.tokens, skip_special_tokens=True) for g in generations]
        return texts, [[g.tokens] for g in generations]

    def from_engine(
        self, engine: LMBackend, ac: ActorCritic, prompts: Prompts, infos: Sequence[Mapping[str, Any]], env_id: str,
        how: Sampling,
    ) -> EnginePick:  # fmt: skip
        requests = [
            GenerateRequest(rules, observation, turns)
            for observation, rules, turns in zip(prompts.observations, prompts.rules, prompts.turns, strict=True)
        ]
        # One seed per batch from the run's generator (the engine seeds request i with seed + i): a resumed run
        # asks for the same samples.
        seed = int(torch.randint(2**31 - 1, (1,), generator=how.generator))
        completions = engine.generate(
            requests, max_new_tokens=ac.config.max_new_tokens, temperature=0.0 if how.greedy else 1.0, seed=seed
        )
        rows = len(completions)
        continuations = [[list(c.token_ids)] for c in completions]
        logprob = torch.tensor([c.logprob for c in completions], dtype=torch.float64)
        return EnginePick([c.text for c in completions], continuations, torch.zeros(rows, dtype=torch.long), logprob)

    def choose(
        self, out: PackedOutput, batch: PackedBatch, options: list[Any], how: Sampling, picked: torch.Tensor | None,
        inverse: torch.Tensor,
    ) -> Choice:  # fmt: skip
        rows = len(options)  # rows are never merged here: inverse is the identity
        token_logprobs = _per_row(out.token_logprobs, batch.seq_row[batch.target_seq], rows)
        logprob = torch.stack([t.sum() for t in token_logprobs])
        return list(options), torch.zeros(rows, dtype=torch.long), logprob, token_logprobs, [torch.empty(0)] * rows

    def reference(self, out: PackedOutput, batch: PackedBatch, continuations: Continuations) -> list[torch.Tensor]:
        return _per_row(out.token_logprobs, batch.seq_row[batch.target_seq], len(continuations))

    def losses(
        self, forward: Forward, stored: Stored, config: PPOLoRAConfig, entropy_coef: float
    ) -> tuple[PPOLosses, torch.Tensor]:
        out, values, batch = forward.out, forward.values, forward.batch
        device = values.device
        token_row = batch.seq_row[batch.target_seq].to(device)
        old = torch.cat(stored.token_logprobs).to(device)
        # Every token of a decision carries its decision's (already normalised) advantage.
        adv = stored.advantages
        entropy = out.predictor_entropy[batch.target_predictor.to(device)]
        per_token = (adv[token_row], values[token_row], stored.old_values[token_row], stored.returns[token_row])
        losses = _ppo(config, entropy_coef, out.token_logprobs, old, *per_token, entropy)
        kl = torch.zeros((), device=device)
        if stored.reference[0].numel():
            log_ratio = torch.cat(stored.reference).to(device) - out.token_logprobs
            kl = (log_ratio.exp() - 1 - log_ratio).mean()  # k3: unbiased, non-negative
        return losses, kl


STRATEGIES: dict[str, Strategy] = {"score": ScoreMode(), "generate": GenerateMode()}


def strategy_for(config: PPOLoRAConfig) -> Strategy:
    return STRATEGIES[config.action_mode]


def _per_row(values: torch.Tensor, rows_of: torch.Tensor, rows: int) -> list[torch.Tensor]:
    values = values.detach().cpu()
    rows_of = rows_of.to(values.device)
    return [values[rows_of == i] for i in range(rows)]
