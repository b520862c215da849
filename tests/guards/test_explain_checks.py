"""explain()'s entries are structured checks (:class:`metatrace.guards.check_texts.CheckText`):
what each check reads, how it compares it, why, and whether it is the jitted module's own state,
carried from the guard records and the prologue's reads. The summary and the hiding of thunder's
duplicate of a pinned value are decided on those fields, never on the text."""

from __future__ import annotations

import torch

import thunder

import metatrace
from metatrace.guards.check_texts import CheckText
from metatrace.guards.explain import TENSORS, VALUES, EntryGuards
from metatrace.metas.relations import Relation

SYMBOLIC = "symbolic values"


class Layers(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.k = 3
        self.lin = torch.nn.Linear(4, 4)
        self.layers = torch.nn.ModuleList(torch.nn.Linear(4, 4) for _ in range(3))

    def forward(self, x, n):
        y = self.lin(x)
        for layer in self.layers:
            y = layer(y)
        if n > 1:
            y = y * 2
        return y[: self.k + n]


def _entry():
    jm = thunder.jit(Layers(), cache=SYMBOLIC)
    jm(torch.randn(8, 4), 2)
    (entry,) = metatrace.explain(jm)
    return entry


def test_every_check_is_structured(enabled):
    assert all(isinstance(c, CheckText) for c in _entry().guards)


def test_the_modules_tensors_are_its_own_state(enabled):
    tensors = _entry().on_state[TENSORS]
    assert {"self.lin.weight", "self.layers.2.bias"} <= {c.tensor for c in tensors}


def test_a_modules_value_is_checked_as_its_subject_equal_to_the_value(enabled):
    (check,) = [c for c in _entry().on_state[VALUES] if c.subject == "self.k"]
    assert (check.relation, check.value) == (Relation.EQ, 3)


def test_an_arguments_metadata_is_on_the_inputs(enabled):
    entry = _entry()
    x_checks = [c for c in entry.guards if c.tensor == "x"]
    assert x_checks and all(c in entry.on_inputs for c in x_checks)


def test_a_guard_on_an_input_number_carries_its_relation(enabled):
    (check,) = [c for c in _entry().on_inputs if c.subject == "n" and c.relation is Relation.GT]
    assert (check.value, check.reason, check.own_state) == (1, "", False)


def test_a_pin_says_why_and_thunders_own_check_of_it_is_not_listed():
    with metatrace.enable(force_fallback=("PAD",)):
        jf = thunder.jit(lambda a, p: torch.nn.functional.pad(a, (p, p)), cache=SYMBOLIC)
        jf(torch.randn(2, 3, 4), 1)
        (entry,) = metatrace.explain(jf)
    pins = [c for c in entry.guards if c.subject == "p" and c.relation is Relation.EQ]
    assert pins and all(c.reason for c in pins)


def test_the_summary_reads_the_checks_subjects_not_their_texts():
    checks = [CheckText(f"check {i}", f"self.h.{i}.w", tensor=f"self.h.{i}.w", own_state=True) for i in range(3)]
    shown = str(EntryGuards(0, checks + [CheckText("n > 1", "n", Relation.GT, 1)]))
    assert "self.h.*.w" in shown and "check 0" not in shown and "n > 1" in shown
