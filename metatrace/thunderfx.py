"""ThunderFX (``thunder.dynamo.thunderfx(fn)``, ``torch.compile(fn, backend=thunder.dynamo.ThunderCompiler())``)
under symbolic values.

Three defaults change while metatrace is enabled:

- a ThunderCompiler built without a ``cache`` option jits each Dynamo subgraph with
  ``cache="symbolic values"`` (thunder's default is constant values: a subgraph Dynamo marked dynamic,
  whose sizes arrive as SymInts, would be recompiled by thunder for every new size);
- ``torch.compile`` given a ThunderCompiler backend (``thunderfx`` calls it so) and no ``dynamic``
  argument captures with ``dynamic=True``: Dynamo's graph is dynamic from the first call, where by
  default its first graph is static and the second length brings a dynamic one (and thunder compiles
  every subgraph twice). Dynamo's options, not the backend: a backend sees the graph after Dynamo
  chose its sizes. Dynamo keeps its own 0/1 specialization;
- and Dynamo traces for a ThunderCompiler with ``specialize_float``: a module's float attributes
  are constants guarded by value, not 0-d tensors read back with ``.item()``, which thunder under
  symbolic values cannot branch on (``_specialize_floats``).

An explicit ``cache=`` or ``dynamic=`` (``False`` included) is respected. And thunder's splitter
asks whether thunder runs a node several times per node (``fx.split_module``'s regions), each
answer running the node's meta and vjp: it is answered once per node, and the trial run once per
graph and signature (``_run_once_per_signature``; ``state/thunderfx_checks.py``); a custom op
metatrace traces is thunder's (``_traced_custom_op``), and under symbolic values so is an op
thunder only registers automatically when its meta runs on the node (``_auto_registered_answer``),
and a ``torch.Size`` built for a view is inlined as its list of sizes (``_sizes_inlined``).
"""

from __future__ import annotations

import functools
import inspect

import torch

from metatrace.patching import Patch, attribute
from metatrace.state.thunderfx_checks import SIGNATURE_ANSWERS, SUPPORT


def _init(original):
    @functools.wraps(original)
    def __init__(self, **thunder_options):
        thunder_options.setdefault("cache", "symbolic values")
        original(self, **thunder_options)

    return __init__


def _specialize_floats(compiled) -> bool:
    """Dynamo's ``specialize_float`` on while it traces ``compiled`` (the result of torch.compile
    with a ThunderCompiler): a closure patcher in the hooks Dynamo enters around every call of it,
    beside the one ``dynamic=`` installs there. False where no Dynamo context is found.

    Under ``dynamic=True`` (and for a float that changed, under ``dynamic=None``) Dynamo makes
    floats dynamic: a module's float attribute (an RMSNorm's ``variance_epsilon``, attention's
    ``scaling`` and ``attention_dropout``, an embedding's ``norm_type``) reaches the graph as a
    float64 0-d tensor read back with ``.item()`` ("tensorified"). Inductor turns those back into
    numbers; thunder cannot: under symbolic values ``.item()`` is a value read from tensor data, and
    the first check on it (``dropout``'s ``0 <= p <= 1``) raises ``DataDependentError``.
    Specialized, they are constants Dynamo guards by value (``CONSTANT_MATCH``), as ``thunder.jit``
    + metatrace checks a module's floats by value. (A float argument that changes from call to call
    is then a Dynamo recompile per value, as under ``dynamic=False``.) A backend's own
    ``backend_ctx_ctor`` would be the hook for this, but torch.compile wraps every backend but
    inductor in a ``_TorchCompileWrapper``, which drops it."""
    from torch._dynamo import config
    from torch._dynamo.eval_frame import _TorchDynamoContext

    ctx = getattr(compiled, "dynamo_ctx", None)  # an OptimizedModule
    if ctx is None:  # a function: Dynamo's compile_wrapper closes over its context
        cells = getattr(compiled, "__closure__", None) or ()
        ctx = next((c.cell_contents for c in cells if isinstance(c.cell_contents, _TorchDynamoContext)), None)
    if not isinstance(ctx, _TorchDynamoContext):
        return False
    ctx.enter_exit_hooks.append(config._make_closure_patcher(specialize_float=True))
    return True


_UNSET = object()
_COMPILE_OPTIONS = ["fullgraph", "dynamic", "backend", "mode", "options", "disable"]


