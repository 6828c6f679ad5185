"""``python -m llm_gym.cli``: the ``llm-gym`` command (what a sweep starts its runs with)."""

from llm_gym.cli import main

main()
