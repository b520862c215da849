"""An input that no output's gradient reaches (used only below a ``detach``) gets no gradient, as
in eager: thunder's grad transform gave it zeros, and an optimizer steps a parameter whose grad
is zeros (weight decay, momentum) where it skips one whose grad is None, so a teacher-student
or target-network step diverged from eager silently (stock thunder too).
"""

from __future__ import annotations

import copy

import pytest
import torch

import thunder
from thunder.executors.torch_compile import torch_compile_ex

EXECUTORS = {"default": None, "torch_compile_ex": [torch_compile_ex]}


class TeacherStudent(torch.nn.Module):
    def __init__(self, learned_temperature):
        super().__init__()
        self.teacher = torch.nn.Linear(3, 4)
        self.student = torch.nn.Linear(3, 4)
        self.temperature = torch.nn.Parameter(torch.tensor(2.0)) if learned_temperature else None

    def forward(self, x):
        target = self.teacher(x).detach()
        if self.temperature is not None:
            target.div_(self.temperature)  # (the detached target now requires grad, in eager too)
        return torch.nn.functional.mse_loss(self.student(x), target)


MODELS = {"detached": False, "detached_then_scaled_in_place": True}


def _train(model, lengths):
    opt = torch.optim.AdamW(model.parameters(), lr=0.1, weight_decay=0.5)
    for n in lengths:
        opt.zero_grad()
        model(torch.randn(n, 3, generator=torch.Generator().manual_seed(n))).backward()
        opt.step()


@pytest.mark.parametrize("learned_temperature", MODELS.values(), ids=MODELS)
@pytest.mark.parametrize("executors", EXECUTORS.values(), ids=EXECUTORS)
def test_a_detached_teacher_gets_no_grad(enabled, executors, learned_temperature):
    torch.manual_seed(0)
    model = TeacherStudent(learned_temperature)
    thunder.jit(model, executors=executors, cache="symbolic values")(torch.randn(5, 3)).backward()
    assert [p.grad for p in model.teacher.parameters()] == [None, None]


@pytest.mark.parametrize("learned_temperature", MODELS.values(), ids=MODELS)
@pytest.mark.parametrize("executors", EXECUTORS.values(), ids=EXECUTORS)
def test_adamw_steps_equal_eager_with_a_detached_teacher(enabled, executors, learned_temperature):
    torch.manual_seed(0)
    model = TeacherStudent(learned_temperature)
    eager = copy.deepcopy(model)
    _train(thunder.jit(model, executors=executors, cache="symbolic values"), (4, 6, 5))
    _train(eager, (4, 6, 5))
    for (name, got), want in zip(model.named_parameters(), eager.parameters()):
        torch.testing.assert_close(got, want, msg=name)


def _partly_detached(x, s):
    y = x * s
    return y.detach() * 2 + s, (x * 3).sum()


@pytest.mark.parametrize("grad_x, grad_s", [(True, True), (True, False), (False, True)], ids=["both", "x", "s"])
def test_each_input_gets_a_gradient_where_eager_gives_one(enabled, grad_x, grad_s):
    jfn = thunder.jit(_partly_detached, cache="symbolic values")
    for n in (4, 1, 6):
        grads = []
        for fn in (jfn, _partly_detached):
            x = torch.randn(n, 3, generator=torch.Generator().manual_seed(n)).requires_grad_(grad_x)
            s = torch.randn(n, 3, generator=torch.Generator().manual_seed(n + 1)).requires_grad_(grad_s)
            a, b = fn(x, s)
            (a.sum() + b).backward()
            grads.append([x.grad, s.grad])
        torch.testing.assert_close(grads[0], grads[1])
