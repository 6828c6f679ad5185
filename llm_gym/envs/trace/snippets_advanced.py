"""Statement templates of levels 3 (functions, lists, dicts, comprehensions) and 4 (recursion, classes,
exceptions). Same rules as :mod:`snippets_basic`: small values, bounded work, nothing that can fail by accident
(level 4 raises exceptions on purpose and always catches them)."""

from __future__ import annotations

from llm_gym.envs.trace.program import Program
from llm_gym.envs.trace.snippets_basic import Template, _ensure

# -- level 3: functions, lists, dicts, comprehensions -----------------------------------------------------------


def new_list(p: Program) -> None:
    name = p.fresh("list")
    size = p.num(4, 6)
    p.emit(f"{name} = [{', '.join(str(p.num(0, 15)) for _ in range(size))}]")
    p.bind("list", name)
    p.list_len[name] = size


def new_words(p: Program) -> None:
    name = p.fresh("words")
    p.emit(f"{name} = [{', '.join(repr(w) for w in p.rng.sample(_WORDS, p.num(3, 4)))}]")
    p.bind("words", name)


def list_ops(p: Program) -> None:
    xs = p.some("list") or _list(p)
    ops = [f"{xs}.append({p.num(0, 20)})", f"{xs}.sort()", f"{xs}.reverse()", f"{xs}[0] = {p.num(0, 20)}",
           f"{xs}.insert(1, {p.num(0, 20)})", f"{xs}[-1] += {p.num(1, 5)}"]  # fmt: skip
    if p.list_len[xs] >= 3:
        ops.append(f"{xs}.pop()")
    op = p.rng.choice(ops)
    p.emit(op)
    p.list_len[xs] += 1 if ("append" in op or "insert" in op) else (-1 if "pop" in op else 0)
    name = p.fresh("int")
    p.emit(
        f"{name} = {p.rng.choice([f'sum({xs})', f'max({xs})', f'min({xs})', f'len({xs})', f'{xs}[-1]', f'{xs}[len({xs}) // 2]'])}"
    )
    p.bind("int", name)
    p.emit(p.rng.choice([f"print({xs})", f"print({xs}[1:3], {name})", f"print(sorted({xs}, reverse=True))"]))


def comprehension(p: Program) -> None:
    xs = p.some("list") or _list(p)
    name = p.fresh("list")
    k = p.num(2, 4)
    form = p.rng.choice([f"[v * {k} for v in {xs}]", f"[v for v in {xs} if v % {k} == 0]", f"[v % {k + 3} for v in {xs}]",
                         f"[v + i for i, v in enumerate({xs})]", f"[v for v in {xs} if v > {p.num(3, 9)}]"])  # fmt: skip
    p.emit(f"{name} = {form}", f"print({name})")
    p.used.add(name)  # not bound as a list: it may be empty, and list templates index into their lists


def dict_build(p: Program) -> None:
    name = p.fresh("dict")
    keys = p.rng.sample(_WORDS, 3)
    p.emit(f"{name} = {{{', '.join(f'{k!r}: {p.num(1, 30)}' for k in keys)}}}")
    new = p.rng.choice([w for w in _WORDS if w not in keys])
    p.emit(f"{name}[{new!r}] = {p.num(1, 9)}", f"{name}[{keys[0]!r}] += {p.num(1, 9)}")
    p.dict_keys[name] = [*keys, new]
    p.bind("dict", name)
    form = p.rng.randrange(3)
    if form == 0:
        p.emit(f"for key, value in {name}.items():")
        p.emit("if value > 10:", depth=1)
        p.emit("print(key, value)", depth=2)
    elif form == 1:
        p.emit(f'print({name}.get("{p.rng.choice(("fig", "lime", keys[1]))}", 0), sorted({name}))')
    else:
        p.emit(f"print(list({name}.values()), len({name}))")


def dict_count(p: Program) -> None:
    s = p.some("str") or _ensure(p, "str")
    name = p.fresh("dict")
    p.emit(f"{name} = {{}}", f"for ch in {s}:")
    p.emit(f"{name}[ch] = {name}.get(ch, 0) + 1", depth=1)
    p.emit(f"print({name})")
    p.bind("dict", name)
    p.dict_keys[name] = []


