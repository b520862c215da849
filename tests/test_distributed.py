"""thunder's ddp and fsdp under symbolic values: one entry per rank serves every length.

Each test spawns 2 CPU ranks with gloo (``torch.multiprocessing``, spawn) and joins them with a
timeout: a rank that hangs fails the test. Every rank builds the same model (fixed seed), trains
one step per length on its own batch and reports its outputs, its gradients (gathered across the
ranks under fsdp, whose parameters are sharded) and its compile count. The reference is eager
PyTorch in the parent: each rank's output on its batch, and the mean over both ranks' batches of
the eager gradients (what ddp and fsdp average to).
"""

from __future__ import annotations

import os
import queue
import socket
import traceback

import pytest
import torch
import torch.multiprocessing as mp

WORLD = 2
TIMEOUT_S = 420


class SequenceModel(torch.nn.Module):
    """Linear layers over the last dimension and a mean over the sequence: sizes (B, T, 8),
    T varying. Dimension 0 of every parameter is even, so fsdp shards it without padding."""

    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(8, 16)
        self.b = torch.nn.Linear(16, 4)

    def forward(self, x):
        return self.b(torch.relu(self.a(x))).mean(1)


def _sequence_batch(model, rank: int, T: int) -> torch.Tensor:
    return torch.randn(2, T, 8, generator=torch.Generator().manual_seed(100 * rank + T))


def _litgpt_model():
    from litgpt_workloads import build

    return build("llama2-like")


def _litgpt_batch(model, rank: int, T: int) -> torch.Tensor:
    from litgpt_workloads import tokens

    return tokens(model, (2, T), seed=100 * rank + T)


# model name -> (build, batch(model, rank, T)); every rank and the eager reference build the same
# weights (fixed seeds)
MODELS = {"sequence": (SequenceModel, _sequence_batch), "litgpt": (_litgpt_model, _litgpt_batch)}


def _model(name: str):
    torch.manual_seed(0)
    return MODELS[name][0]()


def _batch(model, name: str, rank: int, T: int) -> torch.Tensor:
    return MODELS[name][1](model, rank, T)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wrap(kind: str, jitted):
    from thunder.distributed import FSDPBucketingStrategy, FSDPType, ddp, fsdp

    if kind.startswith("ddp"):
        return ddp(jitted, bucket_size_in_mb=0 if kind == "ddp-unbucketed" else 25)
    _, strategy, bucketing = kind.split("-")
    return fsdp(jitted, device=torch.device("cpu"), sharding_strategy=FSDPType[strategy.upper()],
                bucketing_strategy=FSDPBucketingStrategy[bucketing.upper()])


def _full_grad(param, kind: str) -> torch.Tensor:
    """The whole gradient of a parameter: fsdp keeps a shard of dimension 0 on each rank."""
    import torch.distributed as tdist

    grad = param.grad.detach()
    if kind.startswith("ddp"):
        return grad.clone()
    shards = [torch.empty_like(grad) for _ in range(WORLD)]
    tdist.all_gather(shards, grad.contiguous())
    return torch.cat(shards, 0)


def _train(kind: str, schedule: list[list[int]], model_name: str, rank: int):
    """One jitted, wrapped model trained over ``schedule`` on this rank: per step (output,
    gradients) as numpy arrays (they travel by value; a tensor sent through the queue is shared
    memory that disappears with this process), and the compile count."""
    import thunder

    model = _model(model_name)
    names = [name for name, _ in model.named_parameters()]
    dm = _wrap(kind, thunder.jit(model, cache="symbolic values"))
    steps = []
    for lengths in schedule:
        out = dm(_batch(model, model_name, rank, lengths[rank]))
        out.sum().backward()
        params = dict(dm.named_parameters())
        grads = {name: _full_grad(params[name], kind).numpy() for name in names}
        for p in dm.parameters():
            p.grad = None
        steps.append((out.detach().numpy(), grads))
    return steps, thunder.cache_misses(dm)


def _rank_main(rank: int, port: int, runs: list[tuple[str, list[list[int]], str]], results) -> None:
    import torch.distributed as tdist

    try:
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), LOCAL_RANK=str(rank))
        tdist.init_process_group("gloo", rank=rank, world_size=WORLD)
        import metatrace

        metatrace.enable()
        # every run in one process group: spawning and importing thunder costs more than a run
        results.put((rank, "ok", [_train(kind, schedule, model_name, rank) for kind, schedule, model_name in runs]))
        tdist.destroy_process_group()
    except BaseException:
        results.put((rank, "error", traceback.format_exc()))


