"""Attention blocks the fusion modules share: queries reading a sequence, with a feed-forward."""

from __future__ import annotations

import torch
from torch import nn


def heads_for(dim: int, wanted: int = 8) -> int:
    """The most heads (up to `wanted`) that divide `dim`."""
    return next(h for h in range(min(wanted, dim), 0, -1) if dim % h == 0)


class FeedForward(nn.Sequential):
    def __init__(self, dim: int, mult: int = 2):
        super().__init__(nn.LayerNorm(dim), nn.Linear(dim, mult * dim), nn.GELU(), nn.Linear(mult * dim, dim))


class QueryBlock(nn.Module):
    """Queries attend over `context` (optionally over themselves too, the Perceiver's choice), then a feed-forward."""

    def __init__(self, dim: int, include_queries: bool):
        super().__init__()
        self.include_queries = include_queries
        self.norm_q = nn.LayerNorm(dim)
        self.norm_kv = nn.LayerNorm(dim)
        self.attn = nn.MultiheadAttention(dim, heads_for(dim), batch_first=True)
        self.ff = FeedForward(dim)

    def forward(self, queries: torch.Tensor, context: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        q = self.norm_q(queries)
        kv = self.norm_kv(context)
        pad = None if mask is None else ~mask  # MultiheadAttention masks True = ignore
        if self.include_queries:
            kv = torch.cat([kv, q], dim=1)
            if pad is not None:
                pad = torch.cat([pad, torch.zeros(q.shape[:2], dtype=torch.bool, device=q.device)], dim=1)
        queries = queries + self.attn(q, kv, kv, key_padding_mask=pad, need_weights=False)[0]
        return queries + self.ff(queries)


class Projector(nn.Sequential):
    """Encoder width -> backbone width, a two-layer MLP (LLaVA / ChatTS style)."""

    def __init__(self, d_in: int, d_out: int):
        super().__init__(nn.Linear(d_in, d_out), nn.GELU(), nn.Linear(d_out, d_out))
