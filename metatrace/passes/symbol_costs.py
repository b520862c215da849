"""Direct paths through thunder's bound-symbol bookkeeping, which its passes run for every bound
symbol they add and every proxy in it (the grad transform and the executor passes re-bind and
re-swap every bound symbol of a trace, subsymbols included).

- ``Symbol.normalize`` (every ``bind``) computed ``inspect.signature`` of the meta on every call:
  the signature is kept per meta, and a call that passes exactly the meta's positional parameters
  (nearly all: thunder binds what the meta was called with) gets them back as they are, as
  ``BoundArguments`` gave them.
- ``BoundSymbol.from_bsym_swap_proxies`` flattened its arguments, keyword arguments and output
  with ``tree_flatten_with_dataclass`` (a ``tree_map`` calling a Python function on every leaf
  to register dataclasses, then optree) and unflattened them again: exact tuples, lists, dicts
  and slices of proxies and plain leaves are rebuilt directly, each proxy followed through the
  swap map as thunder does.
- ``tree_flatten_with_dataclass`` as ``thunder.core.symbol`` calls it (``flat_args``,
  ``flat_outs``): a tree of exact containers, proxies and plain leaves holds no dataclass to
  register, so optree flattens it at once.
- ``BoundSymbol.from_bsym``: a copy with the same arguments (or the same output) keeps the
  flattened proxies of them the original computed (cached properties derived from those alone);
  ``dce``'s ``remove_duplicate_number_proxies`` rebuilt every output (``tree_map``) even with no
  duplicate number in it: an output that nothing can change in place is kept, and so is what
  ``dce`` flattened of it, for the passes after it.
- ``tree_flatten`` as ``thunder.core.symbol`` and ``thunder.core.utils`` call it (every symbol
  call, every ``safe_map_flat`` of a processor): thunder checks the top's type against a set of
  thirty types it builds on every call; an exact container, a proxy or a plain leaf passes it.

- the eight flattened views of a bound symbol's arguments and output (``flat_proxy_args`` and
  the rest): thunder's cached properties without their shared lock (``passes.flat_proxies``).

Anything else (a collection proxy, a namedtuple, a dataclass, ``torch.Size``, another leaf type)
takes thunder's path for the whole value. What is built is what thunder built: new containers of
the same types, in the same order, holding the same objects.
"""

from __future__ import annotations

import inspect

import optree
import thunder.core.baseutils as baseutils
import thunder.core.symbol as symbol
import thunder.core.transform_common as transform_common
import thunder.core.utils as thunder_utils
from thunder.core import devices, dtypes
from thunder.core.proxies import CollectionProxy, Proxy, variableify
from thunder.core.baseutils import NumberProxyInterface
from thunder.core.pytree import OPTREE_NAMESPACE, tree_map
from thunder.core.symbol import BoundSymbol, Symbol

from metatrace.passes import flat_proxies
from metatrace.patching import Patch, attribute
from metatrace.proxies.plain_trees import PLAIN_LEAVES, plain_leaves
from metatrace.state.process_tables import META_SIGNATURES

_LEAVES = PLAIN_LEAVES


def _plain(x) -> bool:
    """Whether ``x`` is exact tuples, lists, dicts and slices of proxies and plain leaves."""
    return plain_leaves(x) is not None


# What thunder's ``tree_flatten`` accepts at the top of a tree, among the plain values (it raises
# a TypeError for a thunder dtype of another kind there: those take its path).
_TOPS = frozenset({tuple, list, dict, slice, *_LEAVES})


def _plain_top(x) -> bool:
    return (type(x) in _TOPS or isinstance(x, Proxy)) and _plain(x)


def _tree_flatten(original):
    def tree_flatten(args, namespace=OPTREE_NAMESPACE):
        # (thunder's checks the top's type against a set it builds on every call; these pass)
        if type(args) in _TOPS or isinstance(args, Proxy):
            return optree.tree_flatten(args, none_is_leaf=True, namespace=namespace)
        return original(args, namespace)

    return tree_flatten


