"""The size-oblivious sites pass (``rewrites.size_oblivious``): golden before/after on snippets
written for the test, its failure where a listed meta lost its check, its list against the
runtime's table, and ``one_or_same``'s answers on the values the check meets."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest
from thunder.core.proxies import IntegerProxy

from metatrace.metas import oblivious_answers, runtime
from metatrace.state import compile_context
from rewrites.pipeline import rewrite_source
from rewrites.size_oblivious import SIZE_OBLIVIOUS_METAS, SiteNotFound, SizeObliviousSiteTransformer


def apply(source: str) -> str:
    return cst.parse_module(textwrap.dedent(source)).visit(SizeObliviousSiteTransformer()).code


def test_a_listed_meta_runs_its_body_inside_its_site():
    before = '''\
        def take_meta(a, dim):
            """Its docstring stays the function's."""

            # a comment stays with its line
            x = a.shape[dim]
            return x
        '''
    after = '''\
        def take_meta(a, dim):
            """Its docstring stays the function's."""
            with _mt.size_oblivious("take_meta"):
                # a comment stays with its line
                x = a.shape[dim]
                return x
        '''
    assert apply(before) == textwrap.dedent(after)


def test_a_function_not_listed_is_left_alone():
    source = "def other_meta(a):\n    return _mt.truth(_mt.eq(a, 1)) or _mt.truth(_mt.eq(b, a))\n"
    assert apply(source) == source


def test_a_nested_function_of_a_listed_name_is_not_a_site():
    source = "def outer(a):\n    def take_meta(b):\n        return b\n    return take_meta(a)\n"
    assert apply(source) == source


def test_the_broadcast_check_is_answered_by_one_or_same():
    before = '''\
        def broadcast_in_dim_meta(a, shape, dims):
            for n, idx in zip(a.shape, dims):
                _mt.check(_mt.truth(_mt.eq(n, 1)) or _mt.truth(_mt.eq(shape[_mt.index(idx)], n)), lambda: "no")
        '''
    after = '''\
        def broadcast_in_dim_meta(a, shape, dims):
            with _mt.size_oblivious("broadcast_in_dim_meta"):
                for n, idx in zip(a.shape, dims):
                    _mt.check(_mt.one_or_same(n, lambda: shape[_mt.index(idx)], lambda: _mt.truth(_mt.eq(n, 1)) or _mt.truth(_mt.eq(shape[_mt.index(idx)], n))), lambda: "no")
        '''
    assert apply(before) == textwrap.dedent(after)


def test_the_pipeline_marks_thunders_broadcast_check_as_written():
    source = '''\
        import thunder.core.utils as utils
        def broadcast_in_dim_meta(a, shape, dims):
            for original_length, idx in zip(a.shape, dims):
                utils.check(original_length == 1 or shape[idx] == original_length, lambda: "no")
        '''
    rewritten = rewrite_source(textwrap.dedent(source))
    assert "_mt.check(_mt.one_or_same(original_length, lambda: shape[_mt.index(idx)], lambda: " in rewritten


def test_a_check_of_another_size_is_not_answered():
    source = '''\
        def broadcast_in_dim_meta(a, shape, dims):
            return _mt.truth(_mt.eq(n, 1)) or _mt.truth(_mt.eq(shape[0], m)) or _mt.one_or_same(n, f, g)
        '''
    with pytest.raises(SiteNotFound, match="broadcast_in_dim_meta"):
        apply(source)


def test_a_listed_meta_without_its_check_fails_the_rewrite():
    with pytest.raises(SiteNotFound, match="broadcast_in_dim_meta"):
        apply("def broadcast_in_dim_meta(a, shape, dims):\n    return a\n")


def test_the_pass_lists_the_runtimes_meta_sites():
    assert SIZE_OBLIVIOUS_METAS == set(oblivious_answers.REWRITTEN_META_SITES)


def test_the_runtime_enters_a_site_by_name():
    with runtime.size_oblivious("take_meta"):
        assert compile_context.SIZE_OBLIVIOUS.get() == "take_meta"
    assert compile_context.SIZE_OBLIVIOUS.get() is None


def test_an_unknown_site_name_raises():
    with pytest.raises(KeyError, match="not_a_site"):
        runtime.size_oblivious("not_a_site")


# --- one_or_same's answers ------------------------------------------------------------------


class Relations(list):
    """A guard collector that keeps the relations reported to it."""

    def relation(self, op, lhs, rhs, value) -> None:
        self.append((op, lhs, rhs, value))


def _decide(size, target):
    """``one_or_same(size, target)`` with a collector listening: (answer, relations it reported)."""
    relations = Relations()
    as_written = lambda: runtime.truth(runtime.eq(size, 1)) or runtime.truth(runtime.eq(target, size))  # noqa: E731
    with compile_context.collecting(relations):
        answer = runtime.one_or_same(size, lambda: target, as_written)
    return answer, list(relations)


@pytest.fixture
def trace():
    """A trace to name the test's proxies."""
    from thunder.core.trace import TraceCtx, tracectx

    with tracectx(TraceCtx()):
        yield


def test_a_size_broadcast_to_itself_holds_without_a_guard(trace):
    n = IntegerProxy(value=1)
    assert _decide(n, n) == (True, [])


def test_a_size_broadcast_to_another_symbol_of_its_value_guards_their_equality_alone(trace):
    n, m = IntegerProxy(value=1), IntegerProxy(value=1)
    assert _decide(n, m) == (True, [("eq", m, n, True)])


def test_a_size_broadcast_to_another_value_is_the_check_as_written(trace):
    n, m = IntegerProxy(value=1), IntegerProxy(value=4)
    assert _decide(n, m) == (True, [("eq", n, 1, True)])
