"""thunder's ddp and fsdp under symbolic values: one entry per rank serves every length.

The module spawns 2 CPU ranks once, with gloo (``torch.multiprocessing``, spawn), runs every
training run of its tests in them in turn, and joins them with a timeout: a rank that hangs or
raises fails the tests. (A spawn costs each rank its own import of torch, thunder and metatrace
and an ``enable()``: one spawn instead of three saved about 25 s of CPU.) Every rank builds the same model (fixed seed), trains
one step per length on its own batch and reports its outputs, its gradients (gathered across the
ranks under fsdp, whose parameters are sharded) and its compile count. The reference is eager
PyTorch in the parent: each rank's output on its batch, and the mean over both ranks' batches of
the eager gradients (what ddp and fsdp average to). The ranks' code is shared with
tools/bench.py's ddp-train (tests/distributed_workloads.py).
"""

from __future__ import annotations

import functools

import pytest
import torch

from distributed_workloads import WORLD, RankFailure, batch, build, run_ranks

TIMEOUT_S = 600  # (every run of the module in one spawn)


def _run_ranks(runs: list[tuple[str, list[list[int]], str]]) -> list[dict[int, tuple]]:
    """Per run: rank -> (steps as tensors, compile count, seconds); a rank that hangs or raises
    fails the test."""
    try:
        return run_ranks(runs, TIMEOUT_S)
    except RankFailure as e:
        pytest.fail(str(e))


def _eager(schedule: list[list[int]], model_name: str = "sequence"):
    """Per step: each rank's eager output, and the mean of both ranks' eager gradients (computed
    once per schedule and model: several tests compare with the same)."""
    return _eager_once(tuple(map(tuple, schedule)), model_name)


@functools.lru_cache(maxsize=None)
def _eager_once(schedule: tuple[tuple[int, ...], ...], model_name: str):
    model = build(model_name)
    expected = []
    for lengths in schedule:
        outs, grads = [], []
        for rank in range(WORLD):
            model.zero_grad()
            out = model(batch(model, model_name, rank, lengths[rank]))
            out.sum().backward()
            outs.append(out.detach())
            grads.append({n: p.grad.detach().clone() for n, p in model.named_parameters()})
        mean = {n: sum(g[n] for g in grads) / WORLD for n in grads[0]}
        expected.append((outs, mean))
    return expected


# T per step and rank: the same length on both ranks, changing every step
SAME_LENGTHS = [[3, 3], [5, 5], [7, 7], [4, 4]]
# a different length on each rank in the same step
MIXED_LENGTHS = [[3, 6], [5, 2], [7, 7]]

KINDS = ["ddp", "ddp-unbucketed", "fsdp-zero2-none", "fsdp-zero2-layer", "fsdp-zero3-none", "fsdp-zero3-block"]
MIXED_KINDS = ["ddp", "fsdp-zero3-none"]


RUNS = [(kind, SAME_LENGTHS, "sequence") for kind in KINDS] + [(kind, MIXED_LENGTHS, "sequence") for kind in MIXED_KINDS]


@pytest.fixture(scope="module")
def all_ranks():
    """Per run of ALL_RUNS (defined below, with the litgpt and MoE runs), from one spawn of 2
    ranks: rank -> (steps, compiles, seconds)."""
    return _run_ranks(ALL_RUNS)


@pytest.fixture(scope="module")
def ranks(all_ranks):
    """The sequence model's runs: run name -> rank -> (steps, compiles)."""
    return {(kind, tuple(map(tuple, schedule))): report for (kind, schedule, _), report in zip(RUNS, all_ranks)}


def _report(ranks, kind, schedule):
    return ranks[(kind, tuple(map(tuple, schedule)))]


@pytest.mark.parametrize("kind", KINDS)
def test_each_rank_compiles_once_for_every_length(ranks, kind):
    reports = _report(ranks, kind, SAME_LENGTHS)
    assert {rank: compiles for rank, (_, compiles, _) in reports.items()} == {0: 1, 1: 1}


@pytest.mark.parametrize("kind", KINDS)
def test_outputs_equal_eager(ranks, kind):
    expected = _eager(SAME_LENGTHS)
    for rank, (steps, _, _) in _report(ranks, kind, SAME_LENGTHS).items():
        for (out, _), (eager_outs, _) in zip(steps, expected):
            torch.testing.assert_close(out, eager_outs[rank], msg=f"rank {rank}")


