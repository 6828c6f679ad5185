"""``sb3_ppo``: stable-baselines3 PPO (MlpPolicy) on the decoded game state, trained into an llm-gym run."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from llm_gym import Agent, Callback, EnvConfig, PPOConfig, Run, training_only
from llm_gym.callbacks import should_stop
from llm_gym_sb3.features import GameStateFeatures, state_features

MODEL_FILE = "model.zip"


@dataclass(frozen=True, kw_only=True)
class Sb3PPOConfig(PPOConfig):
    """PPO's fields as every llm-gym PPO agent names them (PPOConfig: num_steps is SB3's n_steps, minibatch_size its
    batch_size, update_epochs its n_epochs, clip_coef its clip_range, value_clip_coef its clip_range_vf with 0 for
    None, value_coef its vf_coef, entropy_coef its ent_coef), at SB3's defaults where llm-gym's differ."""

    renamed: ClassVar[Mapping[str, str]] = dict(
        n_steps="num_steps",
        batch_size="minibatch_size",
        n_epochs="update_epochs",
        clip_range="clip_coef",
        ent_coef="entropy_coef",
    )  # fmt: skip  (SB3's names, which the first version of this plugin used)

    total_steps: int = training_only(200_000)
    """Environment steps to train for, summed over parallel envs."""
    learning_rate: float = 2.5e-4
    num_steps: int = 128
    minibatch_size: int = 256
    update_epochs: int = 4
    clip_coef: float = 0.1
    value_clip_coef: float = 0.0
    max_grad_norm: float = 0.5
    checkpoint_every: int = training_only(20_000)
    """Env steps between checkpoints."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.num_envs < 1 or self.total_steps % self.num_envs:
            low = self.total_steps - self.total_steps % max(self.num_envs, 1)
            raise ValueError(
                f"sb3_ppo steps its num_envs={self.num_envs} envs together, so total_steps={self.total_steps} "
                f"cannot be exact; use {low} or {low + self.num_envs}"
            )


class Sb3Policy:
    """Greedy actions of a trained SB3 model, batched over envs."""

    def __init__(self, model: Any) -> None:
        self.model = model

    def act(self, observations: Sequence[Any], infos: Sequence[Mapping[str, Any]]) -> list[int]:
        batch = np.stack([state_features(info["game_state"]) for info in infos])
        actions, _ = self.model.predict(batch, deterministic=True)
        return [int(a) for a in actions]


def _learn_exactly(model: Any, total_steps: int, callback: Any) -> None:
    """Train ``model`` until it has taken exactly ``total_steps`` env steps.

    SB3 learns in whole rollouts of ``n_steps`` per env, so ``learn(512)`` with 8 envs x 128 steps takes 1,024. The
    whole rollouts that fit run as usual; the rest (a multiple of the env count, checked by the config) is one
    shorter rollout, after which the model gets its own ``n_steps`` back (a resume continues with it).
    """
    from stable_baselines3.common.buffers import RolloutBuffer

    rollout = model.n_steps * model.n_envs
    remaining = max(total_steps - model.num_timesteps, 0)
    whole, rest = divmod(remaining, rollout)
    if whole:
        model.learn(whole * rollout, callback=callback, reset_num_timesteps=False)
    if rest and not getattr(callback, "stop", False):
        n_steps, buffer = model.n_steps, model.rollout_buffer

        def resized(steps: int) -> RolloutBuffer:
            return type(buffer)(steps, model.observation_space, model.action_space, device=model.device,
                                gamma=model.gamma, gae_lambda=model.gae_lambda, n_envs=model.n_envs)  # fmt: skip

        model.n_steps, model.rollout_buffer = rest // model.n_envs, resized(rest // model.n_envs)
        try:
            model.learn(rest, callback=callback, reset_num_timesteps=False)
        finally:
            model.n_steps, model.rollout_buffer = n_steps, buffer


class Sb3PPOAgent(Agent):
    name = "sb3_ppo"
    description = "stable-baselines3 PPO on the decoded game state (a classic-RL reference; a third-party plugin)."
    Config = Sb3PPOConfig

    def _vec_env(self, env: EnvConfig) -> Any:
        from stable_baselines3.common.env_util import make_vec_env

        return make_vec_env(lambda: GameStateFeatures(env.make()), n_envs=self.config.num_envs, seed=self.config.seed)

    def train(self, env: EnvConfig, run: Run, callbacks: Sequence[Callback] = ()) -> dict[str, Any]:
        from stable_baselines3 import PPO
        from stable_baselines3.common.callbacks import BaseCallback

        config, vec_env = self.config, self._vec_env(env)
        if run.resumed_from is not None:
            model = PPO.load(run.resumed_from / MODEL_FILE, env=vec_env, device="cpu")
        else:
            model = PPO(
                "MlpPolicy",
                vec_env,
                learning_rate=config.learning_rate,
                n_steps=config.num_steps,
                batch_size=config.minibatch_size,
                n_epochs=config.update_epochs,
                gamma=config.gamma,
                gae_lambda=config.gae_lambda,
                clip_range=config.clip_coef,
                clip_range_vf=config.value_clip_coef or None,
                vf_coef=config.value_coef,
                ent_coef=config.entropy_coef,
                max_grad_norm=config.max_grad_norm,
                target_kl=config.target_kl or None,
                seed=config.seed,
                device="cpu",
                verbose=0,
            )
        for callback in callbacks:
            callback.on_training_start(env.env_id, config, model.num_timesteps)

        def save(step: int) -> None:
            with run.checkpoint(step) as directory:
                model.save(directory / MODEL_FILE)
            for callback in callbacks:
                callback.on_checkpoint(step, run.checkpoints_dir / f"step_{step}")

        class Bridge(BaseCallback):
            """Forwards SB3's rollouts to llm-gym's logs, checkpoints and callbacks."""

            def __init__(self) -> None:
                super().__init__()
                self.last_saved = model.num_timesteps
                self.stop = False

            def _on_step(self) -> bool:
                return not self.stop

            def _on_rollout_end(self) -> None:
                step = self.model.num_timesteps
                returns = [info["r"] for info in self.model.ep_info_buffer]
                metrics = {"charts/episodic_return": float(np.mean(returns))} if returns else {}
                if metrics:
                    run.log_scalars(step, metrics)
                if step - self.last_saved >= config.checkpoint_every:
                    save(step)
                    self.last_saved = step
                self.stop = should_stop([c.on_update(step, metrics) for c in callbacks])

        bridge = Bridge()
        _learn_exactly(model, config.total_steps, bridge)
        save(model.num_timesteps)
        returns = [float(info["r"]) for info in model.ep_info_buffer]
        summary = {
            "agent": self.name,
            "env_id": env.env_id,
            "env_steps": int(model.num_timesteps),
            "episodes": len(returns),
            "mean_return": float(np.mean(returns)) if returns else None,
        }
        run.write_summary(summary)
        for callback in callbacks:
            callback.on_training_end(int(model.num_timesteps), summary)
        vec_env.close()
        return summary

    def policy(self, env: EnvConfig, checkpoint: Path | None = None) -> Sb3Policy:
        from stable_baselines3 import PPO

        if checkpoint is None:
            return Sb3Policy(PPO("MlpPolicy", self._vec_env(env), seed=self.config.seed, device="cpu"))
        return Sb3Policy(PPO.load(Path(checkpoint) / MODEL_FILE, device="cpu"))
