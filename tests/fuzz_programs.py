"""Differential fuzzing of metatrace: small generated programs, each one jitted function fed a
sequence of inputs, every result compared with eager PyTorch.

A program is an ``nn.Module`` whose ``forward(self, x, n, r, b, l, **kw)`` returns a tuple of terms,
one from each family of templates (``FAMILIES``) over the kinds of Python values a trace can
depend on: tensor sizes, ints, floats (NaN and signed zeros included), bools, lists, module attributes
(``self.flag``, ``self.training``, ``self.scale``), globals (a list mutated in place, a dtype
rebound) and closures, and the functions it calls (a global, a user module's attribute, a
method replaced on the class or shadowed on the object, a property, an object's attribute,
edited in place, a forward hook registered and removed, a buffer rebound); with branches, slices, reshapes, factories, builtins over containers,
numbers seen as strings and types, and gradients; grad modes inside the function and
``requires_grad`` read, keyword arguments, sets and dict keys over sizes, dtype rules of scalars
with bool and int tensors, in-place operators' result types and tensor metadata as Python values.
A call sequence repeats inputs, crosses branches, uses sizes 0 and 1, changes module and global
state, x's dtype and ``requires_grad``, an outer ``no_grad`` and the keywords' order between
calls. Every output's value, dtype and ``requires_grad``, x's gradient and the grad mode the call
leaves behind are compared.

``check_program`` runs one program and returns the differences from eager (empty when right).
It is used by ``tests/sweeps/test_fuzz.py`` (a fixed-seed slice, and named regressions) and by
``tools/fuzz.py`` (a timed run with fresh seeds).
"""

from __future__ import annotations

import contextlib
import math
import types
from dataclasses import dataclass, field
from typing import Any

import torch
from hypothesis import strategies as st

# ---------------------------------------------------------------------------------------------
# Templates: each a Python expression over x, n, r, b, l, self, G, DT, CL, ACT, H, help2
# ---------------------------------------------------------------------------------------------

