"""``llm-gym export``, added to the CLI by the ``ppo_lora`` plugin (``register_commands``): a trained LoRA
checkpoint as a standalone model directory.

``--merge`` folds the adapter into the base weights and writes a model that ``AutoModelForCausalLM.from_pretrained``
loads with no peft installed; without it the adapter is copied as is (``PeftModel.from_pretrained`` loads it).
A run with ``action_prior=calibrated`` acts with a per-action offset the weights do not hold: ``action_bias.json``
is copied beside them, and so is a run's action head (``action_head=standardized``: ``action_head.pt``, a linear layer
on the standardised last hidden state, which plain transformers does not apply).
"""

from __future__ import annotations

import json
import shutil
import uuid
from pathlib import Path
from typing import Annotated, Literal

import typer

from llm_gym.agents.ppo_lora.files import ACTION_BIAS_FILE, ACTION_HEAD_FILE
from llm_gym.commands import cli_errors, console
from llm_gym.errors import CheckpointError, ConfigError
from llm_gym.runs import Run


@cli_errors
def export(
    checkpoint: Annotated[Path, typer.Option("--checkpoint", "-c", help="A checkpoint (or run dir: its newest one).")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Directory to write (must not exist).")],
    merge: Annotated[
        bool, typer.Option("--merge/--adapter-only", help="Fold the adapter into the base weights.")
    ] = True,
    dtype: Annotated[
        Literal["float32", "bfloat16", "float16"], typer.Option("--dtype", help="Weights dtype of a merged model.")
    ] = "float32",
) -> None:
    """Write a LoRA checkpoint's model to OUT: merged into the base model (default) or as the adapter alone."""
    if out.exists():
        raise ConfigError(f"{out} already exists; pass a new --out directory")
    run, source = Run.resolve_checkpoint(checkpoint)
    assert source is not None  # required=True raises instead
    adapter = source / "adapter"
    if not (adapter / "adapter_config.json").is_file():
        raise CheckpointError(f"{source} holds no LoRA adapter (adapter/adapter_config.json); only LoRA agents export")
    tmp = out.with_name(f".{out.name}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        if merge:
            # torch, transformers and peft: this module loads in every CLI run (register_commands)
            from llm_gym.lm.adapter_files import save_merged

            saved = run.read_config()["config"]
            base_name = (
                saved.get("model")
                or json.loads((adapter / "adapter_config.json").read_text())["base_model_name_or_path"]
            )
            save_merged(adapter, base_name, tmp, dtype=dtype)
        else:
            shutil.copytree(adapter, tmp)
        # The weights cannot hold a calibrated run's per-action offsets: they travel beside them.
        for extra in (ACTION_BIAS_FILE, ACTION_HEAD_FILE):
            if (source / extra).is_file():
                shutil.copy2(source / extra, tmp / extra)
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp.rename(out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    what = "merged model" if merge else "adapter"
    console.print(f"{what} from {source} written to {out}")
    if (out / ACTION_BIAS_FILE).is_file():
        console.print(
            f"the run calibrated its prior over action names: add the offsets in {out / ACTION_BIAS_FILE} to each "
            "action name's log-likelihood before the softmax to act as it does"
        )
    if (out / ACTION_HEAD_FILE).is_file():
        console.print(
            f"the run trained an action head: the weights alone do not act as it does; add the offsets of "
            f"{out / ACTION_HEAD_FILE} (agents/ppo_lora/action_head.py) to each action name's log-likelihood, or play "
            "the checkpoint itself with llm-gym play --checkpoint"
        )


def register(app: typer.Typer) -> None:
    """Add ``export`` to the ``llm-gym`` app."""
    app.command("export")(export)
