"""Every environment id llm-gym provides is registered here, and only here.

Importing :mod:`llm_gym` runs this module, so ``gym.make("LLMBreakout-v0")`` works after ``import llm_gym`` and
``gym.register_envs(llm_gym)``. Entry points are strings: nothing heavy is imported until an env is made.
"""

from __future__ import annotations

import functools

from gymnasium.envs.registration import register as _gym_register

# Gymnasium's passive env checker (a wrapper gym.make adds) breaks the env for good when the first reset raises:
# it marks reset as checked without keeping that reset's result, and its first step then unpacks None. Our envs
# refuse bad reset options with an EnvInputError and must stay usable after it, so the wrapper is left out; every
# id still passes gymnasium's full check_env in tests/envs/test_envs.py (stricter than the passive checks).
register = functools.partial(_gym_register, disable_env_checker=True)

ATARI_GAMES = {"Breakout": "breakout", "Pong": "pong"}
ATARI_MODES = {"text": "AtariTextEnv", "ascii": "AtariAsciiEnv", "vision": "AtariVisionEnv"}

for _title, _game in ATARI_GAMES.items():
    for _mode, _cls in ATARI_MODES.items():
        register(id=f"LLM{_title}-{_mode}-v0", entry_point=f"llm_gym.envs.atari.views:{_cls}", kwargs={"game": _game})
    # The id without a mode is the text mode.
    register(id=f"LLM{_title}-v0", entry_point="llm_gym.envs.atari.views:AtariTextEnv", kwargs={"game": _game})

# -- OpenSpiel: one id per game, plus OpenSpiel-v0 where the game comes from options={"task_id": N} ---------------
from llm_gym.envs.openspiel.catalog import GAME_NAMES as _OPENSPIEL_GAMES  # noqa: E402  (pure Python, no pyspiel)

# The per-game bridge id plays card play: the task-id variants (affinetes') score bidding with a double-dummy solver,
# seconds per deal; OpenSpiel-v0 and params= still reach them.
_OPENSPIEL_KWARGS = {"bridge": {"params": {"use_double_dummy_result": False}}}
for _name in _OPENSPIEL_GAMES:
    register(
        id=f"OpenSpiel-{_name}-v0",
        entry_point="llm_gym.envs.openspiel.env:OpenSpielEnv",
        kwargs={"game": _name, **_OPENSPIEL_KWARGS.get(_name, {})},
    )
register(id="OpenSpiel-v0", entry_point="llm_gym.envs.openspiel.env:OpenSpielEnv")

# -- Trace: predict the exact stdout of a generated (or your own) Python program -----------------------------------
register(id="Trace-v0", entry_point="llm_gym.envs.trace.env:TraceEnv")
