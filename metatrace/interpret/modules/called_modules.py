"""The state of every module the trace called that thunder's prologue does not read again: its
hooks, and which tensors and submodules it holds. A change after the compile misses the entry.

**Hooks.** thunder's interpreter runs ``nn.Module._call_impl`` like any Python code: it reads
the module's hook dicts (and PyTorch's global ones), finds them empty and takes the plain
``forward`` path, or runs the hooks it finds into the trace. Either way the trace bakes in which
hooks there were, and stock thunder's prologue checks none of it: a hook registered after the
compile (``block.register_forward_hook(capture)``, ``register_module_forward_hook``) never ran
on a reused entry, and a removed one still ran.

**Tensors and submodules.** ``thunder.jit(model)`` wraps the model in a ``ThunderModule`` that
copies the model's parameters, buffers and submodules into its own dicts (``_overrides_*``,
``_module_cache``: transforms such as fsdp replace them there), and the prologue reads them
from those dicts. A tensor or submodule rebound on the model after the jit
(``block.scale = torch.full(...)``, ``layer.weight = nn.Parameter(...)``, ``model.blocks[1] =
Block()``, ``model.act = nn.Tanh()`` where no tensor changes) was never seen: every later call
used the old one. Where the wrapper's entry is still
the tensor or submodule the trace read, the check makes the wrapper follow the model and misses,
so the next entry reads the new one. An entry a transform replaced is the transform's, and is
left alone.

The prologue checks all of it in one call per entry: the ``__dict__`` of each root the modules
were read from (the jitted module, a global or closure module), each module reached from its
root by ``_modules`` keys as the interpreter read it. Per module: the handle ids of its hook
dicts (every registration gets a new id), its class, the identity of each tensor the wrapper
holds for it;
then PyTorch's global hook dicts. Modules created inside the function, or passed as arguments,
are not checked (a new module has no state the trace missed; an argument's structure is
:mod:`metatrace.guards.structure`'s).
"""

from __future__ import annotations

import weakref
from typing import Any

import thunder.core.jit_ext as jit_ext
import torch
import torch.nn.modules.module as torch_module
from thunder.core.interpreter import WrappedValue

from thunder.core.proxies import Proxy
from thunder.core.trace import tracectx

from metatrace.errors import ProcessLocal
from metatrace.guards import provenance
from metatrace.state import compile_context
from metatrace.state.compile_session import current_jit_ctx, session
from metatrace.guards.provenance import is_jitted_function, may_register_for_prologue, rooted_in_arguments, rooted_in_prologue
from metatrace.state.registry import EXPECTED, new_id
from metatrace.guards.value_checks import ValueConstraint
from metatrace.interpret.modules.wrapper_copies import wrapper_of_module

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


class _CalledModule:
    """What the check knows of one module: where it is, its hooks, and the tensors the wrapper
    holds for it (kind, name, dotted name, a weak reference to the tensor the trace read).
    ``base``: the index of the nearest module checked before it on its path from the same root
    (-1: none), ``rest``: the ``_modules`` keys from there, so that a check walks each level once."""

    __slots__ = ("root", "path", "hook_keys", "module", "cls", "tensors", "base", "rest")

    def __init__(self, root: int, path: tuple[str, ...], module: torch.nn.Module, wrapper, base: int, rest):
        self.root, self.path, self.hook_keys = root, path, _hook_keys(module.__dict__)
        self.module, self.cls = weakref.ref(module), type(module)
        self.tensors = [] if wrapper is None else list(_wrapped_tensors(module, path, wrapper))
        self.base, self.rest = base, rest


def _wrapped_tensors(module: torch.nn.Module, path: tuple[str, ...], wrapper):
    for kind, held in (("_parameters", wrapper._overrides_parameters), ("_buffers", wrapper._overrides_buffers)):
        for name, t in module.__dict__[kind].items():
            full = ".".join((*path, name))
            if t is not None and held.get(full) is t:  # (a transform's replacement is not followed)
                yield kind, name, full, weakref.ref(t)


