"""How ``play`` and ``demos`` apply a user's ``--config`` / ``--set`` / ``--model`` / ``--backend`` / ``--seed`` to
a checkpoint: each one is applied where the checkpoint can honour it and refused in one line where it cannot, never
dropped without a word.

A learner's checkpoint holds weights of a fixed shape on a fixed base model (the fields its agent lists in
``fixed_on_resume``): changing one of those cannot play it, so that is refused naming the checkpoint's value. A field
only training reads (marked ``training_only`` in the agent's config: ``learning_rate``, ``epochs`` ...) changes
nothing in play, so it is refused too, naming it. Both refusals are :func:`llm_gym.agent.check_checkpoint_settings`,
which a bench suite's checkpoint entry goes through as well. An LM
checkpoint (ppo_lora, sft, reflection) plays its adapter merged into the base model in this process, i.e. on the
``hf`` backend; another backend serves the merged model once ``llm-gym export --merge`` has written it. A run of an
agent that learns nothing (``lm``, ``random``, ...) holds only its config, so every field but the training-only
ones (``total_steps``) applies.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from llm_gym.cli.common import ConfigSources, resolve_config
from llm_gym.errors import ConfigError
from llm_gym.runs import Run
from llm_gym.training.checkpoints import checkpoint_config
from llm_gym.training.setting_checks import check_checkpoint_settings

IN_PROCESS_BACKEND = "hf"
"""The backend an LM checkpoint's merged adapter plays on (``checkpoint_policy`` builds it in this process)."""


def checkpoint_overrides(checkpoint: Path, sources: ConfigSources) -> dict[str, Any]:
    """The config fields to play ``checkpoint`` with that differ from its saved config (``load_policy``'s
    ``overrides``), resolved as for a fresh agent: saved config <- config file <- ``--set`` <- ``--model`` /
    ``--backend`` / ``--seed``. Raises :class:`ConfigError` for anything the checkpoint cannot play with."""
    run, _ = Run.resolve_checkpoint(checkpoint, required=False)
    agent_cls, base = checkpoint_config(run)
    names = {f.name for f in dataclasses.fields(agent_cls.Config)}
    plays_in_process = agent_cls.learns and "model" in names and "backend" not in names
    backend = sources.backend
    if backend is not None and plays_in_process:
        if backend != IN_PROCESS_BACKEND:
            raise ConfigError(
                f"--backend {backend}: a {agent_cls.name} checkpoint plays its adapter merged into the base model in "
                f"this process (the {IN_PROCESS_BACKEND} backend); to serve it with {backend}, write the merged model "
                f"with `llm-gym export --checkpoint {checkpoint} --merge --out DIR` and play DIR with "
                f"`--agent lm --model DIR --backend {backend}`"
            )
        sources = dataclasses.replace(sources, backend=None)  # what it plays on anyway
    config = resolve_config(agent_cls.Config, sources, base=base)
    return check_checkpoint_settings(agent_cls, base, config, checkpoint=checkpoint, run=run.path, cli=True)
