"""A bool tensor combined with a Python int has torch's dtype, int64 (thunder's lattice gave int8).

thunder's elementwise type promotion follows JAX's lattice, where ``bool ⊔ int`` is a weak
``int8``: ``torch.tensor([True]) * 2`` was int8 under thunder (stock too) and int64 in eager, so
its values wrapped at 128 and ``y.dtype`` differed (found by metatrace's fuzzer: a forward
pre-hook doubling a bool input). torch gives a Python int combined with a tensor of a lower
category (bool) the default integer dtype. The four entries of thunder's exact promotion table
for a bool tensor (strong or weak) with a Python int become int64, as torch has it; every other
entry is thunder's.
"""

from __future__ import annotations

from thunder.core import dtypes, utils

from metatrace.patching import Patch, attribute

_WHY = "a bool tensor with a Python int promotes to int64, as in torch (thunder's lattice: int8)"


def _torch_table(table: list) -> list:
    """thunder's exact promotion table with the bool x Python int entries torch's."""
    index = utils._exact_dtype_to_number_map
    fixed = [list(row) for row in table]
    for bool_dtype in (dtypes.bool8_, dtypes.bool8):
        fixed[index[bool_dtype]][index[int]] = fixed[index[int]][index[bool_dtype]] = dtypes.int64_
    return fixed


def patches() -> list[Patch]:
    # (a new table in place of thunder's, which ``_elementwise_type_promotion`` reads at every call)
    return [attribute(utils, "_elementwise_exact_promotion_table", _torch_table, _WHY, wrap=True)]
