"""The entry point llm-gym loads: registers the ``sb3_ppo`` agent."""

import llm_gym
from llm_gym_sb3.agent import Sb3PPOAgent


@llm_gym.hookimpl
def register_agents(register):
    register(Sb3PPOAgent)
