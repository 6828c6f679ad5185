"""The verifiers taskset ``llm-gym-verifiers``: any llm-gym id as a verifiers environment.

verifiers finds a taskset by a top-level import name (``vf-eval llm-gym-verifiers ...`` imports
``llm_gym_verifiers``) and takes the one ``Taskset``, ``Env`` and ``Harness`` its ``__all__`` names; this module
re-exports them from :mod:`llm_gym.integrations.verifiers_env`, where the code and its documentation live.
"""

from llm_gym.integrations.verifiers_env import LLMGymEnv, LLMGymHarness, LLMGymTaskset, load_environment

__all__ = ["LLMGymEnv", "LLMGymHarness", "LLMGymTaskset", "load_environment"]
