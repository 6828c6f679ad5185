"""The ``hf`` backend: a transformers causal LM in this process (CPU by default, GPU when there is one).

Scoring packs every prompt of a batch with a trie of its choices into one forward pass over the cached shared
prefix (:mod:`llm_gym.lm.packing`); generation samples all prompts together (:mod:`llm_gym.lm.generation`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Any

import numpy as np
import torch

from llm_gym.lm.backends import Completion, GenerateRequest, ScoreRequest
from llm_gym.lm.forward import PrefixCache, compute_prefix, packed_forward
from llm_gym.lm.generation import generate, stop_token_ids
from llm_gym.lm.models import DEFAULT_MODEL, DType, load_causal_lm
from llm_gym.lm.packing import pack
from llm_gym.lm.prompts import PromptBuilder
from llm_gym.lm.quantize import Quantize, check_quantize, quantize_model
from llm_gym.lm.runtime import configure_threads, default_device


def _request_key(request: ScoreRequest, index: int) -> Any:
    """Text requests merge when equal; an image observation (an array) never merges. Callers may hand choices and
    turns as lists, so the key is built from tuples rather than the (then unhashable) request."""
    if isinstance(request.observation, str):
        turns = tuple((str(text), str(move)) for text, move in request.turns)
        return (request.instructions, request.observation, tuple(request.choices), turns)
    return ("unmerged", index)


class HFBackend:
    """A Hugging Face causal LM behind the backend interface.

    Args:
        model: an alias (``smollm2-135m``), a local directory, a ``.gguf`` file or a locally cached HF id.
        dtype: ``auto`` (bf16 where the hardware is fast at it), ``float32``, ``bfloat16``, ``float16``.
        device: ``cpu``, ``cuda`` ... (default: cuda if visible, else cpu; cpu with ``quantize=int8``).
        threads: torch threads (0: one per available core).
        batch_size: most prompts per forward pass.
        score_with_end: score each choice followed by the template's end-of-answer token (see
            :meth:`PromptBuilder.choice_ids`).
        quantize: ``none``, or ``int8``: the decoder's Linear layers with int8 weights (CPU only, float32
            activations; :mod:`llm_gym.lm.quantize`).
    """

    name = "hf"

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        *,
        dtype: DType = "auto",
        device: str | None = None,
        threads: int = 0,
        batch_size: int = 32,
        score_with_end: bool = True,
        quantize: Quantize = "none",
    ) -> None:
        device = device or ("cpu" if quantize == "int8" else default_device())  # int8 kernels are CPU kernels
        check_quantize(quantize, device=device, dtype=dtype)  # before the load: a wrong option costs no time
        configure_threads(threads)
        lm, tokenizer = load_causal_lm(model, dtype="float32" if quantize == "int8" else dtype, device=device)
        self._setup(quantize_model(lm, quantize), tokenizer, batch_size, score_with_end)

    value_head: torch.nn.Module | None = None
    """A trained value head over the final hidden state of a prompt's last token (a ppo_lora / sft checkpoint's),
    or None; with one, :meth:`score_with_values` also returns each prompt's value estimate."""
    choice_head: Any = None
    """A trained head that offsets each choice's log-likelihood from the same hidden state (a ppo_lora checkpoint's
    action head: ``offsets(last_hidden, choices) -> one tensor of offsets per row``), or None. With one, every score
    this backend returns is the policy's offset likelihood, not the model's alone."""

    @classmethod
    def from_model(
        cls,
        model: Any,
        tokenizer: Any,
        *,
        batch_size: int = 32,
        score_with_end: bool = True,
        value_head: torch.nn.Module | None = None,
        choice_head: Any = None,
        compute: Callable[[], AbstractContextManager[Any]] | None = None,
    ) -> HFBackend:
        """Wrap an already loaded model (e.g. a trained one), with its value head if it has one. Its weights must
        not change afterwards: the prefix caches assume they do not. ``compute``: a context every forward pass of
        the model runs in (a LoRA model's :class:`~llm_gym.lm.adapter_compute.AdapterCompute`)."""
        backend = cls.__new__(cls)
        backend._setup(model, tokenizer, batch_size, score_with_end)
        backend.value_head = value_head
        backend.choice_head = choice_head
        backend._compute = compute or nullcontext
        return backend

    def _setup(self, model: Any, tokenizer: Any, batch_size: int, score_with_end: bool) -> None:
        self.model, self.tokenizer = model, tokenizer
        self._setup_runtime(model, batch_size, score_with_end)

    def _setup_runtime(self, lm: Any, batch_size: int, score_with_end: bool) -> None:
        """What every packed backend keeps; ``lm`` is the module the forward passes run (here the model itself,
        for ``hf-vision`` its image+text wrapper)."""
        self.lm = lm
        self.batch_size = max(1, batch_size)
        self.score_with_end = score_with_end
        self.stop_ids = stop_token_ids(self.tokenizer, lm)
        self._prompts: dict[str, tuple[Any, PrefixCache | None]] = {}
        self._generator = torch.Generator()
        self._compute: Callable[[], AbstractContextManager[Any]] = nullcontext

    def _new_prompt_builder(self, instructions: str) -> PromptBuilder:
        return PromptBuilder(self.tokenizer, instructions)

    def _forward_inputs(self, prompts: Sequence[Any]) -> AbstractContextManager[Any]:
        """What a forward pass over ``prompts`` needs besides their token ids: nothing for text (the vision
        backend hands over their images)."""
        return nullcontext()

    def _generation_stop_ids(self, builder: Any) -> set[int]:
        return self.stop_ids

    def prompt_builder(self, instructions: str) -> tuple[Any, PrefixCache | None]:
        """The builder and the prefix KV cache for one system prompt (made on first use)."""
        if instructions not in self._prompts:
            builder = self._new_prompt_builder(instructions)
            with torch.inference_mode(), self._compute():
                prefix = compute_prefix(self.lm, builder.prefix_ids)
            self._prompts[instructions] = (builder, prefix)
        return self._prompts[instructions]

    def _chunks(self, requests: Sequence[Any]) -> list[tuple[str, list[int]]]:
        """Request indices grouped by system prompt, in chunks of ``batch_size``."""
        groups: dict[str, list[int]] = {}
        for i, request in enumerate(requests):
            groups.setdefault(request.instructions, []).append(i)
        return [
            (instructions, indices[start : start + self.batch_size])
            for instructions, indices in groups.items()
            for start in range(0, len(indices), self.batch_size)
        ]

    def score(self, requests: Sequence[ScoreRequest]) -> list[np.ndarray]:
        return self.score_with_values(requests)[0]

    def score_with_values(self, requests: Sequence[ScoreRequest]) -> tuple[list[np.ndarray], list[float] | None]:
        """The choices' log-likelihoods per request and, with a :attr:`value_head`, each prompt's value estimate
        (from the same forward pass: the hidden state the choices are scored from). Equal text requests (envs that
        show the same position) are scored once."""
        first: dict[Any, int] = {}
        distinct: list[ScoreRequest] = []
        inverse = []
        for i, request in enumerate(requests):
            key = _request_key(request, i)
            if key not in first:
                first[key] = len(distinct)
                distinct.append(request)
            inverse.append(first[key])
        if len(distinct) == len(requests):
            return self._score_distinct(requests)
        scores, values = self._score_distinct(distinct)
        return [scores[j] for j in inverse], None if values is None else [values[j] for j in inverse]

    def _score_distinct(self, requests: Sequence[ScoreRequest]) -> tuple[list[np.ndarray], list[float] | None]:
        results: list[np.ndarray] = [np.empty(0)] * len(requests)
        estimates: list[float] | None = [0.0] * len(requests) if self.value_head is not None else None
        for instructions, chunk in self._chunks(requests):
            builder, prefix = self.prompt_builder(instructions)
            prompts = builder.encode([requests[i].observation for i in chunk], [requests[i].turns for i in chunk])
            choices = [[builder.choice_ids(c, self.score_with_end) for c in requests[i].choices] for i in chunk]
            batch = pack(
                [p.ids for p in prompts],
                [p.uses_prefix for p in prompts],
                choices,
                prefix.length if prefix else 0,
                self.tokenizer.pad_token_id,
            )
            with torch.inference_mode(), self._forward_inputs(prompts):
                with self._compute():  # the model only: the value head stays float32
                    out = packed_forward(self.lm, batch, prefix)
                if estimates is not None:
                    head = self.value_head
                    assert head is not None
                    for i, value in zip(chunk, head(out.last_hidden.float()).squeeze(-1).tolist(), strict=True):
                        estimates[i] = float(value)
            values = out.seq_logprobs.double().cpu().numpy()
            offsets = None
            if self.choice_head is not None:
                with torch.inference_mode():
                    offsets = self.choice_head.offsets(out.last_hidden, [requests[i].choices for i in chunk])
            start = 0
            for k, (i, row_choices) in enumerate(zip(chunk, choices, strict=True)):
                results[i] = values[start : start + len(row_choices)]
                if offsets is not None:
                    results[i] = results[i] + offsets[k].numpy()
                start += len(row_choices)
        return results, estimates

    def generate(
        self, requests: Sequence[GenerateRequest], *, max_new_tokens: int, temperature: float, seed: int | None = None
    ) -> list[Completion]:
        if seed is not None:
            self._generator.manual_seed(seed)
        results: list[Completion | None] = [None] * len(requests)
        for instructions, chunk in self._chunks(requests):
            builder, prefix = self.prompt_builder(instructions)
            prompts = builder.encode([requests[i].observation for i in chunk], [requests[i].turns for i in chunk])
            with torch.inference_mode(), self._forward_inputs(prompts), self._compute():
                generations = generate(
                    self.lm,
                    prompts,
                    prefix,
                    max_new_tokens=max_new_tokens,
                    stop_ids=self._generation_stop_ids(builder),
                    pad_id=self.tokenizer.pad_token_id,
                    temperature=temperature,
                    generator=self._generator,
                )
            for i, gen in zip(chunk, generations, strict=True):
                text = self.tokenizer.decode(gen.tokens, skip_special_tokens=True)
                results[i] = Completion(text, float(sum(gen.logprobs)), len(gen.tokens), gen.stopped, tuple(gen.tokens))
        return [r for r in results if r is not None]

    def close(self) -> None:
        self._prompts.clear()
