"""The leaderboard's tables as plain data (title, header, rows of text), shared by the markdown and HTML renderers."""

from __future__ import annotations

from dataclasses import dataclass, field

from llm_gym.bench.comparisons import SUITE
from llm_gym.bench.references import ATARI_REFERENCES, atari_game
from llm_gym.bench.render.viewer import viewer_link
from llm_gym.bench.suite import HELDOUT, TRAIN
from llm_gym.bench.summary import Leaderboard


@dataclass
class Table:
    """One table: ``family`` groups it into a section."""

    title: str
    header: list[str]
    rows: list[list[str]]
    family: str
    note: str = ""
    links: dict[tuple[int, int], str] = field(default_factory=dict)
    """(row, column) -> relative link for that cell."""
    link_lists: dict[tuple[int, int], list[tuple[str, str]]] = field(default_factory=dict)
    """(row, column) -> several (text, relative link) shown in that cell instead of its text."""


FAMILY_NAMES = {SUITE: "Whole suite", "atari": "Atari", "openspiel": "OpenSpiel", "trace": "Trace"}


def comparison_tables(board: Leaderboard) -> list[Table]:
    """One table per comparison (:mod:`llm_gym.bench.comparisons`): entries ranked only on envs all of them
    played; a comparison of one entry is shown unranked."""
    tables = []
    for comparison in board.comparisons:
        rows = []
        for rank, standing in enumerate(comparison.standings, 1):
            rows.append([
                str(rank) if comparison.ranked else "–", standing.entry, board.agents[standing.entry],
                standing.iqm.format(3), str(standing.games), str(standing.iqm.n),
                "" if standing.own else "yes",
            ])  # fmt: skip
        labels = comparison.labels
        what = "ranked" if comparison.ranked else "one entry, nothing to rank it against"
        tables.append(Table(
            comparison.describe(FAMILY_NAMES),
            ["rank", "entry", "agent", "IQM normalised score [95% CI]", "games", "episodes", "played more envs"],
            rows,
            "aggregate",
            f"{what.capitalize()} on the {len(labels)} held-out env(s) every entry here played"
            + (f" ({', '.join(labels)})" if len(labels) > 3 and len(labels) < comparison.scope_size else "")
            + (", by the lower bound of the IQM's 95% CI. Played more envs: also played other envs of this "
               "family, left out here." if comparison.ranked else "."),
        ))  # fmt: skip
    return tables


def entries_table(board: Leaderboard) -> Table:
    """What each entry played, with its train/held-out gap and its gain over the zero-shot model: not a ranking."""
    rows = []
    for agg in board.aggregates:
        splits = agg.mean_normalised_by_split
        gap = f"{splits[TRAIN] - splits[HELDOUT]:+.3f}" if TRAIN in splits and HELDOUT in splits else "–"
        gain = board.zero_shot_gain.get(agg.entry)
        played = [e for e in board.envs if (agg.entry, e.label, HELDOUT) in board.cells]
        families = ", ".join(
            f"{FAMILY_NAMES.get(family, family)} {sum(e.family == family for e in played)}/"
            f"{sum(e.family == family for e in board.envs)}"
            for family in dict.fromkeys(e.family for e in played)
        )
        rows.append([agg.entry, board.agents[agg.entry], families or "–", str(agg.iqm.n), gap,
                     "–" if gain is None else f"{gain:+.3f}"])  # fmt: skip
    return Table(
        "Entries (not ranked)",
        ["entry", "agent", "envs played (held-out)", "episodes", "train − held-out", "gain vs zero-shot"],
        rows,
        "aggregate",
        "Which envs each entry played; entries are ranked only in the comparisons above, on envs all of them played. "
        "Train − held-out: mean normalised score on the training seeds minus on the held-out ones (checkpoints). Gain "
        "vs zero-shot: mean normalised score minus that of the same base model zero-shot, on the held-out envs both "
        "played.",
    )


