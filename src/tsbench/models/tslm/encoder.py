"""The frozen Chronos-2 time-series encoder, shared by the three TSLM architectures.

Chronos-2 reads at most `context_length` samples (8,192 for amazon/chronos-2) and keeps the last
ones when given more, so a longer series is cut into windows of that length, each encoded on its
own, and the patch embeddings are joined: every sample of the series is seen, at full resolution
(one embedding per patch of 16 samples). Each channel is encoded independently.
"""

from __future__ import annotations

import math
from pathlib import Path

import torch
from torch import nn

from tsbench.models.base import ModelUnavailableError
from tsbench.models.tslm.settings import TINY_ENCODER


def tiny_encoder(seed: int = 0, context_length: int = 2048, d_model: int = 32) -> nn.Module:
    """A small Chronos-2 from a config, weights seeded at random (tests and CPU measurements)."""
    from chronos.chronos2.config import Chronos2CoreConfig
    from chronos.chronos2.model import Chronos2Model

    config = Chronos2CoreConfig(
        d_model=d_model,
        d_kv=16,
        d_ff=2 * d_model,
        num_layers=1,
        num_heads=2,
        chronos_config={
            "context_length": context_length,
            "input_patch_size": 16,
            "output_patch_size": 16,
            "input_patch_stride": 16,
            "quantiles": [0.1, 0.5, 0.9],
            "use_reg_token": True,
            "use_arcsinh": True,
            "max_output_patches": 1,
        },
    )
    torch.manual_seed(seed)
    return Chronos2Model(config)


def load_encoder(source: str, seed: int = 0) -> nn.Module:
    """tiny-random, a Chronos-2 directory, or a hub id already in the local cache (nothing is downloaded)."""
    if source == TINY_ENCODER:
        return tiny_encoder(seed)
    from chronos.chronos2.model import Chronos2Model

    local = Path(source).expanduser()
    try:
        if local.is_dir():
            return Chronos2Model.from_pretrained(str(local))
        return Chronos2Model.from_pretrained(source, local_files_only=True)
    except OSError:
        raise ModelUnavailableError(
            f"no Chronos-2 checkpoint at {source!r} (give a local directory, or a hub id already in the hub cache)"
        ) from None


def freeze(module: nn.Module) -> nn.Module:
    module.eval()
    for parameter in module.parameters():
        parameter.requires_grad_(False)
    return module


class SeriesEncoder(nn.Module):
    """(channels, L) float series -> (channels, ceil(L / patch), d) patch embeddings and their mask."""

    def __init__(self, chronos: nn.Module):
        super().__init__()
        self.chronos = freeze(chronos)
        cfg = chronos.chronos_config
        self.patch = int(cfg.input_patch_size)
        self.window = int(cfg.context_length) // self.patch * self.patch
        self.dim = int(chronos.config.d_model)

    def train(self, mode: bool = True) -> SeriesEncoder:  # the encoder stays in eval mode (no dropout)
        super().train(mode)
        self.chronos.eval()
        return self

    def n_patches(self, length: int) -> int:
        return math.ceil(length / self.patch)

    @torch.no_grad()
    def forward(self, values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        channels, length = values.shape
        window = min(self.window, self.n_patches(length) * self.patch)  # a short series: one short window
        n_windows = max(1, math.ceil(length / window))
        padded = torch.full((channels, n_windows * window), float("nan"), dtype=torch.float32)
        padded[:, :length] = values.float()
        windows = padded.to(self.chronos.device).reshape(channels * n_windows, window)
        per_window = window // self.patch
        outputs = self.chronos.encode(windows)[0].last_hidden_state[:, :per_window]
        embeddings = outputs.reshape(channels, n_windows * per_window, self.dim)[:, : self.n_patches(length)]
        mask = torch.ones(channels, embeddings.shape[1], dtype=torch.bool, device=embeddings.device)
        return embeddings, mask