def _assert_gradients_are_eager_means(ranks, kind, schedule) -> None:
    expected = _eager(schedule)
    for rank, (steps, _, _) in _report(ranks, kind, schedule).items():
        for (_, grads), (_, mean) in zip(steps, expected):
            for name in mean:
                torch.testing.assert_close(grads[name], mean[name], msg=f"rank {rank} {name}")


@pytest.mark.parametrize("kind", KINDS)
def test_gradients_equal_the_mean_of_eager_gradients(ranks, kind):
    _assert_gradients_are_eager_means(ranks, kind, SAME_LENGTHS)


@pytest.mark.parametrize("kind", MIXED_KINDS)
def test_ranks_with_different_lengths_in_one_step_train_correctly(ranks, kind):
    _assert_gradients_are_eager_means(ranks, kind, MIXED_LENGTHS)


# litgpt llama2-like (2 layers), T = 8..32 on both ranks, and different lengths per rank
LITGPT_LENGTHS = [[8, 8], [12, 12], [16, 16], [24, 24], [32, 32]]
LITGPT_MIXED = [[8, 16], [24, 12]]
LITGPT_RUNS = [("ddp", LITGPT_LENGTHS, "litgpt"), ("fsdp-zero3-none", LITGPT_LENGTHS, "litgpt"),
               ("ddp", LITGPT_MIXED, "litgpt")]


@pytest.fixture(scope="module")
def litgpt_ranks(all_ranks):
    return dict(enumerate(all_ranks[len(RUNS):len(RUNS) + len(LITGPT_RUNS)]))


@pytest.mark.slow
@pytest.mark.parametrize("run", [0, 1])
def test_litgpt_compiles_once_per_rank_over_lengths(litgpt_ranks, run):
    assert {rank: compiles for rank, (_, compiles, _) in litgpt_ranks[run].items()} == {0: 1, 1: 1}


@pytest.mark.slow
@pytest.mark.parametrize("run", [0, 1, 2])
def test_litgpt_gradients_equal_the_mean_of_eager_gradients(litgpt_ranks, run):
    _, schedule, model_name = LITGPT_RUNS[run]
    expected = _eager(schedule, model_name)
    for rank, (steps, _, _) in litgpt_ranks[run].items():
        for (out, grads), (eager_outs, mean) in zip(steps, expected):
            torch.testing.assert_close(out, eager_outs[rank], atol=1e-5, rtol=1e-5, msg=f"rank {rank} output")
            for name in mean:
                torch.testing.assert_close(grads[name], mean[name], atol=1e-4, rtol=1e-4, msg=f"rank {rank} {name}")


# litgpt mixtral-like (MoE, issue 28): each rank routes its own tokens, so every expert's token
# count (a size read from data) differs between the ranks and between the steps
MOE_RUNS = [("ddp", [[8, 8], [12, 12], [16, 16]], "litgpt:mixtral-like")]


ALL_RUNS = RUNS + LITGPT_RUNS + MOE_RUNS


@pytest.fixture(scope="module")
def moe_ranks(all_ranks):
    return all_ranks[len(RUNS) + len(LITGPT_RUNS)]


@pytest.mark.slow
def test_moe_compiles_once_per_rank_over_lengths_and_routings(moe_ranks):
    assert {rank: compiles for rank, (_, compiles, _) in moe_ranks.items()} == {0: 1, 1: 1}


@pytest.mark.slow
def test_moe_gradients_equal_the_mean_of_eager_gradients(moe_ranks):
    _, schedule, model_name = MOE_RUNS[0]
    expected = _eager(schedule, model_name)
    for rank, (steps, _, _) in moe_ranks.items():
        for (out, grads), (eager_outs, mean) in zip(steps, expected):
            torch.testing.assert_close(out, eager_outs[rank], atol=1e-5, rtol=1e-5, msg=f"rank {rank} output")
            for name in mean:
                torch.testing.assert_close(grads[name], mean[name], atol=1e-4, rtol=1e-4, msg=f"rank {rank} {name}")
