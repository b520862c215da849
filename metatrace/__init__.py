"""metatrace: recorded shape arithmetic and prologue guards for thunder's symbolic-values cache.

``metatrace.enable()`` installs the rewritten metas of the installed thunder (generating them into
the cache directory first when needed); ``metatrace.disable()`` restores thunder exactly. Both are
idempotent; ``with metatrace.enable(): ...`` disables again on exit.
"""

from __future__ import annotations

from metatrace.checker import TraceCheckError, check_trace
from metatrace.codegen.cache import CacheDirectoryError, CorruptCacheError
from metatrace.entry_cache.entry_files import EntryCacheWarning
from metatrace.errors import MetatraceError, ProcessLocal, StaleReference
from metatrace.guards.collect import DataDependentError, GuardFailure
from metatrace.guards.explain import explain
from metatrace.guards.structure import ChangedWhileTracing, StructureMismatch
from metatrace.install import disable, enable, is_enabled
from metatrace.interpret.calls.c_code.container_writes import CMutationError
from metatrace.mutations.unreplayable_stores import DroppedStoreError
from metatrace.interpret.calls.c_code.tensor_arguments import TracedTensorInCCodeError
from metatrace.interpret.calls.unrepeatable_calls import ClockCallError, PreexistingIteratorError, RandomCallError
from metatrace.metas.torch_ops.custom_ops import CustomOpError
from metatrace.grad.written_inputs import WrittenInputError

__all__ = [
    "enable", "disable", "is_enabled", "check_trace", "explain",
    # errors (all subclasses of MetatraceError)
    "MetatraceError", "DataDependentError", "RandomCallError", "ClockCallError", "PreexistingIteratorError", "DroppedStoreError", "GuardFailure",
    "ChangedWhileTracing", "StructureMismatch", "TraceCheckError", "CacheDirectoryError", "CorruptCacheError",
    "CustomOpError", "CMutationError", "TracedTensorInCCodeError", "ProcessLocal", "StaleReference", "EntryCacheWarning",
    "WrittenInputError",
]