def atari_tables(board: Leaderboard) -> list[Table]:
    tables = []
    for env in [e for e in board.envs if e.family == "atari"]:
        game = atari_game(env.env_id)
        ref = ATARI_REFERENCES.get(game or "")
        rows = []
        for entry, cell in board.ranked(env.label):
            rows.append(
                [
                    entry,
                    cell.raw_returns.format(1),
                    cell.normalised.format(3),
                    cell.returns.format(2),
                    f"{cell.mean_length:.0f}",
                    f"{sum(r.truncated for r in cell.rows)}/{len(cell.rows)}",
                    f"{cell.invalid_per_episode:.1f}",
                    f"{cell.seconds_per_episode:.1f}",
                ]
            )
        note = f"{env.env_id} {_args(env.args)}"
        if ref:
            note += f"; human-normalised with random {ref.random:g}, human {ref.human:g} ({ref.source})"
        if "vision" in env.env_id.lower():
            note += ". " + vision_note(board, env.label)
        tables.append(
            Table(
                env.label,
                [
                    "entry",
                    "game return [95% CI]",
                    "human-normalised",
                    "env return",
                    "length",
                    "cut",
                    "invalid/ep",
                    "s/ep",
                ],
                rows,
                "atari",
                note,
            )
        )
    return tables


TEXT_MODELS = frozenset({"smollm2-135m"})
"""Language models known to read text only (the default model); a vision env's image is not theirs to see."""


def vision_note(board: Leaderboard, label: str) -> str:
    """What a vision env's rows read: a language model sees the image only if it is an image-text model. Said out
    loud where none is on the leaderboard, rather than left as rows that are silently missing."""
    models = {
        str(model)
        for entry in board.entries
        if (entry, label, HELDOUT) in board.cells
        and (model := (board.entry_info.get(entry, {}).get("config") or {}).get("model")) is not None
    }
    if models - TEXT_MODELS:
        return f"Language models here: {', '.join(sorted(models))}."
    read = (
        f"the language-model rows ({', '.join(sorted(models))}, a text model) read the observation's text only"
        if models
        else "no language model played it"
    )
    return (
        f"The observation is an image and its text; {read}. No image-text model (VLM) is on this leaderboard: no "
        "such model's weights can be had offline on the machines that made it (the reflection agent takes one "
        "where a user has the weights, docs/guides/reflection.md)."
    )


def openspiel_tables(board: Leaderboard) -> list[Table]:
    """One table per game: W/D/L and Wilson win rate against each opponent rung."""
    games: dict[str, list] = {}
    for env in board.envs:
        if env.family == "openspiel":
            games.setdefault(env.game, []).append(env)
    tables = []
    for game, envs in games.items():
        header = ["entry"] + [f"vs {e.rung} W/D/L" for e in envs] + [f"vs {e.rung} win rate" for e in envs]
        rows = []
        entries = [e for e in board.entries if any((e, env.label, HELDOUT) in board.cells for env in envs)]
        for entry in entries:
            cells = [board.cells.get((entry, env.label, HELDOUT)) for env in envs]
            wdl = [f"{c.wins}/{c.draws}/{c.losses}" if c else "–" for c in cells]
            rates = [c.win_rate.format(1, percent=True) if c else "–" for c in cells]
            rows.append([entry, *wdl, *rates])
        rows.sort(key=lambda r: _first_low(board, r[0], envs), reverse=True)
        tables.append(
            Table(
                game,
                header,
                rows,
                "openspiel",
                "Wins/draws/losses of the learner's seat against each ladder rung; win rate with a Wilson 95% interval. "
                "Ranked by the lower bound against the first rung. "
                + "; ".join(f"{e.rung}: {e.env_id} {_args(e.args)}" for e in envs),
            )
        )
    return tables


def _first_low(board: Leaderboard, entry: str, envs: list) -> float:
    for env in envs:
        cell = board.cells.get((entry, env.label, HELDOUT))
        if cell:
            return cell.win_rate.low if cell.win_rate.low == cell.win_rate.low else cell.win_rate.value
    return float("-inf")


