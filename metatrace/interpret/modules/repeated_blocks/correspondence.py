"""Whether a module is a copy of another for every read its forward can make, and which of its
objects stands where in the other (for stamping repeated blocks: ``repeated_blocks``).

A module's forward reads only what it reaches from the module: its ``__dict__`` (parameters,
buffers, submodules, hook dicts, plain attributes), its class and the globals of its code.
Class and code are compared by identity; the ``__dict__`` trees are walked side by side:

- numbers, strings, dtypes, devices, ``None`` (the values a trace bakes in or makes a symbolic
  number of) must be equal and of one type where the first block read them (``read``: every
  read leaves a check on its path, so the record's paths are the reads); one it never read (a
  layer's index used only in ``__init__``) may differ, since equal reads take the same path;
- tensors must agree on everything a proxy or the prologue's check records (class, shape,
  strides, dtype, device, ``requires_grad``, their ``__dict__``), and be two tensors: a tensor
  both blocks hold (weights shared between layers) is not stamped;
- submodules and containers (dicts, lists, tuples, sets) are walked; two distinct ones pair up;
- any other object (a config, a function, a class) must be the same object in both.

A tensor, submodule or container the interpreter had already wrapped before the first block ran
(the same object read through another path, such as a tied weight) is not stamped either:
thunder's interpreter would hand the sibling the wrapper of the earlier read, with its proxy.
"""

from __future__ import annotations

import enum
import types
from typing import Any

import torch

# Compared by value (and type): what a trace bakes in, or reads as a symbolic number.
_VALUES = (int, float, complex, bool, str, bytes, type(None), torch.dtype, torch.device, enum.Enum,
           slice, range, type(Ellipsis))
# Walked item by item.
_CONTAINERS = (dict, list, tuple, set, frozenset)
# Never walked into: compared by identity (code, classes, functions, modules of code).
_BY_IDENTITY = (type, types.FunctionType, types.BuiltinFunctionType, types.MethodType, types.ModuleType,
                types.CodeType)


class NotACopy(Exception):
    """The sibling differs from the template where a read could see it: the reason, with the path."""


def paired_objects(template: torch.nn.Module, sibling: torch.nn.Module, wrapped_before: set, known,
          read: "ReadPaths") -> dict[int, Any]:
    """``id(object of the template) -> the sibling's object at the same place``, over every
    tensor, submodule and container the template reaches (the roots included). Raises NotACopy
    with the first difference. ``wrapped_before``: ids of the template's objects the interpreter
    held a wrapper of before the template ran (:func:`wrapped_objects`); ``known(obj)``: whether
    it holds one of ``obj`` now; ``read``: the paths the template read."""
    if type(template) is not type(sibling):
        raise NotACopy(f"class {type(sibling).__qualname__} is not {type(template).__qualname__}")
    out: dict[int, Any] = {}
    _walk(template, sibling, (), out, lambda t, s: id(t) in wrapped_before or known(s), read)
    return out


class ReadPaths:
    """The paths below the first block that its record reads (``("_modules", "attn", "eps")``);
    ``everything``: a read the paths cannot name (a whole ``__dict__``), so every value counts."""

    def __init__(self):
        self.paths: set[tuple] = set()
        self.everything = False

    def add(self, path: tuple | None) -> None:
        if path is None or "__dict__" in path:
            self.everything = True
        else:
            self.paths.add(path)

    def was_read(self, path: tuple) -> bool:
        return self.everything or any(path[:i] in self.paths for i in range(len(path) + 1))


