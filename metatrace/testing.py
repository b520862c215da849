"""Test support: compare every rewritten meta against thunder's original on the same inputs.

``with compare_metas() as log: ...`` runs, after each rewritten meta, the original meta on the
same arguments (recording suspended) and logs whether their output metadata agree: tensor shapes
(by value), dtypes, devices and requires_grad; number types and values; the structure of
sequences; or that both raised the same exception type.
"""

from __future__ import annotations

import contextlib
from collections import defaultdict
from dataclasses import dataclass, field
from numbers import Number

from thunder.core.langctxs import Languages, langctx
from thunder.core.proxies import NumberProxy, TensorProxy, pyval

import metatrace.metas.recording as recording


def metadata(x):
    """A comparable summary of a meta's output."""
    if isinstance(x, TensorProxy):
        return ("tensor", tuple(pyval(s) if isinstance(s, NumberProxy) else s for s in x._shape),
                str(x.true_dtype), str(x.device), x.requires_grad)
    if isinstance(x, NumberProxy):
        return ("number", x.python_type.__name__, x.value)
    if isinstance(x, Number):
        return ("number", type(x).__name__, x)
    if isinstance(x, (list, tuple)):
        return (type(x).__name__, tuple(metadata(y) for y in x))
    if isinstance(x, dict):
        return ("dict", tuple((k, metadata(v)) for k, v in x.items()))
    if x is None:
        return None
    return ("object", type(x).__name__)


@dataclass
class MetaLog:
    calls: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    mismatches: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))

    def observe(self, name, original, args, kwargs, result, error) -> None:
        self.calls[name] += 1
        token = recording.SUSPENDED.set(True)
        try:
            expected = langctx(Languages.PRIMS)(original)(*args, **kwargs)
            expected_error = None
        except Exception as e:  # the original's failure is part of its behaviour
            expected, expected_error = None, e
        finally:
            recording.SUSPENDED.reset(token)
        if error is not None or expected_error is not None:
            if type(error) is not type(expected_error):
                self.mismatches[name].append(f"rewritten raised {error!r}, original raised {expected_error!r}")
            return
        got, want = metadata(result), metadata(expected)
        if got != want:
            self.mismatches[name].append(f"rewritten gave {got}, original gave {want}")


@contextlib.contextmanager
def compare_metas():
    log = MetaLog()
    previous = recording.OBSERVER
    recording.OBSERVER = log.observe
    try:
        yield log
    finally:
        recording.OBSERVER = previous
