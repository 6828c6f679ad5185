"""The names of the files a ppo_lora checkpoint holds besides its adapter, in a module without torch: the plugin
module (``register_commands``: ``llm-gym export`` copies them) loads with every CLI run."""

ACTION_BIAS_FILE = "action_bias.json"
"""The calibrated per-action offsets (:mod:`llm_gym.agents.ppo_lora.calibration`)."""
ACTION_HEAD_FILE = "action_head.pt"
"""The action head's names and weights (:mod:`llm_gym.agents.ppo_lora.action_head`)."""
TRAINING_FILE = "training.pt"
"""What ``--resume`` needs besides the model: optimiser, scheduler, RNG states, counters
(:mod:`llm_gym.agents.ppo_lora.checkpoint`)."""
