"""A module's hooks are checked where the trace called the module: a hook registered, removed or
replaced after the compile (``block.register_forward_hook(capture)``, ``handle.remove()``, or
``torch.nn.modules.module.register_module_forward_hook``) misses the entry.

thunder's interpreter runs ``nn.Module._call_impl`` like any Python code: it reads the module's
hook dicts (and PyTorch's global ones), finds them empty and takes the plain ``forward`` path,
or runs the hooks it finds into the trace. Either way the trace bakes in which hooks there
were, and stock thunder's prologue checks none of it: a hook registered after the compile never
ran on a reused entry (an activation capture saw nothing, a hook that changed the output was
ignored).

The prologue checks, in one call per entry, every module the trace called through ``__call__``
and can read again (the jitted module and its submodules, a global or closure module): the keys
of its hook dicts (every registration gets a new handle id, so a hook added or removed changes
them), and PyTorch's global hook dicts. A module without hooks costs four dict truth tests. Modules created inside the
function, or passed as arguments, are not checked (a new module has no hooks the trace missed;
an argument's structure is :mod:`metatrace.guards.structure`'s).
"""

from __future__ import annotations

from typing import Any

import thunder.core.jit_ext as jit_ext
import torch
import torch.nn.modules.module as torch_module
from thunder.core.interpreter import ProvenanceRecord, PseudoInst, WrappedValue
from thunder.core.proxies import Proxy
from thunder.core.trace import tracectx

from metatrace.guards.explain import readable_source
from metatrace.guards.registry import EXPECTED, new_id
from metatrace.guards.value_checks import ValueConstraint, _provenance_key, source_text
from metatrace.interpret.python_values import _may_register_for_prologue, _rooted_in_arguments, _rooted_in_prologue

# The dicts ``nn.Module._call_impl`` reads (the ``*_with_kwargs`` and ``*_always_called`` dicts are
# keyed by the same handle ids and change with these).
_HOOK_DICTS = ("_forward_pre_hooks", "_forward_hooks", "_backward_pre_hooks", "_backward_hooks")
_GLOBAL_HOOK_DICTS = ("_global_forward_pre_hooks", "_global_forward_hooks", "_global_backward_pre_hooks",
                      "_global_backward_hooks")


def _hook_keys(d: dict) -> tuple | None:
    """The handle ids of the hooks of the module whose ``__dict__`` is ``d``, dict by dict; None
    when it has none (the common case)."""
    if not (d["_forward_pre_hooks"] or d["_forward_hooks"] or d["_backward_pre_hooks"] or d["_backward_hooks"]):
        return None
    return tuple(tuple((k, id(h)) for k, h in d[name].items()) for name in _HOOK_DICTS)


def _global_hook_keys() -> tuple | None:
    g = torch_module.__dict__
    if not (g["_global_forward_pre_hooks"] or g["_global_forward_hooks"] or g["_global_backward_pre_hooks"]
            or g["_global_backward_hooks"]):
        return None
    return tuple(tuple((k, id(h)) for k, h in g[name].items()) for name in _GLOBAL_HOOK_DICTS)


class ExpectedHooks:
    """One prologue check per entry (``metatrace.guards.registry.EXPECTED``): every module the
    trace called has the hooks it had then, and PyTorch has the global hooks it had. The
    prologue passes the ``__dict__`` of each root the modules were read from (the jitted module,
    a global module); a submodule is reached from its root by its ``_modules`` keys, as the
    interpreter read it (dict lookups: thunder's ``get_submodule`` for each would cost a
    microsecond)."""

    __slots__ = ("modules", "global_keys", "sources")

    def __init__(self):
        self.modules: list[tuple[int, tuple[str, ...], tuple | None]] = []  # (root, path, hook keys)
        self.sources: list[str] = []
        self.global_keys = _global_hook_keys()

    def add(self, root: int, path: tuple[str, ...], module: torch.nn.Module, source: str) -> None:
        self.modules.append((root, path, _hook_keys(module.__dict__)))
        self.sources.append(source)

    @property
    def text(self) -> str:
        shown = ", ".join(self.sources[:4]) + (f" and {len(self.sources) - 4} more" if len(self.sources) > 4 else "")
        return f"hooks unchanged on {shown} and PyTorch's global hooks (the trace ran the hooks it found)"

    def matches(self, *roots: dict) -> bool:
        if _global_hook_keys() != self.global_keys:
            return False
        try:
            for root, path, keys in self.modules:
                d = roots[root]
                for name in path:
                    d = d["_modules"][name].__dict__
                if _hook_keys(d) != keys:
                    return False
        except (KeyError, AttributeError, TypeError):  # a submodule removed, not a module
            return False
        return True


