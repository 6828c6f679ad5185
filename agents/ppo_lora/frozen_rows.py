"""The frozen layers' output of each distinct decision row, computed once and kept (``frozen_cache_mb``): below the
split nothing trains, so a position the run has met before (a game's opening, one of Kuhn poker's 12 information
states) needs no second pass through those layers, in the rollout, the bootstrap values or an evaluation.

Each row runs through the frozen layers on its own, never padded beside other rows, so its output depends on the row
alone: from the cache or computed now, in whatever batch it was asked for, the numbers are the same, and a resumed
run (whose cache starts empty) continues exactly as the uninterrupted one. That has a price on a CPU: a row alone
costs about 1.4 times its share of a batch of rows of its length in float32, and about twice in bfloat16 on AMX, where
a matmul of one row's hundred tokens is mostly overhead (tic-tac-toe positions, the default model, 2 cores). What the
store saves is measured by ``benchmarks/ppo_lora_throughput.py``.

A caller that asks the same batches every time (the exact update's walk over the game tree) may ask for its rows
``together``: the call's rows of one shape (so one length, no padding) then run as one batch, about twice as fast on
such CPUs (``benchmarks/frozen_rows_together.py``). A batch rounds a row differently from the row alone, so rows
computed together are kept apart from rows computed alone, and a group runs again, whole, whenever the store lacks
any of its rows: for such a caller a row's numbers are the same whether the store held it or not, and a resumed run
(whose store starts empty) continues exactly. The rows kept are the most recently used, within a budget of bytes.
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
        self.rows: OrderedDict[tuple[RowKey, bool], torch.Tensor] = OrderedDict()
        """(row key, computed together): rows computed in a batch round differently, so they are kept apart."""
        self.bytes = 0
        self.hits = self.misses = 0

    def __call__(
        self,
        prompts: Sequence[Sequence[int]],
        uses_prefix: Sequence[bool],
        continuations: Sequence[Sequence[Sequence[int]]],
        together: bool = False,
    ) -> list[torch.Tensor]:
        """Each row's hidden states entering the first trainable layer, (its length, H); ``together``: the call's
        rows of equal length computed as one batch (see the module's docstring)."""
        keys = [(row_key(*row), together) for row in zip(prompts, uses_prefix, continuations, strict=True)]
        computed = self._together(keys, prompts, uses_prefix, continuations) if together else {}
        out = []
        for key, ids, prefix, row_continuations in zip(keys, prompts, uses_prefix, continuations, strict=True):
            if key in computed:
                self.misses += 1
                hidden = computed[key]
                self._keep(key, hidden)
            elif key in self.rows:
                self.rows.move_to_end(key)
                self.hits += 1
                hidden = self.rows[key]
            else:
                self.misses += 1
                batch = self.pack([ids], [prefix], [row_continuations])
                hidden = self.run(batch)[0, : int(batch.row_lengths[0])].clone()
                self._keep(key, hidden)
            out.append(hidden)
        return out

    def _together(
        self,
        keys: Sequence[tuple[RowKey, bool]],
        prompts: Sequence[Sequence[int]],
        uses_prefix: Sequence[bool],
        continuations: Sequence[Sequence[Sequence[int]]],
    ) -> dict[tuple[RowKey, bool], torch.Tensor]:
        """Each group of the call's distinct rows of one shape (prompt length, continuation lengths: one packed
        length, so no padding) run as one batch, unless the store holds every row of it."""
        groups: dict[tuple[int, ...], list[int]] = {}
        seen: set[tuple[RowKey, bool]] = set()
        for i, key in enumerate(keys):
            if key not in seen:
                seen.add(key)
                groups.setdefault(_shape(prompts[i], continuations[i]), []).append(i)
        computed = {}
        for rows in groups.values():
            if all(keys[i] in self.rows for i in rows):
                continue
            batch = self.pack([prompts[i] for i in rows], [uses_prefix[i] for i in rows],
                              [continuations[i] for i in rows])  # fmt: skip
            hidden = self.run(batch)
            for j, i in enumerate(rows):
                computed[keys[i]] = hidden[j, : int(batch.row_lengths[j])].clone()
        return computed

    def clear(self) -> None:
        """Forget every row (the cached prefix they were computed over changed)."""
        self.rows.clear()
        self.bytes = 0

    def _keep(self, key: tuple[RowKey, bool], hidden: torch.Tensor) -> None:
        old = self.rows.pop(key, None)
        if old is not None:  # recomputed together: the same numbers, counted once
            self.bytes -= _size(old)
        if _size(hidden) > self.budget:
            return
        self.rows[key] = hidden
        self.bytes += _size(hidden)
        while self.bytes > self.budget:
            self.bytes -= _size(self.rows.popitem(last=False)[1])


def _shape(prompt: Sequence[int], continuations: Sequence[Sequence[int]]) -> tuple[int, ...]:
    """Rows of one shape pack to one length."""
    return (len(prompt), *(len(c) for c in continuations))


def _size(hidden: torch.Tensor) -> int:
    return hidden.numel() * hidden.element_size()
