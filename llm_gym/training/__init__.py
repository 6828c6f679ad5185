"""What every learner shares, above the agent contract (:mod:`llm_gym.agent`) and below the agents themselves.

* :mod:`~llm_gym.training.loop`: the pieces of a training loop as plain functions: counters, the progress bar,
  "evaluate -> keep the best -> callbacks", "checkpoint -> prune -> callbacks", the envs' state in a checkpoint;
* :mod:`~llm_gym.training.evaluation`: whole episodes of a policy (``run_episodes``), for ``play``, evaluations and
  the bench; :mod:`~llm_gym.training.exact`: a policy's exact value on small OpenSpiel games;
* :mod:`~llm_gym.training.checkpoints`: the policy a checkpoint holds (``load_policy``), and
  :mod:`~llm_gym.training.setting_checks`: the settings it may play with; :mod:`~llm_gym.training.policy_copy`:
  a play-only copy of one;
* :mod:`~llm_gym.training.branches`: groups of episodes that start at states a rollout visited (``branch_fraction``);
* :mod:`~llm_gym.training.curves` and :mod:`~llm_gym.training.selection`: learning curves of finished runs, and
  choosing one of several runs on validation games.
"""
