"""One compiled entry as another process can rebuild it, and the rebuild.

What thunder's ``CacheEntry`` runs are four Python functions it built from traces (prologue,
computation, epilogue, backward) with ``build_callable(name, text, ctx)``; what they call beyond
the text is in ``ctx`` (thunder's and torch's functions, executor operators) and in metatrace's
tables the prologue and epilogue operators look up by id (guard programs, expected values and
structures, mutation replays: ``metatrace.state.registry``). A :class:`StoredEntry` keeps:

1. each function's text and its ``ctx`` pickled by stable keys (``stable_refs``);
2. the table items the texts name by id, pickled by stable keys;
3. the grad bookkeeping: which flat outputs eager returns without grad, the grad mode the function
   leaves, thunder's ``return_none_instead_of_grads``;
4. the source files of the code the compile ran, by digest (``code_files``).

:func:`rebuild` gives every stored id a fresh id of the loading function (ids are per process),
renames them in the texts, unpickles the items under the loading context
(``compile_context.ENTRY_LOADING``: the jitted module, its ThunderModule), and builds the
functions as thunder does. The traces of a rebuilt entry are :class:`StoredTrace` texts (what
``thunder.last_traces`` prints); nothing of thunder's trace objects is stored.
"""

from __future__ import annotations

import pickle
import re
import time
import weakref
from dataclasses import dataclass, field

import thunder
from thunder.core import baseutils

import metatrace.entry_cache.code_files as code_files
import metatrace.entry_cache.stable_refs as stable_refs
from metatrace.errors import ProcessLocal, StaleReference
from metatrace.grad import requires_grad
from metatrace.state import registry
from metatrace.state.callable_sources import SOURCES
from metatrace.state.compile_context import ENTRY_LOADING

FORMAT = 1
ROLES = ("prologue", "computation", "epilogue", "backward")
# metatrace's operators in prologues and epilogues whose first argument is a table id
_ID_USE = re.compile(r"\b(metatrace_(?:guards|structure|replay|new_object))\('([a-z]+\d+)'")
_TABLES = ("PROGRAMS", "EXPECTED", "REPLAYS")
_THUNDER_NAMES = ("__builtins__", "__function_obj", "thunder", "__global_dicts")


@dataclass
class StoredFunction:
    name: str
    text: str
    ctx: bytes  # stable_refs.dumps of the globals beyond thunder's own names
    function_obj: bool  # whether its ``__function_obj`` is the jitted callable (else None)


@dataclass
class StoredEntry:
    format: int
    functions: dict[str, StoredFunction | None]
    ids: tuple[str, ...]
    tables: bytes  # stable_refs.dumps({table name: {id: item}})
    files: dict[str, str]
    non_differentiable: tuple | None
    grad_mode_left: bool | None
    return_none_instead_of_grads: bool
    explain_checks: bytes | None  # what metatrace.explain shows for the entry (pickled CheckTexts)
    meta: dict = field(default_factory=dict)  # what the cache list shows (created, compile seconds)


@dataclass
class Loading:
    """What unpickling needs from the loading process (``compile_context.ENTRY_LOADING``)."""

    ids: dict[str, str]
    module: object  # the jitted nn.Module (submodules are stored by path), or None
    wrapper: object  # its ThunderModule, or None
    cd: object  # thunder's compile data of the jitted callable (process groups are stored by role)


class StoredTrace:
    """The text of a rebuilt entry's function where thunder keeps traces (``thunder.last_traces``);
    a prologue's also carries the checks ``metatrace.explain`` lists."""

    bound_symbols: tuple = ()

    def __init__(self, text: str, explain_checks: list | None = None):
        self.text, self.explain_checks = text, explain_checks

    def python(self, **_) -> str:
        return self.text

    def __str__(self) -> str:
        return self.text

    __repr__ = __str__


def _source_of(fn, depth: int = 3):
    """The text and context ``fn`` was built from, looking through thunder's and metatrace's
    wrappers (``functools.wraps``'s ``__wrapped__``, a closure's function)."""
    if fn is None:
        return None
    try:
        found = SOURCES.get(fn)
    except TypeError:
        found = None
    if found is not None or depth == 0:
        return found
    inner = getattr(fn, "__wrapped__", None)
    if inner is not None and (found := _source_of(inner, depth - 1)) is not None:
        return found
    for cell in getattr(fn, "__closure__", None) or ():
        contents = cell.cell_contents
        if callable(contents) and (found := _source_of(contents, depth - 1)) is not None:
            return found
    return None


