"""Trees of exact containers, proxies and plain leaves: what a bound symbol's arguments and output
nearly always are. Such a tree holds nothing thunder's pytree would have to register or call
(no namedtuple, dataclass or collection proxy), so the passes and the grad bookkeeping may walk it
directly instead of through ``tree_flatten``; anything else takes thunder's path."""

from __future__ import annotations

import types

import torch
from thunder.core import devices, dtypes
from thunder.core.proxies import Proxy

# Leaves optree keeps as they are and thunder registers nothing for.
PLAIN_LEAVES = frozenset({int, float, bool, complex, str, type(None), types.EllipsisType, type, torch.dtype,
                          torch.device, torch.memory_format})


def exact_nodes(tree, dict_keys: bool = False):
    """Every value in ``tree``, ``tree`` and the containers included, reached through exact
    tuples, lists, sets, frozensets, dict values (and keys, with ``dict_keys``) and slices'
    bounds; a subclass (a namedtuple, an ``OrderedDict``) is a value, not walked. One walk, no
    recursion."""
    pending = [tree]
    while pending:
        x = pending.pop()
        yield x
        t = type(x)
        if t is tuple or t is list or t is frozenset or t is set:
            pending.extend(x)
        elif t is dict:
            pending.extend(x.values())
            if dict_keys:
                pending.extend(x.keys())
        elif t is slice:
            pending += (x.start, x.stop, x.step)


def plain_leaves(tree) -> list | None:
    """The leaves of ``tree`` (proxies and :data:`PLAIN_LEAVES`, thunder's dtypes and devices)
    reached through exact tuples, lists, dict values and slices; None if it holds anything else
    (a set too: thunder's pytree does not walk one). It runs for every bound symbol's arguments
    and output, so it walks inline rather than through :func:`exact_nodes` (half the time)."""
    leaves, pending = [], [tree]
    while pending:
        x = pending.pop()
        t = type(x)
        if t in PLAIN_LEAVES:
            leaves.append(x)
        elif t is tuple or t is list:
            pending.extend(x)
        elif t is dict:
            pending.extend(x.values())
        elif t is slice:
            pending += (x.start, x.stop, x.step)
        elif isinstance(x, (Proxy, dtypes.dtype, devices.Device)):
            leaves.append(x)
        else:
            return None
    return leaves
