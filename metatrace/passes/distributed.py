"""thunder's ``add_transform`` (``ddp``, ``fsdp``) and its wait scheduling under symbolic values.

- ``thunder.core.transforms.add_transform`` re-jits the function with the new transforms and
  every option of the original jit except its cache option (its comment reads ``# cache,
  interpretation?``): ``ddp(thunder.jit(model, cache="symbolic values"))`` ran under constant
  values and compiled once per input shape. The wrapped one passes the cache option on.
- ``thunder.distributed.utils.sort_waits`` (run on every trace with collectives) rebuilds the
  trace with ``bsym_list_to_dag``/``toposort_bsym_dag``, which assume every proxy has one
  producer. metatrace re-binds a size symbol where a later trace needs it (``prims.shape`` of
  the same tensor, see :mod:`metatrace.passes.size_producers`), so a size has several: the
  DAG then listed a consumer as a child of every producer of the name but as the child of one
  parent only, and the toposort emitted it once per producer (the joint trace held each gradient
  all-reduce six times; on litgpt the list of eligible nodes grew without bound). The wrapped
  ``bsym_list_to_dag`` (the name ``sort_waits`` calls) keeps an edge only where both ends list
  it: the consumer follows its first producer, as thunder's ``producers`` map says.
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


def _bsym_list_to_dag(original):
    @functools.wraps(original)
    def bsym_list_to_dag(bsyms, *args, **kwargs):
        roots, leaves = original(bsyms, *args, **kwargs)
        # (a no-op on traces with one producer per proxy) Keep an edge only where both ends list it: a consumer of a re-bound size lists the
        # size's first producer as its parent, while every producer of the name lists the
        # consumer as a child. Linear in the edges.
        nodes, seen, stack = [], set(), [*roots, *leaves]
        while stack:
            node = stack.pop()
            if id(node) in seen:
                continue
            seen.add(id(node))
            nodes.append(node)
            stack.extend(node.children)
            stack.extend(node.parents)
        for node in nodes:
            node.children = [c for c in node.children if any(p is node for p in c.parents)]
        for node in nodes:  # (children filtered: a parent keeps node only if node listed it)
            node.parents = [p for p in node.parents if any(c is node for c in p.children)]
        return roots, leaves

    return bsym_list_to_dag


def patches() -> list[Patch]:
    return [
        attribute(transforms, "add_transform", _add_transform,
                  "ddp/fsdp (any add_transform) re-jit with the original cache option; thunder drops it", wrap=True),
        attribute(distributed_utils, "bsym_list_to_dag", _bsym_list_to_dag,
                  "the wait scheduling's DAG keeps an edge only where producer and consumer agree on it "
                  "(a re-bound size has several producers)", wrap=True),
    ]
