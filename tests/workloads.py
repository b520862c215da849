"""Small workloads shared by the tests and tools/bench.py."""

from __future__ import annotations

import math

import torch


def causal_mask(block_size: int = 64) -> torch.Tensor:
    """A (1, 1, block_size, block_size) lower-triangular buffer, as nanoGPT keeps one."""
    return torch.tril(torch.ones(block_size, block_size)).view(1, 1, block_size, block_size)


def causal_attention(q, k, v, mask):
    """Attention over the first T rows and columns of a mask buffer: T varies, the mask does not."""
    B, H, T, D = q.shape
    att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(D))
    att = att.masked_fill(mask[:, :, :T, :T] == 0, float("-inf"))
    return torch.softmax(att, dim=-1) @ v
