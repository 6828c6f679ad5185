"""llm-gym: Gymnasium environments in which language models learn to play games, and pluggable agents to train them.

``import llm_gym`` registers every env id with Gymnasium (``gym.register_envs(llm_gym)`` works too). The names
below are the public API that plugins build on.
"""

from __future__ import annotations

import llm_gym.envs  # noqa: F401  (registers the env ids)
from llm_gym.actions import InvalidActionPolicy, ParsedAction, TextActions, parse_action
from llm_gym.agent import Agent, AgentConfig, EnvConfig, Policy
from llm_gym.callbacks import Callback
from llm_gym.config import speed_only, training_only
from llm_gym.envs.catalog import env_ids, make
from llm_gym.envs.checker import check_llm_env
from llm_gym.hookspecs import hookimpl
from llm_gym.runs import Run
from llm_gym.training.checkpoints import load_policy
from llm_gym.training.config import PPOConfig
from llm_gym.training.evaluation import EpisodeResult, run_episodes

__version__ = "0.1.0"
__all__ = [
    "Agent",
    "AgentConfig",
    "Callback",
    "EnvConfig",
    "EpisodeResult",
    "InvalidActionPolicy",
    "PPOConfig",
    "ParsedAction",
    "Policy",
    "Run",
    "TextActions",
    "__version__",
    "check_llm_env",
    "env_ids",
    "hookimpl",
    "load_policy",
    "make",
    "parse_action",
    "run_episodes",
    "speed_only",
    "training_only",
]
