"""Package discovery only (metadata is in pyproject.toml): llm_gym/** plus agents/** installed as llm_gym.agents.**, and
the one-module verifiers taskset llm_gym_verifiers (verifiers finds tasksets by a top-level import name)."""

from setuptools import find_packages, setup

core = find_packages(include=["llm_gym", "llm_gym.*"])
agents = ["llm_gym.agents"] + [f"llm_gym.agents.{p}" for p in find_packages(where="agents")]
setup(packages=core + agents, py_modules=["llm_gym_verifiers"])
