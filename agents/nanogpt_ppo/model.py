"""A nanoGPT-style transformer over character tokens, with a policy head and a value head.

The observation is read as characters followed by a ``QUERY`` token (see :mod:`.tokenizer`); blocks are pre-norm
causal self-attention (``F.scaled_dot_product_attention``) plus an MLP, as in nanoGPT. The heads read the final
hidden state at the query position. Because nothing else is read, the last block runs its query, attention output,
and MLP for the query position only (keys and values still cover every position): the same numbers as running it on
every position, at a fraction of the cost when the model is shallow (``tests/agents`` checks the two agree).

``query_summary`` fixes what the query position starts from. Its own embedding is the same for every observation,
and attention starts out uniform, so at initialisation the query reads an average in which one ball among 250
characters barely registers: features, values and policy hardly depend on the input (explained variance stays at 0
for tens of thousands of steps). With the option, the query token's input also holds the channel-wise max of the
embeddings before it, in which a rare character (the ball) keeps its full size in the channels where it is largest,
together with its position: input-dependent features from the first step, at O(tokens x width) cost.

Positions are either ``absolute`` (one learned vector per index, as nanoGPT) or ``line_column``: a learned vector
for the line a character is on plus one for its column, counted from the newlines in the text itself. On a
character grid the second makes "the ball is in the paddle's column" a comparison of equal embeddings rather than
something learnt separately for every pair of indices.

``key_frequency_bias`` is the same problem seen from the keys' side: uniform attention weighs the kinds of
character by how many of them there are, so the ~200 blanks of a grid drown the one ball and the three paddle
characters, and the gradient that would turn a head toward the ball is scaled by its 1/250 share. With the option,
each key's score is lowered by ``scale_h * log(n)``, where ``n`` counts the key's character among the positions the
query can see (itself included) and ``scale_h`` is a learned number per head, starting at 1: attention then starts
spread evenly over the *kinds* of character present (the ball gets as much weight as all the blanks together), and
a head can learn back to plain attention (scale 0) if that serves better.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import torch
import torch.nn.functional as F
from torch import nn

Positions = Literal["absolute", "line_column"]
MASKED_LOGIT = -1e8
"""Logit given to illegal actions: its probability underflows to exactly 0, and 0 * logit stays finite (entropy)."""


@dataclass(frozen=True)
class GPTShape:
    """The shape of one network (derived from the agent config and the env)."""

    vocab_size: int
    context: int
    """Most tokens per observation, query token included."""
    n_layer: int
    n_head: int
    n_embd: int
    mlp_ratio: int
    n_actions: int
    positions: Positions = "absolute"
    newline_id: int = -1
    """Token id of ``\\n`` (``line_column`` positions count lines with it)."""
    query_summary: bool = False
    """Add to the query token's input the channel-wise max over the embeddings before it (see the module doc)."""
    query_id: int = 2
    """Token id of the query token."""
    key_frequency_bias: bool = False
    """Lower each attention key's score by a learned multiple of the log of how often its character occurs (module doc)."""

    def __post_init__(self) -> None:
        if self.n_embd % self.n_head:
            raise ValueError(f"n_embd ({self.n_embd}) must be a multiple of n_head ({self.n_head})")
        if min(self.n_layer, self.n_head, self.n_embd, self.mlp_ratio, self.context, self.n_actions) < 1:
            raise ValueError(f"every size of the network must be at least 1, got {self}")
        if self.positions == "line_column" and self.newline_id < 0:
            raise ValueError("line_column positions need the newline token id")


