"""The ``openai`` backend: any OpenAI-compatible HTTP server (``vllm serve``, llama.cpp's server, a hosted API).

* ``generate`` posts chat messages (:func:`llm_gym.lm.prompts.chat_messages`) to ``/chat/completions``; the server
  applies the model's chat template.
* ``score`` needs the log-likelihood of given text, which chat APIs do not report. It posts the prompt rendered with
  the model's chat template (so the model's tokenizer must be available locally) followed by each choice to
  ``/completions`` with ``echo=true, logprobs=1`` and sums the log-probs of the tokens after the prompt. vLLM and
  llama.cpp servers support this; servers that do not get a clear error naming generate mode instead.

Requests of a batch are sent concurrently. Only the standard library is used (no client package needed).
"""

from __future__ import annotations

import json
import math
import os
import urllib.error
import urllib.request
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from llm_gym.errors import ConfigError, LLMGymError
from llm_gym.lm.backends import Completion, GenerateRequest, ScoreRequest
from llm_gym.lm.prompts import PromptBuilder, chat_messages


class ServerError(LLMGymError):
    """The server could not be reached or answered with an error."""


class OpenAIBackend:
    """A model behind an OpenAI-compatible server.

    Args:
        model: the model name the server knows (``--model`` of ``vllm serve``).
        base_url: e.g. ``http://localhost:8000/v1``.
        api_key: bearer token; default ``$OPENAI_API_KEY`` (servers without auth ignore it).
        tokenizer: a local model name/dir whose chat template renders prompts for ``score`` (default: ``model``).
        timeout: seconds per request.
        concurrency: requests in flight at once.
        score_with_end: score each choice followed by the template's end-of-answer token.
    """

    name = "openai"

    def __init__(
        self,
        model: str,
        *,
        base_url: str = "http://localhost:8000/v1",
        api_key: str | None = None,
        tokenizer: str | None = None,
        timeout: float = 60.0,
        concurrency: int = 8,
        score_with_end: bool = True,
    ) -> None:
        self.model, self.base_url = model, base_url.rstrip("/")
        self.api_key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY", "")
        self.tokenizer_name = tokenizer or model
        self.timeout, self.concurrency, self.score_with_end = timeout, max(1, concurrency), score_with_end
        self._tokenizer: Any = None
        self._builders: dict[str, PromptBuilder] = {}

    # -- HTTP --------------------------------------------------------------------------------------------------

    def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        request = urllib.request.Request(
            f"{self.base_url}{path}",
            data=json.dumps(body).encode(),
            method="POST",
            headers={
                "Content-Type": "application/json",
                **({"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}),
            },
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                answer = json.loads(response.read())
        except urllib.error.HTTPError as exc:
            detail = " ".join(exc.read().decode(errors="replace").split())[:200]
            raise ServerError(
                f"{self.base_url}{path} answered {exc.code}: {detail}; check --set base_url=... and --model"
            ) from exc
        except (urllib.error.URLError, TimeoutError, OSError) as exc:
            raise ServerError(
                f"cannot reach {self.base_url} ({exc}); start the server or pass --set base_url=..."
            ) from exc
        except ValueError as exc:  # a body that is not JSON (a proxy's error page, another kind of server)
            raise _not_openai(self.base_url, path, "an answer that is not JSON") from exc
        choices = answer.get("choices") if isinstance(answer, dict) else None
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise _not_openai(self.base_url, path, f"JSON without choices ({str(answer)[:80]!r})")
        return answer

    def _map(self, function: Any, items: Sequence[Any]) -> list[Any]:
        with ThreadPoolExecutor(self.concurrency) as pool:
            return list(pool.map(function, items))

    # -- generate ----------------------------------------------------------------------------------------------

    def generate(
        self, requests: Sequence[GenerateRequest], *, max_new_tokens: int, temperature: float, seed: int | None = None
    ) -> list[Completion]:
        def one(indexed: tuple[int, GenerateRequest]) -> Completion:
            index, request = indexed
            body: dict[str, Any] = {
                "model": self.model,
                "messages": chat_messages(request.instructions, request.observation, turns=request.turns),
                "max_tokens": max_new_tokens,
                "temperature": temperature,
                "logprobs": True,
            }
            if seed is not None:
                body["seed"] = seed + index
            choice = self._post("/chat/completions", body)["choices"][0]
            content = (choice.get("logprobs") or {}).get("content") or []
            logprob = float(sum(t["logprob"] for t in content)) if content else math.nan
            text = (choice.get("message") or {}).get("content") or ""
            return Completion(text, logprob, len(content), choice.get("finish_reason") == "stop")

        return self._map(one, list(enumerate(requests)))

    # -- score -------------------------------------------------------------------------------------------------

    def _builder(self, instructions: str) -> PromptBuilder:
        if self._tokenizer is None:
            # transformers (the lm extra): only score mode needs the tokenizer; a generate-only client runs without
            from llm_gym.lm.models import load_tokenizer

            try:
                self._tokenizer = load_tokenizer(self.tokenizer_name)
            except ConfigError as exc:
                raise ConfigError(
                    f"score mode over a server needs the model's tokenizer locally ({exc}); pass "
                    "--set tokenizer=DIR or use --set action_mode=generate"
                ) from exc
        if instructions not in self._builders:
            self._builders[instructions] = PromptBuilder(self._tokenizer, instructions)
        return self._builders[instructions]

    def score(self, requests: Sequence[ScoreRequest]) -> list[np.ndarray]:
        jobs = []
        for request in requests:
            builder = self._builder(request.instructions)
            prompt = builder.text(request.observation, request.turns)
            end = self._tokenizer.decode(builder.answer_end_ids) if self.score_with_end else ""
            jobs.extend((prompt, f"{prompt}{choice}{end}") for choice in request.choices)
        scores = iter(self._map(self._loglik, jobs))
        return [np.array([next(scores) for _ in r.choices], dtype=np.float64) for r in requests]

    def _loglik(self, job: tuple[str, str]) -> float:
        prompt, text = job
        body = {"model": self.model, "prompt": text, "max_tokens": 1, "echo": True, "logprobs": 1, "temperature": 0}
        logprobs = self._post("/completions", body)["choices"][0].get("logprobs") or {}
        offsets, values = logprobs.get("text_offset"), logprobs.get("token_logprobs")
        if not offsets or not values:
            raise ServerError(
                f"{self.base_url} does not echo prompt log-probs, so it cannot score; use --set action_mode=generate"
            )
        # Tokens that start inside the answer, up to the end of the echoed text (the one generated token is not ours).
        return float(
            sum(v for o, v in zip(offsets, values, strict=False) if len(prompt) <= o < len(text) and v is not None)
        )

    def close(self) -> None:
        self._builders.clear()


def _not_openai(base_url: str, path: str, what: str) -> ServerError:
    return ServerError(
        f"{base_url}{path} sent {what}, not an OpenAI-compatible response; check --set base_url=... "
        "(it should end in /v1) and that the server there serves the OpenAI API"
    )
