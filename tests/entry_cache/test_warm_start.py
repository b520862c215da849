"""A fresh process serves the models users train with 0 compiles, loading the first process's entries.

Two real processes run tests/entry_cache/warm_start_driver.py with one entry cache directory:
litgpt's llama2-like training over 8 lengths, Hugging Face Llama training over 5 lengths, HF
``generate`` with the default DynamicCache over 3 prompt lengths, litgpt's MoE (mixtral-like)
training, and a function with torch_compile_ex's fusion regions (compiled again by torch.compile
from their stored text). The first compiles and stores; the second must compile nothing, load the stored
entries, and return bitwise what the first returned (outputs, every gradient, generated tokens).
(Data-parallel ranks: test_warm_start_ranks.py. The first call's cost, cold against warm, is
measured by tools/bench.py's warm-start section, not here.)
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.slow

DRIVER = Path(__file__).resolve().parent / "warm_start_driver.py"
WORKLOADS = ("litgpt llama2-like training", "HF Llama training", "HF generate (DynamicCache)", "litgpt MoE training",
             "torch_compile_ex fusion regions")


def _cache_env(directory: Path) -> dict:
    return {**os.environ, "METATRACE_ENTRY_CACHE": "1", "METATRACE_ENTRY_CACHE_DIR": str(directory)}


@pytest.fixture(scope="module")
def two_processes(tmp_path_factory):
    directory = tmp_path_factory.mktemp("entries")
    reports = []
    for run in ("cold", "warm"):
        out = directory.parent / f"{run}.pkl"
        done = subprocess.run([sys.executable, str(DRIVER), str(out)], env=_cache_env(directory), capture_output=True,
                              text=True, timeout=900)
        assert done.returncode == 0, done.stderr[-4000:]
        with open(out, "rb") as f:
            reports.append(pickle.load(f))
    return reports


def _same(a, b) -> bool:
    if isinstance(a, np.ndarray):
        return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b


@pytest.mark.parametrize("workload", WORKLOADS)
def test_the_first_process_compiles_and_stores(two_processes, workload):
    cold = two_processes[0][workload]
    assert (cold["compiles"], cold["stored"], cold["kept_local"]) == (cold["stored"], cold["compiles"], [])


@pytest.mark.parametrize("workload", WORKLOADS)
def test_the_second_process_compiles_nothing(two_processes, workload):
    assert two_processes[1][workload]["compiles"] == 0


@pytest.mark.parametrize("workload", WORKLOADS)
def test_the_second_process_loads_every_stored_entry(two_processes, workload):
    # (at least: the two litgpt workloads jit one class, GPT, so each loads the other's entries too,
    # whose prologues then reject the other config)
    cold, warm = two_processes[0][workload], two_processes[1][workload]
    assert warm["loaded"] >= cold["stored"]


@pytest.mark.parametrize("workload", WORKLOADS)
def test_the_second_process_returns_bitwise_what_the_first_returned(two_processes, workload):
    assert _same(two_processes[0][workload]["results"], two_processes[1][workload]["results"])
