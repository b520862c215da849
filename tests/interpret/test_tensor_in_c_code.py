"""PyTorch C code that thunder cannot trace, handed a traced tensor, raises a clear error
(metatrace.interpret.calls.c_code.tensor_arguments) where thunder handed it a proxy with no data."""

from __future__ import annotations

import pytest
import torch

import thunder

import metatrace

SYMBOLIC = "symbolic values"


def _vmapped(x):
    return torch.vmap(lambda row: row * 2)(x)


def test_vmap_in_a_jitted_function_raises_the_clear_error(enabled):
    """torch.vmap's ``torch._C._functorch._add_batch_dim`` gets the traced tensor: the error
    names the C function and the line that reached it (this file's), and stays a TypeError."""
    jf = thunder.jit(_vmapped, cache=SYMBOLIC)
    with pytest.raises(metatrace.TracedTensorInCCodeError) as info:
        jf(torch.randn(3, 4))
    message = str(info.value)
    assert "_add_batch_dim()" in message
    assert "test_tensor_in_c_code.py" in message
    assert isinstance(info.value, TypeError)


def test_stock_thunder_fails_there_too():
    """(The error replaces an obscure one, not a working path.)"""
    jf = thunder.jit(_vmapped)
    with pytest.raises(Exception) as info:
        jf(torch.randn(3, 4))
    # (stock thunder leaves vmap's level raised: its ``finally`` never ran; restored for the tests after)
    while torch._C._functorch.maybe_current_level() is not None:
        torch._C._functorch._vmap_decrement_nesting()
    assert not isinstance(info.value, metatrace.MetatraceError)


def test_the_error_is_a_metatrace_error_exported_by_name():
    assert issubclass(metatrace.TracedTensorInCCodeError, metatrace.MetatraceError)
    assert "TracedTensorInCCodeError" in metatrace.__all__


def test_c_code_given_numbers_and_builtins_given_tensors_still_run(enabled):
    """Only torch's C functions are checked: ``id``, ``isinstance`` and a list's ``append`` take
    a traced tensor as any object."""

    def fn(x):
        found = []
        found.append(x)
        return found[0] * 2 if isinstance(x, torch.Tensor) and id(x) else x

    jf = thunder.jit(fn, cache=SYMBOLIC)
    x = torch.randn(3)
    torch.testing.assert_close(jf(x), fn(x))
