"""What ``sft`` trains on: the demos of one split as batches of the trainable layers' inputs, their losses, and one
optimizer step's backward in micro-batches.

The frozen layers' output of every distinct demo is computed once (or read from :mod:`~llm_gym.agents.sft.frozen_cache`)
and reused by every epoch, so an epoch costs the trainable layers only.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from llm_gym.agents.ppo_lora.frozen_rows import padded_hidden
from llm_gym.agents.ppo_lora.model import ActorCritic
from llm_gym.agents.sft import frozen_cache
from llm_gym.agents.sft.config import SFTConfig
from llm_gym.agents.sft.data import DemoExample
from llm_gym.lm.finetune import prompt_and_answer
from llm_gym.lm.scoring import choice_table


class Batches:
    """The demos of one split with each one's frozen-layer output, computed once, or read from ``cache`` (a
    directory and :func:`~llm_gym.agents.sft.frozen_cache.bottom_fingerprint`; written there when not found)."""

    def __init__(
        self,
        ac: ActorCritic,
        examples: Sequence[DemoExample],
        batch_size: int,
        with_choices: bool = False,
        merge_repeats: bool = True,
        cache: tuple[Path, str] | None = None,
    ) -> None:
        self.examples = list(examples)
        self.with_choices = with_choices
        self.merge_repeats = merge_repeats
        self.parts = [prompt_and_answer(e.encoded) for e in self.examples]
        # Demos repeat decisions (every game starts from the same board): each distinct prompt + answer runs once
        # and its copies share the tensor (the rows hold the answer's fed-in tokens too, or every choice's).
        # Per demo, the first demo with its prompt + answer (+ choices): the copies share its row here and in repeats().
        first: dict[tuple[Any, ...], int] = {}
        self.first_copy = [first.setdefault(self._key(i), i) for i in range(len(self.parts))]
        distinct = sorted(set(first.values()))
        chunks = [distinct[start : start + batch_size] for start in range(0, len(distinct), batch_size)]

        @torch.no_grad()
        def frozen_pass() -> list[torch.Tensor]:
            rows = []
            for index in chunks:
                batch = self._pack(ac, index)
                hidden = ac.bottom(batch)
                rows += [hidden[row, : int(length)].clone() for row, length in enumerate(batch.row_lengths)]
            return rows

        if cache is None or ac.split_layer == 0:  # no frozen layers: the pass is the embedding lookup
            rows = frozen_pass()
        else:  # packed once more for the rows' lengths only: what a cache file must hold
            lengths = [int(n) for index in chunks for n in self._pack(ac, index).row_lengths]
            directory, fingerprint = cache
            described = [(*self._key(i), self.examples[i].uses_prefix) for i in distinct]
            key = frozen_cache.rows_key(fingerprint, described, batch_size)
            rows = frozen_cache.load_or_compute(directory, key, lengths, frozen_pass, ac.device)
        computed = dict(zip(distinct, rows, strict=True))
        self.hidden = [computed[i] for i in self.first_copy]

    def _key(self, i: int) -> tuple[Any, ...]:
        prompt, answer = self.parts[i]
        return (tuple(prompt), tuple(answer), self.examples[i].choices if self.with_choices else ())

    def __len__(self) -> int:
        return len(self.examples)

    def _pack(self, ac: ActorCritic, index: Sequence[int]) -> Any:
        return ac.pack(
            [self.parts[i][0] for i in index],
            [self.examples[i].uses_prefix for i in index],
            [self.examples[i].choices if self.with_choices else [self.parts[i][1]] for i in index],
        )

    def answer_tokens(self, index: Sequence[int]) -> int:
        """Answer tokens of these demos (what the answer loss averages over)."""
        return sum(len(self.parts[i][1]) for i in index)

    def repeats(self, index: Sequence[int]) -> list[list[int]]:
        """The demos of ``index`` grouped by distinct prompt + answer (+ choices), in first-seen order. A group's
        demos give the trainable layers the same input and the same labels, so one row run once and counted
        ``len(group)`` times is exactly their loss and gradient (small games repeat decisions: Kuhn poker's demos
        hold about 10 distinct ones, so a batch of 16 runs about 7.5 rows). Without ``merge_repeats``: groups of one."""
        if not self.merge_repeats:
            return [[i] for i in index]
        groups: dict[int, list[int]] = {}
        for i in index:
            groups.setdefault(self.first_copy[i], []).append(i)
        return list(groups.values())

    def losses(
        self,
        ac: ActorCritic,
        index: Sequence[int],
        config: SFTConfig,
        train: bool,
        share: tuple[int, int] | None = None,
    ) -> dict[str, torch.Tensor]:
        """Answer cross-entropy (mean over the batch's answer tokens), the demo answers' mean probability, and the
        value head's MSE to the returns-to-go. With ``share`` = (answer tokens, demos) of the whole batch that these
        demos are a micro-batch of, ``loss`` is this micro-batch's part of the batch's loss (the parts sum to it)."""
        groups = self.repeats(index)
        rows = [group[0] for group in groups]
        batch = self._pack(ac, rows)
        hidden = padded_hidden([self.hidden[i] for i in rows], batch.input_ids.shape[1]).to(ac.device)
        out, values = ac.top(hidden, batch, "train" if train else "rollout")
        count = torch.tensor([len(group) for group in groups], dtype=values.dtype, device=values.device)
        # A group's demos share the value prediction but not the return-to-go: sum_j (v - t_j)^2 / 2 is
        # count * (v - mean t)^2 / 2 plus the spread of the targets around their mean (no gradient).
        scaled = [[config.reward_scale * self.examples[i].return_to_go for i in group] for group in groups]
        means = [sum(t) / len(t) for t in scaled]
        spread = sum((x - m) ** 2 for t, m in zip(scaled, means, strict=True) for x in t) / 2
        mean = torch.tensor(means, dtype=values.dtype, device=values.device)
        squared_sum = (count * 0.5 * (values - mean) ** 2).sum() + spread
        tokens, demos = share or (self.answer_tokens(index), len(index))
        if self.with_choices:
            # Each row holds every legal action as a continuation; the answer is one of them.
            answer = torch.tensor([self.examples[i].answer_index for i in rows], device=values.device)
            table = choice_table(out.seq_logprobs, batch.seq_row, len(rows))
            answer_seq = table.gather(1, answer[:, None]).squeeze(1)
            choice_logp = torch.log_softmax(table, dim=-1)
            right = torch.zeros_like(choice_logp, dtype=torch.bool)  # what the choice loss counts as right
            for row, i in enumerate(rows):
                example = self.examples[i]
                right[row, list(example.best) if config.choice_target == "best" else [example.answer_index]] = True
            choice_nll = -torch.logsumexp(choice_logp.masked_fill(~right, float("-inf")), dim=1)
        else:
            answer_seq = out.seq_logprobs
        answer_sum = (count * answer_seq).sum()
        loss = -answer_sum / tokens + config.value_coef * squared_sum / demos
        losses = {"answer_loss": -answer_sum / self.answer_tokens(index),
                  "answer_prob": (count * answer_seq.exp()).sum() / len(index),
                  "value_loss": squared_sum / len(index)}  # fmt: skip
        if self.with_choices:
            chosen = right.gather(1, choice_logp.argmax(1, keepdim=True)).squeeze(1)
            loss = loss + config.choice_loss_coef * (count * choice_nll).sum() / demos
            losses |= {"choice_loss": (count * choice_nll).sum() / len(index),
                       "choice_accuracy": (count * chosen).sum() / len(index)}  # fmt: skip
        return {"loss": loss, **losses}


@torch.no_grad()
def validate(ac: ActorCritic, data: Batches, config: SFTConfig) -> dict[str, float]:
    """Mean validation losses over the held-out demos (weighted by batch size)."""
    sums: dict[str, float] = {}
    for start in range(0, len(data), config.minibatch_size):
        index = list(range(start, min(start + config.minibatch_size, len(data))))
        for key, value in data.losses(ac, index, config, train=False).items():
            sums[key] = sums.get(key, 0.0) + float(value) * len(index)
    return {f"val/{k}": v / len(data) for k, v in sums.items()} if len(data) else {}


def accumulate(data: Batches, ac: ActorCritic, index: Sequence[int], config: SFTConfig) -> dict[str, float]:
    """Backward of one batch's loss in micro-batches of ``config.micro_batch_size`` (gradients add up to the whole
    batch's); returns the batch's losses (the answer loss per answer token, the others per demo)."""
    share = (data.answer_tokens(index), len(index))
    scalars: dict[str, float] = {}
    groups = data.repeats(index)  # a micro-batch is micro_batch_size distinct rows, however many demos repeat them
    for start in range(0, len(groups), config.micro_batch_size):
        micro = [i for group in groups[start : start + config.micro_batch_size] for i in group]
        losses = data.losses(ac, micro, config, train=True, share=share)
        losses["loss"].backward()
        weights = {"loss": 1.0, "answer_loss": data.answer_tokens(micro) / share[0]}
        for key, value in losses.items():
            weight = weights.get(key, len(micro) / share[1])
            scalars[f"train/{key}"] = scalars.get(f"train/{key}", 0.0) + weight * float(value.detach())
    return scalars
