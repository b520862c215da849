"""metatrace's tables beside thunder's objects and its own registered operators: what each holds,
keyed by what, and when an entry goes.
"""

from __future__ import annotations

import weakref

from metatrace.state.weak_tables import IdentityTable, WeakTable

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

# Number and tensor proxies -> what metatrace's metas learned about them, keyed by identity (a
# proxy's ``==`` records a comparison); an entry goes with its proxy:
# - a number recorded as ``base + total`` -> [base, total, the recorder it was recorded in]
#   (metatrace.metas.runtime_arithmetic: chains of constant offsets fold)
OFFSET_CHAINS = IdentityTable(list)
# - first number operand -> {(op name, operands): (weak references to the number operands, the
#   result)} for every number op recorded on a number with no value: re-running a meta outside a
#   compile (thunder's ``check_trace``) computes ``n + n`` again, and only the recorded symbol equals
#   the output size it checks against (no value tells a new symbol from it); operands are keyed by
#   identity, their weak references checked on lookup (metatrace.metas.unbacked)
NO_VALUE_OPS = IdentityTable(dict)
# - result -> [op name, operands] of the number ops recorded on a number with no value: what
#   ``unbacked.fold_division`` reads a product's factors from
NO_VALUE_PRODUCERS = IdentityTable(list)
# - tensor proxy -> {flattened?: its indices}: ``x[m] - y[m]`` reads the indices of ``m`` once, so
#   both results have the same length symbol (two calls would have two counts, and broadcasting them
#   would ask whether they are equal); emptied also by every in-place op (thunder keeps the proxy of
#   a tensor written in place, or of its alias, until its functionalization pass)
#   (metatrace.metas.torch_ops.data_dependent)
SHARED_INDICES = IdentityTable(dict)
# - first operand -> {operator name: the size a bound symbol of the operator outputs for it}: every
#   such bound symbol is remembered as it is made (BoundSymbol.__post_init__,
#   metatrace.proxies.number_concretizations), including the copies executor passes make with renamed
#   inputs (metatrace.metas.torch_ops.data_dependent_ops)
BOUND_SIZES = IdentityTable(dict)

# metatrace's operators registered on thunder's executors, by name, filled by their Patch rows while
# metatrace is enabled (the rows' undo empties them): the python executor's number operators
# (metatrace.metas.python_executor), the custom ops' forward and backward
# (metatrace.metas.torch_ops.custom_ops), the data-dependent ops (data_dependent_ops)
PYTHON_EXECUTOR_OPERATORS: dict = {}
CUSTOM_OP_OPERATORS: dict = {}
DATA_DEPENDENT_OPERATORS: dict = {}
