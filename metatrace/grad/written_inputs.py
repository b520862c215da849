"""An argument written in place with a tensor that requires grad raises a clear error.

Eager: under grad mode, ``out[i] = t`` (``copy_``, ``add_``, ``index_put_``, ...) with ``t``
requiring grad makes the caller's ``out`` require grad, with a ``grad_fn`` (``CopySlices``), so
``collate_into(buf, seqs); loss(model(buf))`` reaches ``seqs``. thunder writes the new values into
the caller's tensor but cannot give it a ``grad_fn``: ``buf``, and the function's output when it
returns ``buf``, come back without grad, and the gradient of everything written into it is lost
without a word (stock thunder too). Writing into a buffer the function makes (``torch.zeros``,
``x.new_zeros``) is supported (``metatrace.grad.inplace_writes``).

Before thunder's grad transform (step 1 of its one wrapper, ``metatrace.passes.grad_transform``),
a write into an argument that does not require grad (or into a view of one) of a value that
requires grad, under grad mode, raises :class:`WrittenInputError` naming the argument and the
line, unless the write is made by a symbol whose writes eager makes outside autograd
(:data:`WRITES_OUTSIDE_AUTOGRAD`: the running statistics of ``batch_norm`` and ``instance_norm``,
which their kernels update without a grad_fn). One walk over the trace's bound symbols and their
subsymbols.
"""

from __future__ import annotations

from collections.abc import Iterator

import thunder.torch as ltorch
from thunder.core.prims import PrimIDs
from thunder.core.proxies import TensorProxy

from metatrace.errors import MetatraceError
from metatrace.grad.inplace_writes import VIEW_SYMBOL_IDS, view_outputs

# Symbols whose writes into their arguments eager makes outside autograd.
WRITES_OUTSIDE_AUTOGRAD = frozenset({ltorch.batch_norm.id, ltorch.instance_norm.id})


class WrittenInputError(MetatraceError):
    """An argument that does not require grad is written in place with a tensor that does."""


def check_written_inputs(trace) -> None:
    """Raises :class:`WrittenInputError` for the first write the module docstring describes."""
    root = {a.name: a for a in trace.args if isinstance(a, TensorProxy) and not a.requires_grad}
    if not root:
        return
    for bsym in trace.bound_symbols:
        if bsym.sym.id is PrimIDs.UPDATE_ALIASES:  # (thunder's new names for the same tensors)
            for before, after in zip(bsym.args[0], bsym.output):
                if isinstance(before, TensorProxy) and before.name in root:
                    root[after.name] = root[before.name]
            continue
        if bsym.sym.id in VIEW_SYMBOL_IDS and bsym.args and isinstance(base := bsym.args[0], TensorProxy) \
                and base.name in root:  # (a view of an argument: its writes write the argument)
            for view in view_outputs(bsym.sym.id, bsym.args, bsym.output):
                root[view.name] = root[base.name]
            continue
        if bsym.sym.id in WRITES_OUTSIDE_AUTOGRAD:
            continue
        for write in _copies(bsym):
            value, destination = write.args[0], write.args[1]
            if (isinstance(destination, TensorProxy) and destination.name in root
                    and isinstance(value, TensorProxy) and value.requires_grad
                    and write.kwargs.get("grad_enabled", True)):
                raise WrittenInputError(_message(bsym, root[destination.name]))


def _copies(bsym) -> Iterator:
    """``bsym``'s ``prims.copy_`` bound symbols: itself, or among its subsymbols at any depth."""
    if bsym.sym.id is PrimIDs.COPY_:
        yield bsym
        return
    for sub in bsym.subsymbols:
        yield from _copies(sub)


def _message(bsym, written) -> str:
    where = ""
    if bsym.source_filename is not None:
        line = getattr(bsym.source_positions, "lineno", None)
        where = f" at {bsym.source_filename}:{line}" if line is not None else f" in {bsym.source_filename}"
    return (
        f"the argument {written.name} ({written.shape}, requires_grad=False) is written in place{where} "
        f"({bsym.sym.name}) with a tensor that requires grad, under grad mode. Eager makes the caller's "
        "tensor require grad (a CopySlices grad_fn); thunder cannot give the caller's tensor a grad_fn, so "
        "it would come back without grad and the gradient of what was written into it would be lost. "
        "Write into a tensor the function makes (torch.zeros, x.new_zeros) and return it, or make the "
        "write under torch.no_grad() if no gradient should flow."
    )
