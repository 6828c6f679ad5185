"""``llm-gym serve`` under 64 concurrent sessions on loopback, against in-process stepping in the same run.

The real command serves each env id in a subprocess; one client process opens N sessions at once with
openenv-core's async ``GenericEnvClient`` and plays a seeded answer sequence in each (legal action names, resetting
with the next seed when an episode ends). Then the same answers are stepped in-process, the way llm-gym's own LM
agents step an env (``TextActions`` over ``llm_gym.make``), one session after another. Prints JSON per env:

* ``served`` / ``in_process``: steps/s and p50/p99 step latency. Served: from the moment all N sessions have made
  their env and reset once, until the last step; a step's latency is its round trip as one session saw it while all
  N were in flight. In-process: ``env.step`` (and the resets between episodes, which the served run does too);
* ``served_one_session_alone``: the round trip of one session with the server to itself (before the N);
* ``ratio``: served over in-process for each of the three;
* ``lost`` (steps a session sent without an answer), ``mixed`` (sessions whose trajectory differs from its
  in-process replay) and the server's own count of sessions served: all must be 0, 0 and N + 1.

    python benchmarks/serve_throughput.py [--sessions 64] [--steps 100] [--env LLMBreakout-v0 ...]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from openenv import GenericEnvClient

from llm_gym.actions import TextActions
from llm_gym.envs.catalog import make
from llm_gym.envs.protocol import takes_text
from llm_gym.lm.prompts import observation_text

DEFAULT_ENVS = ("LLMBreakout-v0", "OpenSpiel-tic_tac_toe-v0")
Step = tuple[str, float, bool]


def session_seed(session: int, episode: int) -> int:
    return session * 1000 + episode


def answer_for(rng: np.random.Generator, observation: dict[str, Any]) -> str:
    names = observation["action_names"]
    return str(names[int(rng.integers(len(names)))]) if names else "0\n"


async def play_session(url: str, session: int, steps: int, ready: Any = None) -> dict[str, Any]:
    """One session's seeded play: its answers, per-episode trajectories and step latencies. With ``ready`` (a
    barrier), the session makes its env and resets once, then waits there until every session has."""
    rng = np.random.default_rng(session)
    client = GenericEnvClient(base_url=url, message_timeout_s=300)
    episodes: list[dict[str, Any]] = []
    latencies: list[float] = []
    sent = answered = 0
    async with client:
        while sent < steps:
            seed = session_seed(session, len(episodes))
            result = await client.reset(seed=seed)
            if ready is not None and not episodes:
                await ready.wait()
            episode = {"seed": seed, "answers": [], "steps": [(result.observation["text"], 0.0, False)]}
            episodes.append(episode)
            while not result.done and sent < steps:
                answer = answer_for(rng, result.observation)
                sent += 1
                start = time.perf_counter()
                result = await client.step({"text": answer})
                latencies.append(time.perf_counter() - start)
                answered += 1
                episode["answers"].append(answer)
                episode["steps"].append((result.observation["text"], float(result.reward), bool(result.done)))
    return {"episodes": episodes, "latencies": latencies, "lost": sent - answered}


def replay(env_id: str, episodes: list[dict[str, Any]]) -> tuple[list[list[Step]], list[float], float]:
    """The same answers stepped in-process: each episode's trajectory, every ``env.step``'s seconds, and the seconds
    of all steps and of the resets after the first (what the served rate counts too; making the env is left out)."""
    base = make(env_id)
    env = base if takes_text(base) else TextActions(base)
    trajectories, latencies, resets = [], [], 0.0
    for k, episode in enumerate(episodes):
        start = time.perf_counter()
        observation, _ = env.reset(seed=episode["seed"])
        resets += (time.perf_counter() - start) if k else 0.0
        steps: list[Step] = [(observation_text(observation), 0.0, False)]
        for answer in episode["answers"]:
            start = time.perf_counter()
            observation, reward, terminated, truncated, _ = env.step(answer)
            latencies.append(time.perf_counter() - start)
            steps.append((observation_text(observation), float(reward), bool(terminated or truncated)))
        trajectories.append(steps)
    env.close()
    return trajectories, latencies, sum(latencies) + resets


def start_server(env_id: str, sessions: int) -> tuple[subprocess.Popen, str]:
    command = [sys.executable, "-m", "llm_gym.cli", "serve", "--env", env_id, "--port", "0"]
    proc = subprocess.Popen(
        [*command, "--max-sessions", str(sessions)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    line = proc.stdout.readline() if proc.stdout else ""
    if "http://" not in line:
        proc.kill()
        raise SystemExit(f"llm-gym serve did not start: {line}{proc.stderr.read() if proc.stderr else ''}")
    return proc, line.split(" on ", 1)[1].split()[0]


def stop_server(proc: subprocess.Popen) -> int:
    """Stop the server; the number of sessions it says it served."""
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    last = err.strip().splitlines()[-1] if err.strip() else ""
    return int(last.split("; ")[1].split()[0]) if "sessions served" in last else -1


def stats(latencies: list[float], steps: int, seconds: float) -> dict[str, float]:
    ms = np.array(latencies) * 1000
    return {
        "steps": steps,
        "steps_per_s": round(steps / seconds, 1),
        "p50_ms": round(float(np.percentile(ms, 50)), 4),
        "p99_ms": round(float(np.percentile(ms, 99)), 4),
    }


def bench_env(env_id: str, sessions: int, steps: int) -> dict[str, Any]:
    proc, url = start_server(env_id, sessions)
    try:
        alone = asyncio.run(play_session(url, sessions, steps))  # one session with the server to itself

        async def all_sessions() -> tuple[list[dict[str, Any]], float]:
            ready = asyncio.Barrier(sessions + 1)
            playing = [asyncio.create_task(play_session(url, s, steps, ready)) for s in range(sessions)]
            await ready.wait()  # every session has made its env and reset: time the stepping from here
            start = time.perf_counter()
            played = await asyncio.gather(*playing)
            return played, time.perf_counter() - start

        played, served_seconds = asyncio.run(all_sessions())
    finally:
        served_count = stop_server(proc)
    served_latencies = [x for p in played for x in p["latencies"]]
    replay_latencies: list[float] = []
    in_process_seconds = 0.0
    mixed = 0
    for session in [*played, alone]:
        trajectories, latencies, seconds = replay(env_id, session["episodes"])
        if session is not alone:
            replay_latencies += latencies
            in_process_seconds += seconds
        mixed += any(t != e["steps"] for t, e in zip(trajectories, session["episodes"], strict=True))
    served = stats(served_latencies, len(served_latencies), served_seconds)
    local = stats(replay_latencies, len(replay_latencies), in_process_seconds)
    one = stats(alone["latencies"], len(alone["latencies"]), sum(alone["latencies"]))
    return {
        "sessions": sessions,
        "episodes": sum(len(p["episodes"]) for p in played),
        "served": served,
        "in_process": local,
        "ratio": {
            "steps_per_s": round(served["steps_per_s"] / local["steps_per_s"], 4),
            "p50": round(served["p50_ms"] / local["p50_ms"], 1),
            "p99": round(served["p99_ms"] / local["p99_ms"], 1),
        },
        "served_one_session_alone": {"p50_ms": one["p50_ms"], "p99_ms": one["p99_ms"]},
        "lost": sum(p["lost"] for p in [*played, alone]),
        "mixed": mixed,
        "sessions_served_by_server": served_count,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=64, help="concurrent sessions")
    parser.add_argument("--steps", type=int, default=100, help="steps per session")
    parser.add_argument("--env", action="append", help="env id (repeatable); default: Breakout text, tic-tac-toe")
    args = parser.parse_args()
    report: dict[str, Any] = {
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "machine": platform.machine(),
        "envs": {},
    }
    for env_id in args.env or DEFAULT_ENVS:
        report["envs"][env_id] = bench_env(env_id, args.sessions, args.steps)
    print(json.dumps(report, indent=2))
    failed = [
        e
        for e, r in report["envs"].items()
        if r["lost"] or r["mixed"] or r["sessions_served_by_server"] != args.sessions + 1
    ]
    if failed:
        raise SystemExit(f"sessions lost or mixed on {', '.join(failed)}")


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    main()
