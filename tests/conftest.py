"""Shared fixtures, the suite's layout and its order. Markers are registered in pyproject.toml.

Tests live in a folder per package they test (``metas/``, ``guards/``, ``interpret/``, ...,
``package/`` for the package as a whole); ``models/`` (real models: litgpt, Hugging Face, MoE,
distributed, fusion executors) and ``sweeps/`` (opinfo sweeps, the differential and the fuzz) are
marked ``slow`` here, so ``pytest -m "not slow"`` is the developer's loop. The shared harnesses
(``workloads.py``, ``fuzz_programs.py``, ...) stay in this folder, which is put on ``sys.path``
for every test module and for the tools that import them; so no folder here may take the name of
an importable package (``rewrites`` is ``tests/rewriting``: a folder without ``__init__`` on
``sys.path`` would shadow it as a namespace package).
"""

from __future__ import annotations

import os
import sys
import warnings
from pathlib import Path

import pytest

# The suite never reads or writes the user's entry cache, nor shares entries between tests (a
# loaded entry would change a test's compile count): off for every test and every process a test
# starts; tests of the entry cache turn it on with a directory of their own (tests/entry_cache).
os.environ["METATRACE_ENTRY_CACHE"] = "0"

# One intra-op thread per process (unless the caller sets OMP_NUM_THREADS): the suite's tensors
# are tiny, and its 2 xdist workers already fill 2 cores, where torch's default of one OpenMP
# thread per core made each worker's threads spin-wait for the other worker's (test_litgpt took
# 30% more CPU). Set before torch is imported (OpenMP reads it when it loads), in every worker
# and every process a test starts (ranks, warm-start drivers, thunder's own tests).
os.environ.setdefault("OMP_NUM_THREADS", "1")

TESTS = Path(__file__).resolve().parent
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))
SLOW_FOLDERS = ("models", "sweeps", "entry_cache")  # (entry_cache: real processes)
# the sentinel's marker (metatrace_sentinel) and option; without them the plugin does nothing
pytest_plugins = ("metatrace.pytest_plugin",)

warnings.filterwarnings("ignore", message="transformer_engine module not found")
warnings.filterwarnings("ignore", message="The 'symbolic values' cache option is highly experimental")


# The enable() kept open across consecutive tests that ask for ``enabled`` (one enable costs
# 0.17 s of patching and 1640 tests of the developer loop ask for it: 4.6 min of CPU), closed
# before the first test that does not ask for it (:func:`pytest_runtest_setup`), so that test
# sees thunder as stock thunder is, as before.
_SHARED_ENABLE: list = []


@pytest.fixture
def enabled():
    """metatrace enabled for the test (shared with the tests around it that ask for it too)."""
    # (imported here, not at the top: xdist's controller process loads this file before it starts
    # the workers and runs no test; importing torch and thunder there costs every run 6 s)
    import metatrace

    if not metatrace.is_enabled():
        _SHARED_ENABLE.append(metatrace.enable())
    yield
    assert metatrace.is_enabled()  # (a test that disables re-enables: the next test shares it)


@pytest.fixture(scope="module")
def module_enabled():
    """metatrace enabled by the module's own ``enable()`` from its first test that asks for it to
    its last (module-scoped fixtures that compile need it: ``enabled`` is per test)."""
    import metatrace

    with metatrace.enable():
        yield


def _close_shared_enable() -> None:
    while _SHARED_ENABLE:
        _SHARED_ENABLE.pop().__exit__(None, None, None)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    """Before a test's fixtures (a module fixture may enable metatrace itself): a test that does
    not ask for ``enabled`` runs with metatrace as the shared enable found it, disabled."""
    if "enabled" not in item.fixturenames:
        _close_shared_enable()


def pytest_sessionfinish(session):
    _close_shared_enable()


# Seconds of CPU each costly test module takes on one worker of a 2-core run (its tests' CPU
# summed, one OpenMP thread, measured in a run of the whole suite: what matters is their order;
# the other modules take seconds each).
# Under xdist (`-n 2 --dist loadfile --no-loadscope-reorder`) whole files go to workers in this
# order, each to the first idle worker: heaviest first (longest-processing-time scheduling) keeps
# one big file from running alone at the end. (xdist's default order, by number of tests, put
# test_opinfo_sweep's one 2-minute test last; a costly module missing here runs among the small
# ones and can end the run on one worker.)
MODULE_COSTS = {
    "test_inplace_matrix.py": 163,  # (27 writes, 6 cells of 19 destinations each)
    "test_hf_models.py": 163,  # (7 families x 2 shapes, an eval and a training compile each)
    "test_repeated_blocks.py": 131,  # (5 models compiled stamped and interpreted: 82)
    "test_hf_generate.py": 100,  # (4 families by default)
    "test_thunder_test_dynamo.py": 92,  # (thunder's own test_dynamo.py in a pytest process)
    "test_c_calls.py": 85,
    "test_differential.py": 67,
    "test_litgpt.py": 67,
    "test_hf_generate_more.py": 65,
    "test_distributed.py": 58,  # (its ranks' processes, one spawn)
    "test_thunderfx_models.py": 58,
    "test_warm_start.py": 56,  # (its processes)
    "test_hf_moe.py": 52,
    "test_fusion_executors.py": 47,
    "test_fuzz.py": 43,
    "test_tensor_in_c_code.py": 42,  # (its vmap test: 40 s late in a worker, 1 s alone)
    "test_generator_throw.py": 41,  # (its vmap test: 40 s late in a worker, 2 s alone)
    "test_finetuning.py": 41,
    "test_grad_sweep.py": 39,  # (stock thunder only where a metatrace run was not ok)
    "test_fast_paths.py": 35,
    "test_metatrace_sweep.py": 35,  # (stock thunder only where metatrace's run was not ok)
    "test_cache.py": 30,
    "test_moe.py": 27,
    "test_raising_calls.py": 26,
    "test_entry_files.py": 26,
    "test_called_modules.py": 25,
    "test_thunder_objects.py": 24,
    "test_warm_start_ranks.py": 23,
    "test_opinfo_sweep.py": 20,  # (stock thunder's survey on each op's first sample, cold cache)
    "test_modules.py": 20,
    "test_training_ops.py": 19,
    "test_eager_views.py": 19,
    "test_content_reads.py": 18,
    "test_bounded_state.py": 17,
    "test_stale_entries.py": 16,
    "test_unreached_inputs.py": 14,
    "test_untraced_composites.py": 13,
}


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.path.parent.name in SLOW_FOLDERS and item.path.parent.parent == TESTS:
            item.add_marker(pytest.mark.slow)
    if not hasattr(config, "workerinput"):  # only an xdist worker's order reaches the scheduler
        return
    items.sort(key=lambda item: -MODULE_COSTS.get(item.path.name, 0))  # (stable: files stay whole)
