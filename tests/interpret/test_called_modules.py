"""metatrace.interpret.modules.called_modules: a hook registered, removed or replaced after the compile,
on any module the trace called (or PyTorch's global hooks), and a tensor or submodule rebound on
the jitted model, miss the entry; every call equals eager. Stock thunder reused the entry: it
never ran the new hook, and kept reading the tensors its ThunderModule copied at the jit."""

from __future__ import annotations

import pytest
import torch
import torch.nn.modules.module as torch_module

import thunder

import metatrace

SYMBOLIC = "symbolic values"


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(4, 4)

    def forward(self, x):
        return torch.relu(self.linear(x))


class Stack(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.blocks = torch.nn.ModuleList([Block(), Block()])

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return x


def _zero_output(module, args, output):
    return output * 0


def _double_input(module, args):
    return (args[0] * 2,)


def _calls_after(change, model=None, x=None) -> tuple[list[bool], int]:
    """The jitted model called before and after ``change(model)``: (equal to eager each time, misses)."""
    model = model if model is not None else Stack()
    x = x if x is not None else torch.randn(3, 4)
    jm = thunder.jit(model, cache=SYMBOLIC)
    equal = [torch.allclose(jm(x), model(x))]
    change(model)
    equal.append(torch.allclose(jm(x), model(x)))
    return equal, thunder.cache_misses(jm)


def test_a_forward_hook_registered_on_a_submodule_misses_the_entry(enabled):
    assert _calls_after(lambda m: m.blocks[1].register_forward_hook(_zero_output)) == ([True, True], 2)


def test_a_pre_hook_registered_on_a_nested_submodule_misses_the_entry(enabled):
    assert _calls_after(lambda m: m.blocks[0].linear.register_forward_pre_hook(_double_input)) == ([True, True], 2)


def test_a_hook_registered_on_the_jitted_module_misses_the_entry(enabled):
    assert _calls_after(lambda m: m.register_forward_hook(_zero_output)) == ([True, True], 2)


def test_a_hook_removed_after_the_compile_misses_the_entry(enabled):
    model = Stack()
    handle = model.blocks[0].register_forward_hook(_zero_output)
    assert _calls_after(lambda m: handle.remove(), model) == ([True, True], 2)


def test_a_global_module_hook_registered_after_the_compile_misses_the_entry(enabled):
    handles = []

    def register(model):
        handles.append(torch_module.register_module_forward_pre_hook(
            lambda mod, args: (args[0] * 2,) if isinstance(mod, torch.nn.Linear) else None))

    try:
        assert _calls_after(register) == ([True, True], 2)
    finally:
        for h in handles:
            h.remove()


GLOBAL_BLOCK = Block()


def test_a_hook_on_a_global_module_misses_the_entry(enabled):
    def fn(x):
        return GLOBAL_BLOCK(x)

    jf = thunder.jit(fn, cache=SYMBOLIC)
    x = torch.randn(3, 4)
    jf(x)
    handle = GLOBAL_BLOCK.linear.register_forward_hook(_zero_output)
    try:
        assert (torch.allclose(jf(x), fn(x)), thunder.cache_misses(jf)) == (True, 2)
    finally:
        handle.remove()


def test_a_replaced_submodule_with_a_hook_gives_eagers_result_twice(enabled):
    def replace(model):
        block = Block()
        block.register_forward_hook(_zero_output)
        model.blocks[1] = block

    assert _calls_after(replace)[0] == [True, True]


# ---------------------------------------------------------------------------------------------
# Tensors and submodules rebound on the jitted model
# ---------------------------------------------------------------------------------------------


class Scaled(Stack):
    def __init__(self):
        super().__init__()
        self.register_buffer("scale", torch.ones(4))

    def forward(self, x):
        return super().forward(x) * self.scale


def test_a_buffer_rebound_with_its_shape_misses_the_entry(enabled):
    change = lambda m: setattr(m, "scale", torch.full((4,), 3.0))  # noqa: E731
    assert _calls_after(change, Scaled()) == ([True, True], 2)


def test_a_buffer_rebound_with_another_shape_misses_the_entry(enabled):
    change = lambda m: setattr(m, "scale", torch.full((1,), 3.0))  # noqa: E731
    assert _calls_after(change, Scaled()) == ([True, True], 2)


def test_a_parameter_rebound_misses_the_entry(enabled):
    change = lambda m: setattr(m.blocks[1].linear, "weight", torch.nn.Parameter(torch.randn(4, 4)))  # noqa: E731
    assert _calls_after(change) == ([True, True], 2)


def test_a_replaced_submodule_misses_the_entry(enabled):
    assert _calls_after(lambda m: m.blocks.__setitem__(1, Block())) == ([True, True], 2)


def test_a_buffer_rebound_with_a_hook_registered_at_once_gives_eagers_result_twice(enabled):
    def change(m):
        m.register_forward_hook(lambda mod, args, out: out + 1)
        m.scale = torch.full((4,), 3.0)

    model, x = Scaled(), torch.randn(3, 4)
    jm = thunder.jit(model, cache=SYMBOLIC)
    jm(x)
    change(model)
    assert [torch.allclose(jm(x), model(x)) for _ in range(2)] == [True, True]


def test_a_rebound_parameter_gets_eagers_gradient(enabled):
    model = Stack()
    jm = thunder.jit(model, cache=SYMBOLIC)
    x = torch.randn(3, 4)
    jm(x).sum().backward()
    model.blocks[1].linear.weight = torch.nn.Parameter(torch.randn(4, 4))
    model.zero_grad()
    jm(x).sum().backward()
    got = model.blocks[1].linear.weight.grad.clone()
    model.zero_grad()
    model(x).sum().backward()
    torch.testing.assert_close(got, model.blocks[1].linear.weight.grad)


def test_a_rebound_tensor_is_followed_once(enabled):
    model = Scaled()
    jm = thunder.jit(model, cache=SYMBOLIC)
    jm(torch.randn(3, 4))
    model.scale = torch.full((4,), 2.0)
    for n in (3, 5, 7):
        x = torch.randn(n, 4)
        torch.testing.assert_close(jm(x), model(x))
    assert thunder.cache_misses(jm) == 2


def test_a_state_dict_loaded_in_place_keeps_the_entry(enabled):
    assert _calls_after(lambda m: m.load_state_dict(Stack().state_dict())) == ([True, True], 1)


def test_unchanged_hooks_keep_one_entry_over_sizes(enabled):
    model = Stack()
    model.blocks[0].register_forward_hook(lambda mod, args, out: out + 1)
    jm = thunder.jit(model, cache=SYMBOLIC)
    for n in (2, 3, 5, 8):
        x = torch.randn(n, 4)
        torch.testing.assert_close(jm(x), model(x))
    assert thunder.cache_misses(jm) == 1


def _module_state_guards() -> list[str]:
    jm = thunder.jit(Stack(), cache=SYMBOLIC)
    jm(torch.randn(3, 4))
    (entry,) = metatrace.explain(jm)
    return [g for g in entry.guards if g.startswith("hooks and tensors unchanged")]


def test_the_hooks_of_every_module_are_one_guard(enabled):
    assert len(_module_state_guards()) == 1


def test_the_hooks_guard_names_submodules_as_the_code_reads_them(enabled):
    assert "self.blocks.0.linear" in _module_state_guards()[0]


class Activated(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.linear = torch.nn.Linear(4, 4)
        self.act = torch.nn.ReLU()
        self.inner = torch.nn.Sequential(torch.nn.Identity(), torch.nn.ReLU())

    def forward(self, x):
        return self.inner(self.act(self.linear(x)) - 0.5)


def test_a_submodule_replaced_by_another_class_without_tensors_misses_the_entry(enabled):
    """``model.act = nn.Tanh()``: no tensor was rebound, and stock thunder kept running ReLU."""
    assert _calls_after(lambda m: setattr(m, "act", torch.nn.Tanh()), Activated()) == ([True, True], 2)


def test_a_nested_submodule_replaced_by_another_class_misses_the_entry(enabled):
    assert _calls_after(lambda m: m.inner.__setitem__(1, torch.nn.Tanh()), Activated()) == ([True, True], 2)


# A rebinding is followed whatever else made the call miss, and before the first call too ----

_REBINDINGS = {
    "a buffer": lambda m: setattr(m, "scale", torch.full((4,), 3.0)),
    "a parameter": lambda m: setattr(m.blocks[1].linear, "weight", torch.nn.Parameter(torch.randn(4, 4))),
    "a submodule": lambda m: m.blocks.__setitem__(1, Block()),
    "a nested submodule": lambda m: setattr(m.blocks[0], "linear", torch.nn.Linear(4, 4)),
}
_INPUTS = {  # the call after the rebinding: thunder's own input checks reject the entry first for these
    "the same input": torch.randn(3, 4),
    "an input of another rank": torch.randn(2, 3, 4),
    "an input of another dtype": torch.randn(3, 4, dtype=torch.float64),
}


@pytest.mark.parametrize("rebinding", _REBINDINGS)
@pytest.mark.parametrize("then", _INPUTS)
def test_a_rebinding_after_the_first_call_is_followed(enabled, rebinding, then):
    model = Scaled()
    jm = thunder.jit(model, cache=SYMBOLIC)
    jm(torch.randn(3, 4))
    _REBINDINGS[rebinding](model)
    if then == "an input of another dtype":
        model.double()  # (in place: the wrapper's copies stay the model's)
    x = _INPUTS[then]
    torch.testing.assert_close(jm(x), model(x))


@pytest.mark.parametrize("rebinding", _REBINDINGS)
def test_a_rebinding_before_the_first_call_is_followed(enabled, rebinding):
    model = Scaled()
    jm = thunder.jit(model, cache=SYMBOLIC)
    _REBINDINGS[rebinding](model)
    x = torch.randn(3, 4)
    torch.testing.assert_close(jm(x), model(x))


def test_a_removed_buffer_raises_as_eager_does(enabled):
    model = Scaled()
    jm = thunder.jit(model, cache=SYMBOLIC)
    jm(torch.randn(3, 4))
    del model.scale
    with pytest.raises(AttributeError, match="scale"):
        jm(torch.randn(3, 4))


# A tensor the forward itself rebinds on the module: one compile, eager's values -------------


class Averaging(torch.nn.Module):
    """An exponential average kept by rebinding its buffers (``self.avg = ...``), here and in a
    submodule."""

    def __init__(self):
        super().__init__()
        self.register_buffer("avg", torch.zeros(2))
        self.inner = torch.nn.Module()
        self.inner.register_buffer("steps", torch.zeros(()))

    def forward(self, x):
        self.avg = self.avg * 0.5 + x.mean(0)
        self.inner.steps = self.inner.steps + 1
        return x - self.avg + self.inner.steps


def _averaging_calls():
    eager, model = Averaging(), Averaging()
    jm = thunder.jit(model, cache=SYMBOLIC)
    same = []
    for n in (2, 3, 5, 5, 2):
        x = torch.arange(n * 2.0).reshape(n, 2)
        same.append(torch.allclose(jm(x), eager(x)))
    return same, eager, model, jm


def test_a_buffer_rebound_by_forward_gives_eagers_results(enabled):
    assert _averaging_calls()[0] == [True] * 5


def test_a_buffer_rebound_by_forward_is_the_models(enabled):
    _, eager, model, _ = _averaging_calls()
    torch.testing.assert_close(model.avg, eager.avg)


def test_a_submodules_buffer_rebound_by_forward_is_the_models(enabled):
    _, eager, model, _ = _averaging_calls()
    torch.testing.assert_close(model.inner.steps, eager.inner.steps)


def test_a_buffer_rebound_by_forward_keeps_one_entry(enabled):
    assert thunder.cache_misses(_averaging_calls()[3]) == 1


def test_a_buffer_rebound_by_forward_then_by_the_user_is_followed(enabled):
    _, eager, model, jm = _averaging_calls()
    model.avg, eager.avg = torch.full((2,), 7.0), torch.full((2,), 7.0)
    x = torch.ones(3, 2)
    torch.testing.assert_close(jm(x), eager(x))
