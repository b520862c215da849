"""Torch ops thunder registers automatically, run on fake tensors with symbolic sizes.

thunder has no definition of some torch functions (``thunder/torch/default_torch_ops.py``, tag
``AUTO_REGISTERED``: ``torch.min`` of two tensors, ``torch.roll``, ``Tensor.masked_fill`` ...).
Their meta (``meta_adaptor``) runs the torch function on fake tensors made with
``torch.empty(proxy.shape)``: every symbolic size of an input becomes its value (an equality
guard from ``__index__``) and every output size a constant, so an entry holds for one shape.
T5's relative position buckets (``torch.min(large, torch.full_like(large, n - 1))``) pinned the
query and key lengths, and each decode step of ``generate()`` compiled again.

While metatrace is enabled, where a tensor argument has a symbolic size, the meta runs the torch
function under torch's ``FakeTensorMode`` with a ``ShapeEnv``, every symbolic size a torch symbol
of its own (``custom_ops.FakeRun``, as for a custom op's fake implementation): an output size that
is an input's symbol is that input's size proxy, an integer stays an integer, and anything else
pins the sizes it reads (sound, named in ``explain()``); the decisions torch's meta made (its
guards in the ``ShapeEnv``) become metatrace guards. Number arguments are baked in by value, as
``metatrace.proxies.float_numbers`` does for these ops (guarded by equality, naming why).
Anything the fake run does not cover (``out=``, ``inplace=True``, an argument type thunder's
meta does not take, a meta that fails on symbolic sizes) keeps thunder's meta.
"""

from __future__ import annotations

import functools
import inspect

import thunder.core.devices as devices
import thunder.core.dtypes as dtypes
import thunder.torch as ltorch
import torch
from thunder.core.prims import OpTags
from thunder.core.proxies import NumberProxy, Proxy, TensorProxy
from thunder.core.pytree import tree_flatten, tree_map, tree_unflatten

from metatrace.metas import concretizations
from metatrace.metas.concretizations import Reason, ReasonKind
from metatrace.metas.torch_ops.custom_ops import FakeRun
from metatrace.patching import SYMBOL_METAS, Patch, attribute

# thunder's meta_adaptor stores the torch function on the meta it registers
TORCH_FUNCTION = "__torchfn"
# (float_numbers' fallback bakes numbers in with the same reason)
FAKE_ARG_WHY = Reason(ReasonKind.NAMED,
                      "a number argument of a torch op thunder registered automatically (torch's meta runs on values)")


NOT_COVERED = object()  # what a fake run returns where thunder's meta takes the call


def _covered(tree) -> bool:
    """A tensor argument has a symbolic size, and every argument is one the fake run takes (a
    number with a value; thunder's meta reads a container proxy by value, so it takes those)."""
    leaves = tree_flatten(tree)[0]
    symbolic = any(isinstance(x, TensorProxy) and any(isinstance(s, NumberProxy) for s in x._shape) for x in leaves)
    return symbolic and all(isinstance(x, TensorProxy) or (isinstance(x, NumberProxy) and x.value is not None)
                            or not isinstance(x, Proxy) for x in leaves)


def _fake_arg(run: FakeRun, x):
    """thunder's ``_get_fake_arg``, with a tensor's symbolic sizes as torch symbols."""
    if isinstance(x, TensorProxy):
        with run.mode:
            return torch.empty([run.size(s) for s in x._shape], dtype=dtypes.to_torch_dtype(x.dtype),
                               device=devices.to_torch_device(x.device), requires_grad=x.requires_grad)
    if isinstance(x, NumberProxy):
        concretizations.bake_in(x, x.value, FAKE_ARG_WHY)
        return x.value
    if isinstance(x, devices.Device):
        return devices.to_torch_device(x)
    if isinstance(x, dtypes.dtype):
        return dtypes.to_torch_dtype(x)
    return x


def _thunder_value(run: FakeRun, x, why: str):
    """thunder's ``_fake_type_to_thunder``, a symbolic size read back as the trace's number."""
    if isinstance(x, torch.Tensor):
        return TensorProxy(shape=tuple(run.number(s, why) for s in x.shape), device=devices.to_device(x.device),
                           dtype=dtypes.to_dtype(x.dtype), requires_grad=x.requires_grad)
    if isinstance(x, torch.SymInt):
        return run.number(x, why)
    if isinstance(x, torch.Size):
        return tuple(run.number(s, why) for s in x)
    return ltorch._fake_type_to_thunder(x)


