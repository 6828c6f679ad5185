"""Inject ``print('__DBG_k__', ...)`` lines into a program, guided by its AST, so that they can never raise.

Candidate points are (a) right after an assignment (``=``, ``+=``, annotated, ``import``-free), printing the names
it bound, and (b) at the entry of a branch or body (``if``/``elif``/``else``, loop bodies, ``except`` handlers,
function bodies), printing names bound there. A handful of points (``max_prints``) is picked with a seeded RNG and
numbered in source order. A name is printed only where a definite-assignment analysis proves it bound:

* straight-line code adds names; ``del`` removes them;
* after ``if``/``else`` a name is bound if every branch that falls through binds it;
* after a loop, ``with`` block or ``try`` only names bound before it count (the body may not run or may be cut
  short; ``except ... as e`` unbinds ``e``), plus names every way through a ``try`` binds;
* in a function only its parameters and its own locals count, minus ``global``/``nonlocal`` names and names a
  nested function could delete; class bodies get no prints (their methods do).

Values print through a small helper placed at the top of the program, ``__dbg__``: ``repr`` for ``int``,
``float``, ``str``, ``bool`` and ``None`` (when at most 60 characters long), the type name otherwise. It binds
the builtins it uses when defined, so later shadowing cannot break it. Programs that rebind ``print`` or use
dynamic scope tricks (``globals``, ``locals``, ``vars``, ``exec``, ``eval``, ``__dict__``, ``builtins``,
``sys.stdout``) are left as they are. Lines are inserted into the original text, so comments and layout stay.
"""

from __future__ import annotations

import ast
import random
import threading
from dataclasses import dataclass

HELPER = """\
def __dbg__(v, _t=type, _r=repr, _simple=(int, float, str, bool, type(None))):
    try:
        text = _r(v) if _t(v) in _simple else _t(v).__name__
    except Exception:
        text = _t(v).__name__
    return text if len(text) <= 60 else _t(v).__name__
"""
_UNSAFE_NAMES = {"print", "__dbg__", "globals", "locals", "vars", "exec", "eval", "__builtins__", "builtins", "stdout"}
_TERMINAL = (ast.Return, ast.Raise, ast.Break, ast.Continue)
_MAX_NAMES = 3


@dataclass(frozen=True)
class Point:
    """Where one print may go: before line ``line`` (1-based, in the original), indented like ``indent``."""

    line: int
    indent: str
    names: tuple[str, ...]
    kind: str  # "assign" or "entry"


@dataclass(frozen=True)
class Injection:
    """A program with its debug prints."""

    source: str
    """The program to run and show: the helper, then the original lines with the prints inserted."""
    tags: tuple[str, ...]
    """The tags in source order (``__DBG_1__``, ...); empty when nothing could be injected safely."""
    points: tuple[Point, ...]


_PARSE_LOCK = threading.Lock()
"""``ast.parse`` is not thread-safe on CPython 3.11: the AST constructor's recursion counter lives in shared module
state, so two threads parsing at once can fail with ``SystemError: AST constructor recursion depth mismatch``
(CPython gh-106905; seen here when envs generate tasks in a thread pool). Parses in this module take turns."""


def _parse(source: str) -> ast.Module:
    with _PARSE_LOCK:
        return ast.parse(source)


def inject(source: str, seed: object, max_prints: int = 4) -> Injection:
    """Insert at most ``max_prints`` debug prints into ``source`` at points picked with ``random.Random(seed)``."""
    try:
        tree = _parse(source)
    except (SyntaxError, ValueError):
        return Injection(source, (), ())
    lines = source.splitlines(keepends=True)
    collector = _Collector(lines, tree)
    if not max_prints or collector.facts.unsafe:
        return Injection(source, (), ())
    points = collector.module()
    rng = random.Random(f"inject:{seed}")
    chosen = sorted(rng.sample(points, min(max_prints, len(points))), key=lambda p: p.line)
    if not chosen:
        return Injection(source, (), ())
    tags = tuple(f"__DBG_{i}__" for i in range(1, len(chosen) + 1))
    out = list(lines)
    if out and not out[-1].endswith("\n"):
        out[-1] += "\n"
    for point, tag in sorted(zip(chosen, tags, strict=True), key=lambda pt: pt[0].line, reverse=True):
        args = ", ".join(f"'{n}=' + __dbg__({n})" for n in point.names)
        out.insert(point.line - 1, f"{point.indent}print('{tag}', {args})\n")
    head = _helper_line(tree)
    out.insert(head, HELPER + ("\n" if head < len(out) else ""))
    result = "".join(out)
    try:
        _parse(result)
    except SyntaxError:  # a layout we did not foresee: better no prints than a broken program
        return Injection(source, (), ())
    return Injection(result, tags, tuple(chosen))


