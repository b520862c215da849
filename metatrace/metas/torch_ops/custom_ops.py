"""``torch.library.custom_op`` operators that thunder was not told about, traced with symbolic sizes.

thunder 0.2.6 raises on a custom op nobody passed to ``thunder.torch.register_custom_op``
(``transformers.grouped_mm_fallback is not registered``). Libraries call their own: transformers
5's Mixture-of-Experts layers (``experts_implementation="grouped_mm"``, the default) call
``torch.ops.transformers.grouped_mm_fallback`` whenever ``torch.compiler.is_compiling()``
(which thunder answers True) and the weights are not bfloat16. Registering an op with thunder's
own function would not serve either: its meta runs the op's fake implementation on fake tensors
of the trace-time sizes (every size pinned: a compile per sequence length), and its autograd
support reads ``setup_context``'s source and rebuilds ``ctx`` from saved tensors only (an
attribute such as transformers' ``ctx.offs`` is lost).

While metatrace is enabled a custom op that thunder does not know and that mutates none of its
arguments is traced with two operators of thunder's torch executor, registered once for every
custom op (no thunder table grows while tracing):

- ``metatrace_custom_op("ns::name", *args)`` calls ``torch.ops.ns.name`` when the computation
  runs. Its meta runs the op's registered fake implementation under torch's ``FakeTensorMode``
  with a ``ShapeEnv``, every symbolic size of an input a torch symbol of its own (no duck sizing,
  no 0/1 specialization), and reads the output sizes back: an input's symbol is that input's size
  proxy, an integer stays an integer. The guards the ``ShapeEnv`` recorded (the fake
  implementation's checks) become metatrace guards on those proxies; a guard or an output size
  that is not one symbol against an integer or a symbol pins the sizes it reads (sound, and
  named in ``explain()``).
- Its gradient, for an op with a registered autograd (``torch.library.register_autograd``), is
  ``metatrace_custom_op_backward("ns::name", n, *cotangents, *args)``, which runs the op again
  under ``torch.enable_grad()`` and asks torch's autograd for the gradients of its floating-point
  tensor inputs: the op's own backward with the ``ctx`` its own ``setup_context`` filled, at the
  cost of the forward computed twice. Its meta: each gradient is shaped like its input (what
  autograd checks of every backward).
"""

from __future__ import annotations

import sympy
import thunder.core.devices as devices
import thunder.core.dtypes as dtypes
import thunder.core.jit_ext as jit_ext
import thunder.core.transforms as transforms
import torch
from thunder.core.langctxs import Languages, langctx
from thunder.core.proxies import IntegerProxy, NumberProxy, TensorProxy
from thunder.core.pytree import tree_flatten, tree_map, tree_unflatten

from metatrace.errors import MetatraceError
from metatrace.metas import concretizations
from metatrace.metas.relations import Relation
from metatrace.patching import Patch, item
from metatrace.state.object_tables import CUSTOM_OP_OPERATORS

NAME = "metatrace_custom_op"
BACKWARD_NAME = "metatrace_custom_op_backward"


class CustomOpError(MetatraceError, RuntimeError):
    """A custom op metatrace cannot trace: it mutates an argument, has no fake implementation, or
    returns something other than tensors."""


def _opdef(qualname: str):
    from torch._library.custom_ops import OPDEFS

    return OPDEFS.get(qualname)


def _op(qualname: str):
    namespace, name = qualname.split("::")
    return getattr(getattr(torch.ops, namespace), name)


def _differentiable(x) -> bool:
    if isinstance(x, TensorProxy):
        return dtypes.is_inexact_dtype(x.dtype)
    return isinstance(x, torch.Tensor) and (x.is_floating_point() or x.is_complex())


# --- the forward's meta: the fake implementation with symbolic sizes -------------------------


