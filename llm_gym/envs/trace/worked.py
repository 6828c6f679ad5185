"""Worked solutions of straight-line Trace programs: each statement's value, one operation at a time.

A small model asked for a program's output in one go has to run every expression in its head. Trained on the bare
expected stdout it learns the answer's form and order long before its values (docs/results/sft_trace.md: 44% of computed values
right after two GPU epochs). A worked solution writes the computation out, as a scratchpad does ("Show your work",
Nye et al. 2021, where the traces were of Python programs too): each assignment with its names replaced by their
current values, then one operation at a time; each print with the line it writes. For example::

    y = y + y = 4 + 4 = 8
    flag = len(t) > 4 = len('gold') > 4 = 4 > 4 = False
    print -> __DBG_3__ flag=False y=8
    print(t, len(t)) = print('gold', len('gold')) = print('gold', 4) -> gold 4

``llm-gym demos --set worked=true`` puts it in a ``<think>`` block before the expected stdout; the env's scoring drops
that block, so the answer after it is scored as before.

Only straight-line module code is worked out (Trace level 1: assignments, augmented assignments, prints); anything
else raises :class:`UnsupportedProgram`. Nothing of the program is run here: each step evaluates one operator, call
or slice whose operands are already literal values, from a short list of builtins and ``str`` methods with size
guards, so a data set's program cannot do harm through it. The printed lines come out of that arithmetic, and
:func:`worked_answer` checks them against the sandbox's stdout before a solution is used.
"""

from __future__ import annotations

import ast
import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from llm_gym.errors import LLMGymError

THINK_OPEN, THINK_CLOSE = "<think>", "</think>"

_FUNCTIONS: dict[str, Any] = {
    f.__name__: f for f in (len, str, int, float, bool, round, abs, max, min, ord, chr, sum, sorted)
}
_STR_METHODS = frozenset(("upper", "lower", "title", "capitalize", "swapcase", "replace", "count", "find", "rfind",
    "index", "startswith", "endswith", "strip", "lstrip", "rstrip", "isdigit", "isalpha", "isupper", "islower", "zfill",
    "center", "ljust", "rjust"))  # fmt: skip
_VALUE_TYPES = (int, float, str, bool, type(None))
_MAX_TEXT = 200
"""Longest string a step may produce: level-1 values are short; longer is not worth writing out."""
_MAX_INT_BITS = 64
_SIMPLE_REPR = 60  # the __dbg__ helper's cut (llm_gym.envs.trace.inject.HELPER)


class UnsupportedProgram(LLMGymError, ValueError):
    """The program is not straight-line code this module can work out (the message says where and why)."""


def dbg_text(value: Any) -> str:
    """What the injected ``__dbg__`` helper prints for ``value`` (same rule as ``inject.HELPER``)."""
    text = repr(value) if type(value) in _VALUE_TYPES else type(value).__name__
    return text if len(text) <= _SIMPLE_REPR else type(value).__name__


Part = tuple[str, str]
"""(kind, text) of a piece of a step line: ``statement`` (the program's statement: its target and source, or
``print`` for a debug print), ``substitution`` (the names replaced by their current values), ``operation`` (the
form after one more operation), ``printed`` (the line a print writes) or ``debug`` (a debug print's line). A form's
`` = `` and a print's `` -> `` go with the part they introduce."""

PART_KINDS = ("statement", "substitution", "operation", "printed", "debug")


@dataclass(frozen=True)
class WorkedSolution:
    parts: tuple[tuple[Part, ...], ...]
    """Each statement's line, in order, as its typed parts (their texts joined make the line)."""
    output: str
    """What the prints write, as the program's stdout."""

    @property
    def steps(self) -> tuple[str, ...]:
        """One line per statement, in order."""
        return tuple("".join(text for _, text in step) for step in self.parts)

    @property
    def text(self) -> str:
        return "\n".join(self.steps)


def worked_solution(program: str) -> WorkedSolution:
    """Work out ``program`` statement by statement; :class:`UnsupportedProgram` if it is not straight-line code."""
    try:
        tree = ast.parse(program)
    except SyntaxError as exc:
        raise UnsupportedProgram(f"the program does not parse: {exc.msg} (line {exc.lineno})") from None
    values: dict[str, Any] = {}
    steps: list[tuple[Part, ...]] = []
    output: list[str] = []
    for stmt in tree.body:
        if isinstance(stmt, ast.FunctionDef) and stmt.name == "__dbg__":
            continue  # the injected helper: its effect is dbg_text
        try:
            step, printed = _statement(stmt, program, values)
        except UnsupportedProgram as exc:
            raise UnsupportedProgram(f"line {stmt.lineno}: {exc}") from None
        steps.append(step)
        output.extend(printed)
    return WorkedSolution(tuple(steps), "".join(output))


