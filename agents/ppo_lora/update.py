"""One PPO update over a rollout: minibatches re-packed from the stored decisions, the trainable layers re-run on
the stored frozen-layer output, and the action mode's terms (:meth:`~llm_gym.agents.ppo_lora.acting.Strategy.losses`:
the shared PPO losses plus the KL to the reference) weighted into one loss.

The update is built to behave the same at any batch size (``docs/guides/ppo_lora.md``, "The update"):
an epoch takes steps of ``minibatch_size`` decisions but at most ``max_minibatches`` of them, a larger rollout
accumulating each step's gradient over more decisions (in passes of ``minibatch_size``), and advantages are
normalised once over the whole rollout, so a minibatch without reward events is not blown up to unit scale.
"""

from __future__ import annotations

import math
from collections import defaultdict

import torch

from llm_gym.agents.ppo_lora.acting import identity, merged_rows
from llm_gym.agents.ppo_lora.config import PPOLoRAConfig
from llm_gym.agents.ppo_lora.decisions import Forward, Stored
from llm_gym.agents.ppo_lora.frozen_rows import padded_hidden, row_key
from llm_gym.agents.ppo_lora.model import ActorCritic
from llm_gym.agents.ppo_lora.rollout import Rollout
from llm_gym.agents.ppo_lora.strategies import Strategy
from llm_gym.lm.packing import PackedBatch
from llm_gym.rl import PPOLosses

STORED = ("choice", "logprob", "token_logprobs", "reference", "probs")
"""What each decision keeps for :class:`Stored`, in its field order."""


def flatten_decisions(rollout: Rollout) -> dict[str, list]:
    """The rollout's decisions as one list per stored field (and ``key``: each row's identity), step by step."""
    flat: dict[str, list] = defaultdict(list)
    for d in rollout.decisions:
        for i in range(len(d.prompts)):
            flat["prompts"].append(d.prompts[i])
            flat["uses_prefix"].append(d.uses_prefix[i])
            flat["continuations"].append(d.continuations[i])
            flat["hidden"].append(d.hidden[i])
            flat["choice"].append(int(d.choice[i]))
            flat["logprob"].append(float(d.logprob[i]))
            flat["token_logprobs"].append(d.token_logprobs[i])
            flat["reference"].append(d.reference[i])
            flat["probs"].append(d.probs[i])
            flat["key"].append(row_key(d.prompts[i], d.uses_prefix[i], d.continuations[i]))
    return flat


def stored_batch(ac: ActorCritic, flat: dict[str, list], index: list[int]) -> tuple[PackedBatch, torch.Tensor]:
    """The packed batch of the stored decisions ``index`` and their frozen-layer output, padded to its width (on
    the model's device): what the trainable layers re-run on."""
    batch = ac.pack(*([flat[key][i] for i in index] for key in ("prompts", "uses_prefix", "continuations")))
    return batch, padded_hidden([flat["hidden"][i] for i in index], batch.input_ids.shape[1]).to(ac.device)


def normalize_advantages(advantages: torch.Tensor) -> torch.Tensor:
    """Mean 0, std 1 (unchanged when there are fewer than two)."""
    if advantages.numel() < 2:
        return advantages
    return (advantages - advantages.mean()) / (advantages.std() + 1e-8)


def minibatches(
    samples: int, config: PPOLoRAConfig, generator: torch.Generator, keys: list[tuple] | None = None
) -> list[list[list[int]]]:
    """One epoch's optimizer steps: ceil(samples / minibatch_size) shuffled, equal slices of the rollout, at most
    ``max_minibatches`` of them; each split into passes of at most ``minibatch_size`` decisions, or with ``keys`` (one
    per decision: decisions with equal keys share one forward row) of at most ``minibatch_size`` distinct rows."""
    order = torch.randperm(samples, generator=generator).tolist()
    steps = max(1, min(config.max_minibatches, math.ceil(samples / config.minibatch_size)))
    bounds = [round(i * samples / steps) for i in range(steps + 1)]
    out = []
    for lo, hi in zip(bounds, bounds[1:], strict=False):
        step = order[lo:hi]
        if keys is None:
            out.append([step[i : i + config.minibatch_size] for i in range(0, len(step), config.minibatch_size)])
        else:
            out.append(_passes_of_distinct_rows(step, keys, config.minibatch_size))
    return out


