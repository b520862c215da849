"""The fuzz families of issue 36: generated programs over the kinds of values a trace reads,
text made by C code, mutations of the caller's objects and number ops whose result type depends
on values. The programs and the call sequences are drawn here; ``fuzz_family_runner`` runs them
against eager.

A program is one family's: an ``nn.Module`` whose ``forward(self, x, a, n, m, r, acc, cfg, d)``
runs some statements (mutations) and returns a tuple of terms. ``a`` is an argument of any kind
(``ARGUMENT_VALUES``), ``n``/``m`` ints (negative, 0, 1, huge), ``r`` a float (NaN, infinities,
signed zeros), ``acc``/``cfg``/``d`` a list, a namespace or dataclass and a dict the statements
mutate, beside the module's own attributes and the globals ``G`` (a list) and ``GD`` (a dict).
Between calls the sequence changes ``a`` in kind, in sign, to a fresh object equal to the last
(identity changed, value equal) or in place (identity kept, value changed), and the sizes and
numbers; the mutated state is either kept or replaced by a fresh equal one.
"""

from __future__ import annotations

import dataclasses
import enum
import fractions
import functools
import math
import types
from dataclasses import dataclass, field

import torch
from hypothesis import strategies as st


class Mode(enum.Enum):
    A = 2
    B = 3


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 3


@dataclasses.dataclass
class Cfg:
    k: int = 2
    s: str = "a"
    count: int = 1
    hist: list = dataclasses.field(default_factory=lambda: [2])


def _triple(t):
    return t * 3


def _copy_of(f):
    """A new function object with ``f``'s code: equal behaviour, another identity."""
    return types.FunctionType(f.__code__, f.__globals__, f.__name__, f.__defaults__, f.__closure__)


# Each kind: factories of its values; each call builds a new object (an int or float through
# its text, so even a big int is a fresh object), except where identity is the meaning.
def _fresh(v):
    if type(v) in (int, float):
        return lambda: type(v)(repr(v))
    if isinstance(v, str):
        return lambda: "".join(list(v))
    if isinstance(v, bytes):
        return lambda: bytes(bytearray(v))
    return lambda: v


ARGUMENT_VALUES = {
    "int": [_fresh(v) for v in (0, 1, -1, 2, -3, 5, 257, 2**40)],
    "float": [_fresh(v) for v in (0.0, -0.0, 0.5, -1.5, 2.0, math.nan, math.inf, -math.inf, 1e300)],
    "bool": [_fresh(True), _fresh(False)],
    "str": [_fresh(v) for v in ("", "a", "relu", "12")],
    "bytes": [_fresh(v) for v in (b"", b"ab", b"\x00\xff")],
    "enum": [_fresh(v) for v in (Mode.A, Mode.B, Level.LOW, Level.HIGH)],
    "callable": [_fresh(torch.relu), _fresh(torch.tanh), _fresh(torch.neg), _fresh(_triple), lambda: _copy_of(_triple),
                 lambda: functools.partial(torch.mul, other=2)],
    "class": [_fresh(v) for v in (int, float, str, Mode, Cfg)],
    "namespace": [lambda: types.SimpleNamespace(k=2, s="a"), lambda: types.SimpleNamespace(k=-1, s="bb"),
                  lambda: Cfg(k=3)],
    "none": [_fresh(None)],
    "slice": [lambda: slice(None, 2), lambda: slice(1, None), lambda: slice(None, None, 2), lambda: slice(-2, None),
              lambda: slice(0, 0)],
    "range": [lambda: range(3), lambda: range(1, 4), lambda: range(0), lambda: range(5, 0, -2)],
    "dtype": [_fresh(v) for v in (torch.float32, torch.float64, torch.int64, torch.bool)],
    "device": [lambda: torch.device("cpu")],
    "complex": [lambda: complex(1, 2), lambda: complex(0, -0.5)],
    "fraction": [lambda: fractions.Fraction(1, 3), lambda: fractions.Fraction(-2)],
    # (lists and tuples of ints of one length: another value passes the structure check; a tuple
    # made afresh, not a constant shared with the program's code)
    "tuple": [lambda: (2, "a"), lambda: (Mode.A, 1.5), lambda: (torch.relu, None), lambda: (slice(1, None),),
              lambda: tuple([1, 2]), lambda: tuple([2, 2]), lambda: tuple([2, 1])],
    "list": [lambda: [1, 2], lambda: [-1, "s", None], lambda: [torch.float64], lambda: [], lambda: [2, 2],
             lambda: [2, 1]],
    "dict": [lambda: {"k": 2, "s": "a"}, lambda: {"k": -1}, lambda: {"act": torch.tanh, "k": 1}, lambda: {}],
}
SIGNED = ("int", "float", "complex", "fraction")