def _compile(original):
    from thunder.dynamo import ThunderCompiler

    # torch.compile's own keyword-only signature (torch 2.9.1): thunderfx splits its options by
    # ``inspect.getfullargspec(inspect.unwrap(torch.compile)).kwonlyargs``, and rebinds
    # ``torch.compile`` to what ``inspect.unwrap`` finds, so this function has no ``__wrapped__``
    def compile(model=None, *, fullgraph=False, dynamic=_UNSET, backend="inductor", mode=None, options=None,
                disable=False):
        if model is None:  # the decorator form: torch.compile(backend=...) then applied to the model
            return functools.partial(compile, fullgraph=fullgraph, dynamic=dynamic, backend=backend, mode=mode,
                                     options=options, disable=disable)
        if dynamic is _UNSET:
            dynamic = True if isinstance(backend, ThunderCompiler) else None
        compiled = original(model, fullgraph=fullgraph, dynamic=dynamic, backend=backend, mode=mode,
                            options=options, disable=disable)
        if isinstance(backend, ThunderCompiler) and dynamic is not False:
            _specialize_floats(compiled)
        return compiled

    compile.__doc__, compile.__name__, compile.__qualname__ = original.__doc__, original.__name__, original.__qualname__
    compile.__module__ = original.__module__
    return compile


def _traced_custom_op(node) -> bool:
    """A call of a ``torch.library`` custom op that thunder was not told about and that metatrace
    traces (``metatrace.metas.torch_ops.custom_ops``: its fake implementation with symbolic sizes,
    its own autograd). thunder's splitter finds no mapping for it and sends it to inductor, whose
    AOT autograd traces the op's backward on fake tensors: transformers' ``grouped_mm_fallback``
    (the MoE layers' default experts) reads its offsets with ``tolist()`` there, and inductor fails
    with ``DataDependentOutputException`` (Dynamo then gives up the whole frame: a graph break and
    the frame run again, for every MoE layer). Thunder runs it, as under ``thunder.jit``. Only the
    packet (``torch.ops.ns.name``, what Dynamo puts in its graphs): metatrace's lookaside is on its
    ``__call__``."""
    from metatrace.metas.torch_ops.custom_ops import traces

    return node.op == "call_function" and isinstance(node.target, torch._ops.OpOverloadPacket) \
        and traces(node.target)


def _splitter(original):
    """thunder's splitter flags each output of a thunder subgraph differentiable when its example
    value has a ``grad_fn``: a SymInt output (a size the next partition takes, common under
    dynamic capture: ``mul_24 = s27 * s52``) is flagged non-differentiable, and thunder's
    ``ThunderFunction`` passes it to ``ctx.mark_non_differentiable``, which takes tensors only
    (``RuntimeError: mark_non_differentiable only accepts variable arguments``; thunder 0.2.6's
    ``dynamo/splitter.py`` and ``executors/torch_autograd.py``, stock thunder under ``dynamic=True``
    too). A number output is flagged differentiable here, which the autograd function ignores."""

    @functools.wraps(original)
    def _splitter(gm, thunder_jit, *args, **kwargs):
        def jit(graph_module, *, is_differentiable_outputs=None, **options):
            if is_differentiable_outputs is not None:
                outputs = [n for node in graph_module.graph.nodes if node.op == "output" for n in node.all_input_nodes]
                if len(outputs) == len(is_differentiable_outputs):
                    is_differentiable_outputs = [
                        flag or not isinstance(n.meta.get("example_value", None), torch.Tensor)
                        for n, flag in zip(outputs, is_differentiable_outputs)]
            return thunder_jit(graph_module, is_differentiable_outputs=is_differentiable_outputs, **options)

        thunder_options = kwargs.get("thunder_options", args[2] if len(args) > 2 else None)
        if thunder_options is not None and _symbolic(thunder_options):
            _sizes_inlined(gm)
        return original(gm, jit, *args, **kwargs)

    return _splitter


# the modules of torch's functions (``torch.zeros``, ``torch.reshape``, ``F.pad``), whose shape
# parameters take any sequence of ints
_SHAPE_TAKERS = ("torch", "torch.functional", "torch.nn.functional", "torch._C._nn")


def _takes_a_shape(user, size) -> bool:
    """``user`` is a torch function or a tensor method (not one of ``size``'s own) that takes
    ``size`` as an argument: a ``SymInt[]`` parameter, which a list fills as a ``torch.Size`` does."""
    if user.op == "call_method":
        return bool(user.args) and user.args[0] is not size
    if user.op != "call_function" or user.target is torch.Size:
        return False
    return isinstance(user.target, torch._ops.OpOverload | torch._ops.OpOverloadPacket) or \
        getattr(user.target, "__module__", None) in _SHAPE_TAKERS