def capture(entry, cd, codes: set) -> StoredEntry:
    """``entry`` as another process can rebuild it; raises ProcessLocal naming what cannot be."""
    jitted = cd.fn
    root = jitted if _is_module(jitted) else None
    functions: dict[str, StoredFunction | None] = {}
    for role, fn in zip(ROLES, (entry.prologue_fn, entry.computation_fn, entry.epilogue_fn, entry.backward_fn)):
        if fn is None:
            functions[role] = None
            continue
        source = _source_of(fn)
        if source is None:
            raise ProcessLocal(f"the entry's {role} was not built from a trace's text (an executor's callable)")
        function_obj = source.ctx.get("__function_obj") if "__function_obj" in source.text else None
        if function_obj is not None and function_obj is not jitted:
            raise ProcessLocal(f"the entry's {role} refers to an object other than the jitted callable")
        ctx = {k: v for k, v in source.ctx.items() if k not in _THUNDER_NAMES and k != source.name}
        functions[role] = StoredFunction(source.name, source.text, stable_refs.dumps(ctx, root, cd),
                                         function_obj is not None)
    ids = tuple(dict.fromkeys(m.group(2) for f in functions.values() if f is not None
                              for m in _ID_USE.finditer(f.text)))
    tables: dict[str, dict] = {name: {} for name in _TABLES}
    for ident in ids:
        for name in _TABLES:
            table = getattr(registry, name)
            if ident in table:
                tables[name][ident] = table[ident]
                break
        else:
            raise ProcessLocal(f"the entry's check {ident} is not in metatrace's tables")
    first = entry.computation_traces[0] if entry.computation_traces else None
    return StoredEntry(
        format=FORMAT,
        functions=functions,
        ids=ids,
        tables=stable_refs.dumps(tables, root, cd),
        files=code_files.files_of(codes),
        non_differentiable=requires_grad.NON_DIFFERENTIABLE.get(entry.backward_fn) if entry.backward_fn else None,
        grad_mode_left=None if first is None else requires_grad.grad_mode_left(first),
        return_none_instead_of_grads=bool(entry.return_none_instead_of_grads),
        explain_checks=_explain_checks(entry, jitted),
        meta={"created": time.time()},
    )


def _explain_checks(entry, jitted) -> bytes | None:
    from metatrace.guards.explain import entry_checks

    try:
        return pickle.dumps(entry_checks(entry.prologue_traces[-1], jitted), protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:  # noqa: BLE001 - a check text holding an object: explain shows the prologue's text only
        return None


def _is_module(obj) -> bool:
    import torch

    return isinstance(obj, torch.nn.Module)


def _renamed(text: str, ids: dict[str, str]) -> str:
    return _ID_USE.sub(lambda m: f"{m.group(1)}('{ids[m.group(2)]}'", text)


def rebuild(stored: StoredEntry, cd, cs):
    """The ``CacheEntry`` of ``stored`` for the callable of ``cd`` in this process; raises
    StaleReference when a stored name leads elsewhere now."""
    from metatrace.interpret.modules.wrapper_copies import wrapper_of_module

    if stored.format != FORMAT:
        raise StaleReference(f"an entry of format {stored.format}, this metatrace writes {FORMAT}")
    changed = code_files.changed_files(stored.files)
    if changed:
        raise StaleReference(f"{changed[0]} changed since the entry was stored")
    record = registry.function_record(cs)
    ids = {old: registry.new_id(re.match(r"[a-z]+", old).group(0), record) for old in stored.ids}
    jitted = cd.fn
    module = jitted if _is_module(jitted) else None
    loading = Loading(ids, module, None if module is None else wrapper_of_module(module), cd)
    with ENTRY_LOADING.set_to(loading):
        tables = stable_refs.loads(stored.tables)
        ctxs = {role: None if f is None else stable_refs.loads(f.ctx) for role, f in stored.functions.items()}
    for name, items in tables.items():
        table = getattr(registry, name)
        for old, item in items.items():
            table[ids[old]] = item
    built, texts = {}, {}
    for role, f in stored.functions.items():
        if f is None:
            built[role] = None
            continue
        texts[role] = _renamed(f.text, ids)
        ctx = dict(ctxs[role])
        ctx["__function_obj"] = jitted if f.function_obj else None
        ctx["thunder"] = thunder
        fn = baseutils.build_callable(f.name, python_str=texts[role], file_name=f"thunder.{f.name}", ctx=ctx)
        if role == "prologue":
            del fn.__globals__[f.name]  # (as thunder does: the prologue holds the module through its globals)
        built[role] = fn
    prologue = _timed_prologue(built["prologue"], cs)
    if stored.grad_mode_left is not None:
        prologue = requires_grad.leaving_grad_mode(prologue, stored.grad_mode_left)
    if built["backward"] is not None and stored.non_differentiable is not None:
        requires_grad.NON_DIFFERENTIABLE[built["backward"]] = stored.non_differentiable
    entry = thunder.CacheEntry(prologue, [], built["computation"], [], built["epilogue"], [], built["backward"], [],
                               stored.return_none_instead_of_grads)
    checks = pickle.loads(stored.explain_checks) if stored.explain_checks is not None else None
    trace = lambda role: [StoredTrace(texts[role], checks if role == "prologue" else None)] if role in texts else []  # noqa: E731
    # (given after construction: metatrace's CacheEntry hook reads a compiled entry's first trace)
    return entry._replace(prologue_traces=trace("prologue"), computation_traces=trace("computation"),
                          epilogue_traces=trace("epilogue"), backward_traces=trace("backward"))


def _timed_prologue(prologue, cs):
    """thunder's ``prologue_execution_timer``: the stats' prologue times, as for a compiled entry."""
    stats = weakref.ref(cs)

    def wrapped(*args, **kwargs):
        cs = stats()
        if cs is not None:
            cs.last_prologue_execution_start = time.perf_counter_ns()
        try:
            return prologue(*args, **kwargs)
        finally:
            if cs is not None:
                cs.last_prologue_execution_stop = time.perf_counter_ns()

    return wrapped
