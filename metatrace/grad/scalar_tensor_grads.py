"""The gradient of a 0-d tensor is 0-d.

thunder lets a 0-d tensor meet a tensor of any shape in an elementwise op without broadcasting it
explicitly (``x.sum(-1) * w.sum()``: ``prims.mul`` of an ``[N]`` and a ``[]`` tensor), and its
grad rules then hand the 0-d operand a gradient of the output's shape (``b_grad = a * g``). thunder
sums such a gradient only for the function's own 0-d CPU inputs (``transforms.vjp``'s ``sum_to``);
for a 0-d intermediate the ``[N]`` gradient flows on into the rule that made it: ``sum``'s backward
expands it to ``w``'s shape, which fails, or (where ``N`` happens to equal ``w``'s last size)
broadcasts it silently into a wrong gradient. Stock thunder does this under either cache option,
for every elementwise binary and ternary op (measured: mul, add, sub, div, pow, where, maximum,
atan2, addcmul).

Broadcasting a 0-d tensor to a shape sums its gradient over that shape (the chain rule over a
broadcast), so the gradient a rule puts for a 0-d tensor is summed to 0-d as it is put: one place,
``prims.put_grad``, which every grad rule (thunder's, and the codegen's rewritten copies) calls.
"""

from __future__ import annotations

import thunder.core.prims as prims
import thunder.torch as ltorch
from thunder.core.proxies import TensorProxy


def summed_to_scalar(sym, args: tuple) -> tuple:
    """``args`` of a call of ``sym``, with a ``put_grad``'s gradient for a 0-d tensor summed to 0-d."""
    if sym is not prims.put_grad or len(args) != 2:
        return args
    grad_for, grad = args
    if isinstance(grad_for, TensorProxy) and grad_for.ndim == 0 and isinstance(grad, TensorProxy) and grad.ndim != 0:
        return grad_for, ltorch.sum(grad)
    return args