def worked_answer(program: str, expected: str) -> str:
    """The answer with its work shown: ``<think>`` + the worked solution + ``</think>``, then ``expected``.

    Raises :class:`UnsupportedProgram` where the program is not straight-line code, or where the worked-out output
    differs from ``expected`` (the sandbox's stdout), so a wrong solution is never written."""
    solution = worked_solution(program)
    if solution.output != expected:
        raise UnsupportedProgram("the worked-out output differs from the program's stdout; it is not written")
    return f"{THINK_OPEN}\n{solution.text}\n{THINK_CLOSE}\n{expected}"


# -- statements ------------------------------------------------------------------------------------------------


def _statement(stmt: ast.stmt, program: str, values: dict[str, Any]) -> tuple[tuple[Part, ...], list[str]]:
    """(the step's line as its parts, the lines it prints)."""
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
        name = stmt.targets[0].id
        forms, values[name] = _reduce(stmt.value, values, ast.get_source_segment(program, stmt.value))
        return _chain(f"{name} = ", forms), []
    if isinstance(stmt, ast.AugAssign) and isinstance(stmt.target, ast.Name):
        name = stmt.target.id
        if name not in values:
            raise UnsupportedProgram(f"{name} is updated before it is bound")
        expr = ast.BinOp(ast.Name(name, ast.Load()), stmt.op, stmt.value)
        forms, values[name] = _reduce(expr, values)
        return _chain(f"{name} = ", forms), []
    if isinstance(stmt, ast.Expr) and _is_print(stmt.value):
        return _print(stmt.value, program, values)  # type: ignore[arg-type]
    raise UnsupportedProgram(f"{type(stmt).__name__} is not straight-line code (assignments and prints)")


def _is_print(node: ast.expr) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "print"


def _print(call: ast.Call, program: str, values: dict[str, Any]) -> tuple[tuple[Part, ...], list[str]]:
    options = {"sep": " ", "end": "\n"}
    for keyword in call.keywords:
        if keyword.arg not in options:
            raise UnsupportedProgram(f"print({keyword.arg}=...) is not worked out")
        options[keyword.arg] = _literal_text(keyword.value, values, f"print's {keyword.arg}")
    if any(isinstance(arg, ast.Starred) for arg in call.args):
        raise UnsupportedProgram("print(*...) is not worked out")
    forms, printed = _reduce_all(list(call.args), values, lambda args: ast.unparse(_print_call(args)))
    source = ast.get_source_segment(program, call) if not call.keywords else None  # the sep/end are not shown
    forms = _with_source(source, ast.unparse(_print_call(call.args)), forms)
    line = options["sep"].join(str(v) for v in printed) + options["end"]
    shown = line.removesuffix("\n")
    if _is_debug_print(call):  # the tag and the current values: the names' own lines above hold the work
        return (("statement", "print"), ("debug", f" -> {shown}")), [line]
    return (*_chain("", forms), ("printed", f" -> {shown}")), [line]


def _chain(lead: str, forms: list[tuple[str, str]]) -> tuple[Part, ...]:
    """The parts of ``lead`` + the forms joined by `` = `` (the first form is the statement's source)."""
    (_, source), *later = forms
    return (("statement", lead + source), *((kind, f" = {text}") for kind, text in later))


def _print_call(args: list[ast.expr]) -> ast.Call:
    return ast.Call(ast.Name("print", ast.Load()), list(args), [])


def _is_debug_print(call: ast.Call) -> bool:
    first = call.args[0] if call.args else None
    return isinstance(first, ast.Constant) and isinstance(first.value, str) and first.value.startswith("__DBG_")


def _literal_text(node: ast.expr, values: dict[str, Any], what: str) -> str:
    _, value = _reduce(node, values)
    if not isinstance(value, str):
        raise UnsupportedProgram(f"{what} is not a string")
    return value


# -- expressions -----------------------------------------------------------------------------------------------