# integer-valued expressions (possibly negative: slicing clamps, factories may raise in both)
INT_EXPRS = (
    "n", "len(l)", "x.shape[0]", "max(l)", "min(l)", "sum(l)", "(n > 0) + (n > 1)", "(x.shape[0] > 2) + (x.shape[0] > 1)",
    "abs(n - x.shape[0])", "n // 2", "n % 3", "n & 3", "n | 1", "n ^ 1", "n >> 1", "(n << 1)", "max(x.shape[0], n)",
    "min(x.shape[0], n)", "sorted(l)[-1]", "max(G)", "len(G)", "sum(CL)", "(n < 3) * 1", "b + 0", "-(n > 0)",
    "int(r) if r == r and abs(r) < 100 else 0", "self.k", "divmod(n, 2)[0]", "round(r) if r == r and abs(r) < 100 else 1",
)
# conditions
CONDS = (
    "n > 2", "r > 0.5", "r <= 0.5", "b", "not b", "str(n) == '2'", "type(min(n, 2)) is int", "type(r) is float",
    "self.flag", "self.training", "G[0] > 1", "3 in l", "all(v > 0 for v in l)", "any(v > 2 for v in l)",
    "x.shape[0] > n", "f'{n}' == '3'", "format(n, '03d') == '002'", "DT is torch.float32", "float(n) == n",
    "r != r", "(n > 0) * (n > 1)", "isinstance(n, int)", "len(l) > 2", "sorted(l) == l", "self.mode == 'a'",
)
# float-valued expressions
FLOAT_EXPRS = (
    "r", "r * 2", "n / 2", "n * 1.5", "float(n)", "r + n", "abs(r)", "max(r, 0.5)", "sum(l) / len(l)", "self.scale",
    "math.floor(r) if r == r and abs(r) < 100 else 0.0", "n // 2.0", "-r",
)
# Term families: a program takes one term of each (so every program exercises sizes, branches,
# numbers, factories, text, module/global state and containers together); {i}, {c}, {f} are
# filled with the expressions above.
FAMILIES = {
    "sizes": ("x[:{i}] * 1", "x[{i}:] * 1", "x[-{i}:] + 1", "x.reshape(1, -1) * ({i})", "x[:{i}].sum()"),
    "branches": ("(x * 2 if {c} else x * 3)", "(x.sum() if {c} else x.mean())", "({c})"),
    "numbers": ("x * ({f})", "({f})", "({i})", "x * ({i})"),
    "factories": (
        "torch.arange({f})", "torch.arange(max({i}, 0))", "torch.full((2,), {i})", "torch.full((2,), {f})",
        "torch.zeros(max({i}, 0))", "x.new_full((2,), {f})",
    ),
    "text": ("str({i})", "f'{{{f}}}'", "type({i}).__name__", "repr({f})", "format({i}, '03d')"),
    "state": (
        "x.to(DT) * 1", "x[:2] * (2 if self.training else 3)", "x[:max(G)] * 1", "(x * 2 if self.flag else x)",
        "x * sum(CL)", "x * self.scale", "x[:self.k] * 1", "(x if self.mode == 'a' else -x)", "x * self.w",
    ),
    "bools": (
        "(n > 0) + (n > 1)", "x[:(n > 0) + (n > 1)] * 1", "(n > 0) - (n > 5)", "b + 0", "-(n > 0)",
        "torch.full((2,), (n < 3) + 0)", "abs(n > 1)", "(x.shape[0] > 2) * (n > 1)",
    ),
    "more state": (
        "x.to(DT) * 1", "x[:max(G)] * 1", "x[:len(G)] * 1", "x * G[0]", "x[:sum(CL)] * 1", "(x if self.flag else -x)",
        "(x * 2 if self.training else x)",
    ),
    "callables": (
        "ACT(x - 2)", "H.scale(x)", "self.helper(x)", "self.act(x - 2)", "help2(x)", "help2(x[:{i}])",
        "x[:self.half] * 1", "x * self.half",
    ),
    "containers": (
        "x[:max(l)] * 1", "x[:min(l)] * 1", "sum(l)", "sorted(l)", "(x * 2 if all(v > 0 for v in l) else x)",
        "(x * 2 if 3 in l else x)", "max(l, key=lambda v: -v)",
        # C code given the list itself: hashed, printed, compared, concatenated (issue 51)
        "x.new_zeros(len(set(l)))", "sorted(set(l))", "list(dict.fromkeys(l))", "len({{*l}})", "str(l)",
        "(x * 2 if l == [1, 2] else x)", "sorted(set(l + [x.shape[0]]))", "x[:max(l + [0])] * 1",
    ),
    # grad modes inside the function, requires_grad read and returned (helpers in Program.source)
    "grad modes": (
        "under_no_grad(x.float())", "under_no_grad(x.float()) + x.float()", "under_grad_mode(x.float(), {c})",
        "under_enable_grad(x.float())", "under_inference_mode(x.float())", "torch.is_grad_enabled()",
        "(x.float() * 2).requires_grad", "x.requires_grad", "x.detach() * x", "(x.detach() * 2).requires_grad",
        "left_without_grad(x.float())", "(torch.ones(1) * x.float()).requires_grad", "left_disabled(x)",
    ),
    # keyword arguments (a=n, c=r, in either order across calls)
    "kwargs": (
        "list(kw)", "sum((i + 1) * v for i, v in enumerate(kw.values()))", "x * len(kw)", "next(iter(kw))",
        "[k + str(v) for k, v in kw.items()]",
    ),
    # sets and dict keys over sizes and numbers: decided by value
    "size sets": (
        "len({{x.shape[0], {i}}})", "len(set([x.shape[0], len(l), n]))", "x[:len({{x.shape[0], 2, 3}})] * 1",
        "sorted({{x.shape[0], n}})", "len({{x.shape[0]: 0, n: 1}})", "x.shape[0] in {{n, 2}}",
    ),
    # dtype rules of Python scalars with bool, int and float tensors
    "dtypes": (
        "x + True", "x // 2", "x / max(x.shape[0], 1)", "x * 1.5", "x.sum()", "(~x if x.dtype == torch.bool else -x)",
        "x.to(torch.float32) * ({f})", "x + x", "(x > 1) * 1", "x.dtype == torch.float32",
    ),
    # in-place arithmetic: eager refuses a result type the tensor cannot hold
    "in place": (
        "x.clone().add_({f})", "x.clone().mul_({i})", "x.clone().div_(2)", "x.clone().sqrt_()", "x.clone().add_(1)",
        "x.clone().clamp_(min={f})", "x.clone().copy_(x * 1.5)", "x.clone().zero_()",
    ),
    # in-place writes into fresh buffers (issue 51): the buffer requires grad and backward reaches
    # the written tensors, as eager (helpers in Program.source)
    "buffer writes": (
        "collate([x, x[:{i}] * 2], {f})", "padded(x * 2, max({i}, 0))", "kv_write(x, n % 3)", "running_sum(x)",
        "scatter_acc(x)", "view_write(x)", "torch.zeros_like(x).copy_(x * 2)", "x.detach().clone().mul_(x)",
        "torch.zeros_like(x).fill_(x.sum())", "(lambda o: (o.__setitem__(slice(None, {i}), 1), o)[1])(x * 3)",
    ),
    # tensor metadata as Python values
    "metadata": (
        "x.device.type", "str(x.device)", "x.dtype", "str(x.dtype)", "x.dtype.is_floating_point", "x.is_floating_point()",
        "x.element_size()", "x.dtype.itemsize", "x.device == torch.device('cpu')", "x.dtype in (torch.float32, torch.int64)",
        "str(x.shape)", "f'{{x.size()}}'", "'%s' % (x.shape[1:],)", "isinstance(x.shape, torch.Size)",
    ),
}

