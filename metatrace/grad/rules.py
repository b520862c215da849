"""Installs the rewritten autograd rules (see rewrites.int_as_function) in thunder's registries.

thunder keeps its rules in ``_grad_fn_map`` (wrapped in the torch language context by
``register_grad``), ``augmented_forward_impls`` and ``backward_impls``; an entry whose
underlying function was rewritten is replaced, wrapped the same way, and restored on disable.
"""

from __future__ import annotations

import inspect

import thunder.core.transforms as transforms
from thunder.core.langctxs import Languages, langctx

from metatrace.patching import Patch, item


def patches(rules: dict) -> list[Patch]:
    """A row per registry entry whose rule was rewritten (``rules``: qualname -> rewritten function)."""
    rows = []
    registries = (
        (transforms._grad_fn_map, "_grad_fn_map", lambda fn: langctx(Languages.TORCH)(fn)),
        (transforms.augmented_forward_impls, "augmented_forward_impls", lambda fn: fn),
        (transforms.backward_impls, "backward_impls", lambda fn: fn),
    )
    for registry, name, wrap in registries:
        for key, fn in list(registry.items()):
            raw = inspect.unwrap(fn)
            rewritten = rules.get(getattr(raw, "__qualname__", None))
            if rewritten is not None and getattr(raw, "__module__", None) == transforms.__name__:
                rows.append(item(registry, key, wrap(rewritten),
                                 "an autograd rule that converts sizes with int() keeps them symbolic (rewritten by the codegen)",
                                 label=f"thunder.core.transforms.{name}"))
    return rows