class CausalSelfAttention(nn.Module):
    def __init__(self, shape: GPTShape) -> None:
        super().__init__()
        self.n_head, self.n_embd = shape.n_head, shape.n_embd
        self.c_attn = nn.Linear(shape.n_embd, 3 * shape.n_embd)
        self.c_proj = nn.Linear(shape.n_embd, shape.n_embd)
        # Per-head weight of the key-frequency bias (1 = attention starts even over kinds of character, 0 = plain).
        self.frequency_scale = nn.Parameter(torch.ones(shape.n_head)) if shape.key_frequency_bias else None

    def _heads(self, x: torch.Tensor) -> torch.Tensor:
        batch, length, _ = x.shape
        return x.view(batch, length, self.n_head, self.n_embd // self.n_head).transpose(1, 2)

    def _frequency_bias(self, log_counts: torch.Tensor) -> torch.Tensor:
        """Additive attention scores (B, H, Q, T) from the keys' log-counts (B, Q, T)."""
        assert self.frequency_scale is not None
        return -self.frequency_scale[None, :, None, None] * log_counts[:, None].to(self.frequency_scale.dtype)

    def forward(self, x: torch.Tensor, log_counts: torch.Tensor | None = None) -> torch.Tensor:
        """Every position attends to itself and the positions before it; ``log_counts`` (B, T, T) is
        :func:`key_log_counts` for every query position (needed with ``key_frequency_bias``)."""
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        if self.frequency_scale is None:
            y = F.scaled_dot_product_attention(self._heads(q), self._heads(k), self._heads(v), is_causal=True)
        else:
            assert log_counts is not None, "key_frequency_bias needs the keys' log-counts"
            length = x.shape[1]
            future = torch.ones(length, length, dtype=torch.bool, device=x.device).triu(1)
            bias = self._frequency_bias(log_counts).masked_fill(future, float("-inf"))
            y = F.scaled_dot_product_attention(self._heads(q), self._heads(k), self._heads(v), attn_mask=bias)
        return self.c_proj(y.transpose(1, 2).reshape(x.shape))

    def read_out(
        self, x: torch.Tensor, x_query: torch.Tensor, query_index: torch.Tensor, log_counts: torch.Tensor | None = None
    ) -> torch.Tensor:
        """The attention output at the query positions only: ``x_query`` (B, C) attends to ``x[:, :q+1]``;
        ``log_counts`` (B, T) is :func:`key_log_counts` at the query positions (needed with ``key_frequency_bias``)."""
        d = self.n_embd
        weight, bias = self.c_attn.weight, self.c_attn.bias
        q = F.linear(x_query, weight[:d], bias[:d])[:, None, :]
        k, v = F.linear(x, weight[d:], bias[d:]).split(d, dim=2)
        length = x.shape[1]
        mask: torch.Tensor | None = None
        if bool((query_index != length - 1).any()):  # right-padded batch: keys past the query are padding
            mask = (torch.arange(length, device=x.device)[None, :] <= query_index[:, None])[:, None, None, :]
        if self.frequency_scale is not None:
            assert log_counts is not None, "key_frequency_bias needs the keys' log-counts"
            bias = self._frequency_bias(log_counts[:, None, :])
            mask = bias if mask is None else bias.masked_fill(~mask, float("-inf"))
        y = F.scaled_dot_product_attention(self._heads(q), self._heads(k), self._heads(v), attn_mask=mask)
        return self.c_proj(y.transpose(1, 2).reshape(x_query.shape))


class MLP(nn.Module):
    def __init__(self, shape: GPTShape) -> None:
        super().__init__()
        self.c_fc = nn.Linear(shape.n_embd, shape.mlp_ratio * shape.n_embd)
        self.c_proj = nn.Linear(shape.mlp_ratio * shape.n_embd, shape.n_embd)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.c_proj(F.gelu(self.c_fc(x)))


class Block(nn.Module):
    def __init__(self, shape: GPTShape) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(shape.n_embd)
        self.attn = CausalSelfAttention(shape)
        self.ln_2 = nn.LayerNorm(shape.n_embd)
        self.mlp = MLP(shape)

    def forward(self, x: torch.Tensor, log_counts: torch.Tensor | None = None) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x), log_counts)
        return x + self.mlp(self.ln_2(x))

    def read_out(
        self, x: torch.Tensor, query_index: torch.Tensor, log_counts: torch.Tensor | None = None
    ) -> torch.Tensor:
        """This block's output at the query positions only, (B, C)."""
        rows = torch.arange(x.shape[0], device=x.device)
        normed = self.ln_1(x)
        attended = self.attn.read_out(normed, normed[rows, query_index], query_index, log_counts)
        x_query = x[rows, query_index] + attended
        return x_query + self.mlp(self.ln_2(x_query))