def build_argument(spec: tuple[str, int, bool]):
    kind, index, negated = spec
    value = ARGUMENT_VALUES[kind][index]()
    return -value if negated else value


def mutate_argument(a) -> bool:
    """Changes ``a`` in place (identity kept, value changed); False where its kind cannot be."""
    if isinstance(a, list):
        a.append(3)
    elif isinstance(a, dict):
        a["k"] = a["k"] + 1 if type(a.get("k")) is int else 1
    elif isinstance(a, (types.SimpleNamespace, Cfg)):
        a.k += 1
    else:
        return False
    return True


# ---------------------------------------------------------------------------------------------
# Templates per family
# ---------------------------------------------------------------------------------------------

ARGUMENT_TERMS = (
    "type(a).__name__", "(x * 2 if a else x)", "(a == 1, a == 0, a is None, a is True)", "isinstance(a, int)",
    "(x * a if type(a) in (int, float) and a == a and abs(a) < 1e6 else x + 1)",
    "(x[:a] * 1 if type(a) is int else x * 1)", "(x[a] * 1 if isinstance(a, slice) else x * 1)",
    "(x.to(a) if isinstance(a, torch.dtype) else x * 1)", "(a(x) if callable(a) and not isinstance(a, type) else x * 1)",
    "(len(a) if isinstance(a, (str, bytes, list, tuple, dict, range)) else -1)",
    "(str(a) if not callable(a) else getattr(a, '__name__', 'anon'))",
    "(x * a.value if isinstance(a, enum.Enum) else x * 1)", "(x * a.value if a is Mode.A else x - 1)",
    "(x * a.k if hasattr(a, 'k') and type(a.k) is int else x * 1)",
    "(sum(v for v in a if type(v) is int) if isinstance(a, (list, tuple, range)) else 0)",
    "(a.get('k', 0) if isinstance(a, dict) else 0)", "(x * a['k'] if isinstance(a, dict) and 'k' in a else x * 1)",
    "(a[0] if isinstance(a, (list, tuple, str, bytes, range)) and len(a) > 0 else None)",
    "((a.start, a.stop) if isinstance(a, (range, slice)) else None)",
    "(a.is_floating_point if isinstance(a, torch.dtype) else None)", "(a.type if isinstance(a, torch.device) else None)",
    "(a.upper() if isinstance(a, str) else None)", "(a.hex() if isinstance(a, bytes) else None)",
    "(a < 2 if type(a) in (int, float, bool) else None)", "(a(3) if a in (int, float, str) else None)",
    "(isinstance(3, a) if isinstance(a, type) else None)", "(math.isfinite(a) if type(a) in (int, float) else None)",
    "(-a if type(a) in (int, float, bool, complex, fractions.Fraction) else None)",
    "(a + 1 if type(a) in (int, bool) or isinstance(a, enum.IntEnum) else None)",
    "(x * float(a) if type(a) in (int, float, fractions.Fraction) and a == a else x * 1)",
    "(x * abs(a) if type(a) is complex else x * 1)", "(list(a) if isinstance(a, (range, tuple, bytes)) else None)",
    "(sorted(a) if isinstance(a, dict) else None)", "(dataclasses.is_dataclass(a), isinstance(a, types.SimpleNamespace))",
    "(x * len(a) if isinstance(a, (str, bytes)) else x * 1)", "(a == a)", "(a in (0, 1, 'a', None, Mode.A))",
    "(a.s if hasattr(a, 's') else '')", "(x * a[-1] if isinstance(a, list) and a and type(a[-1]) is int else x * 1)",
    # a container's numbers hashed, printed or compared by C code, never read one by one (issue 51)
    "(len(set(a)) if isinstance(a, (list, tuple)) else -1)",
    "(sorted({*a}) if isinstance(a, list) and all(type(v) is int for v in a) else None)",
    "(list(dict.fromkeys(a)) if isinstance(a, (list, tuple)) else None)",
    "(x.new_zeros(len(frozenset(a))) if isinstance(a, (list, tuple)) else x * 1)",
    "(f'{a}' if isinstance(a, (list, tuple, dict)) else '')", "(a == [1, 2], a == (2, 2))",
)
# Text is returned through ``str``/``len``/``.hex()``: a ``bytes`` output fails in stock thunder
# under constant values too, independently of how the text was made. A shape rendered is eager's
# ``torch.Size`` text (issue 51: thunder's shape is a tuple, ``(2, 3)`` in stock thunder).
TEXT_TERMS = (
    "str(x.shape[0])", "len(str(n))", "format(x.shape[0], '>4')", "format(r, '.2f')", "format(n, 'x')",
    "format(x.shape[0], 'b')", "'x'.join(map(str, x.shape))", "f'{x.shape[0]:03d}'", "f'{x.shape[0]}-{n}'",
    "'{:>4}'.format(x.shape[0])", "'%d' % x.shape[0]", "'%s/%s' % (n, x.shape[0])", "x.shape[0].bit_length()",
    "n.bit_length()", "int.bit_length(x.shape[0])", "(math.log2(x.shape[0]) if x.shape[0] > 0 else None)",
    "math.sqrt(x.shape[0])", "math.gcd(x.shape[0], 6)", "math.comb(x.shape[0] + 2, 2)", "math.factorial(x.shape[0])",
    "math.ceil(x.shape[0] / 3)", "math.prod(x.shape)", "math.isqrt(x.shape[0])", "math.hypot(x.shape[0], 2)",
    "math.copysign(1.0, r)", "math.fsum([r, x.shape[0]])", "int(str(x.shape[0]) * 2)", "x[:len(str(n))] * 1",
    "x * len(f'{r}')", "float(str(r))", "r.is_integer()", "float(x.shape[0]).is_integer()", "(x.shape[0] / 2).is_integer()",
    "hex(x.shape[0])", "bin(n)", "oct(x.shape[0])", "chr(65 + x.shape[0])", "ord(str(x.shape[0])[0])", "str(n).zfill(3)",
    "str(x.shape[0]).rjust(3, '0')", "'ab' * x.shape[0]", "len('ab' * x.shape[0])", "sorted(str(x.shape[0] * 37))",
    "list(map(str, x.shape))", "tuple(zip(x.shape, 'ab'))", "dict(enumerate(map(str, x.shape)))",
    "list(enumerate(x.shape))", "list(filter(None, [n, x.shape[0], 0]))", "pow(x.shape[0], 2, 5)",
    "divmod(x.shape[0], 3)", "round(r, 1)", "repr(r)", "str(tuple(x.shape))", "str(list(x.shape))",
    "x.new_full((len(str(x.shape[0] * 100)),), 1.0)", "x * len('x'.join(map(str, x.shape)))",
    "x[:int(str(x.shape[0])[-1])] * 1", "len(format(x.shape[0] * 1000, ','))", "str(x.shape[0] * 1.5)",
    "'%.3g' % (x.shape[0] / 7)", "f'{x.shape[0] / 3:.2e}'", "x.shape[0].to_bytes(2, 'big').hex()",
    "int.from_bytes(bytes([x.shape[0]]), 'little')", "len(str(x.shape[0]).encode())", "'{}'.format(r)",
    "str(r).split('.')[0]", "str(n) + str(x.shape[0])", "' '.join(str(s) for s in x.shape)",
    "max(map(len, map(str, x.shape)))", "(x * 2 if str(x.shape[0]) in '234' else x)",
    "str(x.shape)", "f'{x.shape}'", "repr(x.size())", "'%s' % (x.shape[1:],)", "'{}'.format(x.shape + (n,))",
    "str([x.shape, n])", "isinstance(x.shape, torch.Size)", "type(x.size()).__name__", "str((x * 2).sum().shape)",
)
MUTATION_STATEMENTS = (
    "acc.append(x.shape[0])", "acc.extend([n, x.shape[0]])", "acc.insert(0, n)", "acc.sort()", "acc.reverse()",
    "if acc: acc[0] = x.shape[0]", "if acc: acc.pop()", "acc += [n]", "if acc: del acc[0]",
    "d['n'] = x.shape[0]", "d.setdefault('k', n)", "d.pop('n', None)", "d.update(m=n)", "d['t'] = x.sum(0) * 2",
    "d['l'] = [n, x.shape[0]]", "d.setdefault('hits', []).append(n)",
    "cfg.last = x.shape[0]", "cfg.count += n", "setattr(cfg, 'r', r)", "cfg.hist.append(x.shape[0])",
    "cfg.t = x.detach() + 1", "object.__setattr__(cfg, 'z', n)", "if hasattr(cfg, 'last'): del cfg.last",
    "self.count += x.shape[0]", "self.last_len = x.shape[0]", "self.act = x.detach() * 2", "self.steps.append(n)",
    "if x.shape[0] not in self.cache: self.cache[x.shape[0]] = torch.ones(x.shape[0])",
    "self.total = self.total + r", "self.steps = self.steps[-2:] + [x.shape[0]]",
    "G.append(n)", "GD['k'] = x.shape[0]", "GD.setdefault('s', []).append(n)",
    "BUMP(x.shape[0])", "BUMP(n)", "REMEMBER(x.shape[0])", "REMEMBER(x.detach() * 2)", "REMEMBER(str(n))",
)
MUTATION_TERMS = (
    "len(acc)", "sum(acc)", "x[:len(acc)] * 1", "list(acc)", "x * self.count", "self.last_len", "x[:cfg.count] * 1",
    "cfg.count", "sorted(d)", "d.get('n', -1)", "len(self.cache)", "(self.act.sum() if self.act is not None else None)",
    "self.total", "len(G)", "GD.get('k')", "len(self.steps)", "x.shape[0] in self.cache", "x * 2",
    "CELLS()[0]", "x * CELLS()[0]", "CELLS()[1]",
)
RESULT_TYPE_TERMS = (
    "n ** 0.5", "type(n ** 0.5).__name__", "isinstance(n ** 0.5, float)", "(x.shape[0] - 2) ** 0.5", "n ** m",
    "type(n ** m).__name__", "m ** (n % 5)", "n ** -1", "n // m", "n % m", "divmod(n, m)", "n / m", "r // m", "r % m",
    "divmod(r, m)", "r / m", "x.shape[0] // m", "x.shape[0] % m", "divmod(x.shape[0] - 2, m)", "safe_div(n, m)",
    "safe_div(x.shape[0], m)", "safe_div(r, r)", "r == float('nan')", "r != r", "r < float('nan')",
    "(r > 0) == (r <= 0)", "n * 1.0", "n + r", "type(n + r).__name__", "type(n * m).__name__", "abs(r)", "int(r)",
    "round(r)", "math.floor(r)", "math.trunc(r)", "r ** 0.5", "(-r) ** 0.5", "pow(n, m)", "n ** r", "math.sqrt(n)",
    "x * (n ** 0.5 if n >= 0 else 1)", "x * (n // m if m else 0)", "x[: n // m if m else 0] * 1", "r.is_integer()",
    "(n * r).is_integer()", "n / 2 == n // 2", "max(n, r)", "type(max(n, r)).__name__", "min(r, n)", "sum([n, r])",
    "n == r", "x * r", "x * (r if r == r else 0.0)", "-0.0 + r", "math.copysign(1.0, r * 0.0)", "r * 0",
    "type(r * 0).__name__", "n % -3", "-n // 3", "(-7) // (x.shape[0] + 1)", "float(n) ** 0.5", "abs(complex(n, 1))",
    "x.shape[0] ** 0.5", "(x.shape[0] - 3) ** 0.5", "type((x.shape[0] - 3) ** 0.5) is float", "2 ** (x.shape[0] - 3)",
    "type(2 ** (x.shape[0] - 3)).__name__", "(x * 2 if isinstance((x.shape[0] - 3) ** 0.5, float) else x)",
)
FAMILY_NAMES = ("argument kinds", "text", "mutations", "result types")


