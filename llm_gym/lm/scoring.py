"""Score mode as a distribution: the log-likelihoods of each row's choices become a categorical over its legal
actions, padded into a (rows, max choices) tensor with ``-inf`` where a row has fewer choices. Differentiable, so
training uses it too."""

from __future__ import annotations

import torch


def choice_table(seq_logprobs: torch.Tensor, seq_row: torch.Tensor, rows: int) -> torch.Tensor:
    """(S,) per-choice log-likelihoods, row-major, -> (rows, max choices) padded with -inf."""
    seq_row = seq_row.to(seq_logprobs.device)
    counts = torch.bincount(seq_row, minlength=rows)
    starts = torch.cumsum(counts, 0) - counts
    column = torch.arange(len(seq_row), device=seq_logprobs.device) - starts[seq_row]
    table = torch.full((rows, int(counts.max())), float("-inf"), dtype=seq_logprobs.dtype, device=seq_logprobs.device)
    return table.index_put((seq_row, column), seq_logprobs)


def categorical_logprobs(seq_logprobs: torch.Tensor, seq_row: torch.Tensor, rows: int) -> torch.Tensor:
    """The policy's log-probabilities over each row's choices: a softmax of their log-likelihoods (padded -inf)."""
    return torch.log_softmax(choice_table(seq_logprobs, seq_row, rows), dim=-1)


def categorical_entropy(logprobs: torch.Tensor) -> torch.Tensor:
    """(rows,) entropy of padded log-probabilities (padding contributes 0)."""
    probs = logprobs.exp()
    return -(probs * torch.where(torch.isfinite(logprobs), logprobs, torch.zeros_like(logprobs))).sum(-1)


def categorical_kl(logprobs: torch.Tensor, reference: torch.Tensor) -> torch.Tensor:
    """(rows,) exact KL(policy || reference) between two padded categoricals over the same choices."""
    finite = torch.isfinite(logprobs)
    diff = torch.where(finite, logprobs - reference, torch.zeros_like(logprobs))
    return (logprobs.exp() * diff).sum(-1)