@dataclass
class Program:
    terms: list[str]
    requires_grad: bool

    def source(self) -> str:
        lines = [
            "def help2(v, c=2):",
            "    return v * c",
            "",
            "def _help_a(v, c=2):",
            "    return v * c",
            "",
            "def _help_b(v, c=2):",
            "    return v - c",
            "",
            "def _plus_one(self, v):",
            "    return v + 1",
            "",
            "def _plus_two(self, v):",
            "    return v + 2",
            "",
            "def _half_a(self):",
            "    return self.k // 2",
            "",
            "def _half_b(self):",
            "    return self.k + 1",
            "",
            "def under_no_grad(v):",
            "    with torch.no_grad():",
            "        return v * 2",
            "",
            "def under_grad_mode(v, flag):",
            "    with torch.set_grad_enabled(flag):",
            "        return v * 3, torch.is_grad_enabled()",
            "",
            "def under_enable_grad(v):",
            "    with torch.no_grad():",
            "        with torch.enable_grad():",
            "            w = v * 2",
            "        return w, v * 3, torch.is_grad_enabled()",
            "",
            "def under_inference_mode(v):",
            "    with torch.inference_mode():",
            "        return v + 1",
            "",
            "def left_disabled(v):",
            "    torch.set_grad_enabled(False)",
            "    return v * 2",
            "",
            "def left_without_grad(v):",
            "    before = torch.is_grad_enabled()",
            "    torch.set_grad_enabled(False)",
            "    w = v * 2",
            "    torch.set_grad_enabled(before)",
            "    return w, v * 3",
            "",
            "def collate(seqs, pad):",
            "    out = seqs[0].new_full((len(seqs), max(t.shape[0] for t in seqs)), pad)",
            "    for i, t in enumerate(seqs):",
            "        out[i, : t.shape[0]] = t",
            "    return out",
            "",
            "def padded(v, length):",
            "    out = v.new_zeros(length)",
            "    k = min(length, v.shape[0])",
            "    out[:k] = v[:k]",
            "    return out",
            "",
            "def kv_write(v, pos):",
            "    cache = torch.zeros(v.shape[0] + 2, dtype=v.dtype)",
            "    cache[pos:pos + v.shape[0]] = v",
            "    return cache[: pos + v.shape[0]]",
            "",
            "def running_sum(v):",
            "    acc = torch.zeros((), dtype=v.dtype)",
            "    for i in range(v.shape[0]):",
            "        acc += v[i]",
            "    return acc",
            "",
            "def scatter_acc(v):",
            "    out = torch.zeros(3, dtype=v.dtype)",
            "    if v.shape[0] == 0:  # (thunder's scatter_add refuses an empty index: a clear error)",
            "        return out",
            "    out.scatter_add_(0, torch.arange(v.shape[0]).clamp(max=2), v)",
            "    return out",
            "",
            "def view_write(v):",
            "    b = torch.zeros(2, v.shape[0], dtype=v.dtype)",
            "    b[1].copy_(v)",
            "    b.t()[:, 0].add_(v)",
            "    return b, b[0] * 2",
            "",
            "class Fuzzed(torch.nn.Module):",
            "    helper = _plus_one",
            "    half = property(_half_a)",
            "",
            "    def __init__(self):",
            "        super().__init__()",
            "        self.act = torch.relu",
            "        self.flag = True",
            "        self.k = 2",
            "        self.scale = 0.5",
            "        self.mode = 'a'",
            "        self.register_buffer('w', torch.ones(1))",
            "",
            "    def forward(self, x, n, r, b, l, **kw):",
            "        return (",
            *(f"            {term}," for term in self.terms),
            "        )",
        ]
        return "\n".join(lines) + "\n"