def _root_and_path(pr) -> tuple[Any, tuple[str, ...]]:
    """``self._modules['h']._modules['0']`` -> (``self``'s provenance, ('h', '0'))."""
    path = []
    while (pr.inst is PseudoInst.BINARY_SUBSCR and pr.inputs[1].inst is PseudoInst.CONSTANT
           and type(pr.inputs[1].value) is str and pr.inputs[0].inst is PseudoInst.LOAD_ATTR
           and pr.inputs[0].inputs[1].inst is PseudoInst.CONSTANT and pr.inputs[0].inputs[1].value == "_modules"):
        path.append(pr.inputs[1].value)
        pr = pr.inputs[0].inputs[0]
    return pr, tuple(reversed(path))


def check_module_call(wrapped_module: WrappedValue) -> None:
    """Adds the called module to the entry's hooks check, once per module and trace."""
    pr = wrapped_module.provenance
    if pr is None or not (pr.inst is PseudoInst.INPUT_FN or _may_register_for_prologue(pr)):
        return
    if pr.inst is not PseudoInst.INPUT_FN and (not _rooted_in_prologue(pr) or _rooted_in_arguments(pr)):
        return
    try:
        ctx = jit_ext.get_jit_ctx()
    except LookupError:
        return
    state = ctx.__dict__.get("_metatrace_hooks")
    if state is None:
        state = ctx._metatrace_hooks = _HooksCheck(new_id("v"))
        EXPECTED[state.value_id] = state.expected
    state.add(ctx, wrapped_module.value, pr)


class _HooksCheck:
    """The entry's hooks check while the function is interpreted: the constraint (one prologue
    call with every root's proxy) is replaced in thunder's list as roots are added."""

    def __init__(self, value_id: str):
        self.value_id, self.expected = value_id, ExpectedHooks()
        self.seen: set[int] = set()
        self.roots: dict[Any, int] = {}  # provenance key -> index among the proxies
        self.proxies: list[Proxy] = []
        self.constraint: tuple | None = None

    def add(self, ctx, module: torch.nn.Module, pr) -> None:
        if id(module) in self.seen:
            return
        self.seen.add(id(module))
        root_pr, path = _root_and_path(pr)
        key = _provenance_key(root_pr)
        if key not in self.roots:
            self.roots[key] = len(self.proxies)
            # ``root.__dict__``, read from the user's module, not thunder's wrapper of it (the flag), and
            # without unpacking the root again (a second ``unpack_thunder_module`` stops ddp/fsdp)
            dict_pr = ProvenanceRecord(PseudoInst.LOAD_ATTR, inputs=[
                root_pr, ProvenanceRecord(PseudoInst.CONSTANT, inputs=[], value="__dict__")])
            dict_pr.ext_flag |= jit_ext.EXT_FLAG_IS_CALLABLE
            with tracectx(ctx.computation_trace):
                self.proxies.append(Proxy(prefix="value", history=dict_pr))  # (thunder names its own "module"s)
            self._replace_constraint(ctx)
        self.expected.add(self.roots[key], path, module,
                          readable_source(source_text(pr), getattr(ctx, "_metatrace_fn", None)))

    def _replace_constraint(self, ctx) -> None:
        constraint = (ValueConstraint(self.value_id), *self.proxies)
        if self.constraint is None:
            ctx.add_constraint(constraint)
        else:
            ctx._constraints[ctx._constraints.index(self.constraint)] = constraint
        self.constraint = constraint
