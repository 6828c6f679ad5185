"""The network as a batched :class:`llm_gym.Policy`, and how a network is built from a config and an env."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from llm_gym.agent import DecisionDetails, DetailedPolicy, EnvConfig
from llm_gym.agents.nanogpt_ppo.config import NanoGPTPPOConfig
from llm_gym.agents.nanogpt_ppo.envs import info_mask, text_length, with_grid
from llm_gym.agents.nanogpt_ppo.model import MASKED_LOGIT, GPTShape, NanoGPTActorCritic
from llm_gym.agents.nanogpt_ppo.tokenizer import QUERY, CharTokenizer
from llm_gym.errors import CheckpointError

SHAPE_FILE, WEIGHTS_FILE = "shape.json", "model.pt"


def env_for(config: NanoGPTPPOConfig, env: EnvConfig) -> EnvConfig:
    """The env the agent uses: ``env`` with the config's grid size where the env takes one."""
    cfg = config.resolved()
    return with_grid(env, cfg.grid_rows, cfg.grid_cols)


def network_shape(config: NanoGPTPPOConfig, env: EnvConfig) -> GPTShape:
    """The network for ``env`` (made once to read its spaces) under ``config``."""
    cfg = config.resolved()
    probe = env.make()
    try:
        longest = text_length(probe.observation_space)
        num_actions = int(probe.action_space.n)  # type: ignore[attr-defined]
    finally:
        probe.close()
    tokenizer = CharTokenizer()
    return GPTShape(
        vocab_size=tokenizer.vocab_size,
        context=cfg.context or longest + 1,
        n_layer=cfg.n_layer,
        n_head=cfg.n_head,
        n_embd=cfg.n_embd,
        mlp_ratio=cfg.mlp_ratio,
        n_actions=num_actions,
        positions=cfg.positions,
        newline_id=int(tokenizer.encode("\n")[0]),
        query_summary=cfg.query_summary,
        query_id=QUERY,
        key_frequency_bias=cfg.key_frequency_bias,
    )


def checkpoint_policy(config: NanoGPTPPOConfig, env: EnvConfig, checkpoint: Path | None) -> NanoGPTPolicy:
    """Greedy actions of the network in ``checkpoint`` (``checkpoints/step_N`` or ``checkpoints/best``), or of a
    freshly initialised one. The policy carries the env arguments it was trained with (``env_kwargs``)."""
    trained_env = env_for(config, env)
    device = playing_device(config.device)
    if checkpoint is not None:
        model = load_network(Path(checkpoint), device)
    else:
        torch.manual_seed(config.seed)
        model = NanoGPTActorCritic(network_shape(config, trained_env)).to(device)
    # seed: the sampler's, for `llm-gym play --sample --seed N` (greedy play draws nothing).
    return NanoGPTPolicy(model, deterministic=True, seed=config.seed, env_kwargs=trained_env.kwargs)


def playing_device(device: str) -> str:
    """Where a policy plays: the configured device, or the CPU where that is a GPU this machine does not have (a run
    trained on a GPU box plays its checkpoint anywhere; the network is the same, only slower)."""
    if device.startswith("cuda") and not torch.cuda.is_available():
        return "cpu"
    return device


def save_network(model: NanoGPTActorCritic, directory: Path) -> None:
    """Write the network's shape (JSON) and weights into a checkpoint directory."""
    (directory / SHAPE_FILE).write_text(json.dumps(model.shape.__dict__, indent=2))
    torch.save(model.state_dict(), directory / WEIGHTS_FILE)


def load_network(directory: Path, device: str = "cpu") -> NanoGPTActorCritic:
    """The network saved by :func:`save_network`."""
    try:
        shape = GPTShape(**json.loads((directory / SHAPE_FILE).read_text()))
        state = torch.load(directory / WEIGHTS_FILE, map_location=device, weights_only=True)
    except (OSError, ValueError, TypeError) as exc:
        raise CheckpointError(
            f"{directory} holds no nanogpt_ppo network ({exc}); pass a checkpoints/step_N directory"
        ) from exc
    model = NanoGPTActorCritic(shape).to(device)
    model.load_state_dict(state)
    return model


class NanoGPTPolicy(DetailedPolicy):
    """Acts for a batch of text observations: greedy (``deterministic``) or sampled from the policy head.

    Args:
        model: the network.
        deterministic: take the most likely legal action instead of sampling.
        epsilon: with this probability take a uniformly random legal action instead (the DQN evaluation protocol
            uses 0.05 on Atari, so that a greedy policy cannot stall forever in a state it never learnt to leave).
        seed: seed of the sampler (sampling and epsilon draws; the same seed gives the same actions).
        env_kwargs: the env arguments the network was trained with (e.g. the grid size); ``llm-gym play`` makes
            its env with them.
    """

    def __init__(
        self,
        model: NanoGPTActorCritic,
        *,
        deterministic: bool = True,
        epsilon: float = 0.0,
        seed: int = 0,
        env_kwargs: Mapping[str, Any] | None = None,
    ) -> None:
        self.model = model
        self.tokenizer = CharTokenizer()
        self.deterministic = deterministic
        self.epsilon = float(epsilon)
        self.env_kwargs = dict(env_kwargs or {})
        self.device = next(model.parameters()).device
        self.generator = torch.Generator(device=self.device).manual_seed(seed)

    @property
    def greedy(self) -> bool:
        """The name every sampling policy shares for ``deterministic`` (``llm-gym play --sample`` sets it)."""
        return self.deterministic

    @greedy.setter
    def greedy(self, value: bool) -> None:
        self.deterministic = value

    @torch.inference_mode()
    def act_with_details(
        self, observations: Sequence[Any], infos: Sequence[Mapping[str, Any]]
    ) -> tuple[list[int], list[DecisionDetails]]:
        """The actions, and per decision the policy head's probability of each legal action (in
        ``info["legal_actions"]`` order; a greedy policy takes the most likely) and the value head's estimate."""
        shape = self.model.shape
        tokens, query = self.tokenizer.encode_batch([str(o) for o in observations], shape.context)
        masks = np.stack([info_mask(info, shape.n_actions) for info in infos]) if infos else None
        was_training = self.model.training
        self.model.eval()
        logits, values = self.model(
            torch.from_numpy(tokens).to(self.device),
            torch.from_numpy(query).to(self.device),
            None if masks is None else torch.from_numpy(masks).to(self.device),
        )
        self.model.train(was_training)
        if self.deterministic:
            actions = logits.argmax(-1)
        else:
            actions = torch.multinomial(torch.softmax(logits, -1), 1, generator=self.generator).squeeze(1)
        if self.epsilon > 0:
            explore = torch.rand(len(actions), generator=self.generator, device=self.device) < self.epsilon
            legal = (logits > MASKED_LOGIT).float()
            random_legal = torch.multinomial(legal, 1, generator=self.generator).squeeze(1)
            actions = torch.where(explore, random_legal, actions)
        probs = torch.softmax(logits.float(), -1).cpu().numpy()
        details = []
        for row, info, value in zip(probs, infos or [{}] * len(probs), values.float().cpu().tolist(), strict=True):
            legal_ids = [int(a) for a in info.get("legal_actions", range(shape.n_actions))]
            details.append(DecisionDetails(probs=[float(row[a]) for a in legal_ids], value=float(value)))
        return [int(a) for a in actions.cpu()], details
