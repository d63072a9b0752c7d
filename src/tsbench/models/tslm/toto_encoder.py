"""The frozen Toto time-series encoder of Toto-1.0-QA (Datadog's `toto-ts` package, the real model code).

`toto-ts` pins old torch/transformers, so it is installed without its dependencies (`make setup`:
`pip install --no-deps toto-ts==0.2.0 gluonts==0.16.2` plus jaxtyping, rotary-embedding-torch and
toolz, what its model code imports). Its model code needs gluonts only for a scaler and a Student-t
distribution; `gluonts.torch/__init__` would also import gluonts' Lightning estimators (lightning,
never used by Toto's model), so the subpackage is registered without running that `__init__`.

Encoding follows ARFBench's Toto-1.0-QA: each channel (up to `max_channels`, the rest of the slots
zero and padded) is fitted into `max_length` samples, padded at the end and masked; Toto's backbone
gives one embedding per time step. ARFBench fits a long incident by picking a coarser sampling
interval of the same metric; tsbench has one resolution, so a longer series is averaged in blocks of
ceil(L / max_length) samples, the nearest equivalent.
"""

from __future__ import annotations

import math
import sys
import types
from pathlib import Path

import torch
from torch import nn

from tsbench.models.base import ModelUnavailableError

INSTALL_HINT = (
    "Toto's model code is missing: pip install --no-deps toto-ts==0.2.0 gluonts==0.16.2 && "
    "pip install jaxtyping rotary-embedding-torch 'toolz~=0.10' (make setup does this)"
)


def import_toto():
    """toto.model.toto.Toto, or one line saying how to install it."""
    import importlib.util

    if importlib.util.find_spec("gluonts") is not None and "gluonts.torch" not in sys.modules:
        import gluonts

        package = types.ModuleType("gluonts.torch")  # its submodules, without the Lightning estimators
        package.__path__ = [str(Path(gluonts.__file__).parent / "torch")]
        sys.modules["gluonts.torch"] = package
    try:
        from toto.model.toto import Toto
    except ImportError as exc:
        raise ModelUnavailableError(f"{INSTALL_HINT} ({exc})") from None
    return Toto


def tiny_toto_config(embed_dim: int = 32) -> dict:
    """A small Toto (Toto-Open-Base-1.0's layout at toy sizes) for tests and CPU measurements."""
    return {
        "patch_size": 16,
        "stride": 16,
        "embed_dim": embed_dim,
        "num_layers": 2,
        "num_heads": 2,
        "mlp_hidden_dim": 2 * embed_dim,
        "dropout": 0.0,
        "spacewise_every_n_layers": 2,
        "scaler_cls": "<class 'model.scaler.CausalPatchStdMeanScaler'>",
        "output_distribution_classes": ["<class 'model.distribution.MixtureOfStudentTsOutput'>"],
        "output_distribution_kwargs": {"k_components": 2},
        "use_memory_efficient_attention": False,
    }


def base_toto_config() -> dict:
    """Toto-Open-Base-1.0's published sizes (151 M parameters), for measuring the encoder at the paper's size."""
    return {
        **tiny_toto_config(768),
        "patch_size": 64,
        "stride": 64,
        "num_layers": 12,
        "num_heads": 12,
        "mlp_hidden_dim": 3072,
        "dropout": 0.1,
        "spacewise_every_n_layers": 12,
        "spacewise_first": False,
        "output_distribution_kwargs": {"k_components": 24},
    }


def random_toto(config: dict, seed: int = 0) -> nn.Module:
    Toto = import_toto()
    torch.manual_seed(seed)
    return Toto(**config)


def save_toto(model: nn.Module, config: dict, out: str | Path) -> Path:
    """Write a Toto as its hub repo lays it out (config.json + model.safetensors); toto-ts has no saver."""
    import json

    from safetensors.torch import save_file

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
    state = {k: v.contiguous() for k, v in model.state_dict().items() if not k.endswith("rotary_emb.freqs")}
    save_file(state, str(out / "model.safetensors"))
    return out


def load_toto(source: str | Path) -> nn.Module:
    """A Toto from a directory (config.json + model.safetensors) or a hub id in the local cache; never downloaded."""
    Toto = import_toto()
    local = Path(source).expanduser()
    try:
        if not local.is_dir():  # a hub id: its snapshot in the local cache (toto's own from_pretrained would fetch)
            from huggingface_hub import snapshot_download

            local = Path(snapshot_download(str(source), local_files_only=True))
        return Toto.load_from_checkpoint(str(local), map_location="cpu")
    except Exception as exc:  # noqa: BLE001 - a missing cache entry, file or key: one line, whatever raised it
        raise ModelUnavailableError(
            f"no Toto weights at {source!r} (a directory with config.json + model.safetensors, or a hub id already "
            f"in the hub cache): {str(exc).splitlines()[0][:160] if str(exc) else type(exc).__name__}"
        ) from None


def fit_length(values: torch.Tensor, max_length: int) -> torch.Tensor:
    """(channels, L) -> (channels, <= max_length): block means over ceil(L / max_length) samples."""
    length = values.shape[-1]
    if length <= max_length:
        return values
    block = math.ceil(length / max_length)
    pad = (-length) % block
    padded = torch.nn.functional.pad(values, (0, pad), value=float("nan"))
    return padded.reshape(values.shape[0], -1, block).nanmean(dim=-1)


class TotoSeriesEncoder(nn.Module):
    """(channels, L) -> (max_channels, max_length, d) per-time-step embeddings of the frozen Toto backbone."""

    def __init__(self, toto: nn.Module, max_length: int = 4096, max_channels: int = 20):
        super().__init__()
        self.toto = toto
        self.toto.eval()
        for parameter in self.toto.parameters():
            parameter.requires_grad_(False)
        patch = int(toto.model.patch_embed.patch_size)
        self.max_length = max(patch, max_length // patch * patch)
        self.max_channels = max_channels
        self.dim = int(toto.model.embed_dim)

    def train(self, mode: bool = True) -> TotoSeriesEncoder:  # frozen: always in eval mode (no dropout)
        super().train(mode)
        self.toto.eval()
        return self

    def prepare(self, values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The padded (max_channels, max_length) input and its padding mask (True = an observed sample)."""
        values = fit_length(values.float()[: self.max_channels], self.max_length)
        values = torch.nan_to_num(values, nan=0.0)  # ARFBench fills gaps; tsbench series have none
        channels, length = values.shape
        series = torch.zeros(self.max_channels, self.max_length)
        mask = torch.zeros(self.max_channels, self.max_length, dtype=torch.bool)
        series[:channels, :length] = values
        mask[:channels, :length] = True
        return series, mask

    @torch.no_grad()
    def forward(self, values: torch.Tensor) -> torch.Tensor:
        series, mask = self.prepare(values)
        weight = next(self.toto.parameters())
        series = series.to(weight.device, weight.dtype).unsqueeze(0)
        mask = mask.to(weight.device).unsqueeze(0)
        embeddings, _, _ = self.toto.model.backbone(series, mask, torch.zeros_like(series))
        return embeddings[0]
