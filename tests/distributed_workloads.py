"""Data-parallel workloads on 2 CPU ranks (gloo), shared by tests/models/test_distributed.py and
tools/bench.py (ddp-train).

``run_ranks`` spawns the ranks (``torch.multiprocessing``, spawn) and waits for their reports
with a timeout: a rank that hangs or raises raises ``RankFailure`` in the parent. Every rank
builds the same model (fixed seed), wraps ``thunder.jit(model, cache=...)`` in thunder's ``ddp``
or ``fsdp`` and trains one step per length on its own batch (``out.sum().backward()``), reporting
its outputs and gradients (gathered across the ranks under fsdp, whose parameters are sharded;
only with ``collect``), its compile count and the seconds its training steps took.
"""

from __future__ import annotations

import os
import queue
import socket
import time
import traceback

import torch
import torch.multiprocessing as mp

WORLD = 2


class RankFailure(RuntimeError):
    """A rank raised, or did not report within the timeout."""


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


def _litgpt_batch(model, rank: int, T: int) -> torch.Tensor:
    from litgpt_workloads import tokens

    return tokens(model, (2, T), seed=100 * rank + T)


def build(name: str):
    """The model ``name``: ``sequence`` (SequenceModel), ``litgpt`` (llama2-like, 2 layers) or
    ``litgpt:<config>``; every rank and the eager reference build the same weights."""
    torch.manual_seed(0)
    if name == "sequence":
        return SequenceModel()
    kind, _, config = name.partition(":")
    if kind != "litgpt":
        raise ValueError(f"unknown model {name!r}")
    from litgpt_workloads import build as build_litgpt

    return build_litgpt(config or "llama2-like")


def batch(model, name: str, rank: int, T: int) -> torch.Tensor:
    """Rank ``rank``'s batch of length ``T`` (fixed seed per rank and length)."""
    return (_sequence_batch if name == "sequence" else _litgpt_batch)(model, rank, T)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wrap(kind: str, jitted):
    """``ddp``, ``ddp-unbucketed`` or ``fsdp-<zero2|zero3>-<none|layer|block>`` of a jitted model."""
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


def train(kind: str, schedule: list[list[int]], model_name: str, rank: int, cache: str, collect: bool):
    """One jitted, wrapped model trained over ``schedule`` (per step, the length of each rank) on
    this rank: (per step (output, gradients) as numpy arrays when ``collect``, else empty; they
    travel by value, a tensor sent through the queue is shared memory that disappears with this
    process), the compile count, and the seconds of the training steps (forward and backward,
    compiles included; collecting is not counted), timed from a barrier."""
    import torch.distributed as tdist

    import thunder

    model = build(model_name)
    names = [name for name, _ in model.named_parameters()]
    dm = wrap(kind, thunder.jit(model, cache=cache))
    batches = [batch(model, model_name, rank, lengths[rank]) for lengths in schedule]
    steps = []
    seconds = 0.0
    tdist.barrier()
    for x in batches:
        start = time.perf_counter()
        out = dm(x)
        out.sum().backward()
        seconds += time.perf_counter() - start
        if collect:
            params = dict(dm.named_parameters())
            grads = {name: _full_grad(params[name], kind).numpy() for name in names}
            steps.append((out.detach().numpy(), grads))
        for p in dm.parameters():
            p.grad = None
    return steps, thunder.cache_misses(dm), seconds


def _rank_main(rank: int, port: int, runs, results, options: dict) -> None:
    import torch.distributed as tdist

    try:
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), LOCAL_RANK=str(rank))
        if options["threads"]:
            torch.set_num_threads(options["threads"])
        tdist.init_process_group("gloo", rank=rank, world_size=WORLD)
        if options["enable"]:
            import metatrace

            metatrace.enable()
        # every run in one process group: spawning and importing thunder costs more than a run
        results.put((rank, "ok", [train(kind, schedule, model_name, rank, options["cache"], options["collect"])
                                  for kind, schedule, model_name in runs]))
        tdist.destroy_process_group()
    except BaseException:
        results.put((rank, "error", traceback.format_exc()))


def run_ranks(runs: list[tuple[str, list[list[int]], str]], timeout: float, *, enable: bool = True,
              cache: str = "symbolic values", collect: bool = True, threads: int | None = None) -> list[dict[int, tuple]]:
    """``runs`` (kind, schedule, model name) in order in one spawn of ``WORLD`` ranks, metatrace
    enabled there or not; per run: rank -> (steps as tensors, compile count, seconds).
    ``timeout``: seconds to wait for each rank's report (a hang raises ``RankFailure``);
    ``threads``: torch threads per rank (default: torch's)."""
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    port = _free_port()
    options = dict(enable=enable, cache=cache, collect=collect, threads=threads)
    procs = [ctx.Process(target=_rank_main, args=(r, port, runs, results, options)) for r in range(WORLD)]
    for p in procs:
        p.start()
    reports: dict[int, list] = {}
    try:
        while len(reports) < WORLD:
            try:
                rank, status, payload = results.get(timeout=timeout)
            except queue.Empty:
                raise RankFailure(f"a rank did not finish within {timeout} s (hang); got ranks {sorted(reports)}") from None
            if status == "error":
                raise RankFailure(f"rank {rank} raised:\n{payload}")
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
                   runs_[i][1], runs_[i][2])
            for rank, runs_ in reports.items()
        })
    return per_run