class FakeRun:
    """One run of a fake implementation: the ShapeEnv and the symbol of every size proxy."""

    def __init__(self):
        from torch._subclasses.fake_tensor import FakeTensorMode
        from torch.fx.experimental.symbolic_shapes import ShapeEnv

        self.env = ShapeEnv(specialize_zero_one=False, duck_shape=False)
        self.mode = FakeTensorMode(shape_env=self.env)
        self.proxies: dict = {}  # sympy symbol -> the size proxy
        self._symbols: dict[int, torch.SymInt] = {}  # id(size proxy) -> its torch symbol

    def size(self, s):
        if not isinstance(s, IntegerProxy):
            return int(s)
        if id(s) not in self._symbols:
            from torch._dynamo.source import ConstantSource
            from torch.fx.experimental.symbolic_shapes import DimDynamic

            if s.value is None:  # a size read from tensor data
                sym = self.env.create_unbacked_symint()
            else:
                source = ConstantSource(f"metatrace_size_{len(self._symbols)}")
                expr = self.env.create_symbol(s.value, source, dynamic_dim=DimDynamic.DYNAMIC)
                sym = self.env.create_symintnode(expr, hint=s.value)
            self._symbols[id(s)] = sym
            self.proxies[sym.node.expr] = s
        return self._symbols[id(s)]

    def fake(self, x):
        if not isinstance(x, TensorProxy):
            return x
        with self.mode:
            return torch.empty([self.size(s) for s in x.shape], dtype=dtypes.to_torch_dtype(x.dtype),
                               device=devices.to_torch_device(x.device))

    def number(self, e, why: str):
        """``e`` (an output size) as the trace's number: the proxy of a symbol, an int, else pinned."""
        if isinstance(e, int):
            return e
        expr = e.node.expr
        if expr in self.proxies:
            return self.proxies[expr]
        if expr.is_Integer:
            return int(expr)
        self._pin(expr, why)
        return int(e.node.hint)

    def _operand(self, e):
        if e in self.proxies:
            return self.proxies[e]
        return int(e) if e.is_Integer else None

    def _pin(self, expr, why: str) -> None:
        for symbol in sorted(expr.free_symbols, key=str):
            proxy = self.proxies.get(symbol)
            if proxy is None or proxy.value is None:
                raise CustomOpError(f"{why}: {expr} depends on a size read from tensor data")
            concretizations.bake_in(proxy, proxy.value, why)

    def report_guards(self, why: str) -> None:
        """Each guard the fake implementation's decisions left in the ShapeEnv, as metatrace's."""
        ops = {sympy.Eq: Relation.EQ, sympy.Ne: Relation.NE, sympy.Lt: Relation.LT, sympy.Le: Relation.LE,
               sympy.Gt: Relation.GT, sympy.Ge: Relation.GE}
        for guard in self.env.guards:
            expr = guard.expr
            op = ops.get(type(expr))
            lhs = rhs = None
            if op is not None:
                lhs, rhs = self._operand(expr.lhs), self._operand(expr.rhs)
            if lhs is not None and rhs is not None:
                concretizations.relation(op, lhs, rhs, True)
            elif not self._lower_bounds(expr):
                self._pin(expr, why)

    def _lower_bounds(self, expr) -> bool:
        """A guard ``p >= k`` (``>``, or the sides swapped) whose ``p`` is a polynomial with
        nonnegative coefficients in sizes (torch's contiguity checks: ``s0*s1 >= 2``) grows with
        every size, so a lower bound on each size that satisfies it implies it: each size at least
        its value or 2, whichever is smaller, else at least its value. Reported as those bounds
        (``s0 >= 2``: a batch of 1 keeps sharing the entry where the guard holds for it); False
        where the guard is not of that form."""
        if isinstance(expr, (sympy.Ge, sympy.Gt)):
            big, small = expr.lhs, expr.rhs
        elif isinstance(expr, (sympy.Le, sympy.Lt)):
            big, small = expr.rhs, expr.lhs
        else:
            return False
        symbols = sorted(big.free_symbols, key=str)
        proxies = [self.proxies.get(symbol) for symbol in symbols]
        if (not small.is_Integer or not symbols or any(p is None or p.value is None for p in proxies)
                or not big.is_polynomial(*symbols) or any(c < 0 for c in sympy.Poly(big, *symbols).coeffs())):
            return False
        bounds = {symbol: min(p.value, 2) for symbol, p in zip(symbols, proxies)}
        if not bool(expr.subs(bounds)):
            bounds = {symbol: p.value for symbol, p in zip(symbols, proxies)}
        for symbol, proxy in zip(symbols, proxies):
            concretizations.relation(Relation.GE, proxy, bounds[symbol], True)
        return True


def _forward_meta(qualname: str, *args):
    opdef = _opdef(qualname)
    if opdef is None or opdef._abstract_fn is None:
        raise CustomOpError(f"custom op {qualname} has no fake implementation (torch.library.register_fake)")
    run = FakeRun()
    why = f"a size of custom op {qualname}'s fake implementation"
    fake_args = tree_map(run.fake, args)
    with run.mode:
        out = opdef._abstract_fn(*fake_args)
    run.report_guards(why)
    flat, spec = tree_flatten(out)
    proxies = []
    requires_grad = any(isinstance(a, TensorProxy) and a.requires_grad for a in tree_flatten(args)[0])
    for t in flat:
        if not isinstance(t, torch.Tensor):
            raise CustomOpError(f"custom op {qualname} returns {type(t).__name__}, not tensors")
        shape = tuple(run.number(s, why) for s in t.shape)
        proxies.append(TensorProxy(shape=shape, dtype=dtypes.to_dtype(t.dtype), device=devices.to_device(t.device),
                                   requires_grad=requires_grad and (t.is_floating_point() or t.is_complex())))
    return tree_unflatten(proxies, spec)


def _forward_impl(qualname: str, *args):
    return _op(qualname)(*args)


# --- the gradient: the op's own autograd, run again ----------------------------------------


def _backward_meta(qualname: str, n: int, *rest):
    return tuple(TensorProxy(like=a) for a in rest[n:] if _differentiable(a))