def _sizes_inlined(gm) -> None:
    """Each ``torch.Size(sizes)`` node of Dynamo's graph whose users are all tensor ops taking it
    as a shape is replaced, in those users, by its list of sizes. GPT-2's ``Conv1D`` builds
    ``torch.Size(x.size()[:-1] + (nf,))`` for a ``view``; under dynamic capture Dynamo's graph has
    ``size_9 = torch.Size([s52, s27, 120]); x_1 = x.view(size_9)``, and thunder's splitter refuses
    both: ``torch.Size`` has no thunder mapping, and the view's proxies are made from each input's
    example value (a torch.Size is a tuple: "'SymInt' object has no attribute 'new_ones'"). Each
    refusal is a cut (GPT-2's training step: 6 thunder and 5 inductor subgraphs). With the list in
    place, ``x.view([s52, s27, 120])`` computes the same view, thunder runs it on its size proxies,
    and nothing of the size escapes the graph (a size that is an output or feeds another kind of
    node keeps its ``torch.Size``). Dynamo's guards are already built; none depends on this."""
    changed = False
    for size in list(gm.graph.find_nodes(op="call_function", target=torch.Size)):
        if len(size.args) != 1 or size.kwargs or not isinstance(size.args[0], (list, tuple)):
            continue
        if not size.users or not all(_takes_a_shape(user, size) for user in size.users):
            continue
        sizes = list(size.args[0])
        for user in list(size.users):
            user.args = torch.fx.map_arg(user.args, lambda n: sizes if n is size else n)
            user.kwargs = torch.fx.map_arg(user.kwargs, lambda n: sizes if n is size else n)
        gm.graph.erase_node(size)
        changed = True
    if changed:
        gm.recompile()


def _symbolic(thunder_options) -> bool:
    cache = thunder_options.get("cache")
    return cache is not None and "symbolic" in str(getattr(cache, "name", cache)).lower()


def _auto_registered_answer(node, thunder_options):
    """thunder's answer for an op it only registers automatically (``default_torch_ops.py``:
    ``torch.diff`` and ``Tensor.new_ones`` of transformers' mask code, ``torch.histc`` of the MoE
    routers), asked as for any op with a thunder symbol (its meta run on the node's example
    values), or None for another op. The splitter refuses these on purpose ("inductor might be
    able to deal with it better"); under symbolic values metatrace runs them on fake tensors with
    symbolic sizes (``metatrace.metas.torch_ops.auto_registered``, ``histc``) and every refusal
    costs a cut: the graph in several thunder subgraphs, an inductor compile per refused op
    (HF Llama's training step: 3 thunder subgraphs and 2 inductor compiles, a first call of 28 s;
    in one subgraph 12 s; Mixtral's 55 s against 40 s)."""
    from thunder.dynamo.utils import auto_register_ops, try_execute_thunder_symbol
    from thunder.torch import _torch_to_thunder_function_map

    target = getattr(torch.Tensor, node.target, None) if node.op == "call_method" else node.target
    if target is None or target not in auto_register_ops or target not in _torch_to_thunder_function_map:
        return None
    return try_execute_thunder_symbol(_torch_to_thunder_function_map[target], node, thunder_options)


def _answered_once(original):
    @functools.wraps(original)
    def is_node_supported_by_thunder(node, thunder_options):
        found = SUPPORT.get(node)
        if found is not None and found[0] is thunder_options:
            return found[1]
        answer = None
        if _traced_custom_op(node):
            answer = (True, None)
        elif node.op in ("call_function", "call_method") and _symbolic(thunder_options):
            answer = _auto_registered_answer(node, thunder_options)
        if answer is None:
            answer = original(node, thunder_options)
        SUPPORT[node] = (thunder_options, answer)  # (the options held: an id could be another's once freed)
        return answer

    return is_node_supported_by_thunder


# the types of constant arguments a signature holds by value (with their type: 1, 1.0 and True differ)
_CONSTANTS = (type(None), bool, int, str, torch.dtype, torch.device, torch.memory_format,
              torch.layout, type(Ellipsis))


