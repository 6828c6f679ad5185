"""Atari Breakout and Pong on the real ALE emulator, seen as text, ASCII or images."""

from llm_gym.envs.atari.env import GAMES, AtariLLMEnv, AtariSnapshot
from llm_gym.envs.atari.grid import ASCII_PRESETS
from llm_gym.envs.atari.views import AtariAsciiEnv, AtariTextEnv, AtariVisionEnv

__all__ = [
    "ASCII_PRESETS",
    "GAMES",
    "AtariAsciiEnv",
    "AtariLLMEnv",
    "AtariSnapshot",
    "AtariTextEnv",
    "AtariVisionEnv",
]