@dataclass
class FamilyProgram:
    family: str
    statements: list[str]
    terms: list[str]

    def source(self) -> str:
        lines = [
            "def make_cells():  # closure variables rebound by the calls (nonlocal)",
            "    total, last = 0, None",
            "    def bump(k):",
            "        nonlocal total",
            "        total = total + k",
            "        return total",
            "    def remember(v):",
            "        nonlocal last",
            "        last = v",
            "        return v",
            "    def cells():",
            "        return total, last",
            "    return bump, remember, cells",
            "",
            "BUMP, REMEMBER, CELLS = make_cells()",
            "",
            "def safe_div(p, q):",
            "    try:",
            "        return p / q",
            "    except ZeroDivisionError:",
            "        return None",
            "",
            "class Family(torch.nn.Module):",
            "    def __init__(self):",
            "        super().__init__()",
            "        self.count, self.last_len, self.steps, self.cache, self.act, self.total = 0, -1, [], {}, None, 0.0",
            "",
            "    def forward(self, x, a, n, m, r, acc, cfg, d):",
            *(f"        {s}" for s in self.statements),
            "        return (",
            *(f"            {t}," for t in self.terms),
            "        )",
        ]
        return f"# family: {self.family}\n" + "\n".join(lines) + "\n"


@dataclass
class FamilyCall:
    size: int
    a: tuple[str, int, bool]  # ARGUMENT_VALUES kind, index, negated
    a_how: str  # "build": a new object from the spec; "same": the last object; "mutate": the last, changed in place
    n: int
    m: int
    r: float
    fresh_state: bool  # acc, cfg and d: new objects (equal to the first call's) or the last call's
    cfg_kind: str  # "namespace" or "dataclass"