def wrapped_objects(root: torch.nn.Module, known) -> set[int]:
    """Ids of the objects below ``root`` (tensors, submodules, containers: what :func:`pairs`
    pairs up) that ``known`` says the interpreter holds a wrapper of; taken before the template runs."""
    found: set[int] = set()
    seen: set[int] = {id(root)}
    todo = list(vars(root).values())
    while todo:
        x = todo.pop()
        if id(x) in seen or isinstance(x, _VALUES) or isinstance(x, _BY_IDENTITY):
            continue
        seen.add(id(x))
        if known(x):
            found.add(id(x))
        if isinstance(x, (torch.nn.Module, torch.Tensor)):
            todo.extend(vars(x).values())
        elif isinstance(x, dict):
            todo.extend(x.values())
        elif isinstance(x, (list, tuple)):
            todo.extend(x)
    return found


def _walk(t: Any, s: Any, at: tuple, out: dict, seen_elsewhere, read: ReadPaths) -> None:
    kind = type(t)
    path = ".".join(map(str, at))
    if isinstance(t, _VALUES) and not isinstance(t, torch.Tensor) and isinstance(s, _VALUES):
        if (kind is not type(s) or t != s and not (t != t and s != s)) and read.was_read(at):
            raise NotACopy(f"{path}: {s!r} where the first block has {t!r}")
        return  # (NaN equals NaN here: the trace baked in the same)
    if kind is not type(s):
        raise NotACopy(f"{path or 'the block'}: {type(s).__name__} where the first block has {kind.__name__}")
    if isinstance(t, _BY_IDENTITY) or not (isinstance(t, (torch.nn.Module, torch.Tensor)) or kind in _CONTAINERS
                                           or type(t).__module__ == "collections"):
        if t is not s:
            raise NotACopy(f"{path}: a different {kind.__name__} object than the first block's")
        return
    if id(t) in out:
        if out[id(t)] is not s:
            raise NotACopy(f"{path}: shared differently than in the first block")
        return
    if t is s:
        if kind in (tuple, frozenset) and all(isinstance(x, _VALUES) for x in t):
            return
        raise NotACopy(f"{path}: the same {kind.__name__} as the first block's (shared between blocks)")
    if path and seen_elsewhere(t, s):
        raise NotACopy(f"{path}: already read through another path before the block")
    out[id(t)] = s
    if isinstance(t, torch.Tensor):
        _same_tensor(t, s, path)
        _walk_dict(vars(t), vars(s), at, out, seen_elsewhere, read)
    elif isinstance(t, torch.nn.Module):
        _walk_dict(vars(t), vars(s), at, out, seen_elsewhere, read)
    elif isinstance(t, dict):
        _walk_dict(t, s, at, out, seen_elsewhere, read)
    elif isinstance(t, (list, tuple)):
        if len(t) != len(s):
            raise NotACopy(f"{path}: {len(s)} items where the first block has {len(t)}")
        for i, (a, b) in enumerate(zip(t, s)):
            _walk(a, b, (*at, i), out, seen_elsewhere, read)
    elif isinstance(t, (set, frozenset)):
        if not all(isinstance(x, _VALUES) for x in t) or t != s:
            raise NotACopy(f"{path}: a set that differs from the first block's")
    else:
        raise NotACopy(f"{path}: a {kind.__name__} the walk does not know")


def _walk_dict(t: dict, s: dict, at: tuple, out: dict, seen_elsewhere, read: ReadPaths) -> None:
    if list(t) != list(s):
        raise NotACopy(f"{'.'.join(map(str, at))}: keys {list(s)[:8]} where the first block has {list(t)[:8]}")
    for k, a in t.items():
        _walk(a, s[k], (*at, k), out, seen_elsewhere, read)


def _same_tensor(t: torch.Tensor, s: torch.Tensor, path: str) -> None:
    if (t.shape != s.shape or t.dtype != s.dtype or t.device != s.device or t.requires_grad != s.requires_grad
            or t.layout != s.layout or (t.layout == torch.strided and t.stride() != s.stride())
            or t.is_leaf != s.is_leaf):
        raise NotACopy(f"{path}: tensor {tuple(s.shape)} {s.dtype} requires_grad={s.requires_grad} where the "
                       f"first block has {tuple(t.shape)} {t.dtype} requires_grad={t.requires_grad}")