def _unsafe_node(node: ast.AST) -> bool:
    """Whether ``node`` rebinds ``print``/``__dbg__`` or plays with scopes or stdout in ways we cannot follow."""
    if isinstance(node, ast.Name):
        return node.id in _UNSAFE_NAMES - {"print"} or (node.id == "print" and not isinstance(node.ctx, ast.Load))
    if isinstance(node, ast.Attribute):
        name = node.attr
    elif isinstance(node, ast.alias):
        if node.name == "stdout":
            return True
        name = (node.asname or node.name).split(".")[0]
    elif isinstance(node, ast.arg):
        name = node.arg
    else:
        name = getattr(node, "name", None) or ""  # defs, classes, except handlers, match captures
    return name in _UNSAFE_NAMES or name == "__dict__"


def _helper_line(tree: ast.Module) -> int:
    """0-based line index before which the helper goes: after a module docstring and ``__future__`` imports."""
    index = 0
    for i, stmt in enumerate(tree.body):
        docstring = i == 0 and isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant)
        if docstring or (isinstance(stmt, ast.ImportFrom) and stmt.module == "__future__"):
            index = stmt.end_lineno or 0
        else:
            break
    return index


def _targets(node: ast.AST) -> list[str]:
    """Plain names an assignment target binds (attributes and subscripts bind none)."""
    if isinstance(node, ast.Name):
        return [node.id]
    if isinstance(node, ast.Tuple | ast.List):
        return [n for elt in node.elts for n in _targets(elt.value if isinstance(elt, ast.Starred) else elt)]
    return []


_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)


