"""thunder's size-oblivious sites, entered by the functions themselves while metatrace is enabled.

A decision on a size read from tensor data is answered where the function making it is a site of
:data:`metatrace.metas.oblivious_answers.THUNDER_SITES` (``compute_broadcast_shape``'s ``n == 1`` is
False, ...). The function says so while it runs: every reference thunder calls it through is
wrapped by a Patch row that enters the site (``oblivious_answers.size_oblivious``) around the call,
or, where a stage module changes what the reference does, by that module's one wrapper of it,
whose first step enters the site (:func:`entering`). Nothing reads the stack, so renaming or
moving metatrace's or thunder's files cannot change an answer.

At enable() each site's function is resolved by its dotted name and checked by its code object
(the name and file it was written for); the references are found by identity of that code
object among the module globals of thunder's modules (functions, their ``functools.wraps``
wrappers and partials), the items of their dicts (the grad transform's registries) and the
metas of their Symbols and executors' symbols. A site whose function is gone, renamed, moved to
another file, or no longer referenced anywhere fails enable() with a MetatraceError naming it.
"""

from __future__ import annotations

import functools
import importlib
import types
from dataclasses import dataclass

from thunder.core.symbol import Symbol

from metatrace.errors import MetatraceError
from metatrace.metas import oblivious_answers
from metatrace.patching import ATTRIBUTE, ITEM, SYMBOL_METAS, Patch, thunder_modules, thunder_symbols

_WHY = ("a size-oblivious site: decisions on sizes read from tensor data get the site's answers "
        "(metas.oblivious_answers.THUNDER_SITES)")

# Functions whose size-oblivious decisions are made in a nested function, by the nested
# function's name: checked to be among the outer code's constants.
_NESTED = {"thunder.clang.utils.maybe_broadcast_impl": "_maybe_broadcast"}


def _moved(site: str, why: str) -> MetatraceError:
    return MetatraceError(f"thunder's {site}, a size-oblivious site of metatrace, {why}: metatrace does not "
                          f"support this thunder (update metatrace.metas.oblivious_answers.THUNDER_SITES)")


def _function(site: str) -> types.FunctionType:
    """The function defined at ``site`` (a module's attribute, or a Symbol's meta), unwrapped."""
    module_name, _, name = site.rpartition(".")
    try:
        value = getattr(importlib.import_module(module_name), name)
    except (ImportError, AttributeError) as e:
        raise _moved(site, f"cannot be found ({e})") from e
    if isinstance(value, Symbol):
        value = value.meta
    for _ in range(8):
        if (inner := _inner(value)) is None:
            break
        value = inner
    if not isinstance(value, types.FunctionType):
        raise _moved(site, "is not a function")
    return value


def site_code(site: str) -> types.CodeType:
    """The code object of ``site``'s function, checked to be the one the site was written for."""
    code = _function(site).__code__
    module_name, _, name = site.rpartition(".")
    path = module_name.replace(".", "/")
    if code.co_name != name or not code.co_filename.endswith((f"{path}.py", f"{path}/__init__.py")):
        raise _moved(site, f"is now {code.co_name} in {code.co_filename}")
    nested = _NESTED.get(site)
    if nested is not None and not any(isinstance(c, types.CodeType) and c.co_name == nested for c in code.co_consts):
        raise _moved(site, f"no longer defines {nested}")
    return code


def _inner(value):
    """What a wrapper wraps: a partial's function, a ``functools.wraps`` wrapper's ``__wrapped__``."""
    if isinstance(value, functools.partial):
        return value.func
    if isinstance(value, types.FunctionType):
        return getattr(value, "__wrapped__", None)
    return None


def reached(value, codes: dict, limit: int = 8) -> str | None:
    """The site (``codes``: code object -> site) whose function ``value`` is or wraps
    (``__wrapped__``, a partial's ``func``), or None."""
    while limit and value is not None:
        if isinstance(value, types.FunctionType) and (site := codes.get(value.__code__)) is not None:
            return site
        value, limit = _inner(value), limit - 1
    return None


def entering(site: str, original, steps=None):
    """``original`` (a reference to ``site``'s function) called inside the site: through ``steps``
    where given, the rest of a stage module's one wrapper of that reference, whose first step
    this is (:mod:`metatrace.proxies.size_oblivious`, ``clang._basic_indexing`` in
    :mod:`metatrace.proxies.python_number_semantics`). :func:`patches` wraps no reference that
    enters its site already."""
    call = original if steps is None else steps

    @functools.wraps(original)
    def entered(*args, **kwargs):
        with oblivious_answers.size_oblivious(site):
            return call(*args, **kwargs)

    return entered


_ENTERED = entering("", len).__code__  # the code of every wrapper that enters a site


def enters_its_site(value) -> bool:
    """``value`` is a wrapper made by :func:`entering` (a row here, or a stage's one wrapper)."""
    return isinstance(value, types.FunctionType) and value.__code__ is _ENTERED


def site_of(original) -> str:
    """The site whose function ``original`` is or wraps; a MetatraceError where it is none."""
    codes = {site_code(site): site for site in oblivious_answers.THUNDER_SITES}
    site = reached(original, codes)
    if site is None:
        raise _moved(repr(original), "is not a size-oblivious site's function")
    return site


@dataclass(frozen=True)
class EnteringSite:
    """A Patch row's wrapper factory: the wrapped call runs inside ``site``."""

    site: str

    def __call__(self, original):
        return entering(self.site, original)


def references(codes: dict) -> list[tuple]:
    """(target, kind, key, site, label) of every reference thunder holds to a site's function
    (``codes``: code object -> site): module globals, items of dicts that are module globals,
    Symbol metas."""
    found, dicts = [], set()
    for module_name, module in thunder_modules():
        for name, value in list(vars(module).items()):
            if (site := reached(value, codes)) is not None:
                found.append((module, ATTRIBUTE, name, site, None))
            elif isinstance(value, dict) and id(value) not in dicts:
                dicts.add(id(value))
                found += [(value, ITEM, key, site, f"{module_name}.{name}")
                          for key, v in list(value.items()) if (site := reached(v, codes)) is not None]
    found += [(sym, ATTRIBUTE, "meta", site, SYMBOL_METAS)
              for sym in thunder_symbols() if (site := reached(sym.meta, codes)) is not None]
    return found


def current(target, kind: str, key):
    """What a reference of :func:`references` holds now."""
    return target[key] if kind == ITEM else getattr(target, key)


def patches() -> list[Patch]:
    """The rows entering every site of ``oblivious_answers.THUNDER_SITES`` (checked first: see the
    module), for each reference that does not enter its site already (a stage's one wrapper of it)."""
    codes = {site_code(site): site for site in oblivious_answers.THUNDER_SITES}
    found = references(codes)
    unreferenced = set(codes.values()) - {site for *_, site, _ in found}
    if unreferenced:
        raise _moved(", ".join(sorted(unreferenced)), "is not referenced by any thunder module, dict or symbol")
    return [Patch(target, key, EnteringSite(site), _WHY, kind, True, label)
            for target, kind, key, site, label in found if not enters_its_site(current(target, kind, key))]