def dict_comprehension(p: Program) -> None:
    ws = p.some("words") or _words(p)
    name = p.fresh("dict")
    value = p.rng.choice(("len(w)", 'w.count("a")', 'w.find("e")', "w[-1]"))
    p.emit(f"{name} = {{w: {value} for w in {ws}}}", f"print({name})")
    p.bind("dict", name)
    p.dict_keys[name] = []


def function_simple(p: Program) -> None:
    a = p.some("int") or _ensure(p, "int")
    fn = p.rng.choice(("scale", "shift", "mix", "blend"))
    k, c = p.num(2, 4), p.num(1, 9)
    p.emit(f"def {fn}(v, k={k}):", f"    w = v * k + {c}", f"    return w % {p.num(20, 50)}", "")
    r = p.fresh("int")
    p.emit(f"{r} = {fn}({a}) + {fn}({p.num(1, 9)}, {p.num(1, 3)})", f"print({r})")
    p.bind("int", r)


def function_loop(p: Program) -> None:
    xs = p.some("list") or _list(p)
    fn = p.rng.choice(("count_above", "tally", "score"))
    p.emit(f"def {fn}(xs, t):", "    c = 0", "    for x in xs:", "        if x > t:", "            c += x - t",
           "    return c", "")  # fmt: skip
    r = p.fresh("int")
    p.emit(f"{r} = {fn}({xs}, {p.num(3, 9)})", f"print({r})")
    p.bind("int", r)


def function_words(p: Program) -> None:
    ws = p.some("words") or _words(p)
    p.emit("def describe(word, n):", '    return word[:n].upper() + "/" + str(len(word))', "")
    p.emit(f"for i, w in enumerate({ws}):")
    p.emit("print(i, describe(w, i + 1))", depth=1)
    p.emit(f'print("-".join(sorted({ws})))')


def _list(p: Program) -> str:
    new_list(p)
    return p.bound["list"][-1]


def _words(p: Program) -> str:
    new_words(p)
    return p.bound["words"][-1]


LEVEL3_DATA: tuple[Template, ...] = (list_ops, comprehension, dict_build, dict_count, dict_comprehension)
LEVEL3_FUNCTIONS: tuple[Template, ...] = (function_simple, function_loop, function_words)


# -- level 4: recursion, classes, exceptions --------------------------------------------------------------------

_RECURSIVE = (
    ("fact", ["def fact(n):", "    if n <= 1:", "        return 1", "    return n * fact(n - 1)"], (3, 6)),
    ("fib", ["def fib(n):", "    if n < 2:", "        return n", "    return fib(n - 1) + fib(n - 2)"], (3, 6)),
    ("digits", ["def digits(n):", "    if n < 10:", "        return n", "    return n % 10 + digits(n // 10)"], (100, 9999)),
    ("power", ["def power(b, e):", "    if e == 0:", "        return 1", "    return b * power(b, e - 1)"], (2, 5)),
    ("gcd", ["def gcd(a, b):", "    if b == 0:", "        return a", "    return gcd(b, a % b)"], (12, 90)),
    ("rev", ["def rev(s):", "    if len(s) <= 1:", "        return s", "    return rev(s[1:]) + s[0]"], None),
    ("countdown", ["def countdown(n):", "    if n == 0:", '        print("go")', "        return 0",
                   "    print(n)", "    return n + countdown(n - 1)"], (2, 4)),
)  # fmt: skip


def recursion(p: Program) -> None:
    name, body, bounds = p.rng.choice(_RECURSIVE)
    p.emit(*body, "")
    r = p.fresh("int") if name != "rev" else p.fresh("str")
    if name == "rev":
        call = f'rev("{p.word()}")'
    elif name in ("power", "gcd"):
        call = f"{name}({p.num(*bounds)}, {p.num(2, 5) if name == 'power' else p.num(*bounds)})"
    else:
        call = f"{name}({p.num(*bounds)})"
    p.emit(f"{r} = {call}", f"print({r})")
    p.bind("str" if name == "rev" else "int", r)


def class_counter(p: Program) -> None:
    p.emit("class Counter:", "    def __init__(self, start):", "        self.value = start", "        self.calls = 0", "",
           "    def add(self, k):", "        self.value += k", "        self.calls += 1", "        return self.value", "")  # fmt: skip
    obj = p.rng.choice(("counter", "ctr", "clock"))
    p.emit(f"{obj} = Counter({p.num(0, 9)})", f"for i in range({p.num(2, 4)}):")
    p.emit(f"{obj}.add(i * {p.num(1, 3)})", depth=1)
    p.emit(f"print({obj}.value, {obj}.calls)")


