"""A sibling's arguments against the recorded block's: tensors of the same dtype, grad flag and
sizes (a size may be another symbol of the same value: the record is renamed to it), the same
numbers and objects; anything else would let the block's code take another path.
"""

from __future__ import annotations

from typing import Any

from thunder.core.proxies import NumberProxy, Proxy, TensorProxy

from metatrace.interpret.modules.repeated_blocks.correspondence import NotACopy


def match(a: Any, b: Any, where: str, out: list, numbers: dict) -> None:
    """Appends (the first block's tensor, the sibling's) for each tensor argument, and maps the
    first block's numbers (sizes, number arguments) to the sibling's (``numbers``: name -> the
    sibling's proxy); NotACopy where the arguments could make the block's code take another path
    (another dtype, grad flag, value of a number, a constant size for a symbol, a symbol for two)."""
    if isinstance(a, TensorProxy) and isinstance(b, TensorProxy):
        if (type(a) is not type(b) or a.dtype != b.dtype or a.device != b.device
                or a.requires_grad != b.requires_grad or len(a._shape) != len(b._shape)):
            raise NotACopy(f"{where}: tensor {b} differs from the first block's {a}")
        for i, (x, y) in enumerate(zip(a._shape, b._shape)):
            _match_number(x, y, f"{where}.shape[{i}]", numbers)
        out.append((a, b))
    elif isinstance(a, NumberProxy) or isinstance(b, NumberProxy):
        _match_number(a, b, where, numbers)
    elif isinstance(a, Proxy) or isinstance(b, Proxy):
        if a is not b:
            raise NotACopy(f"{where}: {b} where the first block had {a}")
    elif type(a) is not type(b):
        raise NotACopy(f"{where}: a {type(b).__name__} where the first block had a {type(a).__name__}")
    elif type(a) in (tuple, list):
        if len(a) != len(b):
            raise NotACopy(f"{where}: {len(b)} items where the first block had {len(a)}")
        for i, (x, y) in enumerate(zip(a, b)):
            match(x, y, f"{where}[{i}]", out, numbers)
    elif type(a) is dict:
        if list(a) != list(b):
            raise NotACopy(f"{where}: keys {list(b)} where the first block had {list(a)}")
        for k in a:
            match(a[k], b[k], f"{where}[{k!r}]", out, numbers)
    elif a is not b and not (isinstance(a, (int, float, str, bool)) and a == b):
        raise NotACopy(f"{where}: {b!r:.40} where the first block had {a!r:.40}")


def _match_number(x: Any, y: Any, where: str, numbers: dict) -> None:
    """A number of the first block's arguments (a size, a number argument) against the sibling's:
    two symbols of one value and type pair up (the first block's record is renamed to the
    sibling's symbol), each of the first block's symbols with one of the sibling's; constants
    must be equal."""
    if isinstance(x, NumberProxy) and isinstance(y, NumberProxy):
        if type(x) is not type(y) or x.value != y.value or x.python_type is not y.python_type:
            raise NotACopy(f"{where}: {y} where the first block had {x}")
        paired = numbers.setdefault(x.name, y)
        if paired is not y and paired.name != y.name:
            raise NotACopy(f"{where}: {y} where the first block's {x} stands for {paired} elsewhere")
    elif isinstance(x, NumberProxy) or isinstance(y, NumberProxy) or x != y or type(x) is not type(y):
        raise NotACopy(f"{where}: {y!r} where the first block had {x!r}")


def template_numbers(arguments: Any) -> dict:
    """The number proxies among the first block's arguments and their sizes, by name."""
    found: dict = {}
    todo = [arguments]
    while todo:
        x = todo.pop()
        if isinstance(x, TensorProxy):
            todo.extend(x._shape)
        elif isinstance(x, NumberProxy):
            found.setdefault(x.name, x)
        elif type(x) in (tuple, list):
            todo.extend(x)
        elif type(x) is dict:
            todo.extend(x.values())
    return found


def check_kept_sizes(template, renaming, renamed: set) -> None:
    """Where a size of the arguments is renamed (the sibling's input has its own symbol), no
    tensor the record keeps as it is (one read from outside the block) may have that size: it
    would keep the first block's symbol where the record's operations assume the sibling's."""
    if not renamed:
        return
    todo = list(template.bsyms)
    while todo:
        b = todo.pop()
        for p in (*b.flat_proxy_args, *b.flat_proxy_outs):
            if isinstance(p, TensorProxy) and renaming.proxy(p) is p and any(
                    isinstance(d, NumberProxy) and d.name in renamed for d in p._shape):
                raise NotACopy(f"{p.name}, read from outside the block, has the size the sibling renames")
        todo.extend(b.subsymbols)


def _size(x) -> Any:
    return ("proxy", x.name) if isinstance(x, Proxy) else ("value", x)


