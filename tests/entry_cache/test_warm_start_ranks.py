"""Data-parallel ranks that start again load their entries: thunder's ddp and fsdp on 2 gloo CPU
ranks, spawned twice with one entry cache directory: the first spawn compiles once per rank and
stores, the second compiles 0 times on every rank and its gradients equal eager's mean gradients.
Each rank stores under its own key (the rank is in it): no cross-rank coordination.
"""

from __future__ import annotations

import os

import pytest
import torch

pytestmark = pytest.mark.slow

DP_RUNS = [("ddp", [[3, 3], [5, 5], [7, 7]], "sequence"), ("fsdp-zero2-none", [[3, 3], [6, 6]], "sequence")]


@pytest.fixture(scope="module")
def data_parallel_twice(tmp_path_factory):
    from distributed_workloads import RankFailure, run_ranks

    directory = tmp_path_factory.mktemp("dp-entries")
    saved = dict(os.environ)
    os.environ.update(METATRACE_ENTRY_CACHE="1", METATRACE_ENTRY_CACHE_DIR=str(directory))  # (the ranks inherit it)
    try:
        return [run_ranks(DP_RUNS, 420) for _ in range(2)]
    except RankFailure as e:
        pytest.fail(str(e))
    finally:
        os.environ.clear()
        os.environ.update(saved)


def _eager_mean_gradients(schedule, model_name):
    from distributed_workloads import WORLD, batch, build

    model = build(model_name)
    steps = []
    for lengths in schedule:
        grads = []
        for rank in range(WORLD):
            model.zero_grad()
            model(batch(model, model_name, rank, lengths[rank])).sum().backward()
            grads.append({n: p.grad.detach().clone() for n, p in model.named_parameters()})
        steps.append({n: sum(g[n] for g in grads) / WORLD for n in grads[0]})
    return steps


@pytest.mark.parametrize("run", range(len(DP_RUNS)), ids=[kind for kind, _, _ in DP_RUNS])
def test_the_first_data_parallel_run_compiles_once_per_rank(data_parallel_twice, run):
    assert {rank: report[1] for rank, report in data_parallel_twice[0][run].items()} == {0: 1, 1: 1}


@pytest.mark.parametrize("run", range(len(DP_RUNS)), ids=[kind for kind, _, _ in DP_RUNS])
def test_the_second_data_parallel_run_compiles_nothing_on_any_rank(data_parallel_twice, run):
    assert {rank: report[1] for rank, report in data_parallel_twice[1][run].items()} == {0: 0, 1: 0}


@pytest.mark.parametrize("run", range(len(DP_RUNS)), ids=[kind for kind, _, _ in DP_RUNS])
def test_the_second_data_parallel_run_has_eagers_gradients(data_parallel_twice, run):
    _, schedule, model_name = DP_RUNS[run]
    expected = _eager_mean_gradients(schedule, model_name)
    for rank, (steps, _, _) in data_parallel_twice[1][run].items():
        for (_, grads), want in zip(steps, expected):
            for name, g in grads.items():
                torch.testing.assert_close(g, want[name], msg=lambda m: f"rank {rank}, {name}: {m}")
