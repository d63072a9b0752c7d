"""ChatTS-style fusion: every patch embedding, projected to the backbone's width, is spliced into the
token stream where its channel's marker stands. Full resolution: L / 16 tokens per channel, so the
backbone's attention grows as (L / 16)^2, which is why this row runs out of memory at long L."""

from __future__ import annotations

import torch
from torch import nn

from tsbench.models.tslm.layers import Projector


class PatchSplice(nn.Module):
    splices = True  # its tokens enter the text stream

    def __init__(self, d_encoder: int, d_model: int, settings) -> None:
        super().__init__()
        self.project = Projector(d_encoder, d_model)

    def series_tokens(self, patches: torch.Tensor, mask: torch.Tensor) -> list[torch.Tensor]:
        """(channels, N, d_enc) -> one (N, d_model) block per channel."""
        projected = self.project(patches)
        return [projected[c][mask[c]] for c in range(projected.shape[0])]