def _fake_run(torchfn, args, kwargs):
    run = FakeRun()
    why = f"a size of {getattr(torchfn, '__name__', torchfn)}'s output (thunder registered it automatically)"
    fake_args, fake_kwargs = tree_map(functools.partial(_fake_arg, run), (args, kwargs))
    try:
        with run.mode:
            out = torchfn(*fake_args, **fake_kwargs)
    except Exception:  # torch's meta refuses symbolic sizes here: thunder's meta decides
        return NOT_COVERED
    flat, spec = tree_flatten(out)
    if any(isinstance(x, (torch.SymFloat, torch.SymBool)) for x in flat):
        return NOT_COVERED
    run.report_guards(why)
    outs = tuple(_thunder_value(run, x, why) for x in flat)
    # (thunder's rule: a torch.return_types result is a tuple)
    if getattr(spec.type, "__module__", "").startswith("torch.return_types"):
        return outs
    return tree_unflatten(list(outs), spec)


def _fake_run_meta(torchfn):
    """The wrapper of a meta of ``torchfn``'s: the symbol's, and the torch executor's operator's
    (which the grad transform's augmented forward calls)."""

    def wrap(original):
        return _wrapped(original, torchfn)

    return wrap


def _wrapped(original, torchfn):
    @functools.wraps(original)
    def meta(*args, **kwargs):
        # (a symbolic size is what says the cache is symbolic values: the grad transform calls the
        # operator's meta outside the compile data that using_symbolic_values() reads)
        if kwargs.get("inplace", False) or kwargs.get("out") is not None or not _covered((args, kwargs)):
            return original(*args, **kwargs)
        out = _fake_run(torchfn, args, kwargs)
        return original(*args, **kwargs) if out is NOT_COVERED else out

    return meta


def _backward_meta(original):
    """The meta of the operator computing an automatically registered op's gradients (thunder's
    ``backward_adaptor`` runs torch's autograd on fake tensors of the sizes' values): each
    gradient of a differentiable input is shaped like that input (what autograd checks of every
    backward), so its sizes are the input's symbols."""

    @functools.wraps(original)
    def meta(saved_for_backward, *grad_output):
        args, kwargs = saved_for_backward
        if not _covered((args, kwargs, grad_output)) or any(map(ltorch._is_differentiable, tree_flatten(kwargs)[0])):
            return original(saved_for_backward, *grad_output)
        flat, spec = tree_flatten(args)
        if not any(map(ltorch._is_differentiable, grad_output)):
            return tree_unflatten([None] * len(flat), spec)
        return tree_unflatten([TensorProxy(like=a, requires_grad=False) if ltorch._is_differentiable(a) else None
                               for a in flat], spec)

    return meta


def each_once(symbols) -> list:
    """``symbols`` without repeats, in order, by identity (one symbol serves several torch
    functions: ``torch.detach`` and ``Tensor.detach``)."""
    return list({id(sym): sym for sym in symbols}.values())


def thunder_symbols_of(*torch_fns) -> list:
    """thunder's symbols for ``torch_fns``, each once (a function thunder has none for is left)."""
    return each_once(sym for fn in torch_fns if (sym := ltorch._torch_to_thunder_function_map.get(fn)) is not None)


def auto_registered_symbols() -> list:
    """thunder's automatically registered torch op symbols (tag ``AUTO_REGISTERED``), each once."""
    return each_once(sym for sym in ltorch._torch_to_thunder_function_map.values()
                     if OpTags.AUTO_REGISTERED in (getattr(sym, "tags", None) or ()))


def _auto_registered_metas() -> list:
    """(symbol or operator, torch function) of each automatically registered torch op, each once:
    a symbol that carries the tag but not meta_adaptor's meta (a manual one shared with a method)
    is left."""
    from thunder.executors.torchex import ex

    out = []
    for sym in auto_registered_symbols():
        torchfn = getattr(sym.meta, TORCH_FUNCTION, None)
        if torchfn is None:
            continue
        out.append((sym, torchfn))
        op = ex.opmap.get(sym.name)
        # (the operator's meta is the one the symbol's wraps: rows before this one may wrap it again)
        if op is not None and inspect.unwrap(op.meta) is inspect.unwrap(sym.meta):
            out.append((op, torchfn))
            backward = ex.opmap.get(f"{sym.name}_vjp")
            if backward is not None:
                out.append((backward, None))
    return out


def patches() -> list[Patch]:
    why = "automatically registered torch ops run on fake tensors with symbolic sizes (no size pinned)"
    # (installed before the rows of metatrace.proxies.float_numbers, torch_metas and
    # interpret.tensor_metadata, which wrap it: they answer some calls themselves)
    return [attribute(sym, "meta", _backward_meta if torchfn is None else _fake_run_meta(torchfn), why, wrap=True,
                      label=SYMBOL_METAS)
            for sym, torchfn in _auto_registered_metas()]