class _Facts:
    """What one pass over the tree tells the walk: per statement, the names it may unbind in its own scope
    (``del``, ``except ... as``); the names some nested scope declares ``global``/``nonlocal`` and deletes; and
    whether the program is unsafe to instrument at all."""

    def __init__(self, tree: ast.Module) -> None:
        self.unbinds: dict[int, frozenset[str]] = {}
        self.unstable: set[str] = set()
        self.unsafe = False
        self._visit(tree)

    def _visit(self, node: ast.AST) -> tuple[set[str], set[str], set[str]]:
        """(unbound here, declared global/nonlocal here, deleted here), nested scopes not included."""
        gone: set[str] = set()
        declared: set[str] = set()
        deleted: set[str] = set()
        self.unsafe = self.unsafe or _unsafe_node(node)
        if isinstance(node, ast.Delete):
            deleted = {n for t in node.targets for n in _targets(t)}
            gone |= deleted
        elif isinstance(node, ast.ExceptHandler) and node.name:
            gone.add(node.name)
        elif isinstance(node, ast.Global | ast.Nonlocal):
            declared = set(node.names)
        for child in ast.iter_child_nodes(node):
            child_gone, child_declared, child_deleted = self._visit(child)
            if isinstance(child, _SCOPES):  # a scope of its own: may it delete a name of ours?
                self.unstable |= child_declared & child_deleted
                continue
            gone |= child_gone
            declared |= child_declared
            deleted |= child_deleted
        if isinstance(node, ast.stmt):
            self.unbinds[id(node)] = frozenset(gone)
        return gone, declared, deleted

    def deleted(self, stmts: list[ast.stmt]) -> frozenset[str]:
        return frozenset().union(*(self.unbinds[id(s)] for s in stmts))

    @staticmethod
    def declared(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
        names: set[str] = set()
        stack: list[ast.AST] = list(fn.body)
        while stack:
            node = stack.pop()
            if isinstance(node, ast.Global | ast.Nonlocal):
                names.update(node.names)
            stack += [c for c in ast.iter_child_nodes(node) if not isinstance(c, _SCOPES)]
        return names


Bound = dict[str, None]  # insertion-ordered set: most recently bound names last


class _Collector:
    def __init__(self, lines: list[str], tree: ast.Module) -> None:
        self.lines = lines
        self.points: list[Point] = []
        self.facts = _Facts(tree)
        # Names a nested scope may delete behind our back are never printed, in any scope (simple and safe).
        self.excluded: set[str] = set(self.facts.unstable)
        self.tree = tree

    def module(self) -> list[Point]:
        self.block(self.tree.body, {})
        return self.points

    # -- where a line can go -----------------------------------------------------------------------------------

    def _owns_lines(self, stmt: ast.stmt) -> str | None:
        """The statement's indentation if it starts its first line and nothing else sits on its last line."""
        first = self.lines[stmt.lineno - 1].encode()  # AST columns count UTF-8 bytes
        indent = first[: stmt.col_offset].decode("utf-8", "replace")
        if indent.strip():
            return None  # `if x: a = 1`
        last = self.lines[(stmt.end_lineno or stmt.lineno) - 1].encode()
        rest = last[stmt.end_col_offset or len(last) :].decode("utf-8", "replace")
        if rest.strip() and not rest.strip().startswith("#"):
            return None  # `a = 1; b = 2`
        return indent

    def _add(self, line: int, indent: str | None, names: list[str], kind: str) -> None:
        names = [n for n in dict.fromkeys(names) if n not in self.excluded][:_MAX_NAMES]
        if indent is not None and names:
            self.points.append(Point(line, indent, tuple(names), kind))

    def entry(self, body: list[ast.stmt], bound: Bound, prefer: list[str]) -> None:
        first = body[0]
        if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and len(body) > 1:
            first = body[1]  # keep a docstring first
        recent = [n for n in reversed(bound) if n not in prefer][:2]
        self._add(first.lineno, self._owns_lines(first), [p for p in prefer if p in bound] + recent, "entry")

    # -- the definite-assignment walk --------------------------------------------------------------------------

    def block(self, body: list[ast.stmt], bound: Bound) -> Bound | None:
        """Walk a statement list; returns the names bound at its end, or None if it never falls through."""
        bound = dict(bound)
        for stmt in body:
            after = self.stmt(stmt, bound)
            if after is None:
                return None
            bound = after
        return bound

    def stmt(self, stmt: ast.stmt, bound: Bound) -> Bound | None:
        if isinstance(stmt, _TERMINAL):
            return None
        if isinstance(stmt, ast.Assign | ast.AugAssign | ast.AnnAssign):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            names = [n for t in targets for n in _targets(t)]
            if isinstance(stmt, ast.AnnAssign) and stmt.value is None:
                names = []
            bound = {**{k: None for k in bound if k not in names}, **dict.fromkeys(names)}
            end = stmt.end_lineno or stmt.lineno
            extra = [n for n in reversed(bound) if n not in names][:1]
            self._add(end + 1, self._owns_lines(stmt), names + extra, "assign")
            return bound
        if isinstance(stmt, ast.Delete):
            return self._minus(bound, stmt)
        if isinstance(stmt, ast.If):
            return self._if(stmt, bound)
        if isinstance(stmt, ast.For | ast.AsyncFor | ast.While):
            inner = self._minus(bound, stmt)  # a later iteration sees what an earlier one deleted
            loop_names = _targets(stmt.target) if isinstance(stmt, ast.For | ast.AsyncFor) else []
            inner.update(dict.fromkeys(loop_names))
            self.entry(stmt.body, inner, loop_names)
            self.block(stmt.body, inner)
            if stmt.orelse:
                self.block(stmt.orelse, self._minus(bound, stmt))
            return self._minus(bound, stmt)
        if isinstance(stmt, ast.Try | getattr(ast, "TryStar", ast.Try)):
            return self._try(stmt, bound)
        if isinstance(stmt, ast.With | ast.AsyncWith):
            inner = dict(bound)
            for item in stmt.items:
                inner.update(dict.fromkeys(_targets(item.optional_vars) if item.optional_vars else []))
            self.block(stmt.body, inner)
            return self._minus(bound, stmt)
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
            self.function(stmt)
            return bound
        if isinstance(stmt, ast.ClassDef):
            for item in stmt.body:
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                    self.function(item)
            return bound
        if isinstance(stmt, ast.Match):
            return self._minus(bound, stmt)
        return bound  # expressions, imports (not printed: they are modules), pass, global, ...

    def _minus(self, bound: Bound, stmt: ast.stmt) -> Bound:
        gone = self.facts.unbinds[id(stmt)]
        return {k: None for k in bound if k not in gone}

    def _if(self, stmt: ast.If, bound: Bound) -> Bound | None:
        self.entry(stmt.body, bound, [])
        ends = [self.block(stmt.body, bound)]
        if stmt.orelse:
            if not (len(stmt.orelse) == 1 and isinstance(stmt.orelse[0], ast.If)):
                self.entry(stmt.orelse, bound, [])  # a plain else (an elif is an If of its own)
            ends.append(self.block(stmt.orelse, bound))
        else:
            ends.append(dict(bound))
        return self._meet(ends, bound, stmt)

    def _try(self, stmt: ast.Try, bound: Bound) -> Bound | None:
        body_end = self.block(stmt.body, bound)
        ends = [self.block(stmt.orelse, body_end) if body_end is not None and stmt.orelse else body_end]
        body_deleted = self.facts.deleted(stmt.body)
        before_handlers = {k: None for k in bound if k not in body_deleted}
        for handler in stmt.handlers:
            inner = dict(before_handlers)  # the body may have stopped anywhere, after any of its dels
            if handler.name:
                inner[handler.name] = None
            self.entry(handler.body, inner, [handler.name] if handler.name else [])
            ends.append(self.block(handler.body, inner))
        if stmt.finalbody:
            self.block(stmt.finalbody, self._minus(bound, stmt))
        return self._meet(ends, bound, stmt)

    def _meet(self, ends: list[Bound | None], bound: Bound, stmt: ast.stmt) -> Bound | None:
        live = [e for e in ends if e is not None]
        if not live:
            return None
        gone = self.facts.unbinds[id(stmt)]
        return {k: None for k in live[0] if all(k in e for e in live[1:]) and k not in gone}

    def function(self, fn: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        args = fn.args
        params = [a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)]
        params += [a.arg for a in (args.vararg, args.kwarg) if a is not None]
        declared = self.facts.declared(fn)
        outer = self.excluded
        self.excluded = outer | declared
        bound = dict.fromkeys(p for p in params if p not in declared)
        self.entry(fn.body, bound, [p for p in params if p not in ("self", "cls")])
        self.block(fn.body, bound)
        self.excluded = outer
