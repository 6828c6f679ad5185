"""``nanogpt_ppo``: a nanoGPT-style transformer over the characters of a text observation, trained from scratch
with PPO. See docs/guides/nanogpt_ppo.md.

Modules: ``config`` (fields and presets), ``tokenizer`` (characters -> ids), ``model`` (the transformer and its
heads), ``buffer`` (rollout storage and minibatches), ``envs`` (grid size, masks and lives from infos),
``policy`` (the network as a batched policy; saving and loading it), ``checkpoint`` (resumable training state),
``train`` (the PPO loop) and ``agent`` (the plugin).
"""

from llm_gym.agents.nanogpt_ppo.agent import NanoGPTPPOAgent, register_agents
from llm_gym.agents.nanogpt_ppo.config import PRESETS, NanoGPTPPOConfig

__all__ = ["PRESETS", "NanoGPTPPOAgent", "NanoGPTPPOConfig", "register_agents"]