INTS = (-3, -2, -1, 0, 1, 2, 3, 10**20)
DIVISORS = (-3, -1, 0, 1, 2, 3)
FLOATS = (math.nan, math.inf, -math.inf, 0.0, -0.0, 1.0, -2.5, 0.5, 1e308, 3.0)
A_STEPS = ("same", "fresh equal", "other value", "other kind", "sign", "mutate")
STEPS = ("repeat", "a", "a", "n", "m", "r", "size", "state", "fresh")


@st.composite
def family_programs(draw, family: str | None = None) -> FamilyProgram:
    family = family or draw(st.sampled_from(FAMILY_NAMES))
    pools = {"argument kinds": ARGUMENT_TERMS, "text": TEXT_TERMS, "mutations": MUTATION_TERMS,
             "result types": RESULT_TYPE_TERMS}
    terms = draw(st.lists(st.sampled_from(pools[family]), min_size=1, max_size=3))
    statements = draw(st.lists(st.sampled_from(MUTATION_STATEMENTS), min_size=1, max_size=4)) if family == "mutations" else []
    return FamilyProgram(family, statements, terms)


@st.composite
def _spec(draw, kind=None):
    kind = kind or draw(st.sampled_from(sorted(ARGUMENT_VALUES)))
    return (kind, draw(st.integers(0, len(ARGUMENT_VALUES[kind]) - 1)), False)


