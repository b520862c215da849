"""An output the forward returns at several positions gets the gradient of every position.

An in-place write can make two outputs one tensor after interpretation: in
``b = x * 1; d = b.add_(s); return b, d`` the trace returns two proxies, and thunder's
in-place functionalization replaces ``b`` by the updated tensor, so the joint trace returns
``(t12, t12)``. thunder's grad transform reads that output's gradient once (one ``get_grad``),
and the split gives it the first position. PyTorch, handed the same tensor twice by the
autograd Function, routes the gradient of that tensor to the *last* position and zeros to the
others, so the backward read zeros: the gradients of ``x`` and ``s`` were silently lost, in
stock thunder too. (An output returned twice before any in-place write is one proxy, which
thunder returns once.)

Before the split (step 2 of the split's one wrapper, ``metatrace.passes.size_producers``), each
output repeated in ``fw_flat_out`` gets one ``get_grad`` per position, and their sum takes the
place of the one gradient the grad transform read, whichever position PyTorch fills. One pass
over the joint trace: linear in its bound symbols.
"""

from __future__ import annotations

import functools
from collections import Counter


from thunder.core import prims
from thunder.core.proxies import TensorProxy, variableify
from thunder.core.trace import TraceProvenance, from_trace, tracectx
from thunder.executors import torchex


def cotangents_of_every_position(joint_trace):
    """The joint trace, its repeated outputs' gradients summed over their positions (the same
    trace where no output is repeated)."""
    returned = joint_trace.bound_symbols[-1]
    if returned.sym is not prims.python_return or not isinstance(returned.args[0], dict):
        return joint_trace
    outputs = returned.args[0].get("fw_flat_out") or ()
    positions = Counter(o.name for o in outputs if isinstance(o, TensorProxy))
    repeated = {name: n for name, n in positions.items() if n > 1}
    if not repeated:
        return joint_trace
    new = from_trace(joint_trace)
    bsyms = []
    with tracectx(new):
        for bsym in joint_trace.bound_symbols:
            output = bsym.args[0] if bsym.sym is prims.get_grad else None
            if output is None or output.name not in repeated:
                bsyms.append(bsym)
                continue
            # one get_grad per position (the split hands each its own cotangent), then their sum
            # under the name the grad transform's backward reads
            parts = [TensorProxy(like=bsym.output) for _ in range(repeated.pop(output.name))]
            bsyms.extend(prims.get_grad.bind(output, output=part) for part in parts)
            new.push_scope([])
            # (the split runs after the executor passes: the torch executor's add, as executed)
            total = functools.reduce(torchex.add, parts)
            rename = {variableify(total): bsym.output}
            bsyms.extend(b.from_bsym_swap_proxies(rename) for b in new.pop_scope())
    new.bound_symbols = bsyms
    new.set_provenance(TraceProvenance("Gradients of outputs returned at several positions summed"))
    return new
