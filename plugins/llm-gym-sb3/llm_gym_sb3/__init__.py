"""stable-baselines3 PPO as an llm-gym agent (``sb3_ppo``)."""