@st.composite
def family_calls(draw) -> list[FamilyCall]:
    sizes, ints, divisors, floats = (st.sampled_from((0, 1, 2, 3, 4, 6)), st.sampled_from(INTS),
                                     st.sampled_from(DIVISORS), st.sampled_from(FLOATS))
    out = [FamilyCall(draw(sizes), draw(_spec()), "build", draw(ints), draw(divisors), draw(floats), True,
                      draw(st.sampled_from(("namespace", "dataclass"))))]
    for _ in range(draw(st.integers(2, 5))):
        call = dataclasses.replace(out[-1], a_how="same", fresh_state=False)
        step = draw(st.sampled_from(STEPS))
        if step == "a":
            _change_a(draw, call)
        elif step in ("n", "m", "r", "size"):
            setattr(call, step, draw({"n": ints, "m": divisors, "r": floats, "size": sizes}[step]))
        elif step == "state":
            call.fresh_state, call.cfg_kind = True, draw(st.sampled_from(("namespace", "dataclass")))
        elif step == "fresh":
            call = FamilyCall(draw(sizes), draw(_spec()), "build", draw(ints), draw(divisors), draw(floats),
                              draw(st.booleans()), draw(st.sampled_from(("namespace", "dataclass"))))
        out.append(call)
    return out


def _change_a(draw, call: FamilyCall) -> None:
    how = draw(st.sampled_from(A_STEPS))
    kind, index, negated = call.a
    if how == "fresh equal":
        call.a_how = "build"
    elif how == "other value":
        call.a, call.a_how = draw(_spec(kind)), "build"
    elif how == "other kind":
        call.a, call.a_how = draw(_spec()), "build"
    elif how == "sign" and kind in SIGNED:
        call.a, call.a_how = (kind, index, not negated), "build"
    elif how == "mutate":
        call.a_how = "mutate"


def fresh_state(kind: str) -> tuple:
    cfg = Cfg() if kind == "dataclass" else types.SimpleNamespace(k=2, s="a", count=1, hist=[2])
    return [3, 1], cfg, {"a": 1}


def fresh_namespace() -> dict:
    return {"__name__": "fuzzed", "torch": torch, "math": math, "enum": enum, "fractions": fractions,
            "dataclasses": dataclasses, "types": types, "Mode": Mode, "Level": Level, "Cfg": Cfg,
            "G": [1], "GD": {}}
