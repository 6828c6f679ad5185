"""The value head: one linear layer on the hidden state at the last prompt position, read as it is
(``value_input=hidden``), scaled to unit length (``unit``), or standardised per channel (``standardized``).

Why the options exist (docs/results/ppo_lora_breakout.md): on SmolLM2 the final hidden state is nearly one shared vector in
every Breakout state (norm about 56, one channel about 44; the states differ by about 1.5% of it).

- ``hidden``: a fresh head projects that vector onto its random weights, so it starts with one value for every
  state, set by the seed: -3.7 to +2.0 over seeds 0-9, where a life's return is about 0.3-0.6. PPO's value clip
  (``value_clip_coef`` 0.2) moves a value at most 0.2 per update, so a head that starts at -1.7 stays below zero
  for about 12 updates, and all that time the decision that loses a ball has a positive advantage (r - V).
- ``unit``: at unit length the fresh head starts within a few hundredths of zero for every seed, and an Adam step
  moves a value by at most lr * sqrt(hidden_size) whatever the base model's activation scale. But the states still
  differ by about 1.5% of the input, so a head trained at PPO's learning rate stays one value for every state:
  explained variance within 0.006 of zero in every such run, where a ridge regression on the same hidden states
  explains about half of the returns' variance on envs it was not fitted on (scripts/value_decodability.py).
- ``standardized``: each channel minus its mean over the rollouts' states, divided by its standard deviation, so
  what tells states apart is the whole input. The statistics come from the states the rollouts visit
  (:meth:`ValueHead.observing`, then :meth:`ValueHead.fold_observed`: the first rollout sets them, later ones move
  them by an exponential average); each change re-expresses the weights and bias so every value stays exactly what
  it was. The head starts at zero (weights and bias), so every seed's first value is 0. Its input is detached: the
  head is a linear probe on the policy's features and the value loss does not reach the LoRA (on standardised
  inputs its gradient with respect to the hidden state is divided by each channel's standard deviation, about
  0.03 on Breakout, so some 35 times the raw one, and could dominate the shared adapter's update; not measured).

The mode and the statistics are saved in the state dict, so a checkpoint's head is always read the way it was
trained; a file without the mode (saved before the options) is a head on the raw hidden state.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import torch
from torch import nn

INPUTS = ("hidden", "unit", "standardized")
MODE_KEY = "input_mode"
UNIT_KEY = "unit_input"  # how files saved before ``standardized`` said ``unit``
MOMENTUM = 0.1
"""Weight of a new rollout's statistics against the running ones (after the first rollout, which sets them)."""
MIN_STD = 1e-4
"""Floor of a channel's standard deviation: a channel that never changes is not blown up."""


