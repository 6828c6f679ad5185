"""The action head (``action_head=standardized``): a learnt, state-dependent offset per action name, added to each
legal action's log-likelihood in score mode, from the same standardised hidden state a ``standardized`` value head
reads.

Why: on SmolLM2 the last prompt position's hidden state is nearly one shared vector in every Breakout state (the
states differ by about 1.5% of it), yet a linear read of it, standardised per channel, tells which side of the
paddle the ball is on in 99-100% of held-out states (docs/results/ppo_lora_breakout.md). The policy itself moves
through the LoRA and the action names' likelihoods, where a preference shared by every state (LEFT everywhere) is
far easier to learn than one that follows the ball: runs at the 64-env recipe's learning rate end near the uniform
policy, and greedy on one action in half the seeds. The head gives the policy gradient a direct, linear path from
what tells states apart to the action preferences, beside the LoRA. Measured there, it does not make the runs
learn (seeds 0 and 7 fail with it): the advantages at gae_lambda=0.95 carry almost no tracking signal to train it
on (scripts/breakout_advantage_by_side.py). It stays an option for runs whose advantages do.

How: a :class:`~llm_gym.agents.ppo_lora.value_head.FeatureHead` with one output per action name, standardised
input (statistics folded after every rollout with every offset kept), detached from the LoRA, starting at zero,
so a run starts from exactly the policy it would have without it. The names are those legal at the first reset of
the training env; an action whose name is not among them gets no offset. Saved as ``action_head.pt`` (names and
weights) in every checkpoint, and used wherever a checkpoint acts through this agent's code: the rollout and the
update, ``play`` and ``bench``. It needs score mode and the transformers rollout (vLLM returns no hidden states).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import torch

from llm_gym.agents.ppo_lora.files import ACTION_HEAD_FILE
from llm_gym.agents.ppo_lora.value_head import FeatureHead

HEADS = ("none", "standardized")


class ActionHead(FeatureHead):
    """One offset per action name from the standardised hidden state; :meth:`seq_offsets` gives them per scored
    continuation of a packed batch, :meth:`offsets` per request's choices."""

    def __init__(self, hidden_size: int, names: Sequence[str]) -> None:
        if not names:
            raise ValueError("an action head needs at least one action name")
        # nn.Linear draws its starting weights from torch's generator; the head starts at zero all the same, so the
        # draw is made on a forked generator and a run's later draws are those of a run without the head.
        with torch.random.fork_rng(devices=[]):
            super().__init__(hidden_size, len(names), "standardized", option="action_head")
        self.names = tuple(str(n) for n in names)
        self.index = {name: i for i, name in enumerate(self.names)}

    def seq_offsets(self, last_hidden: torch.Tensor, seq_row: torch.Tensor, seq_name: torch.Tensor) -> torch.Tensor:
        """(S,) the offset of each continuation: its row's head output at its name's index (0 where ``seq_name`` is
        -1, a name the head does not know)."""
        out = self(last_hidden.float())  # (rows, names)
        known = seq_name >= 0
        picked = out[seq_row.to(out.device), seq_name.clamp_min(0).to(out.device)]
        return torch.where(known.to(out.device), picked, torch.zeros_like(picked))

    def name_indices(self, names: Sequence[str]) -> list[int]:
        """Each name's output index, -1 for a name the head does not know."""
        return [self.index.get(str(n), -1) for n in names]

    def offsets(self, last_hidden: torch.Tensor, choices: Sequence[Sequence[str]]) -> list[torch.Tensor]:
        """Per row, the offsets of its choices (by name) as float64 on the CPU."""
        out = self(last_hidden.float()).double().cpu()
        rows = []
        for row, names in enumerate(choices):
            index = torch.tensor(self.name_indices(names), dtype=torch.long)
            rows.append(torch.where(index >= 0, out[row, index.clamp_min(0)], torch.zeros(len(names), dtype=out.dtype)))
        return rows


def save_action_head(directory: Path, head: ActionHead | None) -> None:
    """Write ``action_head.pt`` (names and state) where there is a head; nothing otherwise."""
    if head is not None:
        torch.save({"names": list(head.names), "state": head.state_dict()}, directory / ACTION_HEAD_FILE)


def load_action_head(directory: Path, hidden_size: int, device: str | torch.device) -> ActionHead | None:
    """A checkpoint's action head (float32, on ``device``), or None where it has none."""
    path = Path(directory) / ACTION_HEAD_FILE
    if not path.is_file():
        return None
    data = torch.load(path, map_location="cpu", weights_only=True)
    head = ActionHead(hidden_size, data["names"])
    head.load_state_dict(data["state"])
    return head.to(device)
