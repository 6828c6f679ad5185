"""``advantage=exact``: exact policy mirror descent on a small OpenSpiel game against its uniformly random opponent.

No episodes are played. Each update asks the policy about every position of the game tree (both seats, every chance
outcome and opponent reply: :class:`llm_gym.training.position_tree.PositionTree`; tic-tac-toe has 13,306), computes
every legal action's exact advantage under the policy as it stands, and trains the policy at every position towards
the improved distribution ``pi(a) * exp(A(a) / target_temperature)`` (the target loss of the sampled estimators with
all actions' advantages known instead of the one drawn: policy mirror descent, Lan 2022; Xiao 2022). The frozen
layers' output of each position is kept between updates (``frozen_cache_mb``), so after the first update a pass over
the tree costs only the trainable layers.

Where the sampled estimators learn from what the policy met, this removes the sampling noise altogether, at the cost
of a whole tree per update: it is for games small enough to walk (what ``llm-gym play --exact`` evaluates), and it is
planning with the game's rules as much as learning from play; docs/guides/groups.md compares the two.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from llm_gym.agents.ppo_lora.acting import rules_of, turns_of
from llm_gym.agents.ppo_lora.config import PPOLoRAConfig
from llm_gym.agents.ppo_lora.model import ActorCritic
from llm_gym.agents.ppo_lora.rollout import Rollout, RolloutActor, cache_common_rules
from llm_gym.agents.ppo_lora.strategies import choice_logprobs
from llm_gym.agents.ppo_lora.update import flatten_decisions, stored_batch
from llm_gym.envs.protocol import legal_choices
from llm_gym.lm.scoring import categorical_kl
from llm_gym.rl.ppo import improved_distribution
from llm_gym.training.position_tree import PositionTree


@dataclass
class TreeRollout(Rollout):
    """Every position of the tree with more than one legal action once (``decisions``, in batches; ``asked``), with
    the improved distribution to train each on. A position with one legal action is not asked: its only action has
    probability 1 under any policy, and its loss no gradient."""

    positions: int = 0
    """The tree's positions, asked or not: the env steps the update counts (``size``)."""
    asked: list[int] = field(default_factory=list)
    """The tree index of each asked position, in the order the update flattens them."""
    targets: list[torch.Tensor] = field(default_factory=list)
    """Per asked position, the improved distribution over its legal actions."""
    start_return: float = float("nan")
    """The exact expected return, from the start, of the policy that was asked (its own probabilities, not greedy)."""
    weights: torch.Tensor = field(default_factory=lambda: torch.ones(0))
    """Per asked position, its weight in the update's loss (mean 1 over them; ``exact_weights``)."""
    focus: list[int] = field(default_factory=list)
    """The asked positions (their index in ``asked``) that the asked policy's greedy version reaches
    (``exact_focus_epochs`` trains them again)."""

    @property
    def size(self) -> int:
        return self.positions


def collect_tree(actor: RolloutActor, tree: PositionTree, config: PPOLoRAConfig, env_id: str) -> TreeRollout:
    """Ask the policy about every position of ``tree`` with a choice to make (in batches of ``minibatch_size``) and
    attach to each its improved distribution under the policy's exact advantages."""
    ac = actor.ac
    observations, infos = [o for o, _ in tree.positions], [i for _, i in tree.positions]
    cache_common_rules(ac, infos)
    rollout = TreeRollout(positions=len(tree))
    rollout.asked = ask_order(ac, observations, infos)
    probs: list[np.ndarray] = [np.ones(len(info["legal_actions"])) for info in infos]
    for lo in range(0, len(rollout.asked), config.minibatch_size):
        batch = rollout.asked[lo : lo + config.minibatch_size]
        batch_infos = [infos[i] for i in batch]
        # The same batches every update: their rows may share a frozen-layer batch and a resumed run stays exact.
        decisions = actor.decide([observations[i] for i in batch], batch_infos, env_id, together=True)
        rollout.decisions.append(decisions)
        rollout.count_actions(decisions.probs, [legal_choices(info, env_id)[1] for info in batch_infos])
        for i, p in zip(batch, decisions.probs, strict=True):
            probs[i] = p.double().numpy()
    values = tree.action_values(probs)
    rollout.start_return = values.start_return
    weights = values.visits[rollout.asked] if config.exact_weights == "visits" else np.ones(len(rollout.asked))
    rollout.weights = torch.from_numpy(weights * len(weights) / weights.sum()).float()
    if config.exact_focus_epochs:
        reached = set(greedy_positions(tree, probs))
        rollout.focus = [k for k, i in enumerate(rollout.asked) if i in reached]
    rollout.targets = [
        improved_distribution(torch.from_numpy(probs[i]), torch.from_numpy(values.advantages[i]),
                              config.target_temperature)
        for i in rollout.asked
    ]  # fmt: skip
    return rollout


