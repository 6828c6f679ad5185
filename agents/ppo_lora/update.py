"""One PPO update over a rollout: minibatches re-packed from the stored decisions, the trainable layers re-run on
the stored frozen-layer output, and the action mode's terms (:meth:`~llm_gym.agents.ppo_lora.acting.Strategy.losses`:
the shared PPO losses plus the KL to the reference) weighted into one loss.
"""

from __future__ import annotations

from collections import defaultdict

import torch

from llm_gym.agents.ppo_lora.acting import Forward, Stored, Strategy
from llm_gym.agents.ppo_lora.config import PPOLoRAConfig
from llm_gym.agents.ppo_lora.model import ActorCritic
from llm_gym.agents.ppo_lora.rollout import Rollout

STORED = ("choice", "logprob", "token_logprobs", "reference")
"""What each decision keeps for :class:`Stored`, in its field order."""


def _flatten(rollout: Rollout) -> dict[str, list]:
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
    return flat


def padded_hidden(rows: list[torch.Tensor], width: int) -> torch.Tensor:
    out = rows[0].new_zeros((len(rows), width, rows[0].shape[-1]))
    for i, row in enumerate(rows):
        out[i, : row.shape[0]] = row
    return out


def ppo_update(
    ac: ActorCritic,
    strategy: Strategy,
    optimizer: torch.optim.Optimizer,
    rollout: Rollout,
    advantages: torch.Tensor,
    returns: torch.Tensor,
    config: PPOLoRAConfig,
    generator: torch.Generator,
    kl_coef: float,
) -> dict[str, float]:
    """Run ``update_epochs`` epochs of minibatch steps; returns the mean of each logged quantity."""
    flat = _flatten(rollout)
    old_values = torch.stack([d.values for d in rollout.decisions]).flatten()
    advantages, returns = advantages.flatten(), returns.flatten()
    samples = len(flat["prompts"])
    params = [p for group in optimizer.param_groups for p in group["params"]]
    sums: dict[str, float] = defaultdict(float)
    steps = 0
    ac.model.train()
    try:
        for _ in range(config.update_epochs):
            order = torch.randperm(samples, generator=generator)
            for start in range(0, samples, config.minibatch_size):
                index = order[start : start + config.minibatch_size].tolist()
                batch = ac.pack(
                    [flat["prompts"][i] for i in index],
                    [flat["uses_prefix"][i] for i in index],
                    [flat["continuations"][i] for i in index],
                )
                hidden = padded_hidden([flat["hidden"][i] for i in index], batch.input_ids.shape[1])
                out, values = ac.top(hidden.to(ac.device), batch, "train")
                targets = (t[index].to(values.device) for t in (advantages, returns, old_values))
                stored = Stored(*([flat[k][i] for i in index] for k in STORED), *targets)
                losses, kl = strategy.losses(Forward(out, values, batch), stored, config)
                loss = losses.loss + kl_coef * kl
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                grad_norm = torch.nn.utils.clip_grad_norm_(params, config.max_grad_norm)
                optimizer.step()
                steps += 1
                for key, value in (
                    ("policy_loss", losses.policy_loss),
                    ("value_loss", losses.value_loss),
                    ("entropy", losses.entropy),
                    ("approx_kl", losses.approx_kl),
                    ("clip_fraction", losses.clip_fraction),
                    ("kl_ref", kl),
                    ("grad_norm", grad_norm),
                    ("loss", loss),
                ):
                    sums[key] += float(value.detach())
    finally:
        ac.model.eval()
        ac.refresh()
    return {key: value / max(steps, 1) for key, value in sums.items()}
