"""The agent contract every built-in and third-party agent implements.

An agent is a name, a frozen config dataclass (a docstring under each field) and two operations: train on an env
into a run directory, and give a policy (fresh, or loaded from a checkpoint). A policy acts on a *batch* of
observations, so one LM call can decide for many envs.

A minimal agent::

    @dataclass(frozen=True, kw_only=True)
    class MyConfig(AgentConfig):
        lr: float = 1e-3
        \"\"\"Learning rate.\"\"\"

    class MyAgent(Agent):
        name = "my_agent"
        description = "What it does, in one line."
        Config = MyConfig

        def train(self, env, run, callbacks=()): ...
        def policy(self, env, checkpoint=None): ...

and a plugin module registers it with ``@llm_gym.hookimpl def register_agents(register): register(MyAgent)``.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable

if TYPE_CHECKING:
    import gymnasium as gym

    from llm_gym.callbacks import Callback
    from llm_gym.runs import Run


@dataclass(frozen=True, kw_only=True)
class AgentConfig:
    """Fields every agent config has. Subclass it (frozen, kw_only) and document each field under it."""

    total_steps: int = 10_000
    """Environment steps to train for, summed over parallel envs."""
    seed: int = 0
    """Seed for envs, sampling and initialisation."""

    def __post_init__(self) -> None:
        if self.total_steps < 0:
            raise ValueError(f"total_steps must be >= 0, got {self.total_steps}")


@dataclass(frozen=True)
class EnvConfig:
    """Which env to train or play on, and the keyword arguments for ``gym.make``."""

    env_id: str
    kwargs: Mapping[str, Any] = field(default_factory=dict)

    def make(self, **overrides: Any) -> gym.Env:
        """A new env (unknown ids raise with close matches)."""
        from llm_gym.envs.catalog import make

        return make(self.env_id, **{**self.kwargs, **overrides})


@runtime_checkable
class Policy(Protocol):
    """Decides actions for a batch of envs at once.

    A policy may also carry an ``env_kwargs`` mapping: the ``gym.make`` arguments it was trained with (say, the
    ASCII grid size). ``llm-gym play`` applies them, with the user's ``--env-arg`` on top (see
    :func:`policy_env_kwargs`).
    """

    def act(self, observations: Sequence[Any], infos: Sequence[Mapping[str, Any]]) -> list[int]:
        """One action id per observation; ``infos[i]`` is the latest info of env ``i`` (legal actions, mask)."""
        ...


def policy_env_kwargs(policy: Policy) -> dict[str, Any]:
    """The env arguments a policy expects (its optional ``env_kwargs`` attribute), or an empty dict."""
    return dict(getattr(policy, "env_kwargs", None) or {})


class Agent(abc.ABC):
    """Base class of agents. Subclasses set ``name``, ``description``, ``Config`` and implement the two operations."""

    name: ClassVar[str]
    description: ClassVar[str] = ""
    Config: ClassVar[type[AgentConfig]] = AgentConfig
    learns: ClassVar[bool] = True
    """False for baselines, whose ``train`` only records how they play."""

    def __init__(self, config: AgentConfig | None = None) -> None:
        self.config = config if config is not None else self.Config()

    @abc.abstractmethod
    def train(self, env: EnvConfig, run: Run, callbacks: Sequence[Callback] = ()) -> dict[str, Any]:
        """Train on ``env`` for ``config.total_steps`` env steps, writing checkpoints and logs into ``run``.

        If ``run.resumed_from`` is set, continue from that checkpoint. Returns the summary (also written to
        ``summary.json``).
        """

    @abc.abstractmethod
    def policy(self, env: EnvConfig, checkpoint: Path | None = None) -> Policy:
        """A policy for ``env``: from ``checkpoint`` when given, else the untrained/zero-shot one."""


def load_policy(checkpoint: str | Path, env: EnvConfig | None = None) -> tuple[Policy, Agent]:
    """The policy saved in a checkpoint (or in a run directory's newest checkpoint), with the agent that made it."""
    from llm_gym.config import from_dict
    from llm_gym.errors import CheckpointError
    from llm_gym.plugins import get_agent
    from llm_gym.runs import Run, find_run_dir

    run = Run.open(find_run_dir(checkpoint))
    saved = run.read_config()
    agent_cls = get_agent(saved["agent"])
    agent = agent_cls(from_dict(agent_cls.Config, saved["config"], source=str(run.path / "config.json")))
    path = Path(checkpoint)
    if path.resolve() == run.path.resolve():
        latest = run.latest_checkpoint()
        if latest is None and agent.learns:
            raise CheckpointError(f"{run.path} has no complete checkpoint yet")
        path = latest or path
    env = env or EnvConfig(saved["env_id"], saved.get("env_kwargs", {}))
    return agent.policy(env, path), agent
