"""``F.instance_norm`` updates its running statistics, as eager does.

thunder's ``instance_norm`` repeats ``running_mean`` and ``running_var`` once per sample, runs
``batch_norm`` on the input reshaped to ``(1, b * c, ...)`` and stops: ``batch_norm`` writes the
new statistics into the repeated copies, which nothing reads, so ``nn.InstanceNorm1d/2d/3d(...,
track_running_stats=True)`` in training kept its statistics at their initial values wherever
thunder ran its definition (under grad: a parameter requires grad; stock thunder too; without
grad the torch executor calls ``F.instance_norm`` whole, which updated them). Eager (aten's
``instance_norm``) then copies the per-channel mean of the repeated copies back into each
statistic; here the definition does the same, in thunder ops.
"""

from __future__ import annotations

import thunder.torch as ltorch

from metatrace.patching import SYMBOL_METAS, Patch, attribute


def _instance_norm(a, /, running_mean=None, running_var=None, weight=None, bias=None, use_input_stats=True,
                   momentum=0.1, eps=1e-5):
    b, c = a.shape[0], a.shape[1]
    repeated = [None if t is None else ltorch.repeat(t, b) for t in (running_mean, running_var, weight, bias)]
    mean_copy, var_copy = repeated[:2]
    out = ltorch.batch_norm(ltorch.reshape(a, (1, b * c, *a.shape[2:])), *repeated, use_input_stats, momentum, eps)
    # (aten: at::alias(running_mean).copy_(running_mean_.view({b, c}).mean(0)), even without input stats)
    for statistic, copy in ((running_mean, mean_copy), (running_var, var_copy)):
        if statistic is not None:
            ltorch._copy_(statistic, ltorch.mean(ltorch.reshape(copy, (b, c)), 0))
    return ltorch.reshape(out, a.shape)


def patches() -> list[Patch]:
    return [attribute(ltorch.instance_norm, "meta", _instance_norm,
                      "instance_norm copies its running statistics back, as eager", label=SYMBOL_METAS)]