def _run_ranks(runs: list[tuple[str, list[list[int]], str]]) -> list[dict[int, tuple]]:
    """Per run: rank -> (steps as tensors, compile count)."""
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    port = _free_port()
    procs = [ctx.Process(target=_rank_main, args=(r, port, runs, results)) for r in range(WORLD)]
    for p in procs:
        p.start()
    reports: dict[int, list] = {}
    try:
        while len(reports) < WORLD:
            try:
                rank, status, payload = results.get(timeout=TIMEOUT_S)
            except queue.Empty:
                pytest.fail(f"a rank did not finish within {TIMEOUT_S} s (hang); got ranks {sorted(reports)}")
            if status == "error":
                pytest.fail(f"rank {rank} raised:\n{payload}")
            reports[rank] = payload
    finally:
        for p in procs:
            p.join(10)
            if p.is_alive():
                p.kill()
    per_run = []
    for i in range(len(runs)):
        per_run.append({
            rank: ([(torch.from_numpy(out), {n: torch.from_numpy(g) for n, g in grads.items()}) for out, grads in runs_[i][0]],
                   runs_[i][1])
            for rank, runs_ in reports.items()
        })
    return per_run


def _eager(schedule: list[list[int]], model_name: str = "sequence"):
    """Per step: each rank's eager output, and the mean of both ranks' eager gradients."""
    model = _model(model_name)
    expected = []
    for lengths in schedule:
        outs, grads = [], []
        for rank in range(WORLD):
            model.zero_grad()
            out = model(_batch(model, model_name, rank, lengths[rank]))
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
def ranks():
    """Every run's reports from one spawn of 2 ranks: run name -> rank -> (steps, compiles)."""
    return {(kind, tuple(map(tuple, schedule))): report for (kind, schedule, _), report in zip(RUNS, _run_ranks(RUNS))}


def _report(ranks, kind, schedule):
    return ranks[(kind, tuple(map(tuple, schedule)))]


@pytest.mark.parametrize("kind", KINDS)
def test_each_rank_compiles_once_for_every_length(ranks, kind):
    reports = _report(ranks, kind, SAME_LENGTHS)
    assert {rank: compiles for rank, (_, compiles) in reports.items()} == {0: 1, 1: 1}


@pytest.mark.parametrize("kind", KINDS)
def test_outputs_equal_eager(ranks, kind):
    expected = _eager(SAME_LENGTHS)
    for rank, (steps, _) in _report(ranks, kind, SAME_LENGTHS).items():
        for (out, _), (eager_outs, _) in zip(steps, expected):
            torch.testing.assert_close(out, eager_outs[rank], msg=f"rank {rank}")


def _assert_gradients_are_eager_means(ranks, kind, schedule) -> None:
    expected = _eager(schedule)
    for rank, (steps, _) in _report(ranks, kind, schedule).items():
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
def litgpt_ranks():
    return dict(zip(range(len(LITGPT_RUNS)), _run_ranks(LITGPT_RUNS)))


@pytest.mark.slow
@pytest.mark.parametrize("run", [0, 1])
def test_litgpt_compiles_once_per_rank_over_lengths(litgpt_ranks, run):
    assert {rank: compiles for rank, (_, compiles) in litgpt_ranks[run].items()} == {0: 1, 1: 1}


@pytest.mark.slow
@pytest.mark.parametrize("run", [0, 1, 2])
def test_litgpt_gradients_equal_the_mean_of_eager_gradients(litgpt_ranks, run):
    _, schedule, model_name = LITGPT_RUNS[run]
    expected = _eager(schedule, model_name)
    for rank, (steps, _) in litgpt_ranks[run].items():
        for (out, grads), (eager_outs, mean) in zip(steps, expected):
            torch.testing.assert_close(out, eager_outs[rank], atol=1e-5, rtol=1e-5, msg=f"rank {rank} output")
            for name in mean:
                torch.testing.assert_close(grads[name], mean[name], atol=1e-4, rtol=1e-4, msg=f"rank {rank} {name}")