def _passes_of_distinct_rows(step: list[int], keys: list[tuple], size: int) -> list[list[int]]:
    """``step``'s decisions in passes of at most ``size`` distinct rows each (a row's decisions stay in one pass)."""
    rows: dict[tuple, list[int]] = {}
    for i in step:
        rows.setdefault(keys[i], []).append(i)
    members = list(rows.values())
    return [[i for row in members[lo : lo + size] for i in row] for lo in range(0, len(members), size)]


def ppo_update(
    ac: ActorCritic,
    strategy: Strategy,
    optimizer: torch.optim.Optimizer,
    rollout: Rollout,
    advantages: torch.Tensor,
    returns: torch.Tensor | None,
    config: PPOLoRAConfig,
    generator: torch.Generator,
    kl_coef: float,
    entropy_coef: float | None = None,
) -> dict[str, float]:
    """Run up to ``update_epochs`` epochs of at most ``max_minibatches`` optimizer steps, stopping before the first
    step whose minibatch has moved more than 1.5 x ``target_kl`` from the rollout's policy (SB3's rule); returns the
    mean of each logged quantity over the steps taken, ``epochs`` (the epochs begun) and ``optimizer_steps``.
    ``entropy_coef``: the entropy bonus's coefficient now (``entropy_target`` moves it); None: the config's."""
    entropy_coef = config.entropy_coef if entropy_coef is None else entropy_coef
    flat = flatten_decisions(rollout)
    old_values = torch.cat([d.values for d in rollout.decisions])
    advantages = advantages.flatten()
    # A group estimator has no value head: its value terms read zeros and add nothing.
    returns = returns.flatten() if returns is not None else torch.zeros_like(advantages)
    if config.advantage_norm == "rollout":
        advantages = normalize_advantages(advantages)
    samples = len(flat["prompts"])
    params = [p for group in optimizer.param_groups for p in group["params"]]
    sums: dict[str, float] = defaultdict(float)
    steps = epochs = 0
    moved_too_far = False
    ac.model.train()
    try:
        for _ in range(config.update_epochs):
            if moved_too_far:
                break
            epochs += 1
            for chunks in minibatches(samples, config, generator, flat["key"] if strategy.merges_identical else None):
                size = sum(len(chunk) for chunk in chunks)
                step_advantages = advantages[[i for chunk in chunks for i in chunk]]
                if config.advantage_norm == "minibatch":
                    step_advantages = normalize_advantages(step_advantages)
                optimizer.zero_grad(set_to_none=True)
                step_sums: dict[str, float] = defaultdict(float)
                offset = 0
                for index in chunks:
                    chunk_advantages = step_advantages[offset : offset + len(index)]
                    offset += len(index)
                    losses, kl, loss = _chunk_loss(
                        ac, strategy, flat, index, chunk_advantages, returns, old_values, config, kl_coef,
                        entropy_coef,
                    )  # fmt: skip
                    (loss * (len(index) / size)).backward()
                    for key, value in (
                        ("policy_loss", losses.policy_loss),
                        ("value_loss", losses.value_loss),
                        ("entropy", losses.entropy),
                        ("approx_kl", losses.approx_kl),
                        ("clip_fraction", losses.clip_fraction),
                        ("kl_ref", kl),
                        ("loss", loss),
                    ):
                        step_sums[key] += float(value.detach()) * len(index) / size
                # The KL is of this minibatch under the weights before this step: past the bound, the update
                # has moved far enough from the policy that collected the rollout, and stops without this step.
                if config.target_kl > 0 and step_sums["approx_kl"] > 1.5 * config.target_kl:
                    moved_too_far = True
                    break
                step_sums["grad_norm"] = float(torch.nn.utils.clip_grad_norm_(params, config.max_grad_norm))
                optimizer.step()
                steps += 1
                for key, value in step_sums.items():
                    sums[key] += value
    finally:
        ac.model.eval()
        ac.refresh()
    means = {key: value / max(steps, 1) for key, value in sums.items()}
    return {**means, "epochs": float(epochs), "optimizer_steps": float(steps)}


