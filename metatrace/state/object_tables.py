"""metatrace's tables beside thunder's objects and its own registered operators: what each holds,
keyed by what, and when an entry goes.
"""

from __future__ import annotations

import weakref

from metatrace.state.weak_tables import WeakTable

# TraceCtx -> {id(scope): ScopeState}: per scope of a trace, the sizes it defines and reads
# (metatrace.proxies.shape_reads); goes with the trace (an entry is used only while its scope, the
# list the id names, is the one the state holds)
SCOPE_STATES = WeakTable(dict)

# ThunderModule -> {(dict name, dotted name): [module path, name, weak reference to what the
# wrapper holds as the model's]} while the wrapper holds it (metatrace.interpret.modules.wrapper_copies)
THUNDER_MODULE_COPIES = WeakTable(dict)

# backward function of a cache entry -> per flat output, True where eager returns it without grad;
# goes with the backward function (metatrace.grad.requires_grad)
NON_DIFFERENTIABLE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

# metatrace's operators registered on thunder's executors, by name, filled by their Patch rows while
# metatrace is enabled (the rows' undo empties them): the python executor's number operators
# (metatrace.metas.python_executor), the custom ops' forward and backward
# (metatrace.metas.torch_ops.custom_ops), the data-dependent ops (data_dependent_ops)
PYTHON_EXECUTOR_OPERATORS: dict = {}
CUSTOM_OP_OPERATORS: dict = {}
DATA_DEPENDENT_OPERATORS: dict = {}
