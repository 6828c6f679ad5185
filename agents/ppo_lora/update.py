"""One PPO update over a rollout: minibatches re-packed from the stored decisions, the trainable layers re-run on
the stored frozen-layer output, the shared PPO losses (``llm_gym.rl.ppo_losses``) plus the KL to the reference.

Score mode: one sample per decision; the ratio, entropy and KL are those of the categorical over the legal actions
(the KL is exact: a sum over the actions). Generate mode: one sample per answer token (the decision's advantage on
each of its tokens), full-vocabulary entropy at each token, and the k3 estimate of the KL on the sampled tokens.
"""

from __future__ import annotations

from collections import defaultdict

import torch

from llm_gym.agents.ppo_lora.config import PPOLoRAConfig
from llm_gym.agents.ppo_lora.model import ActorCritic
from llm_gym.agents.ppo_lora.rollout import Rollout
from llm_gym.lm.scoring import categorical_entropy, categorical_kl, categorical_logprobs, choice_table
from llm_gym.rl import ppo_losses


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


def _padded_hidden(rows: list[torch.Tensor], width: int) -> torch.Tensor:
    out = rows[0].new_zeros((len(rows), width, rows[0].shape[-1]))
    for i, row in enumerate(rows):
        out[i, : row.shape[0]] = row
    return out


def ppo_update(
    ac: ActorCritic,
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
    with_reference = bool(flat["reference"][0].numel())
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
                hidden = _padded_hidden([flat["hidden"][i] for i in index], batch.input_ids.shape[1])
                out, values = ac.top(hidden.to(ac.device), batch, "train")
                rows = len(index)
                device = values.device
                adv, ret, old_v = (t[index].to(device) for t in (advantages, returns, old_values))
                if config.action_mode == "score":
                    logp = categorical_logprobs(out.seq_logprobs, batch.seq_row, rows)
                    choice = torch.tensor([flat["choice"][i] for i in index], device=logp.device)
                    new = logp.gather(1, choice[:, None]).squeeze(1)
                    old = torch.tensor([flat["logprob"][i] for i in index], device=logp.device)
                    losses = ppo_losses(
                        new,
                        old,
                        adv,
                        values,
                        old_v,
                        ret,
                        categorical_entropy(logp),
                        clip_coef=config.clip_coef,
                        value_clip_coef=config.value_clip_coef or None,
                        value_coef=config.value_coef,
                        entropy_coef=config.entropy_coef,
                    )
                    kl = torch.zeros((), device=logp.device)
                    if with_reference:
                        reference = choice_table(
                            torch.cat([flat["reference"][i] for i in index]).to(logp.device), batch.seq_row, rows
                        )
                        kl = categorical_kl(logp, reference).mean()
                else:
                    token_row = batch.seq_row[batch.target_seq].to(values.device)
                    old = torch.cat([flat["token_logprobs"][i] for i in index]).to(values.device)
                    # Advantages are normalised per decision, then every token of a decision carries its decision's.
                    adv = (adv - adv.mean()) / (adv.std() + 1e-8) if rows > 1 else adv
                    losses = ppo_losses(
                        out.token_logprobs,
                        old,
                        adv[token_row],
                        values[token_row],
                        old_v[token_row],
                        ret[token_row],
                        out.predictor_entropy[batch.target_predictor.to(values.device)],
                        clip_coef=config.clip_coef,
                        value_clip_coef=config.value_clip_coef or None,
                        value_coef=config.value_coef,
                        entropy_coef=config.entropy_coef,
                        normalize_advantages=False,
                    )
                    kl = torch.zeros((), device=values.device)
                    if with_reference:
                        log_ratio = (
                            torch.cat([flat["reference"][i] for i in index]).to(values.device) - out.token_logprobs
                        )
                        kl = (log_ratio.exp() - 1 - log_ratio).mean()  # k3: unbiased, non-negative
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