@dataclass
class Call:
    size: int
    n: int
    r: float
    b: bool
    l: list[int]
    mutation: str | None = None  # applied to module / globals just before the call
    dtype: str = "float32"  # x's dtype: float32, float64, int64 or bool
    grad: bool | None = None  # x requires grad (a floating x only); None: the program's choice
    no_grad: bool = False  # the call is made under torch.no_grad()
    kw_reversed: bool = False  # the keyword arguments come as c=r, a=n (else a=n, c=r)


@dataclass
class Outcome:
    calls: int = 0
    compiles: int = 0
    differences: list[str] = field(default_factory=list)
    compiled_calls: list[int] = field(default_factory=list)  # the calls that compiled
    jitted: Any = field(default=None, compare=False, repr=False)  # the jitted callable


MUTATIONS = ("flag", "eval", "train", "G.append", "G[0]", "DT", "CL.append", "k", "scale", "mode",
             "ACT", "H.scale", "method", "self.helper", "self.act", "defaults", "code", "property", "hook", "self.w")
FLOATS = (0.2, 0.5, 0.7, 2.5, -1.5, 0.0, -0.0, float("nan"), 3.0)


@st.composite
def programs(draw) -> Program:
    terms = []
    for family in FAMILIES.values():
        template = draw(st.sampled_from(family))
        terms.append(
            template.format(
                i=draw(st.sampled_from(INT_EXPRS)), c=draw(st.sampled_from(CONDS)), f=draw(st.sampled_from(FLOAT_EXPRS))
            )
        )
    return Program(terms, requires_grad=draw(st.booleans()))


# How a call follows the one before: a repeat, one input changed (a branch crossing or a
# reuse attempt: the entry must serve it or miss), or a fresh draw.
STEPS = ("repeat", "n", "r", "b", "l values", "size", "fresh", "dtype", "grad", "no_grad", "kw order")
DTYPES = ("float32", "float64", "int64", "bool")


@st.composite
def calls(draw) -> list[Call]:
    sizes, ints, floats = st.sampled_from((0, 1, 2, 3, 4, 6)), st.integers(-2, 6), st.sampled_from(FLOATS)
    out = [Call(draw(sizes), draw(ints), draw(floats), draw(st.booleans()), draw(st.lists(st.integers(-1, 5), min_size=1, max_size=4)))]
    for _ in range(draw(st.integers(2, 5))):
        p = out[-1]
        step = draw(st.sampled_from(STEPS))
        call = Call(p.size, p.n, p.r, p.b, list(p.l), dtype=p.dtype, grad=p.grad, no_grad=p.no_grad,
                    kw_reversed=p.kw_reversed)
        if step == "n":
            call.n = draw(ints)
        elif step == "r":
            call.r = draw(floats)
        elif step == "b":
            call.b = not p.b
        elif step == "l values":
            call.l = [draw(st.integers(-1, 5)) for _ in p.l]  # same length: the structure check passes
        elif step == "size":
            call.size = draw(sizes)
        elif step == "dtype":
            call.dtype = draw(st.sampled_from(DTYPES))
        elif step == "grad":
            call.grad = not (p.grad if p.grad is not None else draw(st.booleans()))
        elif step == "no_grad":
            call.no_grad = not p.no_grad
        elif step == "kw order":
            call.kw_reversed = not p.kw_reversed
        elif step == "fresh":
            call = Call(draw(sizes), draw(ints), draw(floats), draw(st.booleans()),
                        draw(st.lists(st.integers(-1, 5), min_size=1, max_size=4)))
        call.mutation = draw(st.sampled_from((None, *MUTATIONS)))
        out.append(call)
    return out


