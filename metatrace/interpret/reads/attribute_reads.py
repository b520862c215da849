"""metatrace's one wrapper of thunder's attribute read (``interpreter._object_getattribute_lookaside``),
its steps in order. Outside a compile that collects guards it only reads.

1. a dunder a number proxy's type lacks (``f.__xor__`` on a float) raises AttributeError, as in
   eager (:mod:`metatrace.interpret.calls.numbers.number_attributes`);
2. a property of the user's class that the trace reads is checked on the class: its getter by
   identity and code (:func:`metatrace.interpret.calls.python.callee_checks.check_property`);
3. thunder reads the attribute;
4. an attribute a number proxy lacks (``n.bit_length``, ``f.is_integer``) is answered from the
   number's value, guarded by equality (``number_attributes.from_value``).
"""

from __future__ import annotations

import functools

import thunder.core.interpreter as interpreter
from thunder.core.interpreter import WrappedValue, do_raise, unwrap
from thunder.core.proxies import NumberProxy

from metatrace.interpret.calls.numbers import number_attributes
from metatrace.interpret.calls.python.callee_checks import check_property
from metatrace.patching import Patch, attribute
from metatrace.state import compile_context


def _reading_attributes(original):
    @functools.wraps(original)
    def _object_getattribute_lookaside(obj, name):
        if compile_context.collector() is None:
            return original(obj, name)
        number = isinstance(unwrap(obj), NumberProxy)
        if number:
            missing = number_attributes.missing_dunder_error(obj, name)
            if missing is not None:
                return do_raise(missing)
        if type(obj) is WrappedValue:
            check_property(obj, name.value if type(name) is WrappedValue else name)
        result = original(obj, name)
        return number_attributes.from_value(obj, name, result) if number else result

    return _object_getattribute_lookaside


def patches() -> list[Patch]:
    return [attribute(interpreter, "_object_getattribute_lookaside", _reading_attributes,
                      "a number's dunders and attributes its proxy lacks behave as the number's; a property of "
                      "the user's class that the trace reads is checked on the class", wrap=True)]
