"""Trace sandbox programs/s: the warm fork server against a fresh interpreter per program, in the same run.

Both run the same generated Trace programs (debug prints injected, all four levels) under the same limits and
the same confinement (seccomp, network and read-only mount namespaces with a capped private tmpfs, Landlock, a
dedicated uid, rlimits, audit hook): the fresh-interpreter baseline starts ``python -s child.py`` per program,
the fork server forks its warm interpreter. A plain
``python -c`` per program, without any isolation, is measured too, for context.

Two measurements:

* wall clock: the runners take turns program by program (so load on a shared machine hits them alike);
  programs/s is each runner's program count over its total time;
* CPU time: each runner alone, CPU seconds of every process it started (server and children included) per
  program, which depends much less on what else the machine is doing.

Outputs of the two sandboxes are checked to be identical.

    python benchmarks/trace_throughput.py [--programs 80] [--repeats 2]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import time
from collections.abc import Callable

from llm_gym.envs.trace.generator import LEVELS, generate
from llm_gym.envs.trace.inject import inject
from llm_gym.envs.trace.sandbox import ForkServerSandbox, FreshInterpreterSandbox, SandboxLimits

GOAL = 10.0
Runner = Callable[[str], tuple[str, str]]


def programs(n: int) -> list[str]:
    return [inject(generate(i, LEVELS[i % 4]), i).source for i in range(n)]


def plain(source: str) -> tuple[str, str]:
    done = subprocess.run([sys.executable, "-c", source], capture_output=True, text=True, timeout=10)
    return ("ok" if done.returncode == 0 else "error", done.stdout)


def sandboxed(box: ForkServerSandbox | FreshInterpreterSandbox, limits: SandboxLimits) -> Runner:
    def run(source: str) -> tuple[str, str]:
        result = box.run(source, limits=limits)
        return result.status, result.stdout

    return run


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def cpu_ms(sources: list[str], make: Callable[[], tuple[object, Runner]]) -> float:
    """CPU milliseconds of running ``sources`` alone: every process started (reaped by the end) plus this one."""
    before = children_cpu() + time.process_time()
    box, run = make()
    for source in sources:
        run(source)
    if box is not None:
        box.close()  # a fork server's CPU, its children's included, is counted once it is reaped
    return 1000 * (children_cpu() + time.process_time() - before)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--programs", type=int, default=80, help="programs per pass")
    parser.add_argument("--repeats", type=int, default=2, help="passes over the programs (wall clock)")
    args = parser.parse_args()
    limits = SandboxLimits()
    sources = programs(args.programs)
    load_before = os.getloadavg()[0]
    fork, fresh = ForkServerSandbox(), FreshInterpreterSandbox()
    fork.run("pass")  # started outside the measurement, as a long-lived env would have it
    runners: dict[str, Runner] = {
        "fork_server": sandboxed(fork, limits),
        "fresh_interpreter": sandboxed(fresh, limits),
        "plain_python_c": plain,
    }
    seconds = dict.fromkeys(runners, 0.0)
    outputs: dict[str, list[tuple[str, str]]] = {name: [] for name in runners}
    for repeat in range(args.repeats):
        for source in sources:
            for name, run in runners.items():
                start = time.perf_counter()
                result = run(source)
                seconds[name] += time.perf_counter() - start
                if repeat == 0:
                    outputs[name].append(result)
    fork.close()
    fresh.close()
    rate = {name: args.repeats * len(sources) / total for name, total in seconds.items()}
    makers: dict[str, Callable[[], tuple[object, Runner]]] = {
        "fork_server": lambda: (box := ForkServerSandbox(), sandboxed(box, limits)),
        "fresh_interpreter": lambda: (box := FreshInterpreterSandbox(), sandboxed(box, limits)),
        "plain_python_c": lambda: (None, plain),
    }
    startup = cpu_ms(["pass"], makers["fork_server"])  # starting and stopping the server, counted apart
    cpu = {name: cpu_ms(sources, make) / len(sources) for name, make in makers.items()}
    cpu["fork_server"] -= startup / len(sources)
    ratio = rate["fork_server"] / rate["fresh_interpreter"]
    report = {
        "programs": args.programs,
        "repeats": args.repeats,
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "load_average_1m_before_after": [round(load_before, 2), round(os.getloadavg()[0], 2)],
        "isolation": fork.isolation,
        "programs_per_second": {k: round(v, 1) for k, v in rate.items()},
        "ratio_fork_server_to_fresh_interpreter": round(ratio, 2),
        "ratio_fork_server_to_plain_python_c": round(rate["fork_server"] / rate["plain_python_c"], 2),
        "cpu_ms_per_program": {k: round(v, 2) for k, v in cpu.items()},
        "fork_server_start_stop_cpu_ms": round(startup, 1),
        "cpu_ratio_fresh_interpreter_to_fork_server": round(cpu["fresh_interpreter"] / cpu["fork_server"], 2),
        "goal": GOAL,
        "meets_goal": ratio >= GOAL,
        "same_outputs": outputs["fork_server"] == outputs["fresh_interpreter"],
        "all_ok": all(status == "ok" for status, _ in outputs["fork_server"]),
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
