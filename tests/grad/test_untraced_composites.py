"""An intermediate no grad rule sends a gradient to (``x * 1`` below a ``detach``) gets zeros that
thunder's grad transform binds without tracing them; DCE took that bound symbol for a no-op and
dropped it from ``torch_compile_ex``'s backward region, which then read a tensor nothing defined
(``Unsupported name 't20' is not defined``). metatrace.grad.untraced_composites traces it.

Each form under the default executors and ``torch_compile_ex``, over sizes, against eager's
values and gradients, and every trace through the strict checker (which follows a fusion
region's subsymbols).
"""

from __future__ import annotations

import pytest
import torch

import thunder
from thunder.executors.torch_compile import torch_compile_ex

from metatrace.checker import check_trace


def _detached_buffer_written(x, s):
    b = (x * 1).detach()
    d = b.add_(s)
    return b, d


def _view_of_intermediate_written(x, s):
    b = x * 1
    v = b.view(-1)
    v.add_(s.view(-1))
    return b, v, b


def _detached_intermediate_used(x, s):
    y = x * 2
    return y.detach() * 3 + s, y.sum()


def _detached_chunk(x, s):
    a, b = (x * s).chunk(2, 0)
    return a.detach() + b, a.sum()


FORMS = [_detached_buffer_written, _view_of_intermediate_written, _detached_intermediate_used, _detached_chunk]
EXECUTORS = {"default": None, "torch_compile_ex": [torch_compile_ex]}


def _run(fn, n):
    g = torch.Generator().manual_seed(n)
    x = torch.randn(n, 3, generator=g).requires_grad_()
    s = torch.randn(n, 3, generator=g).requires_grad_()
    outputs = fn(x, s)
    sum((o * (i + 1)).sum() for i, o in enumerate(outputs)).backward()
    # (None where no output's gradient reaches the input, as in eager: metatrace.grad.unreached_inputs)
    return [o.detach() for o in outputs], [x.grad, s.grad]


@pytest.mark.parametrize("executors", EXECUTORS.values(), ids=EXECUTORS)
@pytest.mark.parametrize("fn", FORMS, ids=lambda f: f.__name__.strip("_"))
def test_values_gradients_and_traces(enabled, fn, executors):
    jfn = thunder.jit(fn, executors=executors, cache="symbolic values")
    for n in (4, 2, 6):
        torch.testing.assert_close(_run(jfn, n), _run(fn, n))
    for trace in [*thunder.last_traces(jfn), *thunder.last_backward_traces(jfn)]:
        # every trace defines what it reads (thunder's own check re-runs each bound symbol, and a
        # fusion region has no meta)
        check_trace(trace, thunder_checks=executors is None)
