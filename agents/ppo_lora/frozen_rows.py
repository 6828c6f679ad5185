"""The frozen layers' output of each distinct decision row, computed once and kept (``frozen_cache_mb``): below the
split nothing trains, so a position the run has met before (a game's opening, one of Kuhn poker's 12 information
states) needs no second pass through those layers, in the rollout, the bootstrap values or an evaluation.

Each row runs through the frozen layers on its own, never padded beside other rows, so its output depends on the row
alone: from the cache or computed now, in whatever batch it was asked for, the numbers are the same, and a resumed
run (whose cache starts empty) continues exactly as the uninterrupted one. On a CPU a row on its own costs about what
it costs inside a padded batch (whose padding is work too); what the store saves is measured by
``benchmarks/ppo_lora_throughput.py``. The rows kept are the most recently used, within a budget of bytes.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence

import torch

from llm_gym.lm.packing import PackedBatch

RowKey = tuple
"""What a decision row's forward depends on: its prompt ids, whether it uses the cached prefix, its continuations."""


def row_key(prompt: Sequence[int], uses_prefix: bool, continuations: Sequence[Sequence[int]]) -> RowKey:
    """What a decision's forward depends on: rows with equal keys compute the same forward."""
    return tuple(prompt), bool(uses_prefix), tuple(tuple(c) for c in continuations)


def padded_hidden(rows: Sequence[torch.Tensor], width: int) -> torch.Tensor:
    """Per-row hidden states (each (length, H)) as one (rows, width, H) batch, zeros after each row's end (the
    positions a packed batch's padding holds, which its mask keeps every real position from reading)."""
    out = rows[0].new_zeros((len(rows), width, rows[0].shape[-1]))
    for i, row in enumerate(rows):
        out[i, : row.shape[0]] = row
    return out


class FrozenRows:
    """Per-row frozen-layer output with a least-recently-used store of ``budget_bytes`` (0: keep none).

    Args:
        run: the frozen layers on a packed batch, (rows, width, H).
        pack: packs rows (prompts, prefix uses, continuations) into a batch, as the model does.
        budget_bytes: the most bytes of hidden states kept.
    """

    def __init__(
        self, run: Callable[[PackedBatch], torch.Tensor], pack: Callable[..., PackedBatch], budget_bytes: int
    ) -> None:
        self.run, self.pack, self.budget = run, pack, max(0, int(budget_bytes))
        self.rows: OrderedDict[RowKey, torch.Tensor] = OrderedDict()
        self.bytes = 0
        self.hits = self.misses = 0

    def __call__(
        self,
        prompts: Sequence[Sequence[int]],
        uses_prefix: Sequence[bool],
        continuations: Sequence[Sequence[Sequence[int]]],
    ) -> list[torch.Tensor]:
        """Each row's hidden states entering the first trainable layer, (its length, H)."""
        out = []
        for ids, prefix, row_continuations in zip(prompts, uses_prefix, continuations, strict=True):
            key = row_key(ids, prefix, row_continuations)
            hidden = self.rows.get(key)
            if hidden is not None:
                self.rows.move_to_end(key)
                self.hits += 1
            else:
                self.misses += 1
                batch = self.pack([ids], [prefix], [row_continuations])
                hidden = self.run(batch)[0, : int(batch.row_lengths[0])].clone()
                self._keep(key, hidden)
            out.append(hidden)
        return out

    def clear(self) -> None:
        """Forget every row (the cached prefix they were computed over changed)."""
        self.rows.clear()
        self.bytes = 0

    def _keep(self, key: RowKey, hidden: torch.Tensor) -> None:
        if _size(hidden) > self.budget:
            return
        self.rows[key] = hidden
        self.bytes += _size(hidden)
        while self.bytes > self.budget:
            self.bytes -= _size(self.rows.popitem(last=False)[1])


def _size(hidden: torch.Tensor) -> int:
    return hidden.numel() * hidden.element_size()
