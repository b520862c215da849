"""metatrace's one wrapper of each of thunder's lookasides for tuple and list indexing, ``+`` and
``*``, and ``isinstance``, their steps in order (each step is the function of the module that owns
its concern).

Indexing (``tuple.__getitem__``, ``list.__getitem__``):

1. a number proxy used as the index is baked in, guarded
   (:func:`metatrace.interpret.calls.numbers.number_builtins.concrete_index`);
2. thunder's lookaside;
3. a slice of a value the code holds as a ``torch.Size`` is one too
   (:mod:`metatrace.interpret.calls.numbers.eager_sizes`).

``+`` and ``*`` (``__add__``, ``__mul__``, ``__rmul__`` of tuples and lists):

1. thunder's lookaside;
2. a ``torch.Size``'s ``+`` and ``*`` make a ``torch.Size`` (eager_sizes);
3. the result's wrapper is held until the compile ends, so thunder's wrapper cache finds its
   items again (:mod:`metatrace.interpret.opcodes.sequence_operators`).

``isinstance``:

1. of a value held as a ``torch.Size``: eager's answer (eager_sizes);
2. of a number proxy: the answer for the number it stands for (number_builtins);
3. thunder's lookaside.
"""

from __future__ import annotations

import functools

import thunder.core.interpreter as interpreter
import thunder.core.jit_ext as jit_ext

from metatrace.interpret.calls.numbers import eager_sizes, number_builtins
from metatrace.interpret.opcodes import sequence_operators
from metatrace.patching import Patch, item

_TRACKING = "thunder.core.interpreter._default_provenance_tracking_lookaside_map"
_GENERAL = "thunder.core.jit_ext._general_jit_lookaside_map"
_OPERATORS = (tuple.__add__, tuple.__mul__, tuple.__rmul__, list.__add__, list.__mul__, list.__rmul__)


def _indexing(original):
    @functools.wraps(original)
    def getitem(self, idx, /):
        result = original(self, number_builtins.concrete_index(idx))
        eager_sizes.note_result(result, eager_sizes.sliced((self, idx)))
        return result

    return getitem


def _operator(original):
    @functools.wraps(original)
    def lookaside(*args, **kwargs):
        result = original(*args, **kwargs)
        eager_sizes.note_result(result, args)
        sequence_operators.keep_result(result)
        return result

    return lookaside


def _isinstance(original):
    def isinstance_lookaside(obj, cls):
        answer = eager_sizes.isinstance_of_size(obj, cls)
        if answer is None:
            answer = number_builtins.isinstance_of_number(obj, cls)
        return original(obj, cls) if answer is None else answer

    return isinstance_lookaside


def patches() -> list[Patch]:
    tracking = interpreter._default_provenance_tracking_lookaside_map
    return [
        *(item(tracking, op, _indexing, "indexing by a symbolic number is guarded by equality; a slice of a "
               "torch.Size is a torch.Size", wrap=True, label=_TRACKING)
          for op in (tuple.__getitem__, list.__getitem__)),
        *(item(tracking, op, _operator, "a torch.Size's + and * make a torch.Size; a list or tuple made by + or * "
               "keeps its items' wrappers (held until the compile ends)", wrap=True, label=_TRACKING)
          for op in _OPERATORS),
        item(jit_ext._general_jit_lookaside_map, isinstance, _isinstance,
             "isinstance(x.shape, torch.Size) is eager's answer; isinstance(n, int) answers for the number a proxy "
             "stands for", wrap=True, label=_GENERAL),
    ]