def trace_tables(board: Leaderboard) -> list[Table]:
    tables = []
    for env in [e for e in board.envs if e.family == "trace"]:
        rows = []
        for entry, cell in board.ranked(env.label, key="exact"):
            for level, (exact, partial) in cell.by_level.items():
                rows.append([entry, str(level), exact.format(1, percent=True), partial.format(3), str(exact.n)])
            rows.append([entry, "all", cell.exact.format(1, percent=True), cell.scores.format(3), str(cell.exact.n)])
        tables.append(
            Table(
                env.label,
                ["entry", "level", "exact match [Wilson 95%]", "partial credit [95% CI]", "episodes"],
                rows,
                "trace",
                f"{env.env_id} {_args(env.args)}",
            )
        )
    return tables


def training_table(board: Leaderboard) -> Table | None:
    rows = []
    for entry in board.entries:
        training = board.entry_info.get(entry, {}).get("training")
        if not training:
            continue
        wall = training.get("wall_seconds")
        gain = board.zero_shot_gain.get(entry)
        rows.append(
            [
                entry,
                str(training.get("agent")),
                str(training.get("env_id")) + _args_suffix(training.get("env_kwargs") or {}),
                _budget(training),
                "–" if wall is None else f"{wall / 60:.1f} min",
                str(training.get("device")),
                str(training.get("seed")),
                # rows stored before curves named their metric plotted charts/episodic_return
                str(training.get("curve_metric") or ("episodic return" if training.get("curve") else "–")),
                "–" if gain is None else f"{gain:+.3f}",
                str(training.get("run")),
            ]
        )
    if not rows:
        return None
    return Table(
        "Training runs",
        [
            "entry",
            "agent",
            "trained on",
            "budget",
            "wall time",
            "device",
            "seed",
            "learning curve",
            "gain vs zero-shot",
            "run",
        ],  # fmt: skip
        rows,
        "training",
        "Checkpoint entries: how they were trained (from the run's summary and TensorBoard scalars, copied into the "
        "store when benchmarked; the plots above are the learning curves). Gain vs zero-shot: mean human-normalised "
        "(Atari) or normalised score minus that of the same base model zero-shot, over the held-out envs both played. "
        "The train − held-out gap is in the entries table.",
    )


def _budget(training: dict) -> str:
    """Env steps for RL runs; demonstrations x epochs for runs that learned from demonstrations."""
    if training.get("demo_decisions"):
        epochs = training.get("epochs")
        return f"{training['demo_decisions']} demo decisions" + (f" x {epochs} epochs" if epochs else "")
    if training.get("examples_seen") is not None:  # from demonstrations, without the run's summary
        return f"{training['examples_seen']} demo decisions seen"
    return f"{training.get('env_steps')} env steps"


def _args_suffix(kwargs: dict) -> str:
    return f" ({_args(kwargs)})" if kwargs else ""


def trajectory_table(board: Leaderboard) -> Table | None:
    """One row per entry: a link to its recorded episode on each env it was recorded on."""
    if not board.trajectories:
        return None
    by_entry: dict[str, list[tuple[str, str]]] = {}
    for episode_id, entry, label, _seed in board.trajectories:
        by_entry.setdefault(entry, []).append((label, viewer_link(episode_id)))
    order = {label: i for i, label in enumerate(e.label for e in board.envs)}
    rows, link_lists = [], {}
    for i, entry in enumerate(e for e in board.entries if e in by_entry):
        episodes = sorted(by_entry[entry], key=lambda item: order.get(item[0], len(order)))
        rows.append([entry, str(len(episodes)), ""])
        link_lists[(i, 2)] = episodes
    return Table(
        "Recorded trajectories",
        ["entry", "envs", "step through its first recorded episode on"],
        rows,
        "trajectories",
        "Step through an episode: observation, legal actions with the policy's probabilities (exact in score mode), "
        "the chosen action, reward and value estimate where the policy has one.",
        link_lists=link_lists,
    )


def all_tables(board: Leaderboard) -> list[Table]:
    tables = [*comparison_tables(board), entries_table(board), *atari_tables(board), *openspiel_tables(board)]
    tables += trace_tables(board)
    tables += [t for t in (training_table(board), trajectory_table(board)) if t is not None]
    return tables


def _args(args: dict) -> str:
    return " ".join(f"{k}={v}" for k, v in sorted(args.items())) if args else "(default args)"
