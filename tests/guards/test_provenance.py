"""metatrace.guards.provenance on records built by hand: the parsed path, its names, its replay."""

from __future__ import annotations

import types

import pytest
from thunder.core.interpreter import ProvenanceRecord, PseudoInst

from metatrace.guards import provenance
from metatrace.guards.provenance import Read, Root, UNKNOWN, attribute_record, item_record, root_record


@pytest.fixture
def cfg_k():
    """``args[0].cfg['k']``"""
    return item_record(attribute_record(item_record(root_record(Root.ARGS), 0), "cfg"), "k")


@pytest.fixture
def global_weight():
    """``CONV.weight`` of a global module, as the interpreter reads it: through the function's
    ``__globals__`` and the module's ``_parameters``."""
    conv = item_record(attribute_record(root_record(Root.FUNCTION), "__globals__"), "CONV")
    return item_record(attribute_record(conv, "_parameters"), "weight")


def test_path_of_an_argument_read_starts_at_args(cfg_k):
    assert provenance.parse(cfg_k).root is Root.ARGS


def test_path_of_an_argument_read_has_its_keys_in_order(cfg_k):
    assert provenance.parse(cfg_k).keys() == [0, "cfg", "k"]


def test_path_of_an_argument_read_has_its_kinds_in_order(cfg_k):
    assert [s.kind for s in provenance.parse(cfg_k).steps] == [Read.ITEM, Read.ATTR, Read.ITEM]


def test_argument_read_is_named_after_the_parameter(cfg_k):
    assert provenance.argument_name(cfg_k, ["x"]) == "x.cfg['k']"


def test_argument_read_without_parameter_names_reads_as_args(cfg_k):
    assert provenance.argument_name(cfg_k) == "args[0].cfg['k']"


def test_argument_read_has_no_state_name(cfg_k):
    assert provenance.state_name(cfg_k) is None


def test_argument_read_shows_value_for_its_root_in_explain(cfg_k):
    assert provenance.text(cfg_k) == "<value>[0].cfg['k']"


def test_argument_read_is_rooted_in_arguments(cfg_k):
    assert provenance.rooted_in_arguments(cfg_k)


def test_attribute_of_an_argument_is_not_an_argument_item(cfg_k):
    assert not provenance.an_argument_or_its_item(cfg_k)


def test_argument_read_is_replayed_from_the_call(cfg_k):
    call = ((types.SimpleNamespace(cfg={"k": 7}),), {})
    assert provenance.replay(cfg_k, call=call) == 7


def test_argument_read_without_the_call_is_not_replayed(cfg_k):
    assert provenance.replay(cfg_k) is NotImplemented


def test_global_module_tensor_is_named_by_the_global(global_weight):
    assert provenance.text(global_weight) == "CONV._parameters['weight']"


def test_global_module_tensor_is_read_through_module_tensors(global_weight):
    assert provenance.through_module_tensors(global_weight)


def test_global_module_tensor_is_a_module_tensor_read(global_weight):
    assert provenance.reads_module_tensor(global_weight)


def test_global_module_tensor_is_not_rooted_in_the_call(global_weight):
    assert not provenance.rooted_in_the_call(global_weight)


def test_global_module_tensor_is_replayed_from_the_function(global_weight):
    weight = object()
    fn = types.SimpleNamespace(__globals__={"CONV": types.SimpleNamespace(_parameters={"weight": weight})})
    assert provenance.replay(global_weight, fn=fn) is weight


def test_module_forward_globals_read_as_the_global():
    fwd = attribute_record(attribute_record(root_record(Root.FUNCTION), "forward"), "__func__")
    assert provenance.text(item_record(attribute_record(fwd, "__globals__"), "G")) == "G"


def test_submodules_read_as_thunder_prints_them():
    h0 = item_record(attribute_record(item_record(attribute_record(root_record(Root.FUNCTION), "_modules"), "h"),
                                      "_modules"), "0")
    assert provenance.text(attribute_record(h0, "eps")) == "self.h.0.eps"


def test_submodule_path_gives_the_root_and_the_keys():
    root = root_record(Root.FUNCTION)
    h0 = item_record(attribute_record(item_record(attribute_record(root, "_modules"), "h"), "_modules"), "0")
    assert provenance.submodule_path(h0) == (root, ("h", "0"))


def test_closure_cell_reads_as_its_variable():
    def make():
        conv = 1

        def f():
            return conv

        return f

    cell = attribute_record(item_record(attribute_record(root_record(Root.FUNCTION), "__closure__"), 0), "cell_contents")
    assert provenance.text(attribute_record(cell, "stride"), make()) == "conv.stride"


def test_key_that_is_not_a_constant_is_unknown():
    computed = ProvenanceRecord(PseudoInst.BINARY_ADD, inputs=[])
    read = ProvenanceRecord(PseudoInst.LOAD_ATTR, inputs=[root_record(Root.FUNCTION), computed])
    assert provenance.parse(read).last.key is UNKNOWN


def test_key_that_is_not_a_constant_shows_as_a_question_mark():
    computed = ProvenanceRecord(PseudoInst.BINARY_ADD, inputs=[])
    read = ProvenanceRecord(PseudoInst.LOAD_ATTR, inputs=[root_record(Root.FUNCTION), computed])
    assert provenance.text(read) == "self.?"


def test_opaque_result_is_shown_as_its_last_input(cfg_k):
    opaque = provenance.opaque_record([provenance.constant_record(len), cfg_k])
    assert provenance.text(opaque) == "<value>[0].cfg['k']"


def test_opaque_result_is_not_rooted_in_arguments(cfg_k):
    opaque = provenance.opaque_record([provenance.constant_record(len), cfg_k])
    assert not provenance.rooted_in_arguments(opaque)


def test_equal_records_have_equal_keys(cfg_k):
    again = item_record(attribute_record(item_record(root_record(Root.ARGS), 0), "cfg"), "k")
    assert provenance.key(again) == provenance.key(cfg_k)


def test_records_reading_other_keys_have_other_keys(cfg_k):
    other = item_record(attribute_record(item_record(root_record(Root.ARGS), 0), "cfg"), "j")
    assert provenance.key(other) != provenance.key(cfg_k)


def test_an_argument_itself_is_told_by_its_source_and_key():
    assert provenance.argument_of(item_record(root_record(Root.KWARGS), "n")) == (Root.KWARGS, "n")


def test_a_chain_past_the_limit_stops_parsing():
    record = root_record(Root.FUNCTION)
    for _ in range(provenance.MAX_DEPTH + 5):
        record = attribute_record(record, "x")
    assert provenance.parse(record).root is Root.TOO_DEEP
