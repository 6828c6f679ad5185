"""The value head: one linear layer on the hidden state at the last prompt position, optionally of that state scaled
to unit length first (``value_input=unit``).

Why the unit option exists (docs/ppo_lora_breakout.md, "A fresh value head's starting value"): on SmolLM2 the
final hidden state is nearly one shared vector in every Breakout state (norm about 56, one channel about 44; the
states differ by about 1% of it). A fresh head projects that vector onto its random weights, so it starts with one
value for every state, set by the seed: -3.7 to +2.0 over seeds 0-9, where a life's return is about 0.3-0.6. PPO's
value clip (``value_clip_coef`` 0.2) moves a value at most 0.2 per update, so a head that starts at -1.7 stays
below zero for about 12 updates, and all that time the decision that loses a ball has a positive advantage
(r - V). At unit length the fresh head starts within a few hundredths of zero for every seed, and an Adam step
moves a value by at most lr * sqrt(hidden_size) whatever the base model's activation scale.

The choice is saved in the state dict (``unit_input``), so a checkpoint's head is always read the way it was
trained; a file without it (saved before the option) is a head on the raw hidden state.
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

UNIT_KEY = "unit_input"


class ValueHead(nn.Linear):
    """``Linear(hidden_size, 1)`` on the hidden state, or on the hidden state divided by its L2 norm."""

    def __init__(self, hidden_size: int, unit_input: bool = False) -> None:
        super().__init__(hidden_size, 1)
        self.unit_input = unit_input

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        if self.unit_input:
            hidden = hidden / hidden.norm(dim=-1, keepdim=True).clamp_min(1e-6)
        return super().forward(hidden)

    # The input mode travels in the state dict (a plain bool tensor: loads under weights_only) through torch's own
    # per-module hooks, so ``state_dict``/``load_state_dict`` and the checkpoint code need nothing special.
    def _save_to_state_dict(self, destination, prefix, keep_vars):  # type: ignore[no-untyped-def]
        super()._save_to_state_dict(destination, prefix, keep_vars)
        destination[prefix + UNIT_KEY] = torch.tensor(self.unit_input)

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):  # type: ignore[no-untyped-def]
        key = prefix + UNIT_KEY
        self.unit_input = bool(state_dict[key]) if key in state_dict else False
        rest = {k: v for k, v in state_dict.items() if k != key}
        super()._load_from_state_dict(rest, prefix, *args, **kwargs)


def load_value_head_file(path: Path, hidden_size: int, device: str | torch.device) -> ValueHead:
    """A saved ``value_head.pt`` as a float32 :class:`ValueHead` on ``device``, in eval mode."""
    head = ValueHead(hidden_size)
    head.load_state_dict(torch.load(path, map_location="cpu", weights_only=True))
    return head.to(device).eval()
