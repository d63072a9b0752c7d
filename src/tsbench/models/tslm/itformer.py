"""ITFormer-style fusion: a fixed number of learned summary tokens per channel aggregate that channel's
patch embeddings through cross-attention, and only they enter the token stream. The backbone's cost
stays constant in L; the compression ratio (L / 16 patches into `summary_tokens`) grows with it.
(ITFormer also conditions its queries on the instruction; here they are learned, the same for every question.)"""

from __future__ import annotations

import torch
from torch import nn

from tsbench.models.tslm.layers import Projector, QueryBlock


class SummaryTokens(nn.Module):
    splices = True

    def __init__(self, d_encoder: int, d_model: int, settings) -> None:
        super().__init__()
        self.queries = nn.Parameter(torch.randn(settings.summary_tokens, d_encoder) * 0.02)
        self.blocks = nn.ModuleList(QueryBlock(d_encoder, include_queries=False) for _ in range(settings.fusion_layers))
        self.project = Projector(d_encoder, d_model)

    def series_tokens(self, patches: torch.Tensor, mask: torch.Tensor) -> list[torch.Tensor]:
        queries = self.queries.unsqueeze(0).expand(patches.shape[0], -1, -1).to(patches.dtype)
        for block in self.blocks:
            queries = block(queries, patches, mask)
        return list(self.project(queries))