# ---------------------------------------------------------------------------------------------
# Running a program: eager and jitted side by side, with the same state
# ---------------------------------------------------------------------------------------------


def _fresh_namespace() -> dict[str, Any]:
    helpers = types.ModuleType("fuzz_helpers")  # a module of the user's (no installed file)
    helpers.double, helpers.triple = (lambda v: v * 2), (lambda v: v * 3)
    helpers.scale = helpers.double
    return {"torch": torch, "math": math, "G": [1, 2], "DT": torch.float32, "CL": [1], "ACT": torch.relu, "H": helpers}


def _toggle(current, a, b):
    return b if current is a else a


def _mutate_callables(ns: dict, module: torch.nn.Module, mutation: str) -> None:
    if mutation == "ACT":
        ns["ACT"] = _toggle(ns["ACT"], torch.relu, torch.neg)
    elif mutation == "H.scale":
        ns["H"].scale = _toggle(ns["H"].scale, ns["H"].double, ns["H"].triple)
    elif mutation == "method":
        type(module).helper = _toggle(type(module).__dict__["helper"], ns["_plus_one"], ns["_plus_two"])
    elif mutation == "self.helper":  # the class's method shadowed on the object, or the shadow removed
        if "helper" in module.__dict__:
            del module.helper
        else:
            module.helper = lambda v: v + 5
    elif mutation == "self.act":
        module.act = _toggle(module.act, torch.relu, torch.neg)
    elif mutation == "defaults":
        ns["help2"].__defaults__ = (5,) if ns["help2"].__defaults__ == (2,) else (2,)
    elif mutation == "property":
        getter = type(module).__dict__["half"].fget
        type(module).half = property(_toggle(getter, ns["_half_a"], ns["_half_b"]))
    elif mutation == "hook":  # a forward pre-hook that doubles x, registered or removed
        handle = ns.pop("_hook", None)
        if handle is not None:
            handle.remove()
        else:
            ns["_hook"] = module.register_forward_pre_hook(lambda mod, args: (args[0] * 2, *args[1:]))
    elif mutation == "code":
        ns["help2"].__code__ = _toggle(ns["help2"].__code__, ns["_help_b"].__code__, ns["_help_a"].__code__)


def _mutate(ns: dict, module: torch.nn.Module, mutation: str | None) -> None:
    if mutation is None:
        return
    if mutation == "flag":
        module.flag = not module.flag
    elif mutation == "eval":
        module.eval()
    elif mutation == "train":
        module.train()
    elif mutation == "G.append":
        ns["G"].append(len(ns["G"]) + 2)
    elif mutation == "G[0]":
        ns["G"][0] = 3 - ns["G"][0]
    elif mutation == "DT":
        ns["DT"] = torch.float64 if ns["DT"] is torch.float32 else torch.float32
    elif mutation == "CL.append":
        ns["CL"].append(2)
    elif mutation == "k":
        module.k += 1
    elif mutation == "scale":
        module.scale = -module.scale
    elif mutation == "mode":
        module.mode = "b" if module.mode == "a" else "a"
    elif mutation == "self.w":  # a buffer rebound on the model (its ThunderModule held the old one)
        module.w = torch.full((1,), 2.0) if bool(module.w[0] == 1) else torch.ones(1)
    else:
        _mutate_callables(ns, module, mutation)


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, torch.Tensor):
        return (
            isinstance(b, torch.Tensor)
            and a.shape == b.shape
            and a.dtype == b.dtype
            and a.requires_grad == b.requires_grad
            and torch.allclose(a.detach(), b.detach(), equal_nan=True, rtol=1e-5, atol=1e-6)
        )
    if isinstance(a, (tuple, list)):
        return type(a) is type(b) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, float):
        if type(b) is not float:
            return False
        if math.isnan(a):
            return math.isnan(b)
        return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)
    return type(a) is type(b) and a == b