def class_stack(p: Program) -> None:
    p.emit("class Stack:", "    def __init__(self):", "        self.items = []", "",
           "    def push(self, x):", "        self.items.append(x)", "",
           "    def pop(self):", "        if not self.items:", '            raise IndexError("empty")',
           "        return self.items.pop()", "")  # fmt: skip
    st = p.rng.choice(("stack", "pile"))
    p.emit(f"{st} = Stack()", f"for w in {[p.word() for _ in range(p.num(2, 3))]!r}:")
    p.emit(f"{st}.push(w)", depth=1)
    top = p.fresh("str")
    p.emit(f"{top} = {st}.pop()", f"print({top}, len({st}.items))")
    p.bind("str", top)


def class_inherit(p: Program) -> None:
    p.emit("class Shape:", "    def __init__(self, size):", "        self.size = size", "",
           "    def area(self):", "        return self.size * self.size", "",
           "    def __repr__(self):", '        return type(self).__name__ + "(" + str(self.size) + ")"', "",
           "class Tri(Shape):", "    def area(self):", "        return self.size * self.size // 2", "")  # fmt: skip
    p.emit(f"shapes = [Shape({p.num(2, 6)}), Tri({p.num(2, 6)})]", "for sh in shapes:")
    p.emit("print(sh, sh.area())", depth=1)


def try_parse(p: Program) -> None:
    r = p.fresh("int")
    text = p.rng.choice([str(p.num(10, 99)), f"{p.num(1, 9)}x", "", f"-{p.num(1, 9)}"])
    p.emit("try:", f'    {r} = int("{text}")', "except ValueError as err:", f"    {r} = -1",
           '    print("bad:", err)', f"print({r})")  # fmt: skip
    p.bind("int", r)


def try_divide(p: Program) -> None:
    a = p.some("int") or _ensure(p, "int")
    d, r = p.fresh("int"), p.fresh("int")
    p.emit(f"{d} = {a} % {p.num(2, 3)}", "try:", f"    {r} = {p.num(10, 50)} // {d}",
           "except ZeroDivisionError:", f"    {r} = 0", "finally:", f'    print("checked", {d})', f"print({r})")  # fmt: skip
    p.bind("int", d)
    p.bind("int", r)


def try_custom(p: Program) -> None:
    limit = p.num(5, 15)
    p.emit("class TooBig(Exception):", "    pass", "", "def check(v):", f"    if v > {limit}:",
           '        raise TooBig("too big: " + str(v))', "    return v * 2", "")  # fmt: skip
    p.emit(f"for v in [{p.num(1, 9)}, {p.num(10, 20)}, {p.num(1, 20)}]:")
    p.emit("try:", depth=1)
    p.emit("print(check(v))", depth=2)
    p.emit("except TooBig as e:", depth=1)
    p.emit('print("error", e)', depth=2)


def try_lookup(p: Program) -> None:
    d = p.some("dict")
    if d is None:
        dict_build_plain(p)
        d = p.bound["dict"][-1]
    key = p.rng.choice([*p.dict_keys[d][:1], "fig", "lime"]) if p.dict_keys[d] else "fig"
    r = p.fresh("int")
    p.emit("try:", f'    {r} = {d}["{key}"]', "except KeyError as e:", '    print("missing", e)', f"    {r} = 0",
           "else:", '    print("found")', f"print({r})")  # fmt: skip
    p.bind("int", r)


def dict_build_plain(p: Program) -> None:
    name = p.fresh("dict")
    keys = p.rng.sample(_WORDS, 2)
    p.emit(f"{name} = {{{', '.join(f'{k!r}: {p.num(1, 30)}' for k in keys)}}}")
    p.bind("dict", name)
    p.dict_keys[name] = keys


LEVEL4_RECURSION: tuple[Template, ...] = (recursion,)
LEVEL4_CLASSES: tuple[Template, ...] = (class_counter, class_stack, class_inherit)
LEVEL4_EXCEPTIONS: tuple[Template, ...] = (try_parse, try_divide, try_custom, try_lookup)

_WORDS = ("apple", "banana", "cherry", "lemon", "mango", "pear", "plum", "kiwi", "grape", "melon", "olive", "peach")
