"""``t.numel()`` in traced code binds the sizes it multiplies, like any shape read there.

Under symbolic values a TensorProxy's number of elements is a closure multiplying its size
symbols; ``a.numel()`` in thunder's torch layer (``nll_loss``: ``if a.numel() == 0``) records
``prims.mul(1, i3)`` without the ``prims.shape`` binding that reading ``a.shape`` records, so
thunder's own trace check (``thunder.dev_utils.check_trace``: every argument known in its scope)
fails on the trace. While enabled, the torch language's ``numel`` method reads ``a.shape`` first.
"""

from __future__ import annotations

import importlib

# (thunder.torch re-exports a ``langctx`` name that hides the submodule from attribute access)
_methods = importlib.import_module("thunder.torch.langctx")._method_name_to_fn_map
_original = _methods["numel"]


def numel(a, /):
    a.shape  # noqa: B018 - when tracing, the read binds the sizes numel multiplies
    return _original(a)


def install() -> None:
    _methods["numel"] = numel


def uninstall() -> None:
    _methods["numel"] = _original
