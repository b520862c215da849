"""Over all prims: every ``PrimIDs`` member is accounted for.

A ported prim's rewritten meta must give the same output metadata as thunder's original meta
(shapes by value, dtypes, devices, requires_grad, number values; or the same exception type) on
every sample that reaches it: thunder's opinfo samples traced under ``cache="symbolic values"``,
plus hand-written samples (tests/prim_samples.py) for the prims opinfos do not reach on the CPU.
A ported prim that no sample reaches fails. A fallback prim must carry a reason.
"""

from __future__ import annotations

import pytest

from thunder.core.prims import PrimIDs

import metatrace
from metatrace.codegen import cache
from metatrace.codegen.generate import prim_symbols
from metatrace.testing import compare_metas
from opinfo_harness import iter_cases, run_case
from prim_samples import SAMPLES, direct_call_context

# The prims the core issue requires to be ported.
REQUIRED_PORTED = [
    "SLICE", "PAD", "RESHAPE", "BROADCAST_IN_DIM", "CAT", "TRANSPOSE", "SQUEEZE", "FLIP", "TAKE", "GATHER",
    "TAKE_ALONG_AXIS", "SCATTER_ADD", "INDEX_ADD", "MATMUL", "LINEAR", "CONVOLUTION", "UNFOLD", "TOPK", "SORT",
    "ARGMAX", "ARGMIN", "SUM", "PROD", "AMAX", "AMIN", "VAR", "VAR_MEAN", "FULL", "IOTA", "EMBEDDING",
]


@pytest.fixture(scope="module")
def manifest() -> dict:
    return cache.ensure().manifest


@pytest.fixture(scope="module")
def meta_log():
    """Every rewritten meta call of an opinfo sweep plus the hand-written samples, compared."""
    symbols = {pid.name: sym for pid, sym in prim_symbols().items()}
    with metatrace.enable(), compare_metas() as log:
        for op, sample in iter_cases(max_samples_per_op=1):
            run_case(op, sample, cache="symbolic values")
        for name, build in SAMPLES.items():
            with direct_call_context():
                for args, kwargs in build():
                    try:
                        symbols[name](*args, **kwargs)
                    except Exception:
                        pass  # compared by the log: both metas must raise the same type
    return log


def test_manifest_lists_every_prim(manifest):
    assert set(manifest["prims"]) == {p.name for p in PrimIDs}
    ported = [n for n, e in manifest["prims"].items() if e["status"] == "ported"]
    assert len(ported) >= 150, f"only {len(ported)} prims ported"
    assert not [n for n in REQUIRED_PORTED if manifest["prims"][n]["status"] != "ported"]


@pytest.mark.parametrize("prim", list(PrimIDs), ids=lambda p: p.name)
def test_prim(prim, manifest, meta_log):
    entry = manifest["prims"][prim.name]
    assert entry["meta"], "the manifest names the meta function"
    if entry["status"] == "fallback":
        assert entry.get("reason"), "a fallback says why"
        return
    assert entry["status"] == "ported"
    assert meta_log.calls.get(prim.name, 0) > 0, (
        f"no sample reaches {prim.name}: add one to tests/prim_samples.py"
    )
    assert not meta_log.mismatches.get(prim.name), meta_log.mismatches[prim.name][:3]


def test_report_prints_every_prim_and_totals(manifest, capsys):
    from metatrace.codegen.report import main

    assert main(["report"]) == 0
    out = capsys.readouterr().out
    for prim in PrimIDs:
        assert f"\n{prim.name} " in out
    ported = sum(e["status"] == "ported" for e in manifest["prims"].values())
    assert f"{ported} ported, {len(PrimIDs) - ported} fallback, {len(PrimIDs)} prims in all" in out
