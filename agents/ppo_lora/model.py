"""The actor-critic: a causal LM with LoRA on its top layers (peft), a value head on the last prompt token, and
the frozen reference policy: the same model with the adapter disabled, or a second, frozen adapter beside the
trained one (``kl_reference=start`` on a warm start: the adapter the run started from).

Everything runs through :class:`llm_gym.lm.split.SplitLM`: the frozen layers once per decision (their output is
kept in the rollout buffer), the LoRA layers again in every epoch. The shared system-prompt prefix is cached at
three places: below the split (never changes), above it for the current adapter (refreshed after each update)
and above it for the reference (never changes).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any, Literal

import torch
from peft import LoraConfig, PeftModel, get_peft_model
from torch import nn

from llm_gym.agents.ppo_lora.action_head import ActionHead, load_action_head, save_action_head
from llm_gym.agents.ppo_lora.calibration import save_action_bias
from llm_gym.agents.ppo_lora.config import PPOLoRAConfig
from llm_gym.agents.ppo_lora.frozen_rows import FrozenRows, padded_hidden
from llm_gym.agents.ppo_lora.tokens import check_tokenizer_record, write_tokenizer_record
from llm_gym.agents.ppo_lora.value_head import ValueHead
from llm_gym.errors import ConfigError
from llm_gym.lm.adapter_files import save_adapter
from llm_gym.lm.forward import PackedOutput, PrefixCache, compute_prefix
from llm_gym.lm.models import load_causal_lm, resolve_model
from llm_gym.lm.packing import PackedBatch, pack
from llm_gym.lm.prompts import EncodedPrompt, PromptBuilder, Turns
from llm_gym.lm.runtime import default_device, quiet_peft
from llm_gym.lm.split import SplitLM, TopPrefix

ADAPTER_DIR, VALUE_HEAD_FILE = "adapter", "value_head.pt"
TRAINED_ADAPTER, REFERENCE_ADAPTER = "default", "reference"  # peft's adapter names; "default" is peft's own
Pass = Literal["rollout", "train", "reference"]


def resolve_device(device: str) -> str:
    return default_device() if device == "auto" else device


class ActorCritic:
    """LM policy + value head; the prefix of one system prompt is cached (:meth:`use_instructions`).

    Args:
        config: the agent config (model, dtype, LoRA shape, trainable layers).
        instructions: the rules text whose prompt prefix is cached (the env's; a task with other rules gets its own
            system prompt, uncached).
        adapter: a saved adapter directory to start from (a checkpoint's), else a fresh LoRA.
    """

    def __init__(self, config: PPOLoRAConfig, instructions: str, adapter: Path | None = None) -> None:
        if config.quantize != "none":
            raise ConfigError(
                f"quantize={config.quantize} is for playing a checkpoint (llm-gym play/bench, the adapter merged "
                "first); training the adapter stays float: use quantize=none"
            )
        self.config = config
        self.device = resolve_device(config.device)
        base, self.tokenizer = load_causal_lm(config.model, dtype=config.dtype, device=self.device)
        # Recorded in the adapter config, so plain peft finds the base model (the converted cache dir for aliases).
        base.name_or_path = str(resolve_model(config.model))
        for parameter in base.parameters():
            parameter.requires_grad_(False)
        num_layers = len(base.get_decoder().layers)
        self.num_layers = num_layers  # a reference adapter loaded later is checked against it
        top = config.trainable_layers if 0 < config.trainable_layers < num_layers else num_layers
        self.split_layer = num_layers - top
        with quiet_peft():
            self.model = self._peft(base, config, num_layers, adapter)
        self.model.eval()  # no dropout in the base model; LoRA dropout follows train()/eval() of the update
        self.hidden_size = base.config.hidden_size
        # Only GAE reads a value head (advantage=group/step_group compare episodes of one start, exact walks the tree).
        self.value_head: ValueHead | None = self._fresh_value_head(config) if config.has_value_head else None
        self.split = SplitLM(self.model, self.split_layer, config.adapter_compute)
        self.adapter_compute = self.split.adapter_compute  # generate mode's sampling runs the whole model under it too
        self.pad_id = self.tokenizer.pad_token_id
        self.reference_adapter: Path | None = None  # None: the reference is the base model (use_reference_adapter)
        self.frozen_rows = FrozenRows(self.bottom, self.pack, config.frozen_cache_mb * 2**20)
        self.use_instructions(instructions)
        self.set_action_bias({})
        self.set_action_head(None)  # action_head=standardized: set_action_head / load_action_head
        if adapter is not None:
            check_tokenizer_record(Path(adapter), self.tokenizer, self.builder.answer_end_ids)

    def _fresh_value_head(self, config: PPOLoRAConfig) -> ValueHead:
        head = ValueHead(self.hidden_size, input_mode=config.value_input).to(self.device)
        # Drawn after the move, on the device's generator: the draws of every run before ValueHead existed.
        nn.init.normal_(head.weight, std=1.0 / self.hidden_size**0.5)
        nn.init.zeros_(head.bias)
        if config.value_input == "standardized":  # starts at 0 everywhere; drawn above all the same, so a run's
            nn.init.zeros_(head.weight)  # later draws are those of the other inputs' runs
        return head

    def use_instructions(self, instructions: str) -> None:
        """Make ``instructions`` the system prompt whose prefix is cached. Prompts with other rules (another task's)
        stay right, only slower: they run whole. Call it only between an update and the next rollout: the update
        recomputes the stored decisions over the cached prefix."""
        self.builder = PromptBuilder(self.tokenizer, instructions)
        self.bottom_prefix = self.split.bottom_prefix(self.builder.prefix_ids)
        self.frozen_rows.clear()  # computed over the old prefix
        with torch.no_grad(), self._reference_policy():
            self.reference_prefix = self.split.top_prefix(self.bottom_prefix)
        self.refresh()

    def use_reference_adapter(self, adapter: Path) -> None:
        """Measure the KL term against the policy of ``adapter`` (a saved adapter directory, loaded frozen beside
        the trained one) instead of the base model's."""
        _check_adapter_layers(adapter, self.split_layer, self.num_layers)
        with quiet_peft():
            self.model.load_adapter(str(adapter), adapter_name=REFERENCE_ADAPTER, is_trainable=False)
        self.model.set_adapter(TRAINED_ADAPTER)  # the trained adapter stays the active, trainable one
        self.reference_adapter = Path(adapter)
        with torch.no_grad(), self._reference_policy():
            self.reference_prefix = self.split.top_prefix(self.bottom_prefix)

    @contextmanager
    def _reference_policy(self) -> Iterator[None]:
        """Inside, the model is the reference policy: the base model, or the frozen reference adapter."""
        if self.reference_adapter is None:
            with self.model.disable_adapter():
                yield
            return
        # set_adapter also sets requires_grad: inference_mode keeps the reference frozen, and switching back makes
        # the trained adapter trainable again (its parameters are the optimiser's, unchanged).
        self.model.set_adapter(REFERENCE_ADAPTER, inference_mode=True)
        try:
            yield
        finally:
            self.model.set_adapter(TRAINED_ADAPTER)

    def _peft(self, base: Any, config: PPOLoRAConfig, num_layers: int, adapter: Path | None) -> Any:
        if adapter is not None:
            _check_adapter_layers(adapter, self.split_layer, num_layers)
            return PeftModel.from_pretrained(base, str(adapter), is_trainable=True)
        lora = LoraConfig(
            r=config.lora_rank,
            lora_alpha=config.lora_alpha,
            lora_dropout=config.lora_dropout,
            target_modules=list(config.lora_targets),
            layers_to_transform=list(range(self.split_layer, num_layers)) if self.split_layer else None,
            task_type="CAUSAL_LM",
        )
        return get_peft_model(base, lora)

    # -- parameters --------------------------------------------------------------------------------------------

    def trainable_parameters(self) -> list[nn.Parameter]:
        heads = list(self.value_head.parameters()) if self.value_head is not None else []
        if self.action_head is not None:
            heads += list(self.action_head.parameters())
        return [p for p in self.model.parameters() if p.requires_grad] + heads

    def refresh(self) -> None:
        """Recompute the prefix caches that depend on the adapter (after every optimiser step phase)."""
        with torch.no_grad():
            self.rollout_prefix: TopPrefix | None = self.split.top_prefix(self.bottom_prefix)
        self._full_prefix: PrefixCache | None | Literal[False] = False  # made on demand (generate mode)

    def full_prefix(self) -> PrefixCache | None:
        """The prefix through the whole model with the current adapter (for sampling in generate mode)."""
        if self._full_prefix is False:
            with torch.no_grad(), self.adapter_compute():
                self._full_prefix = compute_prefix(self.model, self.builder.prefix_ids)
        return self._full_prefix

    # -- forward -----------------------------------------------------------------------------------------------

    def encode(
        self,
        observations: Sequence[Any],
        instructions: Sequence[str] | None = None,
        turns: Sequence[Turns] | None = None,
    ) -> list[EncodedPrompt]:
        """Prompt ids of each observation, with its task's rules (``instructions``, per row) and the episode's
        earlier ``turns`` (``history=K``) where given. A prompt with turns still starts with the system prompt, so
        the cached prefix serves it."""
        return self.builder.encode(observations, turns, instructions)

    def choices(self, names: Sequence[str]) -> list[list[int]]:
        """Token ids of each action name as a whole answer (score mode)."""
        return [self.builder.choice_ids(n, self.config.score_with_end) for n in names]

    def set_action_bias(self, bias: dict[str, float]) -> None:
        """The per-action offsets of ``action_prior=calibrated`` (:mod:`llm_gym.agents.ppo_lora.calibration`), added
        to each action name's log-likelihood in every batch :meth:`pack` makes; empty: none."""
        self.action_bias = dict(bias)
        self._bias_of_tokens = {tuple(self.choices([name])[0]): value for name, value in self.action_bias.items()}

    def pack(
        self,
        prompts: Sequence[Sequence[int]],
        uses_prefix: Sequence[bool],
        continuations: Sequence[Sequence[Sequence[int]]],
    ) -> PackedBatch:
        prefix_length = self.bottom_prefix.length if self.bottom_prefix else 0
        batch = pack(prompts, uses_prefix, continuations, prefix_length, self.pad_id)
        if self._bias_of_tokens:  # keyed by the scored tokens: the stored decisions of an update carry no names
            bias = [self._bias_of_tokens.get(tuple(c), 0.0) for row in continuations for c in row]
            batch.seq_bias = torch.tensor(bias, dtype=torch.float32)
        if self.action_head is not None:
            index = [self._head_index_of_tokens.get(tuple(c), -1) for row in continuations for c in row]
            batch.seq_name = torch.tensor(index, dtype=torch.long)
        return batch

    def set_action_head(self, head: ActionHead | None) -> None:
        """Use ``head`` (``action_head=standardized``) in every rollout and training pass from now on; None: none.
        Call before the optimizer is built: its parameters are among :meth:`trainable_parameters`."""
        self.action_head = None if head is None else head.to(self.device)
        names = head.names if head is not None else ()
        self._head_index_of_tokens = {tuple(self.choices([name])[0]): i for i, name in enumerate(names)}

    @contextmanager
    def observing(self) -> Iterator[None]:
        """Collect the states a rollout reads, for the standardised heads' statistics (:meth:`fold_observed`)."""
        value = self.value_head.observing() if self.value_head is not None else nullcontext()
        with value, self.action_head.observing() if self.action_head else nullcontext():
            yield

    def fold_observed(self) -> None:
        """Move the standardised heads' statistics to the last rollout's states; every value and offset stays."""
        if self.value_head is not None:
            self.value_head.fold_observed()
        if self.action_head is not None:
            self.action_head.fold_observed()

    def load_action_head(self, directory: Path) -> None:
        """The checkpoint's action head where it has one (its own names and statistics); else none."""
        self.set_action_head(load_action_head(directory, self.hidden_size, self.device))

    def bottom(self, batch: PackedBatch) -> torch.Tensor:
        """Hidden states entering the first trainable layer (no gradients: those layers are frozen)."""
        return self.split.bottom(batch, self.bottom_prefix)

    def bottom_rows(
        self,
        prompts: Sequence[Sequence[int]],
        uses_prefix: Sequence[bool],
        continuations: Sequence[Sequence[Sequence[int]]],
        together: bool = False,
    ) -> tuple[PackedBatch, torch.Tensor, list[torch.Tensor]]:
        """The packed batch of these rows, its frozen-layer output (padded, on the model's device) and each row's
        own (its length, H), every row computed on its own (``together``: with the rows of its length in this call)
        or taken from :attr:`frozen_rows`."""
        batch = self.pack(prompts, uses_prefix, continuations)
        rows = self.frozen_rows(prompts, uses_prefix, continuations, together)
        return batch, padded_hidden(rows, batch.input_ids.shape[1]).to(self.device), rows

    def top(self, hidden: torch.Tensor, batch: PackedBatch, which: Pass) -> tuple[PackedOutput, torch.Tensor]:
        """Continuation log-probs and values from the split hidden states.

        ``rollout``: current adapter, cached prefix, no gradients. ``train``: current adapter with gradients
        through the prefix too. ``reference``: the reference policy (:meth:`_reference_policy`), no gradients.
        """
        if which == "reference":
            with torch.no_grad(), self._reference_policy():
                out = self.split.top(hidden, batch, self.reference_prefix)
            return out, torch.zeros(hidden.shape[0], device=hidden.device)
        if which == "rollout":
            with torch.no_grad():
                out = self.split.top(hidden, batch, self.rollout_prefix)
                return self._with_action_head(out, batch), self.value(out)
        prefix = self.split.top_prefix(self.bottom_prefix)
        out = self.split.top(hidden, batch, prefix)
        return self._with_action_head(out, batch), self.value(out)

    def _with_action_head(self, out: PackedOutput, batch: PackedBatch) -> PackedOutput:
        """``out`` with the action head's offsets per continuation (the reference pass has none: it is the LM's
        policy alone, the base model's or the reference adapter's)."""
        if self.action_head is not None and batch.seq_name is not None:
            out.seq_offset = self.action_head.seq_offsets(out.last_hidden, batch.seq_row, batch.seq_name)
        return out

    def value(self, out: PackedOutput) -> torch.Tensor:
        """V(s) per row; zeros without a value head (a group estimator never reads them)."""
        if self.value_head is None:
            return torch.zeros(out.last_hidden.shape[0], device=out.last_hidden.device)
        return self.value_head(out.last_hidden.float()).squeeze(-1)

    # -- saving ------------------------------------------------------------------------------------------------

    def save(self, directory: Path) -> None:
        """Adapter via ``save_pretrained`` (plain peft loads it onto the base model), the value head (where there is
        one) and any per-action offsets."""
        save_adapter(self.model, directory / ADAPTER_DIR)
        write_tokenizer_record(directory / ADAPTER_DIR, self.tokenizer, self.builder.answer_end_ids)
        if self.value_head is not None:
            torch.save(self.value_head.state_dict(), directory / VALUE_HEAD_FILE)
        save_action_bias(directory, self.action_bias)
        save_action_head(directory, self.action_head)

    def load_value_head(self, directory: Path) -> None:
        """The value head saved beside a checkpoint's adapter, onto this model's device (a checkpoint made on a GPU
        warm-starts or resumes on a CPU, and the other way round); nothing under a group estimator."""
        if self.value_head is None:
            return
        device = next(self.value_head.parameters()).device
        self.value_head.load_state_dict(torch.load(directory / VALUE_HEAD_FILE, map_location=device, weights_only=True))


def _check_adapter_layers(adapter: Path, split_layer: int, num_layers: int) -> None:
    """An adapter must sit on exactly the layers above the split: below it the layers run once, without gradients,
    and the reference pass would not switch a LoRA there off."""
    layers = json.loads((Path(adapter) / "adapter_config.json").read_text()).get("layers_to_transform")
    have = sorted(layers) if layers is not None else list(range(num_layers))
    want = list(range(split_layer, num_layers))
    if have != want:
        top = have == list(range(num_layers - len(have), num_layers))
        fix = f"set trainable_layers={len(have)} to continue from it" if top else "ppo_lora trains top layers only"
        raise ConfigError(
            f"the adapter in {adapter} has LoRA on layers {have[0]}..{have[-1]} of {num_layers}, this run would train "
            f"the top {num_layers - split_layer}: {fix}"
        )
