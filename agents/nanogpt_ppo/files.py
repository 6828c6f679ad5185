"""The name of the file a nanogpt_ppo checkpoint holds besides its network, in a module without torch: the plugin
module (:mod:`llm_gym.agents.nanogpt_ppo.agent`) loads with every CLI run and names it for ``--resume``."""

TRAINING_FILE = "training.pt"
"""What ``--resume`` needs besides the network: optimiser, RNG states, counters and the rollout buffer's position
(:mod:`llm_gym.agents.nanogpt_ppo.checkpoint`)."""
