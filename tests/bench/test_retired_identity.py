"""Retiring a config field (``Config.retired``) replays nothing: an entry hashes as it did while the field existed at
its "off" value, for agent entries and for checkpoint entries whose run saved the field; a run saved after the
retirement does not count it."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

from llm_gym.agent import AgentConfig
from llm_gym.bench.entries import ResolvedEntry, keep_stored_identity
from llm_gym.bench.suite import SuiteEntry


@dataclass(frozen=True, kw_only=True)
class BeforeConfig(AgentConfig):
    lr: float = 1e-3
    """Learning rate."""
    head: Literal["none", "linear"] = "none"
    """A setting about to be retired."""


@dataclass(frozen=True, kw_only=True)
class AfterConfig(AgentConfig):
    retired = {"head": ("none", "measured useless")}
    lr: float = 1e-3
    """Learning rate."""


def resolved(config: AgentConfig, saved_fields: frozenset[str] | None = None) -> ResolvedEntry:
    return ResolvedEntry(SuiteEntry("row", agent="demo"), "demo", config, None, None, saved_fields)


def test_an_agent_entry_keeps_the_identity_it_had_with_the_field_off() -> None:
    assert resolved(AfterConfig(lr=0.5)).entry_hash == resolved(BeforeConfig(lr=0.5)).entry_hash
    assert resolved(AfterConfig(lr=0.5)).entry_hash != resolved(BeforeConfig(lr=0.5, head="linear")).entry_hash


def test_a_checkpoint_entry_counts_the_field_only_where_its_run_saved_it() -> None:
    old_run = frozenset({"seed", "lr", "head"})
    assert resolved(AfterConfig(), old_run).entry_hash == resolved(BeforeConfig(), old_run).entry_hash
    new_run = frozenset({"seed", "lr"})
    assert resolved(AfterConfig(), new_run).entry_hash == resolved(BeforeConfig(), new_run).entry_hash


def test_episodes_stored_before_the_field_existed_keep_their_identity() -> None:
    """An agent entry stored when the config had neither field: the store's identity still matches."""
    before_both = resolved(AfterConfig(), frozenset({"seed", "lr"}))
    stored = {("row", before_both.entry_hash): {"agent": "demo", "config": {"seed": 0, "lr": 1e-3}}}
    now = resolved(AfterConfig())
    assert now.entry_hash != before_both.entry_hash
    assert keep_stored_identity(now, stored).entry_hash == before_both.entry_hash
    changed = replace(now, config=AfterConfig(lr=0.5))
    assert keep_stored_identity(changed, stored).entry_hash != before_both.entry_hash