def _inputs(call: Call, requires_grad: bool):
    """The positional arguments and the keyword arguments of a call."""
    if call.dtype == "bool":
        x = torch.arange(call.size) % 2 == 0
    else:
        x = torch.arange(call.size, dtype=getattr(torch, call.dtype)) + 1
    if (call.grad if call.grad is not None else requires_grad) and x.is_floating_point():
        x.requires_grad_(True)
    kw = {"c": call.r, "a": call.n} if call.kw_reversed else {"a": call.n, "c": call.r}
    return (x, call.n, call.r, call.b, list(call.l)), kw


def _call(fn, call: Call, args, kw):
    """The result of a call, and the grad mode the call leaves behind (restored after)."""
    try:
        with torch.no_grad() if call.no_grad else contextlib.nullcontext():
            out = fn(*args, **kw)
            return out, torch.is_grad_enabled()
    finally:
        torch.set_grad_enabled(True)


def _grad_of(outputs, x):
    """x's gradient through the tensor outputs that depend on it (None where none do)."""
    if not x.requires_grad:
        return None
    losses = [o.float().sum() for o in outputs if isinstance(o, torch.Tensor) and o.requires_grad]
    if not losses:
        return None
    (grad,) = torch.autograd.grad(sum(losses), x, allow_unused=True)
    return grad


def check_program(program: Program, sequence: list[Call], jit_namespace: dict | None = None) -> Outcome:
    """Runs ``program`` over ``sequence`` eagerly and under ``thunder.jit(cache="symbolic values")``
    (metatrace must be enabled by the caller); returns the differences. ``jit_namespace``: where
    the jitted side's program lives (an imported module's ``vars``: tools/fuzz_two_process.py),
    else the program exec'd into a fresh namespace."""
    import thunder

    outcome = Outcome()
    source = program.source()
    eager_ns, jit_ns = _fresh_namespace(), _fresh_namespace() if jit_namespace is None else jit_namespace
    exec(compile(source, "<fuzzed program>", "exec"), eager_ns)
    if jit_namespace is None:
        exec(compile(source, "<fuzzed program>", "exec"), jit_ns)
    eager_module, jit_module = eager_ns["Fuzzed"](), jit_ns["Fuzzed"]()
    jitted = thunder.jit(jit_module, cache="symbolic values")
    for i, call in enumerate(sequence):
        _mutate(eager_ns, eager_module, call.mutation)
        _mutate(jit_ns, jit_module, call.mutation)
        outcome.calls += 1
        (eager_args, eager_kw), (jit_args, jit_kw) = _inputs(call, program.requires_grad), _inputs(call, program.requires_grad)
        try:
            expected, expected_mode = _call(eager_module, call, eager_args, eager_kw)
            expected_grad = _grad_of(expected, eager_args[0])
        except Exception as e:  # eager raises: the jitted function must raise too
            expected, expected_grad = e, None
        try:
            got, got_mode = _call(jitted, call, jit_args, jit_kw)
            got_grad = _grad_of(got, jit_args[0]) if not isinstance(expected, Exception) else None
        except Exception as e:
            got, got_grad = e, None
        if thunder.cache_misses(jitted) > len(outcome.compiled_calls):
            outcome.compiled_calls.append(i)
        where = f"call {i} ({call}):"
        if isinstance(expected, Exception) or isinstance(got, Exception):
            if not (isinstance(expected, Exception) and isinstance(got, Exception)):
                outcome.differences.append(f"{where} eager {_short(expected)}, jitted {_short(got)}")
            continue
        if not _same(expected, got):
            outcome.differences.append(f"{where} {_first_difference(expected, got)}")
        elif expected_mode != got_mode:
            outcome.differences.append(f"{where} grad mode left: eager {expected_mode}, jitted {got_mode}")
        elif not _same_grad(expected_grad, got_grad):
            outcome.differences.append(f"{where} gradient: eager {_short(expected_grad)}, jitted {_short(got_grad)}")
    outcome.compiles, outcome.jitted = thunder.cache_misses(jitted), jitted
    return outcome