def ask_order(ac: ActorCritic, observations: list[Any], infos: list[dict[str, Any]]) -> list[int]:
    """The positions with more than one legal action, those of one prompt length and one count of legal actions side
    by side (then in the tree's order): the frozen layers run a batch's rows of one shape as one batch
    (agents/ppo_lora/frozen_rows.py), so the first update's pass through the whole model takes fewer, fuller ones."""
    asked = [i for i, info in enumerate(infos) if len(info["legal_actions"]) > 1]
    picked_infos = [infos[i] for i in asked]
    prompts = ac.encode([observations[i] for i in asked], rules_of(ac, picked_infos), turns_of(picked_infos))
    shape = {i: (len(p.ids), len(infos[i]["legal_actions"])) for i, p in zip(asked, prompts, strict=True)}
    return sorted(asked, key=lambda i: shape[i])


def greedy_positions(tree: PositionTree, probs: list[np.ndarray]) -> list[int]:
    """The positions that the policy playing its most likely action (``probs``' first largest, as ``act`` picks)
    reaches against every chance outcome and opponent reply."""
    greedy = [np.eye(len(p))[int(np.argmax(p))] for p in probs]
    return np.flatnonzero(tree.visits(greedy) > 0).tolist()


def exact_update(
    ac: ActorCritic, optimizer: torch.optim.Optimizer, rollout: TreeRollout, config: PPOLoRAConfig,
    generator: torch.Generator, kl_coef: float,
) -> dict[str, float]:  # fmt: skip
    """``update_epochs`` shuffled passes over the positions, then ``exact_focus_epochs`` over the rollout's
    ``focus``, one optimizer step per ``minibatch_size`` of them, each
    on the cross-entropy of the policy to the positions' improved distributions, plus ``kl_coef`` times the KL to the
    reference where the run has one (as the sampled estimators' updates); returns the mean of each logged quantity over
    the steps (``policy_loss``, ``kl_ref``, ``entropy``, ``approx_kl`` from the asked policy, ``grad_norm``)."""
    flat = flatten_decisions(rollout)
    samples = len(flat["prompts"])
    params = [p for group in optimizer.param_groups for p in group["params"]]
    sums: dict[str, float] = defaultdict(float)
    steps = 0
    ac.model.train()
    try:
        passes = [list(range(samples))] * config.update_epochs + [rollout.focus] * config.exact_focus_epochs
        for positions in passes:
            order = [positions[i] for i in torch.randperm(len(positions), generator=generator).tolist()]
            for lo in range(0, len(order), config.minibatch_size):
                index = order[lo : lo + config.minibatch_size]
                batch, hidden = stored_batch(ac, flat, index)
                out, _ = ac.top(hidden, batch, "train")
                logp = choice_logprobs(out, batch, len(index))
                target, old = (torch.zeros_like(logp) for _ in range(2))
                for row, i in enumerate(index):
                    target[row, : len(rollout.targets[i])] = rollout.targets[i].to(logp.dtype)
                    old[row, : len(flat["probs"][i])] = flat["probs"][i].to(logp.dtype)
                finite = torch.where(torch.isfinite(logp), logp, torch.zeros_like(logp))
                weight = rollout.weights[index].to(logp.device, logp.dtype)
                policy_loss = (weight * -(target * finite).sum(1)).mean()
                kl = torch.zeros((), device=logp.device)
                if flat["reference"][index[0]].numel():  # kl_coef or kl_target: the reference's log-probs were kept
                    reference = torch.full_like(logp, float("-inf"))
                    for row, i in enumerate(index):
                        reference[row, : len(flat["reference"][i])] = flat["reference"][i].to(logp.dtype)
                    kl = categorical_kl(logp, reference).mean()
                loss = policy_loss + kl_coef * kl
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                sums["grad_norm"] += float(torch.nn.utils.clip_grad_norm_(params, config.max_grad_norm))
                optimizer.step()
                steps += 1
                with torch.no_grad():
                    new = finite.exp()
                    sums["policy_loss"] += float(policy_loss)
                    sums["kl_ref"] += float(kl)
                    sums["loss"] += float(loss)
                    sums["entropy"] += float(-(new * finite).sum(1).mean())
                    log_old = torch.where(old > 0, old.clamp_min(1e-30).log(), torch.zeros_like(old))
                    sums["approx_kl"] += float((old * (log_old - finite)).sum(1).mean())
    finally:
        ac.model.eval()
        ac.refresh()
    means = {key: value / max(steps, 1) for key, value in sums.items()}
    return {**means, "epochs": float(config.update_epochs), "optimizer_steps": float(steps),
            "focus_positions": float(len(rollout.focus))}  # fmt: skip
