"""llm-gym envs for the field's LLM-RL trainers: the shared text episode (:mod:`.episode`), a verifiers environment
(:mod:`.verifiers_env`, extra ``verifiers``) and a TRL GRPO recipe (:mod:`.trl_grpo`, extra ``trl``). ``llm-gym
serve`` (:mod:`llm_gym.serve`, extra ``serve``) serves the same episodes over OpenEnv's protocol."""
