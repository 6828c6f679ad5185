"""Process-wide torch settings for the LM runtime, chosen deliberately rather than left to defaults.

torch sits at the top: the modules that import this one (the backends, the trainers, the agents' policy builders)
load a model right after, so none of them is on a light path (``import llm_gym``, the CLI's listings)."""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator

import torch

from llm_gym.lm.cpu import available_cores


def configure_threads(threads: int = 0) -> int:
    """Set torch's intra-op threads (``0``: one per available core) and return the number set.

    Inter-op threads stay at 1: the runtime issues one op at a time, and a second pool only competes for cores.
    """
    count = threads if threads > 0 else available_cores()
    torch.set_num_threads(count)
    with contextlib.suppress(RuntimeError):  # only settable before the first parallel op; keep what is there
        torch.set_num_interop_threads(1)
    return count


def default_device() -> str:
    """``cuda`` when a GPU is visible, else ``cpu``."""
    return "cuda" if torch.cuda.is_available() else "cpu"


@contextlib.contextmanager
def quiet_peft() -> Iterator[None]:
    """Silence one warning peft triggers on every load (it asks transformers about gradient checkpointing through
    a name transformers has deprecated); nothing the user can act on."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*", category=FutureWarning)
        yield