class NanoGPTActorCritic(nn.Module):
    """Character transformer with a policy head (action logits) and a value head, both on the query position."""

    def __init__(self, shape: GPTShape) -> None:
        super().__init__()
        self.shape = shape
        self.wte = nn.Embedding(shape.vocab_size, shape.n_embd)
        if shape.positions == "absolute":
            self.wpe = nn.Embedding(shape.context, shape.n_embd)
        else:
            self.w_line = nn.Embedding(shape.context, shape.n_embd)
            self.w_col = nn.Embedding(shape.context, shape.n_embd)
        self.blocks = nn.ModuleList(Block(shape) for _ in range(shape.n_layer))
        self.ln_f = nn.LayerNorm(shape.n_embd)
        self.policy_head = nn.Linear(shape.n_embd, shape.n_actions)
        self.value_head = nn.Linear(shape.n_embd, 1)
        self._init_weights()

    def _init_weights(self) -> None:
        # nanoGPT's init: N(0, 0.02), residual projections scaled down by depth so the residual stream does not grow.
        for module in self.modules():
            if isinstance(module, (nn.Linear, nn.Embedding)):
                nn.init.normal_(module.weight, std=0.02)
            if isinstance(module, nn.Linear) and module.bias is not None:
                nn.init.zeros_(module.bias)
        for name, param in self.named_parameters():
            if name.endswith("c_proj.weight"):
                nn.init.normal_(param, std=0.02 / math.sqrt(2 * self.shape.n_layer))
        if self.shape.positions == "line_column":
            # Ordered from the start: sinusoids (lines in the first half of the channels, columns in the second),
            # so "left of" and "above" are near-linear in the embeddings before any learning; then trained freely.
            half = self.shape.n_embd // 2
            with torch.no_grad():
                self.w_line.weight.zero_()[:, :half] = sinusoids(self.shape.context, half)
                self.w_col.weight.zero_()[:, half : 2 * half] = sinusoids(self.shape.context, half)
        # CleanRL's head init: a near-uniform first policy, a value head on the scale of returns.
        nn.init.orthogonal_(self.policy_head.weight, gain=0.01)
        nn.init.orthogonal_(self.value_head.weight, gain=1.0)

    def positions(self, tokens: torch.Tensor) -> torch.Tensor:
        """Position embeddings (B, T, C) of a token batch."""
        if self.shape.positions == "absolute":
            return self.wpe(torch.arange(tokens.shape[1], device=tokens.device))[None]
        line, column = line_and_column(tokens, self.shape.newline_id)
        top = self.shape.context - 1
        return self.w_line(line.clamp(max=top)) + self.w_col(column.clamp(max=top))

    def _embed(self, tokens: torch.Tensor) -> torch.Tensor:
        if tokens.shape[1] > self.shape.context:
            raise ValueError(f"{tokens.shape[1]} tokens exceed the model's context of {self.shape.context}")
        x = self.wte(tokens.long()) + self.positions(tokens)
        if self.shape.query_summary:
            x = x + self._query_summary(tokens, x)
        return x

    def _query_summary(self, tokens: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """At each query position, the channel-wise max of ``x`` over the positions strictly before it (causal);
        zero elsewhere."""
        is_query = tokens == self.shape.query_id
        if bool((is_query.sum(1) <= 1).all()):
            # One query per row (what the agent feeds): a masked max, whose backward is a cheap scatter.
            where = is_query.long().argmax(1)
            before = torch.arange(x.shape[1], device=x.device)[None, :] < where[:, None]
            summary = x.masked_fill(~before[..., None], float("-inf")).amax(1)
            summary = torch.where(before.any(1)[:, None], summary, torch.zeros_like(summary))
            return is_query[..., None] * summary[:, None, :]
        # Several queries in a row (probing, tests): a running max, 2-3x dearer to differentiate.
        prefix = F.pad(x.cummax(dim=1).values[:, :-1], (0, 0, 1, 0))
        return torch.where(is_query[..., None], prefix, torch.zeros_like(prefix))

    def hidden(self, tokens: torch.Tensor) -> torch.Tensor:
        """Final hidden states (B, T, C) at every position (all blocks on all positions; for tests and probing)."""
        x = self._embed(tokens)
        log_counts = key_log_counts(tokens, self.shape.vocab_size) if self.shape.key_frequency_bias else None
        for block in self.blocks:
            x = block(x, log_counts)
        return self.ln_f(x)

    def features(self, tokens: torch.Tensor, query_index: torch.Tensor) -> torch.Tensor:
        """Final hidden state (B, C) at each row's query position; the last block runs for that position only."""
        tokens = tokens[:, : int(query_index.max()) + 1]  # padding after the last query changes nothing (causal)
        x = self._embed(tokens)
        every, at_query = None, None
        if self.shape.key_frequency_bias:
            at_query = key_log_counts(tokens, self.shape.vocab_size, query_index)
            if self.shape.n_layer > 1:
                every = key_log_counts(tokens, self.shape.vocab_size)
        for block in self.blocks[:-1]:
            x = block(x, every)
        return self.ln_f(self.blocks[-1].read_out(x, query_index, at_query))

    def forward(
        self, tokens: torch.Tensor, query_index: torch.Tensor, action_mask: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(action logits (B, A) with illegal actions at :data:`MASKED_LOGIT`, values (B,))."""
        feats = self.features(tokens, query_index)
        logits = self.policy_head(feats)
        if action_mask is not None:
            logits = logits.masked_fill(~action_mask.bool(), MASKED_LOGIT)
        return logits, self.value_head(feats).squeeze(-1)


def sinusoids(length: int, channels: int, rms: float = 0.02) -> torch.Tensor:
    """(length, channels) sin/cos position table (Vaswani et al. 2017) scaled to an RMS of ``rms`` per channel,
    that of nanoGPT's N(0, 0.02) embeddings. Low frequencies make position differences near-linear."""
    position = torch.arange(length, dtype=torch.float32)[:, None]
    frequency = 1.0 / (10_000.0 ** (torch.arange(0, channels, 2, dtype=torch.float32) / channels))
    table = torch.zeros(length, channels)
    table[:, 0::2] = torch.sin(position * frequency)
    table[:, 1::2] = torch.cos(position * frequency)[:, : channels // 2]
    return table * rms * math.sqrt(2)


def line_and_column(tokens: torch.Tensor, newline_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(line, column) of every token (B, T), both from 0; a newline is the last character of its line."""
    index = torch.arange(tokens.shape[1], device=tokens.device)
    newline = tokens == newline_id
    line = newline.long().cumsum(1) - newline.long()
    last_newline = torch.where(newline, index, -1).cummax(1).values
    before = F.pad(last_newline[:, :-1], (1, 0), value=-1)  # the latest newline strictly before each position
    return line, index - before - 1


def key_log_counts(tokens: torch.Tensor, vocab_size: int, query_index: torch.Tensor | None = None) -> torch.Tensor:
    """log of how often each key's token occurs among the positions a query sees (itself and those before it).

    With ``query_index`` (B,): (B, T), counted over ``tokens[b, :query_index[b] + 1]`` (keys past it are counted the
    same way and masked by attention). Without: (B, T, T), entry [b, i, j] counted over ``tokens[b, :i + 1]`` for
    every query position i (causal, so a later token changes no earlier position); entries j > i must be masked.
    """
    tokens = tokens.long()
    batch, length = tokens.shape
    if query_index is not None:
        seen = (torch.arange(length, device=tokens.device)[None, :] <= query_index[:, None]).float()
        counts = torch.zeros(batch, vocab_size, device=tokens.device).scatter_add_(1, tokens, seen)
        return counts.gather(1, tokens).clamp(min=1).log()
    running = F.one_hot(tokens, vocab_size).cumsum(1).float()  # (B, T, V): counts up to each position
    counts = running.gather(2, tokens[:, None, :].expand(batch, length, length))
    return counts.clamp(min=1).log()


def distribution_terms(logits: torch.Tensor, actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(log-prob of ``actions``, entropy) of categorical distributions given by (masked) ``logits``."""
    logp = F.log_softmax(logits, dim=-1)
    entropy = -(logp.exp() * logp).sum(-1)
    return logp.gather(1, actions.long()[:, None]).squeeze(1), entropy


def forward_flops(shape: GPTShape, tokens: int) -> int:
    """Multiply-add FLOPs (2 per MAC) of one forward pass over ``tokens`` tokens, as :meth:`features` runs it.

    Counts the matmuls and attention (causal: on average each position attends to half the sequence); embeddings,
    norms and activations are left out (under 2% here).
    """
    d, r, t = shape.n_embd, shape.mlp_ratio, tokens
    dense_per_token = 2 * (3 * d * d + d * d + 2 * r * d * d)  # qkv, attention out, MLP up + down
    attention_per_token = 2 * 2 * d * (t + 1) / 2  # q.k and att.v, over (t + 1) / 2 keys on average
    full_blocks = (shape.n_layer - 1) * t * (dense_per_token + attention_per_token)
    last_block = t * 2 * (2 * d * d) + 2 * (d * d + d * d + 2 * r * d * d) + 2 * 2 * d * t
    heads = 2 * d * (shape.n_actions + 1)
    return int(full_blocks + last_block + heads)
