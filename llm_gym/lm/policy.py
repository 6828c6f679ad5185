"""A batched policy backed by any LM backend, in either action mode.

* ``score``: a categorical over each env's legal actions, from the log-likelihood of each action's name as the
  whole answer; greedy takes the most likely, otherwise it samples.
* ``generate``: the model writes an answer; the shared parser (:func:`llm_gym.actions.parse_action`) reads an
  action from it. What cannot be parsed falls back to the env's no-op (a random legal action where it has none)
  and is counted. Envs whose action space is text (``Trace-v0``) get the answer itself.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

import numpy as np

from llm_gym.actions import parse_action
from llm_gym.agent import DecisionDetails, DetailedPolicy
from llm_gym.envs.catalog import EnvConfig, EnvTraits
from llm_gym.envs.history import TURNS_KEY
from llm_gym.envs.protocol import legal_choices, step_instructions
from llm_gym.errors import UnsupportedEnvError
from llm_gym.lm.backends import GenerateRequest, LMBackend, ScoreRequest

__all__ = ["ActionMode", "EnvTraits", "LMPolicy", "legal_choices", "with_action_bias"]

ActionMode = Literal["score", "generate"]


def with_action_bias(loglik: Any, names: Sequence[str], bias: Mapping[str, float]) -> np.ndarray:
    """Each legal action's log-likelihood plus its name's offset in ``bias`` (0 for names not in it): the scores of
    a policy that calibrated its prior over action names (``ppo_lora``'s ``action_prior=calibrated``)."""
    loglik = np.asarray(loglik)
    return loglik + np.array([bias.get(name, 0.0) for name in names]) if bias else loglik


class LMPolicy(DetailedPolicy):
    """Acts for a batch of envs with one backend call per step.

    Args:
        backend: the LM backend.
        env: the env config (its instructions become the system prompt).
        mode: ``score`` or ``generate``.
        greedy: score mode: take the most likely action instead of sampling; generate mode: temperature 0.
        temperature: generate mode sampling temperature when not greedy.
        max_new_tokens: generate mode answer budget.
        seed: seed of the sampling RNG.
        history: earlier turns of the episode shown before each observation (0: none). The envs must be made with
            ``history=`` at least this (:mod:`llm_gym.envs.history`); :attr:`env_kwargs` asks ``play`` for it.
        action_bias: score mode: a log-probability offset per action name, added to its likelihood before the
            softmax (a ``ppo_lora`` run's calibrated prior over action names); names not in it get 0.
    """

    def __init__(
        self,
        backend: LMBackend,
        env: EnvConfig,
        *,
        mode: ActionMode = "score",
        greedy: bool = True,
        temperature: float = 1.0,
        max_new_tokens: int = 16,
        seed: int = 0,
        history: int = 0,
        action_bias: Mapping[str, float] | None = None,
    ) -> None:
        self.backend, self.env_id, self.mode = backend, env.env_id, mode
        self.history = max(0, history)
        self.env_kwargs = {"history": self.history} if self.history else {}
        self.traits = EnvTraits.probe(env)
        if mode == "score" and self.traits.text_actions:
            raise UnsupportedEnvError(f"{env.env_id} takes free text as its action; use --set action_mode=generate")
        self.greedy, self.temperature, self.max_new_tokens = greedy, temperature, max_new_tokens
        self.action_bias = dict(action_bias or {})
        self.rng = np.random.default_rng(seed)
        self.seed = seed
        self.decisions = 0
        self.parse_failures = 0
        self.last_answers: list[str] = []
        """The model's answer behind each action of the latest ``act`` (score mode: the chosen action's name)."""

    def act_with_details(
        self, observations: Sequence[Any], infos: Sequence[Mapping[str, Any]]
    ) -> tuple[list[Any], list[DecisionDetails]]:
        """The actions and, per decision, the legal actions' probabilities (score) or the answer (generate)."""
        self.decisions += len(observations)
        if self.mode == "score":
            return self._act_score(observations, infos)
        return self._act_generate(observations, infos)

    def _act_score(
        self, observations: Sequence[Any], infos: Sequence[Mapping[str, Any]]
    ) -> tuple[list[int], list[DecisionDetails]]:
        legal = [legal_choices(info, self.env_id) for info in infos]
        requests = [
            ScoreRequest(self.rules(info), obs, tuple(names), self.turns(info))
            for obs, info, (_, names) in zip(observations, infos, legal, strict=True)
        ]
        actions, answers, details = [], [], []
        # A backend with a trained value head (a ppo_lora / sft checkpoint's) reports its value estimates too.
        scores, values = (
            self.backend.score_with_values(requests)
            if getattr(self.backend, "value_head", None) is not None
            else (self.backend.score(requests), None)
        )
        for k, (loglik, (ids, names)) in enumerate(zip(scores, legal, strict=True)):
            loglik = with_action_bias(loglik, names, self.action_bias)
            logp = loglik - np.logaddexp.reduce(loglik)
            probs = np.exp(logp) / np.exp(logp).sum()
            index = int(np.argmax(logp)) if self.greedy else int(self.rng.choice(len(ids), p=probs))
            actions.append(ids[index])
            answers.append(names[index])
            detail = DecisionDetails(probs=[float(p) for p in probs])
            if values is not None:
                detail["value"] = values[k]
            details.append(detail)
        self.last_answers = answers
        return actions, details

    def _act_generate(
        self, observations: Sequence[Any], infos: Sequence[Mapping[str, Any]]
    ) -> tuple[list[Any], list[DecisionDetails]]:
        requests = [
            GenerateRequest(self.rules(info), obs, self.turns(info))
            for obs, info in zip(observations, infos, strict=True)
        ]
        completions = self.backend.generate(
            requests,
            max_new_tokens=self.max_new_tokens,
            temperature=0.0 if self.greedy else self.temperature,
            seed=int(self.rng.integers(2**31)),
        )
        self.last_answers = [c.text for c in completions]
        details = [DecisionDetails(answer=c.text, tokens=int(c.num_tokens)) for c in completions]
        if self.traits.text_actions:
            return [c.text for c in completions], details
        actions = []
        for completion, info in zip(completions, infos, strict=True):
            ids, names = legal_choices(info, self.env_id)
            parsed = parse_action(completion.text, names, ids, self.traits.aliases)
            if parsed.action is None:
                self.parse_failures += 1
                actions.append(self.fallback(ids))
            else:
                actions.append(parsed.action)
        return actions, details

    def rules(self, info: Mapping[str, Any]) -> str:
        """The system prompt for this step: the task's rules where the env gives them per task (OpenSpiel-v0)."""
        return step_instructions(info, self.traits.instructions)

    def turns(self, info: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
        """The episode's last ``history`` turns from the env's info (none when history is off)."""
        if not self.history:
            return ()
        if TURNS_KEY not in info:
            raise UnsupportedEnvError(
                f"history={self.history} needs envs made with history={self.history} (--env-arg history=N, or "
                f"EnvConfig({self.env_id!r}, {{'history': N}})); this env's info carries no {TURNS_KEY!r}"
            )
        return tuple(info[TURNS_KEY])[-self.history :]

    def fallback(self, legal: Sequence[int]) -> int:
        """The action taken when an answer names no legal action: the no-op where legal, else a random one."""
        if self.traits.noop is not None and self.traits.noop in legal:
            return int(self.traits.noop)
        return int(legal[int(self.rng.integers(len(legal)))])
