"""Statement templates of levels 1 (straight-line arithmetic and strings) and 2 (loops and branches).

Every template appends a few lines at module level to a :class:`~llm_gym.envs.trace.program.Program` and
records the names it binds. Templates must keep programs safe and short: small constants, loops of at most a
handful of iterations, divisors that are non-zero constants, indexes into lists that are never empty.
"""

from __future__ import annotations

from collections.abc import Callable

from llm_gym.envs.trace.program import Program

Template = Callable[[Program], None]


# -- level 1: straight-line arithmetic and strings ------------------------------------------------------------


def new_int(p: Program) -> None:
    name = p.fresh("int")
    value = p.int_expr() if p.bound["int"] and p.rng.random() < 0.6 else str(p.num(2, 20))
    p.emit(f"{name} = {value}")
    p.bind("int", name)


def new_str(p: Program) -> None:
    name = p.fresh("str")
    p.emit(f'{name} = "{p.word()}"')
    p.bind("str", name)


def str_op(p: Program) -> None:
    src = p.some("str") or _ensure(p, "str")
    name = p.fresh("str")
    n = p.some("int")
    forms = [f"{src}.upper()", f"{src}.title()", f"{src}[1:4]", f"{src}[::-1]", f"{src} * 2", f'{src} + "-" + {src}',
             f'{src}.replace("{p.rng.choice("aeiou")}", "_")', f"{src}[-2:] + {src}[:2]", f'"<" + {src} + ">"']  # fmt: skip
    if n:
        forms += [f"{src} + str({n})", f'f"{{{src}}}:{{{n}}}"', f"{src}[:{p.num(1, 4)}] * 2"]
    p.emit(f"{name} = {p.rng.choice(forms)}")
    p.bind("str", name)


def str_metric(p: Program) -> None:
    src = p.some("str") or _ensure(p, "str")
    name = p.fresh("int")
    form = p.rng.choice([f"len({src})", f'{src}.count("{p.rng.choice("aeiou")}")', f'{src}.find("{p.rng.choice("aenr")}")',
                         f"len({src}) * {p.num(2, 5)}", f"ord({src}[0]) - ord(\"a\")"])  # fmt: skip
    p.emit(f"{name} = {form}")
    p.bind("int", name)


def int_update(p: Program) -> None:
    name = p.some("int") or _ensure(p, "int")
    op = p.rng.choice([f"{name} += {p.int_operand()}", f"{name} -= {p.num(1, 9)}", f"{name} *= {p.num(2, 3)}",
                       f"{name} //= {p.num(2, 4)}", f"{name} %= {p.num(5, 13)}"])  # fmt: skip
    p.emit(op)


def new_float(p: Program) -> None:
    a = p.some("int") or _ensure(p, "int")
    name = p.fresh("float")
    p.emit(f"{name} = round({a} / {p.num(3, 8)}, {p.num(1, 3)})")
    p.bind("float", name)


def new_bool(p: Program) -> None:
    name = p.fresh("bool")
    a, s = p.some("int"), p.some("str")
    forms = [f"{a} > {p.int_operand()}", f"{a} % 2 == 0"] if a else []
    forms += [f'"{p.rng.choice("aeiou")}" in {s}', f"len({s}) > {p.num(3, 6)}"] if s else []
    p.emit(f"{name} = {p.rng.choice(forms) if forms else 'True'}")
    p.bind("bool", name)


def show(p: Program) -> None:
    ints, strs, other = p.bound["int"], p.bound["str"], p.bound["float"] + p.bound["bool"]
    forms = []
    if ints:
        forms += [f"print({p.rng.choice(ints)})", f"print({', '.join(p.rng.sample(ints, min(2, len(ints))))})",
                  f"print({p.int_expr()})"]  # fmt: skip
    if strs:
        s = p.rng.choice(strs)
        forms += [f"print({s})", f"print({s}, len({s}))", f"print({s}.upper(), {s}[0])"]
    if ints and strs:
        forms.append(f'print(f"{{{p.rng.choice(strs)}}} -> {{{p.rng.choice(ints)}}}")')
    if other:
        forms.append(f"print({p.rng.choice(other)})")
    p.emit(p.rng.choice(forms) if forms else f'print("{p.word()}")')


def _ensure(p: Program, kind: str) -> str:
    {"int": new_int, "str": new_str}[kind](p)
    return p.bound[kind][-1]


