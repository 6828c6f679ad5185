"""Pack prompts and the continuations to score into one batch for a single forward pass ("tree attention").

Each row holds one prompt's tokens (after the shared prefix, when it has it) followed by the internal nodes of a
trie over that row's continuations (legal action strings in score mode, sampled completions in generate mode).
A 4-D attention mask lets every trie node see the prefix, the prompt and its own ancestors only, and position ids
continue the prompt's positions by trie depth, so each continuation token is predicted exactly as in a separate
forward pass of ``prompt + continuation``. Leaves are never fed in: their logits would predict nothing we need.

Only the positions that predict a continuation token are gathered for the LM head (the last prompt token and the
internal trie nodes); the prompt positions before it never reach the 49k-way vocabulary projection.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch


@dataclass
class PackedBatch:
    """Tensors of one packed forward pass. B rows, Q query slots, P cached prefix tokens."""

    input_ids: torch.Tensor
    """(B, Q) token ids (padding: the pad id)."""
    position_ids: torch.Tensor
    """(B, Q) positions (prefix tokens occupy 0..P-1 for rows that use the prefix)."""
    allowed: torch.Tensor
    """(B, Q, P + Q) bool: which keys each query may attend to."""
    last_prompt: torch.Tensor
    """(B,) query slot of each row's last prompt token (the value head reads the hidden state there)."""
    row_lengths: torch.Tensor
    """(B,) real (non-padding) slots of each row: its prompt after the prefix plus its trie's internal nodes."""
    predict_row: torch.Tensor
    """(U,) row of each slot whose next-token distribution is needed."""
    predict_slot: torch.Tensor
    """(U,) query slot of each such position."""
    target_predictor: torch.Tensor
    """(T,) for each continuation token: index into the U predicting positions."""
    target_ids: torch.Tensor
    """(T,) the continuation tokens."""
    target_seq: torch.Tensor
    """(T,) which continuation (0..S-1, row-major) each token belongs to."""
    seq_row: torch.Tensor
    """(S,) row of each continuation."""
    seq_lengths: torch.Tensor
    """(S,) tokens in each continuation."""
    seq_bias: torch.Tensor | None = None
    """(S,) a fixed offset added to each continuation's log-likelihood before the softmax over its row's choices
    (a policy's per-action prior correction, set by whoever packs for it); None: no offset."""
    seq_name: torch.Tensor | None = None
    """(S,) long: each continuation's index in a policy's own table of action names (-1: not in it), for a
    state-dependent offset computed from the forward pass (set by whoever packs for it); None: no table."""

    @property
    def prefix_length(self) -> int:
        return self.allowed.shape[2] - self.allowed.shape[1]


def pack(
    prompts: Sequence[Sequence[int]],
    uses_prefix: Sequence[bool],
    continuations: Sequence[Sequence[Sequence[int]]],
    prefix_length: int,
    pad_id: int,
) -> PackedBatch:
    """Pack rows of ``prompt`` + trie of ``continuations`` (see the module doc).

    Args:
        prompts: per row, the full prompt token ids (including the shared prefix where ``uses_prefix``).
        uses_prefix: per row, whether the first ``prefix_length`` tokens are the cached prefix.
        continuations: per row, the token-id sequences to score (each non-empty).
        prefix_length: P, the length of the cached prefix (0 without one).
        pad_id: token id used for padding slots.
    """
    rows: list[tuple[list[int], list[int], list[int], int]] = []  # (tokens, positions, parents, n_prompt)
    target_predictor: list[int] = []
    target_ids: list[int] = []
    target_seq: list[int] = []
    seq_row: list[int] = []
    seq_lengths: list[int] = []
    predictors: list[tuple[int, int]] = []
    for b, (prompt, has_prefix, conts) in enumerate(zip(prompts, uses_prefix, continuations, strict=True)):
        skip = prefix_length if has_prefix else 0
        tokens = list(prompt[skip:])
        if not tokens:
            raise ValueError("a prompt must have at least one token after the cached prefix")
        n_prompt = len(tokens)
        positions = list(range(skip, skip + n_prompt))
        parents = list(range(-1, n_prompt - 1))
        # Trie: node key = token prefix; the root is the last prompt token.
        slot_of: dict[tuple[int, ...], int] = {(): n_prompt - 1}
        predictor_of: dict[int, int] = {}

        def predictor(slot: int, _row: int = b, _cache: dict[int, int] = predictor_of) -> int:
            if slot not in _cache:
                _cache[slot] = len(predictors)
                predictors.append((_row, slot))
            return _cache[slot]

        for cont in conts:
            if len(cont) == 0:
                raise ValueError("continuations must be non-empty")
            seq = len(seq_row)
            seq_row.append(b)
            seq_lengths.append(len(cont))
            for depth, token in enumerate(cont):
                parent_key = tuple(cont[:depth])
                if parent_key not in slot_of:  # an internal node not fed in yet
                    slot_of[parent_key] = len(tokens)
                    tokens.append(int(parent_key[-1]))
                    positions.append(skip + n_prompt + depth - 1)
                    parents.append(slot_of[parent_key[:-1]])
                target_predictor.append(predictor(slot_of[parent_key]))
                target_ids.append(int(token))
                target_seq.append(seq)
        rows.append((tokens, positions, parents, n_prompt))

    batch, width = len(rows), max(len(r[0]) for r in rows)
    input_ids = torch.full((batch, width), pad_id, dtype=torch.long)
    position_ids = torch.zeros((batch, width), dtype=torch.long)
    allowed = torch.zeros((batch, width, prefix_length + width), dtype=torch.bool)
    last_prompt = torch.zeros(batch, dtype=torch.long)
    causal = torch.ones((width, width), dtype=torch.bool).tril()
    for b, ((tokens, positions, parents, n_prompt), has_prefix) in enumerate(zip(rows, uses_prefix, strict=True)):
        n = len(tokens)
        input_ids[b, :n] = torch.tensor(tokens)
        position_ids[b, :n] = torch.tensor(positions)
        if n < width:  # padding: valid positions, attending to themselves only (no all-masked rows, no NaN)
            position_ids[b, n:] = positions[-1]
            allowed[b, n:, prefix_length:] = torch.eye(width, dtype=torch.bool)[n:]
        last_prompt[b] = n_prompt - 1
        view = allowed[b, :n, prefix_length:]
        view[:n_prompt, :n_prompt] = causal[:n_prompt, :n_prompt]
        for slot in range(n_prompt, n):
            view[slot, :n_prompt] = True
            node = slot
            while node >= n_prompt:
                view[slot, node] = True
                node = parents[node]
        if has_prefix:
            allowed[b, :n, :prefix_length] = True
    return PackedBatch(
        input_ids=input_ids,
        position_ids=position_ids,
        allowed=allowed,
        last_prompt=last_prompt,
        row_lengths=torch.tensor([len(r[0]) for r in rows], dtype=torch.long),
        predict_row=torch.tensor([r for r, _ in predictors], dtype=torch.long),
        predict_slot=torch.tensor([s for _, s in predictors], dtype=torch.long),
        target_predictor=torch.tensor(target_predictor, dtype=torch.long),
        target_ids=torch.tensor(target_ids, dtype=torch.long),
        target_seq=torch.tensor(target_seq, dtype=torch.long),
        seq_row=torch.tensor(seq_row, dtype=torch.long),
        seq_lengths=torch.tensor(seq_lengths, dtype=torch.long),
    )