def _argument_signature(arg):
    """What ``get_proxy_inputs_from_node`` makes of ``arg`` for thunder's symbol, as a hashable key,
    or None where the run may depend on more (an object passed as is: a context manager, a module,
    a tensor subclass, a size without a hint). A tensor's proxy is made from ``new_ones`` of its
    concrete shape, dtype and device: only those reach the symbol (and ``requires_grad``, which
    picks the vjp)."""
    if isinstance(arg, torch.fx.Node):
        if arg.op == "get_attr" or "example_value" not in arg.meta:
            return None
        value = arg.meta["example_value"]
        if isinstance(value, tuple):
            keys = tuple(_tensor_signature(v) for v in value)
            return None if None in keys else ("tensors", keys)
        if isinstance(value, torch.Tensor):
            return _tensor_signature(value)
        if isinstance(value, torch.types.py_sym_types) and value.node.has_hint():
            return ("number", type(value), value.node.hint)
        return None
    if type(arg) in (float, complex):  # (by repr: -0.0 == 0.0)
        return (type(arg), repr(arg))
    if isinstance(arg, _CONSTANTS):
        return (type(arg), arg) if type(arg) in _CONSTANTS else None
    if isinstance(arg, (tuple, list)):
        keys = tuple(_argument_signature(a) for a in arg)
        return None if None in keys else (type(arg), keys)
    if isinstance(arg, dict) and all(type(k) is str for k in arg):
        keys = tuple((k, _argument_signature(v)) for k, v in arg.items())
        return None if any(v is None for _, v in keys) else (dict, keys)
    if isinstance(arg, slice):
        keys = (_argument_signature(arg.start), _argument_signature(arg.stop), _argument_signature(arg.step))
        return None if None in keys else (slice, keys)
    return None


def _tensor_signature(value):
    from torch.utils._python_dispatch import is_traceable_wrapper_subclass

    if not isinstance(value, torch.Tensor) or is_traceable_wrapper_subclass(value):
        return None
    shape = tuple(s.node.hint if isinstance(s, torch.SymInt) else s for s in value.shape)
    if None in shape:
        return None
    return ("tensor", shape, value.dtype, value.device, value.requires_grad)


def _signature(thunder_symbol, node):
    if node.op not in ("call_function", "call_method"):
        return None
    args, kwargs = _argument_signature(tuple(node.args)), _argument_signature(dict(node.kwargs))
    if args is None or kwargs is None:
        return None
    # (the defaults thunder's run reads from torch: factory functions' dtype and device)
    return (id(thunder_symbol), node.op, args, kwargs, torch.get_default_dtype(), str(torch.get_default_device()))


def _run_once_per_signature(original):
    """thunder's trial run of a node's symbol on proxies (``try_execute_thunder_symbol``), done once
    per FX graph for each signature: the symbol and what its proxies are made of. A model's layers
    repeat the same ops on the same shapes, and each run is the op's meta and, where grad is
    required, its vjp (~10 ms a node; a 2-layer litgpt's 148 nodes, 1.6 s of a 5.8 s first call).
    The run is a function of its signature (the proxies carry no more than the signature holds), so
    the answer is the same; only successes are kept (a refusal's reason names its own node)."""

    @functools.wraps(original)
    def try_execute_thunder_symbol(thunder_symbol, node, thunder_options):
        key = _signature(thunder_symbol, node)
        if key is None:
            return original(thunder_symbol, node, thunder_options)
        answers = SIGNATURE_ANSWERS.setdefault(node.graph, {})
        found = answers.get(key)
        if found is not None and found[0] is thunder_options and found[1] is thunder_symbol:
            return True, None
        answer = original(thunder_symbol, node, thunder_options)
        if answer[0]:  # (the options and the symbol held: an id could be another's once freed)
            answers[key] = (thunder_options, thunder_symbol)
        return answer

    return try_execute_thunder_symbol


def patches() -> list[Patch]:
    try:
        from thunder.dynamo import ThunderCompiler
    except ImportError:  # thunder without its dynamo integration: nothing to change
        return []
    from thunder.dynamo import compiler, splitter, utils

    from metatrace import thunderfx_alias_args

    once = "the splitter's question whether thunder runs a node is answered once per node"
    rows = [attribute(ThunderCompiler, "__init__", _init,
                      "ThunderFX without a cache option jits Dynamo's subgraphs under symbolic values", wrap=True),
            attribute(splitter, "is_node_supported_by_thunder", _answered_once, once, wrap=True),
            attribute(utils, "is_node_supported_by_thunder", _answered_once, once, wrap=True),
            attribute(utils, "try_execute_thunder_symbol", _run_once_per_signature,
                      "thunder's trial run of a node's symbol is done once per FX graph and signature", wrap=True),
            attribute(compiler, "_splitter", _splitter,
                      "a number output of a thunder subgraph is not marked non-differentiable", wrap=True),
            *thunderfx_alias_args.patches()]
    if inspect.getfullargspec(inspect.unwrap(torch.compile)).kwonlyargs != _COMPILE_OPTIONS:
        return rows  # (another torch.compile: its options are not the wrapper's; Dynamo's defaults stay)
    return rows + [attribute(torch, "compile", _compile,
                      "torch.compile with a ThunderCompiler and no dynamic= captures dynamic graphs from the first call",
                      wrap=True)]