class ExpectedModuleState:
    """One prologue check per entry (``metatrace.state.registry.EXPECTED``): every module the
    trace called has the hooks and tensors it had then, and PyTorch has the global hooks it had.
    The prologue passes the ``__dict__`` of each root; a submodule is reached from its root by its
    ``_modules`` keys (dict lookups: thunder's ``get_submodule`` for each would cost a microsecond)."""

    __slots__ = ("modules", "global_keys", "sources", "wrapper", "index")

    def __init__(self, wrapper):
        self.modules: list[_CalledModule] = []
        self.sources: list[str] = []
        self.global_keys = _global_hook_keys()
        self.wrapper = None if wrapper is None else weakref.ref(wrapper)  # the jitted model's ThunderModule
        self.index: dict[tuple, int] = {}  # (root, path) -> position in ``modules``

    def add(self, root: int, path: tuple[str, ...], module: torch.nn.Module, source: str, in_wrapper: bool) -> None:
        wrapper = self.wrapper() if self.wrapper is not None and in_wrapper else None
        base, start = -1, 0
        for cut in range(len(path) - 1, 0, -1):  # the longest prefix already checked
            found = self.index.get((root, path[:cut]))
            if found is not None:
                base, start = found, cut
                break
        self.index[(root, path)] = len(self.modules)
        self.modules.append(_CalledModule(root, path, module, wrapper, base, path[start:]))
        self.sources.append(source)

    @property
    def text(self) -> str:
        shown = ", ".join(self.sources[:4]) + (f" and {len(self.sources) - 4} more" if len(self.sources) > 4 else "")
        return (f"hooks and tensors unchanged on {shown} and PyTorch's global hooks (the trace ran the hooks it "
                "found and read the tensors thunder's module held)")

    def __reduce__(self):
        # a stored entry (metatrace.entry_cache): modules by root and path, classes by name; hooks are
        # known by their handles' ids, which mean nothing in another process
        if self.global_keys is not None or any(m.hook_keys is not None for m in self.modules):
            raise ProcessLocal("a module the trace called has hooks (known by their handles in this process)")
        modules = tuple((m.root, m.path, m.cls, tuple(t[:3] for t in m.tensors), m.base, m.rest) for m in self.modules)
        return _restored_module_state, (modules, tuple(self.sources), self.wrapper is not None)

    def matches(self, *roots: dict) -> bool:
        same = _global_hook_keys() == self.global_keys
        wrapper = self.wrapper() if self.wrapper is not None else None
        held = None if wrapper is None else {"_parameters": wrapper._overrides_parameters,
                                             "_buffers": wrapper._overrides_buffers}
        rebound = False
        walked: list[dict] = []  # each module's __dict__, in the order of ``modules``
        try:
            for m in self.modules:
                d = roots[m.root] if m.base < 0 else walked[m.base]
                for name in m.rest:
                    sub = d["_modules"][name]
                    d = sub.__dict__
                # a submodule replaced by one of another class (``model.act = nn.Tanh()``): the
                # trace ran the old one's forward (stock thunder too)
                rebound = rebound or bool(m.rest) and type(sub) is not m.cls
                walked.append(d)
                same = same and _hook_keys(d) == m.hook_keys
                for kind, name, full, _ in m.tensors:
                    # the model's tensor is the wrapper's copy, which the prologue reads (the
                    # epilogue's own ``self.avg = ...`` moves both: metatrace.interpret.modules.wrapper_copies)
                    rebound = rebound or held is None or d[kind].get(name) is not held[kind].get(full)
        except (KeyError, AttributeError, TypeError):  # a submodule removed, not a module
            same = False
        return same and not rebound  # (the next compile follows the model: wrapper_copies.follow_the_model)


def _restored_module_state(modules: tuple, sources: tuple, had_wrapper: bool) -> ExpectedModuleState:
    """A stored check, for the module the loading process jits (compile_context.ENTRY_LOADING)."""
    state = ExpectedModuleState.__new__(ExpectedModuleState)
    wrapper = compile_context.ENTRY_LOADING.get().wrapper if had_wrapper else None
    state.wrapper = None if wrapper is None else weakref.ref(wrapper)
    state.global_keys, state.sources, state.index, state.modules = None, list(sources), {}, []
    for root, path, cls, tensors, base, rest in modules:
        m = _CalledModule.__new__(_CalledModule)
        m.root, m.path, m.hook_keys, m.module, m.cls = root, path, None, None, cls
        m.tensors, m.base, m.rest = [(*t, None) for t in tensors], base, rest
        state.modules.append(m)
    return state


def check_module_call(wrapped_module: WrappedValue) -> None:
    """Adds the called module to the entry's check, once per module and trace."""
    pr = wrapped_module.provenance
    if pr is None or not (is_jitted_function(pr) or may_register_for_prologue(pr)):
        return
    if not is_jitted_function(pr) and (not rooted_in_prologue(pr) or rooted_in_arguments(pr)):
        return
    ctx = current_jit_ctx()
    if ctx is None:
        return
    compile_session = session(ctx)
    state = compile_session.called_modules
    if state is None:
        state = compile_session.called_modules = _CalledModulesCheck(new_id("v"), _wrapper_of(ctx))
        EXPECTED[state.value_id] = state.expected
    state.add(ctx, wrapped_module.value, pr)


def _wrapper_of(ctx):
    """The ThunderModule of the jitted model (None when a function is jitted, or outside a compile)."""
    return wrapper_of_module(session(ctx).fn)


class _CalledModulesCheck:
    """The entry's check while the function is interpreted: the constraint (one prologue call
    with every root's proxy) is replaced in thunder's list as roots are added."""

    def __init__(self, value_id: str, wrapper):
        self.value_id, self.expected = value_id, ExpectedModuleState(wrapper)
        self.seen: set[int] = set()
        self.roots: dict[Any, int] = {}  # provenance key -> index among the proxies
        self.proxies: list[Proxy] = []
        self.constraint: tuple | None = None

    def add(self, ctx, module: torch.nn.Module, pr) -> None:
        blocks = session(ctx).blocks
        if blocks is not None:
            for recording in blocks.recordings:
                recording.called_modules.append((module, pr))  # replayed for a stamped sibling
        if id(module) in self.seen:
            return
        self.seen.add(id(module))
        root_pr, path = provenance.submodule_path(pr)
        key = provenance.key(root_pr)
        if key not in self.roots:
            self.roots[key] = len(self.proxies)
            # ``root.__dict__``, read from the user's module, not thunder's wrapper of it (the flag), and
            # without unpacking the root again (a second ``unpack_thunder_module`` stops ddp/fsdp)
            dict_pr = provenance.attribute_record(root_pr, "__dict__", jit_ext.EXT_FLAG_IS_CALLABLE)
            with tracectx(ctx.computation_trace):
                self.proxies.append(Proxy(prefix="value", history=dict_pr))  # (thunder names its own "module"s)
            self._replace_constraint(ctx)
        self.expected.add(self.roots[key], path, module,
                          provenance.text(pr, session(ctx).fn), in_wrapper=is_jitted_function(root_pr))

    def _replace_constraint(self, ctx) -> None:
        constraint = (ValueConstraint(self.value_id), *self.proxies)
        if self.constraint is None:
            ctx.add_constraint(constraint)
        else:
            ctx._constraints[ctx._constraints.index(self.constraint)] = constraint
        self.constraint = constraint
