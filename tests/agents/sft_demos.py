"""A small demonstrations writer for the sft tests (and nothing else): plays episodes with any policy and writes
one line per decision in the demos format (``llm_gym.demos.format``), with the env's instructions as the system
message, the observation as the user's and the chosen action's name (or the answer text) as the assistant's; and
the tiny-model sft config those tests train with."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from llm_gym.agent import EnvConfig, Policy
from llm_gym.demos.format import DemoRecord, write_records
from llm_gym.envs.catalog import EnvTraits
from llm_gym.envs.protocol import legal_choices
from llm_gym.lm.prompts import chat_messages, observation_text


def write_demos(path: Path, env: EnvConfig, policy: Policy, episodes: int, seed: int = 0) -> Path:
    """Play ``episodes`` episodes (seeds ``seed + i``) and write every decision; returns ``path``."""
    traits = EnvTraits.probe(env)
    gym_env = env.make()
    try:
        for episode in range(episodes):
            observation, info = gym_env.reset(seed=seed + episode)
            steps: list[tuple[Any, Any, Any, float, tuple[str, ...]]] = []
            done = False
            while not done:
                action = policy.act([observation], [info])[0]
                names: list[str] = []
                if traits.text_actions:
                    answer = str(action)
                else:
                    ids, names = legal_choices(info, env.env_id)
                    answer = names[ids.index(int(action))]
                next_observation, reward, terminated, truncated, info = gym_env.step(action)
                steps.append((observation, answer, action, float(reward), tuple(names)))
                observation, done = next_observation, terminated or truncated
            episode_return = sum(s[3] for s in steps)
            records, to_go = [], episode_return
            for step, (obs, answer, action, reward, choices) in enumerate(steps):
                messages = [*chat_messages(traits.instructions, obs), {"role": "assistant", "content": answer}]
                records.append(
                    DemoRecord(
                        messages=messages, env_id=env.env_id, env_args=dict(env.kwargs), seed=seed + episode,
                        episode=episode, step=step, task_id=info.get("task_id"), action=action, choices=choices, reward=reward,
                        episode_return=episode_return, episode_score=float(info.get("score", episode_return)),
                        return_to_go=to_go, source={"agent": type(policy).__name__},
                    )
                )  # fmt: skip
                to_go -= reward
            write_records(path, records)
    finally:
        gym_env.close()
    return path


__all__ = ["observation_text", "write_demos"]


def sft_settings(model: Path, demos: Path, **overrides: Any) -> Any:
    """An sft config for a tiny model: float32, one thread, LoRA on the top layer, no evaluation, fast steps."""
    from llm_gym.agents.sft.config import SFTConfig

    base = dict(model=str(model), demos=str(demos), dtype="float32", threads=1, trainable_layers=1, progress=False)
    base |= dict(eval_episodes=0, minibatch_size=8, learning_rate=3e-3, warmup_updates=0)
    return SFTConfig(**{**base, **overrides})
