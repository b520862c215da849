"""Methods of a jitted module that call its ``forward`` (``jm.generate``) run the compiled forward.

``jm = thunder.jit(model)`` returns a ``ThunderModule`` whose ``__getattr__`` hands back the
wrapped model's attributes: ``jm.generate`` was ``model.generate``, bound to the model, which calls
``model(...)``, the eager forward. Generation ran entirely in eager and nothing said so.

While metatrace is enabled, a method of the model reached through the ``ThunderModule`` (one the
model's class defines, not ``torch.nn.Module``'s own) runs with the model's ``forward`` redirected
to the ThunderModule for the duration of the call: ``self(...)`` and ``self.forward(...)`` inside
``generate`` reach the compiled forward. The redirection keeps the forward's signature
(``generate`` inspects it for the arguments it may pass) and is lifted while the compiled forward
runs, so the trace and its guards see the model as it is; what the model had as an instance
``forward`` before is put back afterwards.
"""

from __future__ import annotations

import functools
import inspect
import types

import torch
from thunder.core.module import ThunderModule

from metatrace.patching import Patch, attribute
from metatrace.state.process_tables import RUNNING_MODEL_METHODS

_MISSING = object()


def _module_method(model, name: str) -> bool:
    """``name`` is a method the model's own class (not nn.Module) defines, other than forward."""
    if name.startswith("__") or name == "forward":
        return False
    for klass in type(model).__mro__:
        if name in vars(klass):
            return klass not in (torch.nn.Module, object) and inspect.isfunction(vars(klass)[name])
    return False


def _with_compiled_forward(jm: ThunderModule, method):
    model = jm._model

    @functools.wraps(method)
    def run(*args, **kwargs):
        if getattr(RUNNING_MODEL_METHODS, "model", None) is model:  # nested (generate calling _sample): already redirected
            return method(*args, **kwargs)
        before = model.__dict__.get("forward", _MISSING)
        eager_forward = model.forward

        @functools.wraps(eager_forward)
        def compiled_forward(*fargs, **fkwargs):
            _restore(model, before)
            try:
                return jm(*fargs, **fkwargs)
            finally:
                model.__dict__["forward"] = compiled_forward

        model.__dict__["forward"] = compiled_forward
        RUNNING_MODEL_METHODS.model = model
        try:
            return method(*args, **kwargs)
        finally:
            RUNNING_MODEL_METHODS.model = None
            _restore(model, before)

    return run


def _restore(model, before) -> None:
    if before is _MISSING:
        model.__dict__.pop("forward", None)
    else:
        model.__dict__["forward"] = before


def _getattr(original):
    @functools.wraps(original)
    def __getattr__(self, name: str):
        value = original(self, name)
        if name == "_model" or not isinstance(value, types.MethodType):
            return value
        model = self._modules["_model"]
        if value.__self__ is not model or not _module_method(model, name):
            return value
        return _with_compiled_forward(self, value)

    return __getattr__


def patches() -> list[Patch]:
    return [attribute(ThunderModule, "__getattr__", _getattr,
                      "jm.generate (a model method calling forward) runs the compiled forward", wrap=True)]
