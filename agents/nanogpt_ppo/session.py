"""What a ``nanogpt_ppo`` run holds between its steps, and how it starts: the network, the optimizer, the rollout
buffer and the vector envs; on ``--resume``, all of it as the checkpoint left it (the envs continue their episodes
where the env can snapshot them, else start new ones).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from llm_gym.agent import EnvConfig
from llm_gym.agents.nanogpt_ppo.buffer import RolloutBuffer
from llm_gym.agents.nanogpt_ppo.checkpoint import LoopState, load_training, save_training
from llm_gym.agents.nanogpt_ppo.config import NanoGPTPPOConfig
from llm_gym.agents.nanogpt_ppo.envs import lives
from llm_gym.agents.nanogpt_ppo.model import GPTShape, NanoGPTActorCritic
from llm_gym.agents.nanogpt_ppo.policy import env_for, load_network, network_shape, save_network
from llm_gym.agents.nanogpt_ppo.tokenizer import CharTokenizer
from llm_gym.callbacks import Callback
from llm_gym.envs.tasks import TaskSampler
from llm_gym.runs import Run
from llm_gym.stepping import EnvStepper, make_vector_env
from llm_gym.training.loop import Counters, spread_starts, training_env


@dataclass
class Session:
    """One nanogpt_ppo run's state. :meth:`save` writes everything ``--resume`` needs into a checkpoint folder."""

    cfg: NanoGPTPPOConfig
    """The config with its presets resolved."""
    env: EnvConfig
    """The env the run trains on (Atari: FIRE on reset, a life loss ends the episode)."""
    run: Run
    callbacks: Sequence[Callback]
    sampler: TaskSampler | None
    device: torch.device
    shape: GPTShape
    model: NanoGPTActorCritic
    optimizer: torch.optim.Optimizer
    generator: torch.Generator
    """Action sampling and minibatch order."""
    tokenizer: CharTokenizer
    buffer: RolloutBuffer
    stepper: EnvStepper
    counters: Counters
    loop: LoopState

    def save(self, directory: Path) -> None:
        save_network(self.model, directory)
        save_training(directory, self.optimizer, self.generator, self.counters, self.loop, self.stepper.state_dict())


def start_session(
    config: NanoGPTPPOConfig, env: EnvConfig, run: Run, callbacks: Sequence[Callback], sampler: TaskSampler | None
) -> Session:
    """Build the network, the optimizer, the buffer and the envs (reset, or restored on ``--resume``)."""
    cfg = config.resolved()
    n, steps = cfg.num_envs, cfg.num_steps
    if cfg.threads > 0:
        torch.set_num_threads(cfg.threads)
    torch.manual_seed(cfg.seed)
    device = torch.device(cfg.device)
    env = training_env(env_for(cfg, env))  # Atari: FIRE on reset, a life loss ends the episode (docs/guides/atari.md)
    shape = network_shape(cfg, env)
    model = NanoGPTActorCritic(shape).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=cfg.learning_rate, betas=(0.9, cfg.adam_beta2), eps=1e-5)
    generator = torch.Generator().manual_seed(cfg.seed)  # action sampling and minibatch order
    tokenizer = CharTokenizer()
    buffer = RolloutBuffer(steps, n, shape.context, shape.n_actions, device)
    stepper = EnvStepper(make_vector_env(env, n, kind=cfg.vector_env), seed=cfg.seed, sampler=sampler)
    counters = Counters()
    if run.resumed_from is not None:
        model.load_state_dict(load_network(run.resumed_from, str(device)).state_dict())
        counters, loop, env_state = load_training(run.resumed_from, optimizer, generator)
        if not stepper.load_state_dict(env_state):  # no snapshots: new episodes, numbered on
            loop = LoopState.fresh(lives(stepper.infos))
    else:
        stepper.reset()
        if cfg.start_spread:
            spread_starts(stepper, cfg.start_spread, cfg.seed, env.env_id, run)
        loop = LoopState.fresh(lives(stepper.infos))
    return Session(
        cfg, env, run, callbacks, sampler, device, shape, model, optimizer, generator, tokenizer, buffer, stepper,
        counters, loop,
    )  # fmt: skip
