"""thunder's ``add_transform`` (``ddp``, ``fsdp``) and its wait scheduling under symbolic values.

- ``thunder.core.transforms.add_transform`` re-jits the function with the new transforms and
  every option of the original jit except its cache option (its comment reads ``# cache,
  interpretation?``): ``ddp(thunder.jit(model, cache="symbolic values"))`` ran under constant
  values and compiled once per input shape. The wrapped one passes the cache option on.
- ``thunder.distributed.utils.sort_waits`` (run on every trace with collectives) rebuilds the
  trace with ``bsym_list_to_dag``/``toposort_bsym_dag``, which assume every proxy has one
  producer. metatrace re-binds a size symbol where a later trace needs it (``prims.shape`` of
  the same tensor, see :mod:`metatrace.passes.size_producers`), so a size has several: the
  toposort then met a consumer once per producer and emitted it again each time (the joint trace
  held each gradient all-reduce six times, and the forward/backward split failed). The wrapped
  pass keeps each bound symbol at its first place, which follows its first producer, as thunder's
  ``producers`` map does.
"""

from __future__ import annotations

import functools

import thunder.core.transforms as transforms
import thunder.distributed.utils as distributed_utils

from metatrace.patching import Patch, attribute


def _add_transform(original):
    @functools.wraps(original)
    def add_transform(cfn, *, transform, disable_torch_autograd_support=False):
        cd = getattr(cfn, "_lc_cd", None)
        if cd is None or cd.cache_option is None:
            return original(cfn, transform=transform, disable_torch_autograd_support=disable_torch_autograd_support)
        # thunder's body with the cache option passed on. thunder's is not called first for its
        # checks: jit() of a module applies the transforms' ``transform_module`` (fsdp shards the
        # parameters), which must happen once.
        from thunder import jit

        if not (isinstance(transform, transforms.Transform) or all(isinstance(t, transforms.Transform) for t in transform)):
            return original(cfn, transform=transform, disable_torch_autograd_support=disable_torch_autograd_support)
        transforms_list = [transform] if isinstance(transform, transforms.Transform) else list(transform)
        jfn = jit(
            cd.fn,
            langctx=cd.langctx,
            executors=cd.executors_list,
            sharp_edges=cd.sharp_edges,
            cache=cd.cache_option,
            transforms=cfn._lc_transforms + transforms_list,
            debug_options=cd.debug_options,
            disable_torch_autograd=cd.disable_torch_autograd_support or disable_torch_autograd_support,
            **cd.compile_options,
        )
        return jfn

    return add_transform


def _sort_waits(original):
    @functools.wraps(original)
    def sort_waits(execution_trace):
        trace = original(execution_trace)
        if trace is execution_trace:
            return trace
        seen: set[int] = set()
        unique = []
        for bsym in trace.bound_symbols:
            if id(bsym) not in seen:
                seen.add(id(bsym))
                unique.append(bsym)
        trace.bound_symbols = unique
        return trace

    return sort_waits


def patches() -> list[Patch]:
    return [
        attribute(transforms, "add_transform", _add_transform,
                  "ddp/fsdp (any add_transform) re-jit with the original cache option; thunder drops it", wrap=True),
        attribute(distributed_utils, "sort_waits", _sort_waits,
                  "the wait scheduling keeps each bound symbol once when a size symbol has several producers",
                  wrap=True),
    ]
