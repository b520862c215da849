"""``generator.throw`` into a generator thunder interprets raises inside its frame, so its
``except`` and ``finally`` run as in eager (metatrace.interpret.calls.python.generators)."""

from __future__ import annotations

import contextlib

import pytest
import torch

import thunder

SYMBOLIC = "symbolic values"


@contextlib.contextmanager
def _suppressing():
    try:
        yield
    except ValueError:
        pass


def _suppressed(x):
    with _suppressing():
        raise ValueError("inside the with block")
    return x * 2


def test_a_context_manager_that_suppresses_an_exception_suppresses_it(enabled):
    """contextlib's ``__exit__`` throws the exception into the generator, which handles it:
    eager returns; thunder's interpreter raised it at its own wrapper's yield."""
    x = torch.randn(3)
    torch.testing.assert_close(thunder.jit(_suppressed, cache=SYMBOLIC)(x), _suppressed(x))


def _gen():
    try:
        yield 1
    except KeyError:
        yield 2
    finally:
        pass


def _thrown(x):
    g = _gen()
    first = next(g)
    second = g.throw(KeyError("k"))
    return x * first + second


def test_throw_returns_the_value_the_handler_yields(enabled):
    x = torch.randn(3)
    torch.testing.assert_close(thunder.jit(_thrown, cache=SYMBOLIC)(x), _thrown(x))


def _unhandled(x):
    g = _gen()
    next(g)
    try:
        g.throw(IndexError("not handled"))
    except IndexError:
        return x - 1
    return x


def test_an_exception_the_generator_does_not_handle_propagates(enabled):
    x = torch.randn(3)
    torch.testing.assert_close(thunder.jit(_unhandled, cache=SYMBOLIC)(x), _unhandled(x))


def _vmapped(x):
    return torch.vmap(lambda row: row * 2)(x)


def test_an_error_inside_vmap_leaves_no_vmap_level_behind(enabled):
    """vmap's ``finally: _vmap_decrement_nesting()`` runs when the call fails inside it
    (metatrace.TracedTensorInCCodeError there): later random ops work."""
    import metatrace

    with pytest.raises(metatrace.TracedTensorInCCodeError):
        thunder.jit(_vmapped, cache=SYMBOLIC)(torch.randn(3, 4))
    assert torch._C._functorch.maybe_current_level() is None
