"""An input that no output's gradient reaches gets no gradient (None), as in eager.

thunder's grad transform gives an intermediate that no rule sent a gradient to (a tensor used
only below a ``detach``: a teacher's output, a target network's) a gradient of zeros, and the
rules carry those zeros back to the inputs: the teacher's parameters came back with ``.grad``
zeros where eager leaves None. An optimizer tells the two apart: AdamW and SGD with weight decay
or momentum step a parameter whose grad is zeros and skip one whose grad is None, so training
diverged from eager silently (stock thunder too).

Every grad rule is linear in the cotangents it reads, so a gradient that no ``get_grad`` (an
output's cotangent) reaches is zero by construction, and eager, which follows the autograd graph
from the outputs, gives it None. One walk over the joint trace marks what the cotangents reach;
each input gradient not marked becomes None in the joint trace's return (the split's DCE then
drops the zeros' cone from the backward). The trace itself where every input gradient is reached.
"""

from __future__ import annotations

from thunder.core import prims
from thunder.core.proxies import TensorProxy
from thunder.core.trace import TraceProvenance, from_trace


def _reached(bsyms) -> set[str]:
    reached: set[str] = set()
    for bsym in bsyms:
        if bsym.sym is prims.get_grad or any(p.name in reached for p in bsym.flat_proxy_args):
            reached.update(p.name for p in bsym.flat_proxy_outs)
    return reached


def without_unreached_gradients(joint_trace):
    """``joint_trace`` with each input gradient that no output's cotangent reaches set to None (a
    new trace; ``joint_trace`` itself when there is none)."""
    returned = joint_trace.bound_symbols[-1] if joint_trace.bound_symbols else None
    if returned is None or returned.sym is not prims.python_return or not isinstance(returned.args[0], dict):
        return joint_trace
    values = returned.args[0]
    if "fw_flat_out" not in values:  # (not a joint forward-backward trace)
        return joint_trace
    grads = values.get("output") or ()
    if not any(isinstance(g, TensorProxy) for g in grads):
        return joint_trace
    reached = _reached(joint_trace.bound_symbols)
    kept = tuple(g if not isinstance(g, TensorProxy) or g.name in reached else None for g in grads)
    if all(a is b for a, b in zip(kept, grads)):  # (by identity: a proxy's == records an op)
        return joint_trace
    new = from_trace(joint_trace)
    new.bound_symbols = [*joint_trace.bound_symbols[:-1], returned.from_bsym(args=({**values, "output": kept},))]
    new.set_provenance(TraceProvenance("Gradients no output's cotangent reaches dropped (None, as in eager)"))
    return new