def _reduce(expr: ast.expr, values: dict[str, Any], source: str | None = None) -> tuple[list[tuple[str, str]], Any]:
    """The forms of ``expr`` from its text (``source``, else its unparsed form) to its value, each with its kind
    (:func:`_with_source`), and the value."""
    forms, (value,) = _reduce_all([expr], values, lambda args: ast.unparse(args[0]))
    return _with_source(source, ast.unparse(expr), forms), value


def _reduce_all(
    args: list[ast.expr], values: dict[str, Any], render: Callable[[list[ast.expr]], str]
) -> tuple[list[str], list[Any]]:
    """Reduce ``args`` to literals, leftmost first: each form as ``render`` shows the list (names replaced by their
    values, then after each operation), and the values."""
    substitute = _Substitute(values)
    args = [substitute.visit(copy.deepcopy(arg)) for arg in args]
    forms = [render(args)]
    while (pending := next((i for i, arg in enumerate(args) if not _is_literal(arg)), None)) is not None:
        args[pending] = _reduce_once(args[pending])
        forms.append(render(args))
    return forms, [_value(arg) for arg in args]


def _with_source(source: str | None, unparsed: str, forms: list[str]) -> list[tuple[str, str]]:
    """The source text first (the program's own quotes and spacing), then the forms that differ from it, each with
    its kind: the first of ``forms`` is the substitution where it changed the text, the rest are operations."""
    later = _dedupe([unparsed, *forms])[1:]  # a form equal to the unparsed source adds nothing
    substituted = forms[0] != unparsed  # then it is later[0]: it differs from the form before it
    kinds = ["substitution" if k == 0 and substituted else "operation" for k in range(len(later))]
    return [("statement", source or unparsed), *zip(kinds, later, strict=True)]


def _dedupe(forms: list[str]) -> list[str]:
    out: list[str] = []
    for form in forms:
        if not out or form != out[-1]:
            out.append(form)
    return out


class _Substitute(ast.NodeTransformer):
    """Every name read becomes its current value; names of the allowed functions stay."""

    def __init__(self, values: dict[str, Any]) -> None:
        self.values = values

    def visit_Call(self, node: ast.Call) -> ast.AST:
        if isinstance(node.func, ast.Name):  # the function's name stays a name
            node.args = [self.visit(a) for a in node.args]
            node.keywords = [self.visit(k) for k in node.keywords]
            return node
        return self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if node.id not in self.values:
            raise UnsupportedProgram(f"{node.id} is read before it is bound")
        return ast.Constant(self.values[node.id])


def _is_literal(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant)


def _value(node: ast.expr) -> Any:
    assert isinstance(node, ast.Constant)
    return node.value


def _children(node: ast.AST) -> list[tuple[str, int | None, ast.AST]]:
    """The expressions ``node`` needs as values, in evaluation order: (field, index in a list field or None, node)."""
    if isinstance(node, ast.Call):
        out: list[tuple[str, int | None, ast.AST]] = []
        if isinstance(node.func, ast.Attribute):
            out.append(("func", None, node.func))
        out += [("args", i, a) for i, a in enumerate(node.args)]
        return out + [("keywords", i, k.value) for i, k in enumerate(node.keywords)]
    if isinstance(node, ast.Attribute):
        return [("value", None, node.value)]
    if isinstance(node, ast.JoinedStr):
        return [("values", i, v.value) for i, v in enumerate(node.values) if isinstance(v, ast.FormattedValue)]
    if isinstance(node, ast.Slice):
        return [(f, None, getattr(node, f)) for f in ("lower", "upper", "step") if getattr(node, f) is not None]
    out = []
    for field, value in ast.iter_fields(node):
        if isinstance(value, ast.expr):
            out.append((field, None, value))
        elif isinstance(value, list):
            out += [(field, i, v) for i, v in enumerate(value) if isinstance(v, ast.expr)]
    return out


def _ready(node: ast.AST) -> bool:
    """Whether every value ``node`` needs is a literal (an attribute or a slice is ready when its parts are)."""
    return all(_is_literal(child) or (_ready(child) and isinstance(child, (ast.Attribute, ast.Slice)))
               for _, _, child in _children(node))  # fmt: skip


def _reduce_once(node: ast.expr) -> ast.expr:
    """``node`` after one operation: the leftmost innermost one whose operands are literals."""
    if _ready(node):
        return ast.Constant(_evaluate(node))
    for field, index, child in _children(node):
        if _is_literal(child) or (isinstance(child, (ast.Attribute, ast.Slice)) and _ready(child)):
            continue
        reduced = _reduce_once(child) if not isinstance(child, (ast.Attribute, ast.Slice)) else _reduce_part(child)
        _replace(node, field, index, reduced)
        return node
    raise UnsupportedProgram(f"cannot work out {ast.unparse(node)}")  # pragma: no cover - _ready covers it


