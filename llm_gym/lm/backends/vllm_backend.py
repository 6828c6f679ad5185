"""The ``vllm`` backend: vLLM's offline engine in this process (GPU). Imported only when asked for.

``score`` uses vLLM's prompt log-probs of ``prompt + choice`` (``prompt_logprobs=0``: the log-prob of each actual
prompt token); ``generate`` samples with ``SamplingParams``. Prompts are rendered with the model's chat template
through :class:`llm_gym.lm.prompts.PromptBuilder`, exactly as in the ``hf`` backend.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from typing import Any

import numpy as np

from llm_gym.errors import MissingDependencyError
from llm_gym.lm.backends import Completion, GenerateRequest, ScoreRequest
from llm_gym.lm.prompts import PromptBuilder


class VLLMBackend:
    """A vLLM engine. Options other than the ones below go to ``vllm.LLM`` (e.g. ``gpu_memory_utilization``)."""

    name = "vllm"

    def __init__(self, model: str, *, score_with_end: bool = True, **engine_options: Any) -> None:
        if importlib.util.find_spec("vllm") is None:
            raise MissingDependencyError("the vllm backend", "vllm")
        import vllm

        from llm_gym.lm.models import resolve_model

        self._vllm = vllm
        self.engine = vllm.LLM(model=str(resolve_model(model)), **engine_options)
        self.tokenizer = self.engine.get_tokenizer()
        self.score_with_end = score_with_end
        self._builders: dict[str, PromptBuilder] = {}

    def _builder(self, instructions: str) -> PromptBuilder:
        if instructions not in self._builders:
            self._builders[instructions] = PromptBuilder(self.tokenizer, instructions)
        return self._builders[instructions]

    def score(self, requests: Sequence[ScoreRequest]) -> list[np.ndarray]:
        inputs, spans = [], []
        for request in requests:
            builder = self._builder(request.instructions)
            (prompt,) = builder.encode([request.observation])
            for choice in request.choices:
                ids = builder.choice_ids(choice, self.score_with_end)
                inputs.append({"prompt_token_ids": prompt.ids + ids})
                spans.append((len(prompt.ids), ids))
        params = self._vllm.SamplingParams(max_tokens=1, prompt_logprobs=0, temperature=0.0)
        outputs = self.engine.generate(inputs, params, use_tqdm=False)
        scores = []
        for output, (start, ids) in zip(outputs, spans, strict=True):
            entries = output.prompt_logprobs[start : start + len(ids)]
            scores.append(sum(entry[token].logprob for entry, token in zip(entries, ids, strict=True)))
        values = iter(scores)
        return [np.array([next(values) for _ in r.choices], dtype=np.float64) for r in requests]

    def generate(
        self, requests: Sequence[GenerateRequest], *, max_new_tokens: int, temperature: float, seed: int | None = None
    ) -> list[Completion]:
        prompts = [{"prompt_token_ids": self._builder(r.instructions).encode([r.observation])[0].ids} for r in requests]
        params = self._vllm.SamplingParams(max_tokens=max_new_tokens, temperature=temperature, seed=seed, logprobs=0)
        completions = []
        for output in self.engine.generate(prompts, params, use_tqdm=False):
            sample = output.outputs[0]
            logprob = float(sample.cumulative_logprob) if sample.cumulative_logprob is not None else float("nan")
            completions.append(Completion(sample.text, logprob, len(sample.token_ids), sample.finish_reason == "stop"))
        return completions

    def close(self) -> None:
        del self.engine