def _tree_flatten_with_dataclass(original):
    def tree_flatten_with_dataclass(tree):
        if _plain_top(tree):
            return optree.tree_flatten(tree, none_is_leaf=True, namespace=OPTREE_NAMESPACE)
        return original(tree)

    return tree_flatten_with_dataclass


_THUNDERS = object()  # what _swapped returns for a value thunder's swap must handle


def _followed(p, swap_map):
    """Proxy ``p`` followed through ``swap_map`` as thunder's swap follows it."""
    vp = variableify(p)
    visited = set()
    while vp in swap_map:
        if swap_map[vp] is p:
            break
        baseutils.check(vp not in visited, lambda: f"Detected a cycle while swapping; the cycle includes {visited}")
        visited.add(vp)
        p = swap_map[vp]
        vp = variableify(p)
    return p


def _swapped(x, swap_map):
    """``x`` with its proxies followed through ``swap_map`` (thunder's ``swap`` in
    ``from_bsym_swap_proxies``), rebuilt directly; _THUNDERS if it is not plain (see ``_plain``)
    or holds a collection proxy (thunder's swap rewrites its contents in place)."""
    t = type(x)
    if t is tuple or t is list:
        items = []
        for y in x:
            # (the common items inline: a call per item was most of the walk)
            if type(y) in _LEAVES:
                items.append(y)
            elif isinstance(y, Proxy) and not isinstance(y, CollectionProxy):
                items.append(_followed(y, swap_map))
            elif (y := _swapped(y, swap_map)) is _THUNDERS:
                return _THUNDERS
            else:
                items.append(y)
        return tuple(items) if t is tuple else items
    if t in _LEAVES:
        return x
    if isinstance(x, Proxy):
        return _THUNDERS if isinstance(x, CollectionProxy) else _followed(x, swap_map)
    if t is dict:
        items = {}
        for k, v in x.items():
            if (v := _swapped(v, swap_map)) is _THUNDERS:
                return _THUNDERS
            items[k] = v
        return items
    if t is slice:
        parts = (_swapped(x.start, swap_map), _swapped(x.stop, swap_map), _swapped(x.step, swap_map))
        return _THUNDERS if any(p is _THUNDERS for p in parts) else slice(*parts)
    return x if isinstance(x, (dtypes.dtype, devices.Device)) else _THUNDERS


def _swapped_top(x, swap_map):
    return _swapped(x, swap_map) if type(x) in _TOPS or isinstance(x, Proxy) else _THUNDERS


def _from_bsym_swap_proxies(original):
    def from_bsym_swap_proxies(self, swap_map, skip_inputs=False, skip_output=False, skip_subsymbols=False):
        if len(swap_map) == 0:
            return self
        nargs = self.args if skip_inputs else _swapped_top(self.args, swap_map)
        nkwargs = self.kwargs if skip_inputs else _swapped_top(self.kwargs, swap_map)
        new_output = self.output if skip_output else _swapped_top(self.output, swap_map)
        if nargs is _THUNDERS or nkwargs is _THUNDERS or new_output is _THUNDERS:
            return original(self, swap_map, skip_inputs, skip_output, skip_subsymbols)
        if skip_subsymbols:
            subsymbols = list(self.subsymbols)
        else:
            subsymbols = [b.from_bsym_swap_proxies(swap_map, skip_inputs, skip_output, skip_subsymbols)
                          for b in self.subsymbols]
        return self.from_bsym(args=nargs, kwargs=nkwargs, output=new_output, subsymbols=subsymbols)

    return from_bsym_swap_proxies


# A bound symbol's flattened arguments and outputs (``functools.cached_property`` values in its
# ``__dict__``; tuples, derived from ``args``/``kwargs`` and from ``output`` alone).
_ARGUMENT_CACHES = ("flat_proxy_args", "flat_variableified_proxy_args")
_OUTPUT_CACHES = ("flat_proxy_outs", "flat_variableified_proxy_outs")


