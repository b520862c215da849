"""The prologue's reads of parameters, buffers and submodules by dotted path, without PyTorch's
attribute walk.

thunder's prologue unpacks every parameter and submodule the trace read as
``obj.get_parameter('model.layers.0.mlp.up_proj.weight')`` (``prims.unpack_parameter``,
``unpack_buffer``, ``unpack_submodule``). Where the jitted function is a bound ``forward``
(``model.forward = thunder.jit(model.forward)``, as Hugging Face ``generate`` needs) ``obj`` is the
model itself, and PyTorch's ``get_submodule`` runs ``hasattr`` then ``getattr`` at each level:
each goes through ``Module.__getattr__`` after a failed instance lookup. A two-layer Llama's
decode prologue spent a third of its time there, on every call.

The path the prologue replays is the one the interpreter read: ``_modules[name]`` at each level,
then ``_parameters[name]`` or ``_buffers[name]`` (thunder builds the path from that provenance).
The operators here read exactly those dict entries. Where an entry is missing or an instance
attribute of the same name exists (``mod.__dict__[name]`` would win over ``__getattr__``), they
call PyTorch's method, which returns what ``getattr`` returns or raises its error (a failing
prologue is a cache miss). A ``ThunderModule`` (``thunder.jit(model)``) or any class with its own
``get_parameter`` keeps its method: fsdp and ddp replace tensors in the ThunderModule's dicts.

The prims keep their ids for every transform that looks for them (the distributed transforms'
``transform_traces_pre_prologue``); the execution transform of a trace that has them (the
prologue's) rebinds them to these functions of the same names, printed
``unpack_parameter(obj2, 'a.b.weight')`` (thunder's ``check_trace`` skips every ``unpack*``).

metatrace's one wrapper of ``thunder.transform_for_execution`` (the execution transform thunder's
compile calls) is here; its steps, in order:

1. the collector is paced for the phase (:func:`metatrace.gc_pacing.paced`, measured in
   :mod:`metatrace.interpret.costs.gc_pacing_phases`);
2. the trace's unpacks are rebound to the operators here (:func:`read_paths_by_dict`);
3. thunder's transform.
"""

from __future__ import annotations

import functools
from typing import Any

import torch
from thunder.core import prims
from thunder.core.symbol import Symbol
from thunder.core.trace import TraceCtx, TraceProvenance, from_trace

from metatrace.gc_pacing import paced
from metatrace.patching import Patch, attribute
from metatrace.state.process_tables import DOTTED_PATH_NAMES

_Module = torch.nn.Module


def _names(path: str) -> tuple[str, ...]:
    names = DOTTED_PATH_NAMES.get(path)
    if names is None:
        names = DOTTED_PATH_NAMES[path] = tuple(path.split(".")) if path else ()
    return names


def _walk(module: Any, names: tuple[str, ...]) -> Any:
    """The module at ``names`` below ``module`` by ``_modules`` entries; None where the dict walk is
    not what ``getattr`` would return (a missing entry, an instance attribute of the same name)."""
    for name in names:
        d = module.__dict__
        sub = d["_modules"].get(name)
        if sub is None or name in d:
            return None
        module = sub
    return module


def unpack_submodule(o: Any, path: str) -> Any:
    if type(o).get_submodule is _Module.get_submodule:
        found = _walk(o, _names(path))
        if found is not None:
            return found
    return o.get_submodule(path)


def _tensor(o: Any, path: str, kind: str, method: str) -> Any:
    if getattr(type(o), method) is getattr(_Module, method):
        names = _names(path)
        owner = _walk(o, names[:-1])
        if owner is not None:
            d = owner.__dict__
            t = d[kind].get(names[-1])
            if t is not None and names[-1] not in d:
                return t
    return getattr(o, method)(path)


def unpack_parameter(o: Any, path: str) -> Any:
    return _tensor(o, path, "_parameters", "get_parameter")


def unpack_buffer(o: Any, path: str) -> Any:
    return _tensor(o, path, "_buffers", "get_buffer")


def _printer(bsym, out_printables, arg_printables, kwarg_printables) -> str:
    from thunder.core import codeutils

    origin, key = arg_printables
    out = codeutils.prettyprint(out_printables, with_type=True, literals_as_underscores=True)
    return f"{out} = {bsym.sym.name}({codeutils.prettyprint(origin)}, {codeutils.prettyprint(key)})"


def _symbol(prim, fn) -> Symbol:
    return Symbol(name=fn.__name__, meta=prim.meta, id=f"metatrace.{fn.__name__}", is_prim=True,
                  python_printer=_printer, python_impl=fn, _module=prim.module)


# the prim -> its operator and the name the generated prologue calls it by
_OPERATORS = {prim.id: (_symbol(prim, fn), {fn.__name__: fn})
              for prim, fn in ((prims.unpack_parameter, unpack_parameter), (prims.unpack_buffer, unpack_buffer),
                               (prims.unpack_submodule, unpack_submodule))}


def read_paths_by_dict(trace: TraceCtx) -> TraceCtx:
    """``trace`` with its parameter, buffer and submodule unpacks rebound to the operators above
    (the same trace where it has none: only prologues do)."""
    if not any(b.sym.id in _OPERATORS for b in trace.bound_symbols):
        return trace
    new = from_trace(trace)
    for b in trace.bound_symbols:
        operator = _OPERATORS.get(b.sym.id)
        new.bound_symbols.append(b if operator is None else b.from_bsym(sym=operator[0], _call_ctx=operator[1]))
    new.set_provenance(TraceProvenance("Parameters and submodules read by dict entries (metatrace)"))
    return new


def _before_execution(original):
    @functools.wraps(original)
    def transform_for_execution(trace, *args, **kwargs):
        with paced():
            return original(read_paths_by_dict(trace), *args, **kwargs)

    return transform_for_execution


def patches() -> list[Patch]:
    import thunder

    return [attribute(thunder, "transform_for_execution", _before_execution,
                      "the prologue reads parameters and submodules by dict entries, not PyTorch's getattr walk; "
                      "the collector runs every 50k allocations during the phase, not every 700", wrap=True)]