def _backward_impl(qualname: str, n: int, *rest):
    cotangents, args = rest[:n], rest[n:]
    with torch.enable_grad():
        leaves = [a.detach().requires_grad_() if _differentiable(a) else a for a in args]
        outs = [o for o in torch.utils._pytree.tree_leaves(_op(qualname)(*leaves)) if isinstance(o, torch.Tensor)]
        wrt = [a for a in leaves if _differentiable(a)]
        grads = torch.autograd.grad(outs, wrt, cotangents, allow_unused=True)
    return tuple(torch.zeros_like(a) if g is None else g for a, g in zip(wrt, grads))




def _grad_rule(qualname: str, *args):
    from thunder.core.transforms import get_grad, put_grads
    import thunder.torch as ltorch

    out = CUSTOM_OP_OPERATORS["forward"](qualname, *args)
    wrt = [a for a in args if _differentiable(a)]
    if not any(a.requires_grad for a in wrt):
        return out
    if _opdef(qualname)._backward_fn is None:
        raise CustomOpError(f"custom op {qualname} has no autograd (torch.library.register_autograd): "
                            "its inputs require grad")
    outs = [o for o in tree_flatten(out)[0] if isinstance(o, TensorProxy)]
    cotangents = [g if (g := get_grad(o)) is not None else ltorch.zeros_like(o) for o in outs]
    grads = CUSTOM_OP_OPERATORS["backward"](qualname, len(cotangents), *cotangents, *args)
    put_grads(wrt, grads)
    return out


# --- the call: thunder's lookaside for OpOverloadPacket.__call__, for custom ops it does not know


def _positional(packet, args: tuple, kwargs: dict) -> tuple:
    """The call's arguments in the schema's order (keywords and defaults filled in)."""
    schema = packet.default._schema
    out = []
    for i, argument in enumerate(schema.arguments):
        if i < len(args):
            out.append(args[i])
        elif argument.name in kwargs:
            out.append(kwargs[argument.name])
        elif argument.has_default_value():
            out.append(argument.default_value)
        else:
            raise TypeError(f"{packet._qualified_op_name}() missing argument {argument.name!r}")
    return tuple(out)


def _traceable(packet) -> bool:
    from thunder.torch import _torch_to_thunder_function_map

    if packet in _torch_to_thunder_function_map or not hasattr(packet, "_qualified_op_name"):
        return False
    opdef = _opdef(packet._qualified_op_name)
    return opdef is not None and not opdef._opoverload._schema.is_mutable


def traces(packet) -> bool:
    """Whether metatrace traces a call of ``packet`` (an ``OpOverloadPacket``): a custom op thunder
    does not know, with a fake implementation, mutating none of its arguments. (ThunderFX's
    splitter asks it: metatrace.thunderfx.)"""
    return _traceable(packet)


def _call_lookaside(original):
    def lookaside(wrapped_packet, *args, **kwargs):
        packet = jit_ext.unwrap(wrapped_packet)
        if not _traceable(packet):
            return original(wrapped_packet, *args, **kwargs)
        u_args, u_kwargs = tree_map(jit_ext.unwrap, (args, kwargs))
        output = CUSTOM_OP_OPERATORS["forward"](packet._qualified_op_name, *_positional(packet, u_args, u_kwargs))
        return jit_ext.wrap(output, provenance=jit_ext.ProvenanceRecord(
            jit_ext.PseudoInst.LOOKASIDE, inputs=[wrapped_packet.provenance]))

    return lookaside


def _operator(name: str, meta, fn):
    def register(previous):
        from thunder.executors.torchex import ex

        assert previous is None, f"{name} is already registered on the torch executor"
        return ex.register_operator(name, meta=meta, fn=fn)

    return register


def patches() -> list[Patch]:
    from thunder.executors.torchex import ex

    why = "torch.library custom ops thunder was not told about, with symbolic sizes"
    own = "metatrace.metas.torch_ops.custom_ops"
    return [
        item(ex.opmap, NAME, _operator(NAME, _forward_meta, _forward_impl), why, wrap=True,
             label="executor torch.opmap"),
        item(ex.opmap, BACKWARD_NAME, _operator(BACKWARD_NAME, _backward_meta, _backward_impl), why, wrap=True,
             label="executor torch.opmap"),
        item(CUSTOM_OP_OPERATORS, "forward", lambda _: ex.opmap[NAME], "(the grad rule and the lookaside find it)", wrap=True,
             label=own),
        item(CUSTOM_OP_OPERATORS, "backward", lambda _: ex.opmap[BACKWARD_NAME], "(the grad rule finds it)", wrap=True,
             label=own),
        item(transforms._grad_fn_map, NAME, langctx(Languages.TORCH)(_grad_rule),
             "a custom op's gradient is its own autograd's, run by torch", label="thunder.core.transforms._grad_fn_map"),
        item(jit_ext._general_jit_lookaside_map, torch._ops.OpOverloadPacket.__call__, _call_lookaside, why, wrap=True,
             label="thunder.core.jit_ext._general_jit_lookaside_map"),
    ]
