"""Comparing a compile with repeated blocks stamped against the same compile with every block
interpreted (tests/interpret/test_repeated_blocks.py): traces up to renaming, prologues by what
they check.

- A computation or backward trace is compared as text with every proxy renamed by its first
  appearance (``N0``, ``N1``, ...), the registry ids likewise, source-line comments dropped (they
  echo the user's variable names, which thunder gives only to interpreted proxies).
- A prologue is compared by what it checks: its checks, each written with the paths it reads
  inlined (``check_tensor_shape_and_metadata(unpack_parameter(self, 'transformer.h.1.attn.qkv.weight'), ...)``),
  a metatrace check by the kind of its expected value, the guard program by its guards' texts
  (``prologue_checks``); and the set of values those checks read (``checked_values``). A stamped
  sibling may check a shared value by the first block's check where an interpreted one checks
  it again, or the other way round (``layers[1].act is layers[0].act`` against
  ``layers[1].act == gelu``), and it checks what the first block checked on its first read of
  a value (an interpreted sibling finds the first block's wrapper and checks nothing): the
  values read are the same or more, never fewer.
"""

from __future__ import annotations

import re
from collections import Counter

from thunder.core.proxies import Proxy, TensorProxy

from metatrace.state.registry import EXPECTED, PROGRAMS


def canonical_trace(trace) -> str:
    names: dict[str, str] = {}

    def note(p) -> None:
        if p.name not in names:
            names[p.name] = f"N{len(names)}"
        if isinstance(p, TensorProxy):
            for s in p._shape:
                if isinstance(s, Proxy) and s.name not in names:
                    names[s.name] = f"N{len(names)}"

    todo = list(reversed(trace.bound_symbols))
    while todo:
        b = todo.pop()
        for p in (*b.flat_proxy_args, *b.flat_proxy_outs):
            note(p)
        todo.extend(reversed(b.subsymbols))
    text = re.sub(r"\s*\\\n\s*", " ", str(trace))  # (thunder wraps long lines where the names' lengths put it)
    text = "\n".join(line for line in text.splitlines()
                     if not re.match(r"\s*# .*\.py:\d+", line) and not line.startswith("# Constructed by"))
    if names:
        pattern = re.compile(r"\b(" + "|".join(map(re.escape, sorted(names, key=len, reverse=True))) + r")\b")
        text = pattern.sub(lambda m: names[m.group(1)], text)
    ids: dict[str, int] = {}
    text = re.sub(r"'([vgs]\d+)'", lambda m: "'ID%d'" % ids.setdefault(m.group(1), len(ids)), text)
    return re.sub(r"0x[0-9a-f]+", "", text)


def checked_values(trace) -> set[str]:
    """The values the prologue's checks read, each written as the unpacks that read it."""
    return _prologue(trace)[1]


def guard_texts(trace) -> list[str]:
    """The guards of the prologue's guard program, as explain() prints them."""
    texts = []
    for b in trace.bound_symbols:
        if b.sym.name == "metatrace_guards":
            texts.extend(getattr(PROGRAMS.get(b.args[0]), "texts", ()))
    return sorted(texts)


def prologue_checks(trace) -> Counter:
    """What the prologue checks: one line per check with the values it reads written out."""
    return _prologue(trace)[0]


def _prologue(trace) -> tuple[Counter, set[str]]:
    expressions: dict[str, str] = {}

    def show(x) -> str:
        if isinstance(x, Proxy):
            return expressions.get(x.name, "<input>")
        if isinstance(x, (tuple, list)):
            return "(" + ", ".join(map(show, x)) + ")"
        return repr(x)

    checks: Counter = Counter()
    values: set[str] = set()
    for b in trace.bound_symbols:
        name = b.sym.name
        if name == "metatrace_structure":
            expected = EXPECTED.get(b.args[0])
            text = f"{name}({type(expected).__name__}, {', '.join(map(show, b.args[1:]))})"
        elif name == "metatrace_guards":
            program = PROGRAMS.get(b.args[0])
            text = f"{name}({sorted(getattr(program, 'texts', ()))})"
        else:
            text = f"{name}({', '.join(map(show, b.args))})"
        outs = b.flat_proxy_outs
        if name == "python_return":
            continue
        if outs:
            for i, o in enumerate(outs):
                expressions[o.name] = text if len(outs) == 1 else f"{text}[{i}]"
        else:
            checks[text] += 1
            values.update(show(a) for a in b.args if isinstance(a, Proxy))
    return checks, values