def _reduce_part(node: ast.Attribute | ast.Slice) -> ast.AST:
    """One operation inside an attribute's object or a slice's bounds (they are not values themselves)."""
    for field, index, child in _children(node):
        if not _is_literal(child):
            _replace(node, field, index, _reduce_once(child))  # type: ignore[arg-type]
            return node
    return node  # pragma: no cover


def _replace(node: ast.AST, field: str, index: int | None, new: ast.AST) -> None:
    if isinstance(node, ast.Call) and field == "keywords":
        node.keywords[index].value = new  # type: ignore[index]
    elif isinstance(node, ast.JoinedStr):
        node.values[index].value = new  # type: ignore[index, union-attr]
    elif index is None:
        setattr(node, field, new)
    else:
        getattr(node, field)[index] = new


# -- one operation on literal values ---------------------------------------------------------------------------


def _evaluate(node: ast.expr) -> Any:
    """The value of one operation whose operands are literals (only the forms level-1 programs use)."""
    _check_operation(node)
    namespace = {**_FUNCTIONS, "__dbg__": dbg_text}
    try:
        code = compile(ast.fix_missing_locations(ast.Expression(body=node)), "<worked>", "eval")
        value = eval(code, {"__builtins__": {}}, namespace)  # noqa: S307
    except Exception as exc:  # the program itself would fail here; such tasks are not served
        raise UnsupportedProgram(f"{ast.unparse(node)} raises {type(exc).__name__}") from None
    if type(value) not in _VALUE_TYPES:
        raise UnsupportedProgram(f"{ast.unparse(node)} is a {type(value).__name__}, not a plain value")
    if isinstance(value, str) and len(value) > _MAX_TEXT:
        raise UnsupportedProgram(f"{ast.unparse(node)[:40]}... makes a string over {_MAX_TEXT} characters")
    if isinstance(value, int) and value.bit_length() > _MAX_INT_BITS:
        raise UnsupportedProgram(f"{ast.unparse(node)[:40]}... makes an integer over {_MAX_INT_BITS} bits")
    return value


def _check_operation(node: ast.expr) -> None:
    """Refuse what is not a plain operator, an allowed call or a slice, and operands that would blow up."""
    if isinstance(node, ast.Call):
        func = node.func
        if isinstance(func, ast.Name) and (func.id in _FUNCTIONS or func.id == "__dbg__"):
            return
        on_text = isinstance(func, ast.Attribute) and isinstance(func.value, ast.Constant)
        if on_text and isinstance(func.value.value, str) and func.attr in _STR_METHODS:  # type: ignore[union-attr]
            _check_width(node)
            return
        raise UnsupportedProgram(f"the call {ast.unparse(func)}(...) is not worked out")
    if isinstance(node, ast.BinOp):
        left, right = _value(node.left), _value(node.right)  # type: ignore[arg-type]
        if isinstance(node.op, ast.Mult) and any(isinstance(v, str) for v in (left, right)):
            count = right if isinstance(left, str) else left
            if not isinstance(count, int) or count > _MAX_TEXT:
                raise UnsupportedProgram(f"{ast.unparse(node)} repeats a string too often to write out")
        if isinstance(node.op, (ast.Pow, ast.LShift)) and (not isinstance(right, int) or abs(right) > _MAX_INT_BITS):
            raise UnsupportedProgram(f"{ast.unparse(node)} is too large to write out")
        if isinstance(node.op, ast.Mod) and isinstance(left, str):
            raise UnsupportedProgram(f"{ast.unparse(node)}: %-formatting is not worked out")
        return
    if isinstance(node, (ast.UnaryOp, ast.Compare, ast.BoolOp, ast.Subscript, ast.JoinedStr)):
        return
    raise UnsupportedProgram(f"{type(node).__name__} ({ast.unparse(node)[:40]}) is not worked out")


def _check_width(call: ast.Call) -> None:
    """``'x'.center(10**9)`` and the like: widths beyond the text limit are refused before they are built."""
    for arg in call.args:
        if isinstance(arg, ast.Constant) and isinstance(arg.value, int) and arg.value > _MAX_TEXT:
            raise UnsupportedProgram(f"{ast.unparse(call)} is too wide to write out")
