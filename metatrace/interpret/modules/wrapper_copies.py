"""The jitted module's ThunderModule keeps its copies of the model's tensors and submodules in
step with the model.

``thunder.jit(model)`` copies the model's parameters, buffers and submodules into its
ThunderModule (``_overrides_parameters``, ``_overrides_buffers``, ``_module_cache``), and the
prologue reads them there (transforms such as fsdp replace some copies, which then are theirs).
Two things rebind a tensor on the model behind those copies:

- the user, between calls (``model.w = torch.full(...)``, ``model.blocks[1] = Block()``, before
  the first call too): at every compile, every copy the wrapper still holds as it copied it
  becomes what the model holds now (:func:`follow_the_model`), whatever else made the call miss
  (an input's dtype: thunder's own checks reject the entry before the module-state check runs);
- the function itself (``self.avg = self.avg * 0.9 + x.mean(0)`` rebinds a buffer): the
  epilogue replays that store into the model's ``_buffers`` and then moves the wrapper's copy
  with it (:func:`follow_stores`), so the next call's prologue reads the new tensor, as eager,
  and the module-state check (model's tensor is the wrapper's copy) keeps the entry: one
  compile, not one per call.
"""

from __future__ import annotations

import weakref

import torch
from thunder.core.module import ThunderModule, get_thunder_module

from metatrace.patching import Patch, attribute
from metatrace.state.object_tables import THUNDER_MODULE_COPIES

_KINDS = ("_parameters", "_buffers", "_modules")


def _held(wrapper, kind: str) -> dict:
    return {"_parameters": wrapper._overrides_parameters, "_buffers": wrapper._overrides_buffers,
            "_modules": wrapper._module_cache}[kind]


def _remember_copies(original):
    def __init__(self, model, compiled_model_call):
        """thunder's ThunderModule, remembering which tensors and submodules it copied from the
        model (before any transform replaces some of them: those are the transform's)."""
        original(self, model, compiled_model_call)
        copies = THUNDER_MODULE_COPIES.get(self)
        for kind in _KINDS:
            for full, value in _held(self, kind).items():
                if full and value is not None:
                    path, _, name = full.rpartition(".")
                    at = tuple(full.split(".")) if kind == "_modules" else tuple(path.split(".")) if path else ()
                    copies[(kind, full)] = [at, name, weakref.ref(value)]

    return __init__


def wrapper_of_module(fn):
    """The ThunderModule of the jitted module ``fn`` (None for a function, or without compile data)."""
    if not isinstance(fn, torch.nn.Module):
        return None
    try:
        wrapper = get_thunder_module(fn)
    except Exception:  # no compile data
        return None
    return wrapper if isinstance(wrapper, ThunderModule) else None


def module_at(root: dict, path: tuple[str, ...]) -> tuple[torch.nn.Module | None, dict | None]:
    """The submodule at ``path`` below the module whose ``__dict__`` is ``root``, and its ``__dict__``."""
    module, d = None, root
    for name in path:
        module = d["_modules"].get(name)
        if module is None:
            return None, None
        d = module.__dict__
    return module, d


def follow_the_model(fn) -> None:
    """Before each compile of a jitted module: every copy its ThunderModule still holds as the
    model's becomes what the model holds there now; one the model no longer has is dropped (the
    wrapper then asks the model, which raises AttributeError, as eager)."""
    wrapper = wrapper_of_module(fn)
    copies = None if wrapper is None else THUNDER_MODULE_COPIES.get(wrapper, create=False)
    if not copies:
        return
    root = wrapper._model.__dict__
    for (kind, full), entry in copies.items():
        at, name, ref = entry
        old, held = ref(), _held(wrapper, kind)
        if old is None or held.get(full) is not old:
            continue  # a transform's replacement
        if kind == "_modules":
            now = module_at(root, at)[0]
        else:
            d = module_at(root, at)[1]
            now = None if d is None else d[kind].get(name)
        if now is None:
            del held[full]
        elif now is not old:
            held[full] = now
            entry[2] = weakref.ref(now)


def follow_stores(wrapper, kind: str, prefix: str, before: dict, now: dict) -> None:
    """After the epilogue stored into the ``kind`` dict (``_buffers``/``_parameters``) of the
    model's module at ``prefix`` (``""``, ``"blocks.0."``): ``before`` was that dict's contents
    before the stores, ``now`` is the dict. Each entry the stores changed moves the wrapper's
    copy with it where the copy was the model's (or there was none)."""
    copies = THUNDER_MODULE_COPIES.get(wrapper)
    held = _held(wrapper, kind)
    for name, value in now.items():
        old = before.get(name)
        if value is old or value is None:
            continue
        full = prefix + name
        if full in held and held[full] is not old:
            continue  # a transform's replacement
        held[full] = value
        path = prefix[:-1]
        copies[(kind, full)] = [tuple(path.split(".")) if path else (), name, weakref.ref(value)]


def patches() -> list[Patch]:
    return [attribute(ThunderModule, "__init__", _remember_copies,
                      "a ThunderModule remembers what it copied from the model, to follow rebinding", wrap=True)]
