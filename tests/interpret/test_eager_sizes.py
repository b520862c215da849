"""metatrace.interpret.calls.numbers.eager_sizes: a tensor's shape in the user's code is eager's ``torch.Size``
where C code renders it and where the code asks its type.

thunder's shape is a plain tuple of sizes: ``str(x.shape)`` and ``f"{x.shape}"`` were ``(2, 3)``
where eager prints ``torch.Size([2, 3])``, stock thunder too (issue 51). Generated: every way a
shape is made (``x.shape``, ``x.size()``, slices, ``+``, ``*``, an intermediate's, a 0-d tensor's)
x every way C code renders it, against eager's text over calls with other sizes; the sizes are
guarded as any number rendered is, and a shape that is not rendered stays symbolic.
"""

from __future__ import annotations

import json

import pytest
import thunder
import torch

SYMBOLIC = "symbolic values"

SHAPES = {  # a torch.Size in eager
    "x.shape": lambda x: x.shape,
    "x.size()": lambda x: x.size(),
    "a slice": lambda x: x.shape[1:],
    "an empty slice": lambda x: x.shape[:0],
    "plus a tuple": lambda x: x.shape + (1,),
    "a tuple plus it": lambda x: (1,) + x.shape,
    "times 2": lambda x: x.shape * 2,
    "an intermediate's": lambda x: (x * 2).sum(0).shape,
    "a 0-d tensor's": lambda x: x.sum().shape,
}
RENDERINGS = {
    "str": str,
    "repr": repr,
    "an f-string": lambda s: f"<{s}>",
    "an f-string with !r and a spec": lambda s: f"{s!r} {s!s:>30}",
    "format": lambda s: format(s, ""),
    "%": lambda s: "%s" % (s,),
    "str.format": lambda s: "{}".format(s),
    "in a list": lambda s: str([s, 1]),
    "json": json.dumps,
}
SIZES = [(2, 3), (4, 3), (2, 3), (2, 5)]


@pytest.mark.parametrize("rendering", RENDERINGS)
@pytest.mark.parametrize("shape", SHAPES)
def test_a_rendered_shape_is_eagers_text(enabled, shape, rendering):
    make, render = SHAPES[shape], RENDERINGS[rendering]
    fn = lambda x: render(make(x))  # noqa: E731
    jf = thunder.jit(fn, cache=SYMBOLIC)
    assert [jf(torch.ones(s)) for s in SIZES] == [fn(torch.ones(s)) for s in SIZES]


def test_a_rendered_shape_is_checked_by_the_prologue(enabled):
    fn = lambda x: str(x.shape)  # noqa: E731
    jf = thunder.jit(fn, cache=SYMBOLIC)
    for s in SIZES:
        jf(torch.ones(s))
    assert thunder.cache_misses(jf) == 3


def test_a_shape_not_rendered_stays_symbolic(enabled):
    fn = lambda x: x.reshape(x.shape[:-1] + (-1,)) * len(x.size())  # noqa: E731
    jf = thunder.jit(fn, cache=SYMBOLIC)
    for s in SIZES:
        jf(torch.ones(s))
    assert thunder.cache_misses(jf) == 1


def test_a_shape_is_a_torch_size(enabled):
    fn = lambda x: (isinstance(x.shape, torch.Size), isinstance(x.size()[1:], (list, torch.Size)))  # noqa: E731
    jf = thunder.jit(fn, cache=SYMBOLIC)
    assert jf(torch.ones(2, 3)) == (True, True)


def test_a_shape_is_still_a_tuple(enabled):
    jf = thunder.jit(lambda x: isinstance(x.shape, tuple), cache=SYMBOLIC)
    assert jf(torch.ones(2, 3)) is True


def test_the_type_of_a_shape_is_torch_size(enabled):
    jf = thunder.jit(lambda x: type(x.shape) is torch.Size, cache=SYMBOLIC)
    assert jf(torch.ones(2, 3)) is True


def test_a_tuple_made_of_a_shape_is_a_tuple(enabled):
    fn = lambda x: (str(tuple(x.shape)), str(list(x.size())), type(tuple(x.shape)).__name__)  # noqa: E731
    jf = thunder.jit(fn, cache=SYMBOLIC)
    assert jf(torch.ones(2, 3)) == fn(torch.ones(2, 3))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int64, torch.bool])
def test_a_dtype_and_device_as_text_are_eagers(enabled, dtype):
    fn = lambda x: (str(x.dtype), repr(x.dtype), f"{x.device}", repr(x.device))  # noqa: E731
    jf = thunder.jit(fn, cache=SYMBOLIC)
    x = torch.ones(2, dtype=dtype)
    assert jf(x) == fn(x)