def _first_difference(a: Any, b: Any, where: str = "") -> str:
    """Where two results first differ (the term's index in the tuple), and the two values there."""
    if isinstance(a, (tuple, list)) and type(a) is type(b) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b)):
            if not _same(x, y):
                return _first_difference(x, y, f"{where}[{i}]")
    flags = ""
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        flags = f" (requires_grad {a.requires_grad} vs {b.requires_grad})"
    return f"result{where}: eager {_short(a)}, jitted {_short(b)}{flags}"


def _same_grad(a, b) -> bool:
    if a is None or b is None:
        zero = lambda g: g is None or (isinstance(g, torch.Tensor) and not g.any())  # noqa: E731
        return zero(a) and zero(b)
    return _same(a, b)


def _short(x: Any, limit: int = 300) -> str:
    text = f"{type(x).__name__}: {x}" if isinstance(x, Exception) else repr(x)
    return text if len(text) <= limit else text[: limit - 3] + "..."


# ---------------------------------------------------------------------------------------------
# Named regressions: wrong results stock thunder returns too (issue 30), one program per class
# (terms, calls, whether x requires grad)
# ---------------------------------------------------------------------------------------------


def _calls(*steps, **common):
    return [Call(**{**dict(size=3, n=1, r=0.5, b=True, l=[1]), **common, **step}) for step in steps]


REGRESSIONS = {
    "no_grad inside": (["under_no_grad(x.float())", "x * 2"], _calls({}, {}), True),
    "set_grad_enabled(flag)": (["under_grad_mode(x.float(), b)"], _calls({"b": False}, {"b": True}, {"b": False}), True),
    "enable_grad in no_grad": (["under_enable_grad(x.float())"], _calls({}, {}), True),
    "inference_mode inside": (["under_inference_mode(x.float())"], _calls({}, {}), True),
    "set_grad_enabled called": (["left_without_grad(x.float())"], _calls({}, {}), True),
    "grad mode left behind": (["left_disabled(x)"], _calls({}, {}, {"size": 4}), False),
    "requires_grad of a result": (["(torch.ones(1) * x.float()).requires_grad"], _calls({}, {}), True),
    "kwargs order": (["list(kw)"], _calls({}, {"kw_reversed": True}), False),
    "a set of sizes": (["len({x.shape[0], n})"], _calls({"n": 3}, {"n": 4}, {"size": 2, "n": 2}), False),
    "a dict keyed by sizes": (["{x.shape[0]: 5}.get(n, 7)"], _calls({"n": 3}, {"n": 4}, {"size": 2, "n": 2}), False),
    "a dtype branch": (["(~x if x.dtype == torch.bool else -x)"], _calls({"dtype": "bool"}, {"dtype": "float32"}), False),
    "a dtype compared": (["x.dtype == torch.float32"], _calls({}, {"dtype": "int64"}), False),
    "an in-place result type": (["x.clone().add_(1.5)"], _calls({"dtype": "int64"}, {"dtype": "float32"}), False),
    "a device as text": (["str(x.device)", "x.device == torch.device('cpu')"], _calls({}), False),
    "a saved tensor overwritten": (["x.clone().sqrt_()"], _calls({"size": 4}, {"size": 5}), True),
    "floor_divide's gradient": (["x // 2"], _calls({}), True),
    "a signed zero plus zero": (["f'{r + 0}'"], _calls({"r": 0.0}, {"r": -0.0}, {"r": -0.0, "size": 4}), False),
    "a buffer rebound as the dtype changes": (["x * self.w"], _calls({}, {"mutation": "self.w", "dtype": "float64"}),
                                              False),
    # C code given a list argument read its plain numbers: the entry of [1, 2, 3] served [1, 1, 3]
    "a set of a list's numbers": (["x.new_zeros(len(set(l)))", "sorted(set(l))"],
                                  _calls({"l": [1, 2, 3]}, {"l": [1, 1, 3]}, {"l": [3, 2, 1]}), False),
    "a list concatenated": (["max(l + [0])", "str(l + [x.shape[0]])"], _calls({"l": [1, 2]}, {"l": [3, 2]}), False),
    "a shape as text": (["str(x.shape)", "f'{x.size()}'"], _calls({}, {"size": 4}), False),
}
