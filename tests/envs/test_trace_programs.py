"""Generated programs: deterministic by task id, the intended features per level, and debug prints that never
raise (thousands of programs, run through the fork server)."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest

from llm_gym.envs.trace.generator import LEVELS, generate
from llm_gym.envs.trace.inject import HELPER, inject
from llm_gym.envs.trace.sandbox import ForkServerSandbox

PROGRAMS_PER_LEVEL = 500  # 2000 injected programs in all


def test_same_task_id_same_program() -> None:
    for level in LEVELS:
        for task_id in (0, 1, 12345, 2**31 - 2):
            assert generate(task_id, level) == generate(task_id, level)
            a, b = inject(generate(task_id, level), task_id), inject(generate(task_id, level), task_id)
            assert a == b


def test_programs_do_not_depend_on_the_interpreter_run() -> None:
    """Same text in a fresh interpreter with a different hash seed (nothing depends on str hashing)."""
    script = "from llm_gym.envs.trace.generator import generate; import sys; sys.stdout.write(generate(77, 3) + generate(5, 4))"
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, check=True).stdout
    assert out == generate(77, 3) + generate(5, 4)


def test_task_ids_give_varied_programs() -> None:
    for level in LEVELS:
        programs = {generate(i, level) for i in range(100)}
        assert len(programs) >= 95


def _features(source: str) -> dict[str, bool]:
    tree = ast.parse(source)
    nodes = list(ast.walk(tree))
    functions = [n for n in nodes if isinstance(n, ast.FunctionDef)]
    recursive = any(
        isinstance(c, ast.Call) and isinstance(c.func, ast.Name) and c.func.id == f.name
        for f in functions
        for c in ast.walk(f)
    )
    return {
        "loop": any(isinstance(n, ast.For | ast.While) for n in nodes),
        "branch": any(isinstance(n, ast.If) for n in nodes),
        "function": bool(functions),
        "comprehension": any(isinstance(n, ast.ListComp | ast.DictComp) for n in nodes),
        "container": any(isinstance(n, ast.List | ast.Dict) for n in nodes),
        "recursion": recursive,
        "class": any(isinstance(n, ast.ClassDef) for n in nodes),
        "exception": any(isinstance(n, ast.Try) for n in nodes),
        "string_op": any(isinstance(n, ast.Constant) and isinstance(n.value, str) for n in nodes),
        "arithmetic": any(isinstance(n, ast.BinOp | ast.AugAssign) for n in nodes),
        "print": any(isinstance(n, ast.Call) and getattr(n.func, "id", "") == "print" for n in nodes),
    }


def test_each_level_has_its_features() -> None:
    seen = {level: {} for level in LEVELS}
    for level in LEVELS:
        for task_id in range(150):
            f = _features(generate(task_id, level))
            for key, value in f.items():
                seen[level][key] = seen[level].get(key, 0) + value
            assert f["print"], (level, task_id)
            if level == 1:  # straight-line arithmetic and strings
                assert f["arithmetic"], task_id
                assert not (f["loop"] or f["branch"] or f["function"] or f["class"] or f["exception"]), task_id
                assert f["string_op"]
            elif level == 2:  # loops and branches
                assert f["loop"] and f["branch"] and not (f["function"] or f["class"] or f["exception"]), task_id
            elif level == 3:  # functions, lists, dicts, comprehensions
                assert f["function"] and f["comprehension"] and f["container"], task_id
                assert not (f["recursion"] or f["class"] or f["exception"]), task_id
            else:  # recursion, classes, exceptions: two of the three in each program
                assert f["recursion"] + f["class"] + f["exception"] >= 2, task_id
    for key in ("recursion", "class", "exception"):
        assert seen[4][key] >= 50, f"level 4 rarely has {key}"


def _check_batch(box: ForkServerSandbox, jobs: list[tuple[int, int]]) -> list[str]:
    problems = []
    for level, task_id in jobs:
        injected = inject(generate(task_id, level), f"{level}:{task_id}", max_prints=4)
        if not injected.tags:
            problems.append(f"level {level} task {task_id}: nothing injected")
            continue
        result = box.run(injected.source)
        if result.status != "ok":
            problems.append(f"level {level} task {task_id}: {result.status} {result.detail}")
        elif not any(tag in result.stdout for tag in injected.tags):
            problems.append(f"level {level} task {task_id}: no debug line printed")
    return problems


def test_injected_prints_never_raise_over_thousands_of_programs() -> None:
    jobs = [(level, task_id) for level in LEVELS for task_id in range(PROGRAMS_PER_LEVEL)]
    boxes = [ForkServerSandbox(), ForkServerSandbox()]  # two servers: both cores work
    try:
        with ThreadPoolExecutor(len(boxes)) as pool:
            batches = pool.map(_check_batch, boxes, [jobs[i :: len(boxes)] for i in range(len(boxes))])
            problems = [p for batch in batches for p in batch]
    finally:
        for box in boxes:
            box.close()
    assert not problems, problems[:10]


TRICKY = {
    "del in a loop": "x = 1\nfor i in range(3):\n    y = i\n    if i == 1:\n        del x\n    z = 2\n",
    "del in a try": "x = 1\ntry:\n    del x\n    1 / 0\nexcept ZeroDivisionError:\n    q = 1\n",
    "except as": "try:\n    1 / 0\nexcept Exception as e:\n    a = 1\nb = 2\nc = 3\n",
    "bound in one branch": "import random\nif random.random() > 2:\n    v = 1\nw = 2\nu = 3\n",
    "loop that never runs": "for i in range(0):\n    k = i\nm = 1\nn = 2\n",
    "global deleted by a call": "x = 1\ndef f():\n    global x\n    del x\ny = 2\nf()\nz = 3\nw = 4\n",
    "nonlocal deleted by a call": "def outer():\n    a = 1\n    def inner():\n        nonlocal a\n        del a\n    b = 2\n    inner()\n    c = 3\n    return c\nouter()\n",
    "semicolons and one-liners": "a = 1; b = 2\nif a: c = 3\nelse: c = 4\nd = c\n",
    "multi-line statements": "s = (1 +\n     2)\nt = '''x\ny'''\nu = [\n  1,\n  2,\n]\n",
    "name mangling": "class C:\n    def m(self, __p):\n        __q = __p\n        return __q\nprint(C().m(3))\n",
    "suppressed exception": "import contextlib\nwith contextlib.suppress(ZeroDivisionError):\n    a = 1 / 0\nb = 2\nc = 3\n",
    "huge int and long str": "x = 10**5000\ny = 'a' * 100\nz = 1\n",
    "shadowed builtins": "type = 3\nrepr = 4\na = 1\nb = 2\n",
    "generator": "def g(n):\n    for i in range(n):\n        j = i * 2\n        yield j\nprint(list(g(3)))\n",
    "match": "x = 2\nmatch x:\n    case 1:\n        y = 'a'\n    case _:\n        y = 'b'\nz = 1\n",
    "tabs, no final newline": "if True:\n\tx = 1\n\ty = 2",
    "return in a branch": "def f(x):\n    if x:\n        return 1\n    else:\n        y = 2\n    z = y\n    return z\nprint(f(0))\n",
    "parameter deleted": "def f(a, b=2, *args, c, **kw):\n    del a\n    d = b\n    return d\nprint(f(1, c=3))\n",
}


@pytest.fixture(scope="module")
def box() -> ForkServerSandbox:
    sandbox = ForkServerSandbox()
    yield sandbox
    sandbox.close()


@pytest.mark.parametrize("name", TRICKY)
def test_injection_follows_definite_assignment(box: ForkServerSandbox, name: str) -> None:
    source = TRICKY[name]
    reference = box.run(source)
    for seed in range(6):
        injected = inject(source, seed, max_prints=6)
        assert injected.tags, "something can always be printed safely here"
        result = box.run(injected.source)
        assert result.status == reference.status, (seed, result.detail, injected.source)
        assert "NameError" not in result.stderr and "UnboundLocalError" not in result.stderr


def test_injection_layout() -> None:
    source = '"""Doc."""\nfrom __future__ import annotations\n# a comment\nx = 1  # one\ny = x + 1\nprint(y)\n'
    injected = inject(source, 0, max_prints=2)
    assert injected.tags == ("__DBG_1__", "__DBG_2__")
    lines = injected.source.splitlines()
    assert lines[:2] == ['"""Doc."""', "from __future__ import annotations"]
    assert injected.source.index(HELPER) > injected.source.index("annotations")
    assert "x = 1  # one" in lines and "# a comment" in lines
    assert [line.split("'")[1] for line in lines if line.startswith("print('__DBG")] == ["__DBG_1__", "__DBG_2__"]


def test_injection_leaves_unsafe_programs_alone() -> None:
    for source in ("print = len\nx = 1\n", "x = 1\nprint(globals())\n", "import sys\nx = 1\nsys.stdout.write('a')\n"):
        assert inject(source, 0).source == source and not inject(source, 0).tags
    assert inject("def broken(:\n", 0).tags == ()
    assert len(inject("\n".join(f"v{i} = {i}" for i in range(30)), 0, max_prints=3).tags) == 3