LEVEL1: tuple[Template, ...] = (new_int, new_int, new_str, str_op, str_metric, int_update, new_float, new_bool)


# -- level 2: loops and branches --------------------------------------------------------------------------------


def loop_accumulate(p: Program) -> None:
    acc, limit, k = p.fresh("int"), p.num(4, 7), p.num(2, 3)
    p.emit(f"{acc} = 0", f"for i in range(1, {limit}):")
    p.emit(f"if i % {k} == 0:", depth=1)
    p.emit(f"{acc} += i * {p.num(1, 3)}", depth=2)
    p.emit("else:", depth=1)
    p.emit(f"{acc} -= {p.num(1, 2)}", depth=2)
    p.emit(f"print({acc})")
    p.bind("int", acc)


def loop_while(p: Program) -> None:
    n, steps = p.fresh("int"), p.fresh("int")
    p.emit(f"{n} = {p.num(20, 60)}", f"{steps} = 0", f"while {n} > {p.num(1, 3)} and {steps} < 6:")
    p.emit(f"if {n} % 2 == 0:", depth=1)
    p.emit(f"{n} //= 2", depth=2)
    p.emit("else:", depth=1)
    p.emit(f"{n} -= {p.num(1, 5)}", depth=2)
    p.emit(f"{steps} += 1", depth=1)
    p.emit(f"print({n}, {steps})")
    p.bind("int", n)
    p.bind("int", steps)


def if_chain(p: Program) -> None:
    x = p.some("int") or _ensure(p, "int")
    label = p.fresh("str")
    hi, lo = p.num(10, 20), p.num(3, 9)
    p.emit(f"if {x} > {hi}:")
    p.emit(f'{label} = "{p.word()}"', depth=1)
    p.emit(f"elif {x} > {lo}:")
    p.emit(f'{label} = "{p.word()}"', depth=1)
    p.emit("else:")
    p.emit(f'{label} = "{p.word()}"', depth=1)
    p.emit(f"print({x}, {label})")
    p.bind("str", label)


def char_loop(p: Program) -> None:
    s = p.some("str") or _ensure(p, "str")
    count = p.fresh("int")
    p.emit(f"{count} = 0", f"for ch in {s}:")
    p.emit(f'if ch in "{p.rng.choice(("aeiou", "aei", "ou", "rnt"))}":', depth=1)
    p.emit(f"{count} += 1", depth=2)
    if p.rng.random() < 0.5:
        p.emit("else:", depth=1)
        p.emit("continue", depth=2)
    p.emit(f"print({s}, {count})")
    p.bind("int", count)


def nested_loop(p: Program) -> None:
    acc = p.fresh("int")
    p.emit(f"{acc} = 0", f"for i in range({p.num(2, 3)}):")
    p.emit(f"for j in range({p.num(2, 3)}):", depth=1)
    p.emit("if i == j:", depth=2)
    p.emit("continue", depth=3)
    p.emit(f"{acc} += i * {p.num(2, 4)} + j", depth=2)
    p.emit(f"print({acc})")
    p.bind("int", acc)


def loop_break(p: Program) -> None:
    x = p.some("int") or _ensure(p, "int")
    found = p.fresh("int")
    p.emit(f"{found} = -1", f"for i in range({p.num(5, 9)}):")
    p.emit(f"if i * i > {x}:", depth=1)
    p.emit(f"{found} = i", depth=2)
    p.emit("break", depth=2)
    p.emit(f"print({found})")
    p.bind("int", found)


def build_string(p: Program) -> None:
    out = p.fresh("str")
    p.emit(f'{out} = ""', f"for i in range({p.num(3, 5)}):")
    p.emit(f'{out} += str(i) * {p.num(1, 2)} + "{p.rng.choice("-.,:")}"', depth=1)
    p.emit(f"print({out})")
    p.bind("str", out)


def loop_print(p: Program) -> None:
    x = p.some("int") or _ensure(p, "int")
    p.emit(f"for i in range({p.num(2, 4)}):")
    p.emit(f"print(i, i * {x} % {p.num(5, 11)})", depth=1)


LEVEL2: tuple[Template, ...] = (loop_accumulate, loop_while, if_chain, char_loop, nested_loop, loop_break,
                                build_string, loop_print)  # fmt: skip
LEVEL2_LOOP_BRANCH: tuple[Template, ...] = (loop_accumulate, loop_while, char_loop, nested_loop, loop_break)
