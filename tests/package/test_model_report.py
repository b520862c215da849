"""``python -m metatrace report --model``: a model's compiles and every pin with what fixed it."""

from __future__ import annotations

import torch

from metatrace import model_report
from metatrace.__main__ import main

SCALES = tuple(float(i) for i in range(64))


class IndexesByLength(torch.nn.Module):
    """Reads a Python tuple at the sequence length: each length needs its own entry."""

    def forward(self, x):
        return x * SCALES[x.shape[1]]


class LinearOverLength(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(4, 3)

    def forward(self, x):
        return self.linear(x).mean(1)


def indexing_model():
    return IndexesByLength(), lambda T: (torch.randn(2, T, requires_grad=True),)


def linear_model():
    return LinearOverLength(), lambda T: (torch.randn(2, T, 4),)


def test_a_pinned_length_compiles_per_length():
    report = model_report.run("test_model_report:indexing_model", (4, 6), train=True)
    assert report.compiles == 2


def test_each_pin_names_the_line_that_fixed_it():
    report = model_report.run("test_model_report:indexing_model", (4, 6), train=True)
    assert [entry for entry, text in report.pins if text.startswith("x.shape[1] == ")
            and "index into a tuple or list" in text and "test_model_report.py" in text] == [0, 1]


def test_a_length_free_model_compiles_once():
    report = model_report.run("test_model_report:linear_model", (4, 6, 9), train=True)
    assert report.compiles == 1


def test_only_the_feature_size_is_pinned_and_says_why():
    report = model_report.run("test_model_report:linear_model", (4, 6, 9), train=True)
    assert {(text.split(" (")[0], text.endswith(")")) for _, text in report.pins} == {("x.shape[2] == 4", True)}


def test_command_line_prints_the_pins(capsys):
    assert main(["report", "--model", "test_model_report:indexing_model", "--lengths", "4,6", "--eval"]) == 0
    assert "entry 1: x.shape[1] == 6 (index into a tuple or list" in capsys.readouterr().out