def _from_bsym(original):
    def from_bsym(self, **kwargs):
        new = original(self, **kwargs)
        known = vars(self)
        if "flat_proxy_args" in known and kwargs.get("args", self.args) is self.args \
                and kwargs.get("kwargs", self.kwargs) is self.kwargs:
            fresh = vars(new)
            for name in _ARGUMENT_CACHES:
                if name in known:
                    fresh[name] = known[name]
        if "flat_proxy_outs" in known and kwargs.get("output", self.output) is self.output:
            fresh = vars(new)
            for name in _OUTPUT_CACHES:
                if name in known:
                    fresh[name] = known[name]
        return new

    return from_bsym


def _kept_whole(output) -> bool:
    """An output nothing can change in place: a proxy, None, or a tuple of proxies and leaves."""
    if output is None or isinstance(output, Proxy):
        return True
    return type(output) is tuple and all(isinstance(x, Proxy) or type(x) in _LEAVES for x in output)


def _remove_duplicate_number_proxies(original):
    def remove_duplicate_number_proxies(bsyms):
        """thunder's (``thunder.core.transform_common``), where a bound symbol whose output holds
        no number seen before keeps its output object when nothing can change it in place (thunder
        rebuilt an equal one), and so the flattened outputs ``dce`` just computed."""
        seen = set()

        def keep_or_swap(p):
            if not isinstance(p, NumberProxyInterface):
                return p
            if p.name in seen:
                return p.value  # don't make it a duplicate
            seen.add(p.name)
            return p

        new_bsyms = []
        for bsym in bsyms:
            outs = bsym.flat_outs
            if all(isinstance(x, NumberProxyInterface) and x.name in seen for x in outs):
                continue
            names = [x.name for x in outs if isinstance(x, NumberProxyInterface)]
            if _kept_whole(bsym.output) and len(set(names)) == len(names) and seen.isdisjoint(names):
                seen.update(names)
                new_bsyms.append(bsym.from_bsym(output=bsym.output))
            else:
                new_bsyms.append(bsym.from_bsym(output=tree_map(keep_or_swap, bsym.output)))
        return new_bsyms

    return remove_duplicate_number_proxies


class _Signature:
    """A meta's signature, and how many positional parameters it has when it has no other kind
    (None otherwise)."""

    __slots__ = ("signature", "positional")

    def __init__(self, meta):
        self.signature = inspect.signature(meta)
        kinds = [p.kind for p in self.signature.parameters.values()]
        plain = all(k in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD) for k in kinds)
        self.positional = len(kinds) if plain else None


def _normalize(original):
    def normalize(self, *args, **kwargs):
        meta = self.meta
        assert meta is not None
        try:
            found = META_SIGNATURES.get(meta)
        except TypeError:  # an unhashable callable
            return original(self, *args, **kwargs)
        if found is None:
            found = META_SIGNATURES[meta] = _Signature(meta)
        if not kwargs and len(args) == found.positional:
            return args, {}
        ba = found.signature.bind(*args, **kwargs)
        ba.apply_defaults()
        return ba.args, ba.kwargs

    return normalize


def patches() -> list[Patch]:
    why = "thunder's passes re-bind and re-swap every bound symbol: the plain cases without its generic tree walks"
    return [
        attribute(Symbol, "normalize", _normalize, "the meta's signature computed once per meta", wrap=True),
        attribute(BoundSymbol, "from_bsym_swap_proxies", _from_bsym_swap_proxies, why, wrap=True),
        attribute(symbol, "tree_flatten_with_dataclass", _tree_flatten_with_dataclass, why, wrap=True),
        attribute(BoundSymbol, "from_bsym", _from_bsym, "a copy with the same arguments or output keeps their flattened proxies",
                  wrap=True),
        attribute(transform_common, "remove_duplicate_number_proxies", _remove_duplicate_number_proxies,
                  "dce's last step keeps outputs it would rebuild unchanged", wrap=True),
        *(attribute(module, "tree_flatten", _tree_flatten, "thunder's tree_flatten of a plain value without its type set",
                    wrap=True) for module in (symbol, thunder_utils)),
        *flat_proxies.patches(),
    ]