class FeatureHead(nn.Linear):
    """``Linear(hidden_size, outputs)`` on the hidden state as it is, divided by its L2 norm, or standardised per
    channel with the statistics of the states the rollouts visited. ``option`` names the setting in errors."""

    def __init__(self, hidden_size: int, outputs: int, input_mode: str = "hidden", option: str = "value_input") -> None:
        if input_mode not in INPUTS:
            raise ValueError(f"{option} must be one of {', '.join(INPUTS)}, got {input_mode!r}")
        super().__init__(hidden_size, outputs)
        self.input_mode = input_mode
        self.register_buffer("input_mean", torch.zeros(hidden_size))
        self.register_buffer("input_std", torch.ones(hidden_size))
        self.register_buffer("input_folds", torch.zeros((), dtype=torch.long))
        if input_mode == "standardized":
            nn.init.zeros_(self.weight)
            nn.init.zeros_(self.bias)
        self._observed: list[torch.Tensor] | None = None  # [count, sum, sum of squares] while observing
        self._pending: list[torch.Tensor] | None = None  # the last observing block's, until folded

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        if self.input_mode == "unit":
            hidden = hidden / hidden.norm(dim=-1, keepdim=True).clamp_min(1e-6)
        elif self.input_mode == "standardized":
            if self._observed is not None and not torch.is_grad_enabled():
                flat = hidden.detach().reshape(-1, hidden.shape[-1]).double()
                self._observed[0] += flat.shape[0]
                self._observed[1] += flat.sum(0)
                self._observed[2] += flat.pow(2).sum(0)
            hidden = (hidden.detach() - self.input_mean) / self.input_std
        return super().forward(hidden)

    @contextmanager
    def observing(self) -> Iterator[None]:
        """Collect the inputs read without gradients (a rollout's values) for :meth:`fold_observed`; nothing for
        the other input modes."""
        if self.input_mode == "standardized":
            zeros = torch.zeros(self.in_features, dtype=torch.float64, device=self.weight.device)
            self._observed = [torch.zeros((), dtype=torch.float64, device=zeros.device), zeros, zeros.clone()]
        try:
            yield
        finally:
            pending, self._observed = self._observed, None
            self._pending = pending

    def fold_observed(self) -> None:
        """Move the standardisation to the last :meth:`observing` block's states (set by the first block, then
        an exponential average) and re-express the weights and bias so that every output stays the same."""
        pending, self._pending = self._pending, None
        if pending is None or float(pending[0]) < 2:
            return
        count, total, squares = pending
        mean = total / count
        var = (squares / count - mean.pow(2)).clamp_min(0.0)
        old_mean, old_std = self.input_mean.double(), self.input_std.double()
        if int(self.input_folds) > 0:
            var = (
                (1 - MOMENTUM) * old_std.pow(2) + MOMENTUM * var + MOMENTUM * (1 - MOMENTUM) * (mean - old_mean).pow(2)
            )
            mean = (1 - MOMENTUM) * old_mean + MOMENTUM * mean
        std = var.sqrt().clamp_min(MIN_STD)
        with torch.no_grad():
            # v = w.(h - m)/s + b = w'.(h - m')/s' + b' for every h: w' = w s'/s, b' = b + w.(m' - m)/s.
            weight = self.weight.double()
            self.bias += (weight * (mean - old_mean) / old_std).sum(-1).to(self.bias.dtype)
            self.weight.copy_((weight * std / old_std).to(self.weight.dtype))
            self.input_mean.copy_(mean.to(self.input_mean.dtype))
            self.input_std.copy_(std.to(self.input_std.dtype))
            self.input_folds += 1

    # The mode travels in the state dict (an index into INPUTS, a plain tensor: loads under weights_only) through
    # torch's own per-module hooks, so ``state_dict``/``load_state_dict`` and the checkpoint code need nothing special.
    def _save_to_state_dict(self, destination, prefix, keep_vars):  # type: ignore[no-untyped-def]
        super()._save_to_state_dict(destination, prefix, keep_vars)
        destination[prefix + MODE_KEY] = torch.tensor(INPUTS.index(self.input_mode))

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):  # type: ignore[no-untyped-def]
        mode, unit = prefix + MODE_KEY, prefix + UNIT_KEY
        if mode in state_dict:
            self.input_mode = INPUTS[int(state_dict[mode])]
        else:  # saved before the standardised mode: a unit flag, or (older still) nothing, a head on the raw state
            self.input_mode = "unit" if unit in state_dict and bool(state_dict[unit]) else "hidden"
        rest = {k: v for k, v in state_dict.items() if k not in (mode, unit)}
        if prefix + "input_mean" not in state_dict:  # saved before the statistics: the identity (none were used)
            rest[prefix + "input_mean"] = torch.zeros_like(self.input_mean)
            rest[prefix + "input_std"] = torch.ones_like(self.input_std)
            rest[prefix + "input_folds"] = torch.zeros_like(self.input_folds)
        super()._load_from_state_dict(rest, prefix, *args, **kwargs)


class ValueHead(FeatureHead):
    """The critic: one value per state (``Linear(hidden_size, 1)``)."""

    def __init__(self, hidden_size: int, input_mode: str = "hidden") -> None:
        super().__init__(hidden_size, 1, input_mode)


def load_value_head_file(path: Path, hidden_size: int, device: str | torch.device) -> ValueHead:
    """A saved ``value_head.pt`` as a float32 :class:`ValueHead` on ``device``, in eval mode."""
    head = ValueHead(hidden_size)
    head.load_state_dict(torch.load(path, map_location="cpu", weights_only=True))
    return head.to(device).eval()