def value_features(ac: ActorCritic, flat: dict[str, list], size: int) -> torch.Tensor:
    """What the value head reads for each stored decision (the last prompt position's hidden state with the current
    adapter), computed in passes of ``size`` without gradients."""
    features = []
    with torch.no_grad():
        for lo in range(0, len(flat["prompts"]), size):
            batch, hidden = stored_batch(ac, flat, list(range(lo, min(lo + size, len(flat["prompts"])))))
            out, _ = ac.top(hidden, batch, "rollout")
            features.append(out.last_hidden.float())
    return torch.cat(features)


def value_warmup_update(
    ac: ActorCritic, rollout: Rollout, returns: torch.Tensor, config: PPOLoRAConfig, generator: torch.Generator
) -> dict[str, float]:
    """Fit the value head alone to the rollout's ``returns`` (``value_warmup_updates``): the trainable layers run
    once, without gradients (the adapter does not move, so their output is the same in every pass), then
    ``value_warmup_epochs`` shuffled passes of ``minibatch_size``-decision Adam steps at
    ``value_warmup_learning_rate`` on the head's squared error, with an optimizer of its own (so a resume needs no
    state of it). Unclipped: the clip keeps the value near the rollout's for the policy's sake, and here only the
    value moves. Every minibatch is used, not ``max_minibatches`` of them: a step costs one linear layer."""
    flat = flatten_decisions(rollout)
    samples, size = len(flat["prompts"]), config.minibatch_size
    inputs, targets = value_features(ac, flat, size), returns.flatten().to(ac.device)
    head = list(ac.value_head.parameters())
    optimizer = torch.optim.Adam(head, lr=config.value_warmup_learning_rate)
    sums: dict[str, float] = defaultdict(float)
    steps = 0
    for epoch in range(config.value_warmup_epochs):
        order = torch.randperm(samples, generator=generator).tolist()
        for lo in range(0, samples, size):
            index = order[lo : lo + size]
            optimizer.zero_grad(set_to_none=True)
            value_loss = 0.5 * ((ac.value_head(inputs[index]).squeeze(-1) - targets[index]) ** 2).mean()
            (config.value_coef * value_loss).backward()
            sums["grad_norm"] += float(torch.nn.utils.clip_grad_norm_(head, config.max_grad_norm))
            # The first pass's loss is the head's error on returns it has not fitted yet; the last, after fitting.
            if epoch == 0:
                sums["value_loss"] += float(value_loss.detach()) * len(index) / samples
            if epoch == config.value_warmup_epochs - 1:
                sums["value_loss_fitted"] += float(value_loss.detach()) * len(index) / samples
            optimizer.step()
            steps += 1
    return {**sums, "grad_norm": sums["grad_norm"] / max(steps, 1), "epochs": float(config.value_warmup_epochs),
            "value_warmup": 1.0}  # fmt: skip


def _chunk_loss(
    ac: ActorCritic,
    strategy: Strategy,
    flat: dict[str, list],
    index: list[int],
    advantages: torch.Tensor,
    returns: torch.Tensor,
    old_values: torch.Tensor,
    config: PPOLoRAConfig,
    kl_coef: float,
    entropy_coef: float,
) -> tuple[PPOLosses, torch.Tensor, torch.Tensor]:
    """The strategy's losses of the decisions ``index`` (with their already normalised ``advantages``), the KL to
    the reference, and the weighted loss. Decisions with the same prompt and continuations share one forward."""
    if strategy.merges_identical:
        distinct, inverse = merged_rows(
            *([flat[key][i] for i in index] for key in ("prompts", "uses_prefix", "continuations"))
        )
    else:
        distinct, inverse = identity(len(index))
    batch, hidden = stored_batch(ac, flat, [index[j] for j in distinct])
    out, values = ac.top(hidden, batch, "train")
    targets = [advantages.to(values.device), *(t[index].to(values.device) for t in (returns, old_values))]
    stored = Stored(*([flat[k][i] for i in index] for k in STORED), *targets)
    losses, kl = strategy.losses(Forward(out, values, batch, inverse), stored, config, entropy_coef)
    return losses, kl, losses.loss + kl_coef * kl
