"""``llm-gym bench``: run a benchmark suite into the episode store and, with ``--leaderboard``, render it."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Annotated, Any

import typer

from llm_gym.bench.merge import merge_store
from llm_gym.bench.ray_runner import ray_module
from llm_gym.bench.runner import run_suite
from llm_gym.bench.store import EpisodeStore
from llm_gym.bench.suite import load_suite
from llm_gym.cli.common import cli_errors, console, err_console, print_json
from llm_gym.cli.options import JsonOption
from llm_gym.errors import ConfigError


@cli_errors
def bench(
    suite: Annotated[str, typer.Option("--suite", help="Suite name in benchmarks/suites (or a .toml path).")],
    entries: Annotated[
        list[str] | None, typer.Option("--entry", help="Run only this entry of the suite (repeatable).")
    ] = None,
    envs: Annotated[list[str] | None, typer.Option("--env", help="Run only this env label (repeatable).")] = None,
    db: Annotated[
        Path | None, typer.Option("--db", help="SQLite episode store (default: OUT/episodes.sqlite).")
    ] = None,
    leaderboard: Annotated[
        bool, typer.Option("--leaderboard", help="Render OUT/leaderboard.md and OUT/index.html from the store.")
    ] = False,
    out: Annotated[Path, typer.Option("--out", help="Leaderboard directory.")] = Path("leaderboard"),
    record: Annotated[
        bool,
        typer.Option("--record-trajectories", help="Store each episode's steps for the trajectory viewer."),
    ] = False,
    ray: Annotated[bool, typer.Option("--ray", help="Play episodes on a local Ray instance started here.")] = False,
    ray_address: Annotated[
        str | None, typer.Option("--ray-address", help="Play episodes on an existing Ray cluster (implies --ray).")
    ] = None,
    workers: Annotated[
        int | None, typer.Option("--workers", help="Ray workers (default: one per CPU Ray sees).")
    ] = None,
    render_only: Annotated[
        bool, typer.Option("--render-only", help="Play nothing; render the leaderboard from the store.")
    ] = False,
    merge: Annotated[
        list[Path] | None,
        typer.Option(
            "--merge",
            help="Copy the episodes another results file holds and this store lacks into it (repeatable); plays "
            "nothing. Add --leaderboard to render the merged store.",
        ),
    ] = None,
    readme: Annotated[
        Path | None,
        typer.Option(
            "--readme",
            help="Write the README's results table (the cells benchmarks/readme_results.toml names) from the store "
            "into this file, between its markers.",
        ),
    ] = None,
    progress: Annotated[bool, typer.Option("--progress/--no-progress", help="Show a progress bar.")] = True,
    as_json: JsonOption = False,
) -> None:
    """Play every (entry, env, seed) episode of a suite that the store does not hold yet; resumable at any point."""
    chosen = load_suite(suite).select(entries or (), envs or ())
    play = not (render_only or merge)  # a merge only adds another store's episodes; it renders with --leaderboard
    _check_play_options(play, render_only, ray=ray or bool(ray_address), workers=workers, record=record)
    if (ray or ray_address) and play:
        ray_module()  # the one-line install hint before anything runs
    spec = _readme_spec(readme, chosen.name) if readme is not None else None  # checked before anything is played
    store_path = db or out / "episodes.sqlite"
    for other in merge or ():  # checked before the store is opened, so a refused merge creates no store file
        if not other.is_file():
            raise ConfigError(f"{other}: no such results file to merge")
    if render_only and not store_path.is_file():
        raise ConfigError(f"--render-only: there is no store at {store_path}; pass --db, or run the suite first")
    with EpisodeStore(store_path) as store:
        merged = []
        if merge:
            merged = [merge_store(store, other, chosen.name) for other in merge]
        report = None
        if play:
            report = run_suite(
                chosen,
                store,
                record=record,
                ray=ray,
                ray_address=ray_address,
                workers=workers,
                progress=progress and not as_json,
            )
        index = None
        if leaderboard or render_only:
            from llm_gym.bench.render import render_leaderboard  # scipy (the bench extra)

            index = render_leaderboard(store, chosen.name, out)
        readme_changed = None
        if readme is not None and spec is not None:
            from llm_gym.bench.readme import table_from_store, write_into_readme  # scipy (the bench extra)

            readme_changed = write_into_readme(readme, table_from_store(store, spec))
        stored = store.count()
    result = {
        "suite": chosen.name,
        "db": str(store_path),
        "stored_episodes": stored,
        "leaderboard": str(index) if index else None,
    }
    if merged:
        result["merged"] = [dataclasses.asdict(m) for m in merged]
    if readme_changed is not None:
        result["readme"] = {"path": str(readme), "changed": readme_changed}
    if report is not None:
        result |= {
            "planned": report.planned,
            "already_stored": report.already_stored,
            "played": report.played,
            "seconds": round(report.seconds, 2),
            "episodes_per_second": round(report.episodes_per_second, 3),
            "skipped": report.skipped,
        }
        if report.exact is not None and report.exact.planned:
            result["exact"] = dataclasses.asdict(report.exact)
    if as_json:
        print_json(result)
        return
    for m in merged:
        console.print(
            f"merged {m.source}: {m.added} of its {m.episodes} episodes of suite {chosen.name} were new "
            f"({m.trajectories} trajectories, {m.entries} new entry records, {m.exact} new exact values); "
            f"store {store_path}"
        )
        if m.left_out:
            others = ", ".join(f"{n} of suite {s}" for s, n in m.left_out.items())
            err_console.print(
                f"note: {m.source}: left out {others} (merge them with --suite)", markup=False, soft_wrap=True
            )
    for name, reason in (report.skipped if report else {}).items():
        err_console.print(f"warning: entry {name!r} skipped: {reason}", markup=False)
    if report is not None:
        console.print(
            f"suite {chosen.name}: {report.played} episodes played, {report.already_stored} already stored "
            f"({report.planned} in the suite) in {report.seconds:.1f} s; store {store_path}"
        )
    if report is not None and report.exact is not None and report.exact.planned:
        done = report.exact
        console.print(
            f"exact values: {done.computed} computed, {done.already_stored} already stored ({done.planned} "
            f"(entry, env) pairs in the suite) in {done.seconds:.1f} s"
        )
        for pair, reason in done.failed.items():
            err_console.print(f"warning: no exact values for {pair}: {reason}", markup=False, soft_wrap=True)
    if index is not None:
        err_console.print(f"leaderboard: {index.parent / 'leaderboard.md'} and {index}")
    if readme_changed is not None:
        err_console.print(f"results table in {readme}: {'rewritten' if readme_changed else 'already up to date'}")


def _readme_spec(readme: Path, suite: str) -> Any:
    """The README table's spec, for this suite, and a README with the markers to write between."""
    from llm_gym.bench.readme import load_spec, readme_block  # scipy (the bench extra)

    spec = load_spec()
    if spec.suite != suite:
        raise ConfigError(f"--readme: the README's results come from suite {spec.suite!r}, not {suite!r}")
    if not readme.is_file() or readme_block(readme) is None:
        raise ConfigError(
            f"--readme {readme}: no such file with a generated results table (see llm_gym/bench/readme.py)"
        )
    return spec


def _check_play_options(play: bool, render_only: bool, *, ray: bool, workers: int | None, record: bool) -> None:
    """Options that shape how episodes are played are refused where none are (rather than ignored)."""
    if workers is not None and not ray:
        raise ConfigError("--workers sets the Ray workers; add --ray (or --ray-address), or drop --workers")
    if workers is not None and workers < 1:
        raise ConfigError(f"--workers must be >= 1, got {workers}")
    given = [name for name, on in (("--ray", ray), ("--record-trajectories", record)) if on]
    if not play and given:
        why = "--render-only" if render_only else "--merge"
        raise ConfigError(f"{why} plays no episode, so {' and '.join(given)} would do nothing: drop it")


def register(app: typer.Typer) -> None:
    app.command("bench")(bench)
