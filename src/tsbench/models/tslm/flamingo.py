"""OpenTSLM-Flamingo fusion: a Perceiver resampler turns each channel's patches into a fixed number of
latents, and gated cross-attention blocks, placed before every k-th decoder layer, let every text
token read them. The series never enters the token stream: the backbone sees text only, plus the
cross-attention to channels x latents vectors, whatever L is. Each gate starts at tanh(0) = 0, so
the untrained model is the backbone itself (Flamingo's initialisation)."""

from __future__ import annotations

from contextlib import contextmanager

import torch
from torch import nn

from tsbench.models.tslm.layers import FeedForward, QueryBlock, heads_for

MAX_CHANNELS = 64  # learned channel embeddings; channel c uses c mod MAX_CHANNELS


class GatedCrossAttention(nn.Module):
    def __init__(self, d_model: int):
        super().__init__()
        self.norm = nn.LayerNorm(d_model)
        self.attn = nn.MultiheadAttention(d_model, heads_for(d_model), batch_first=True)
        self.ff = FeedForward(d_model)
        self.attn_gate = nn.Parameter(torch.zeros(1))
        self.ff_gate = nn.Parameter(torch.zeros(1))

    def forward(self, hidden: torch.Tensor, media: torch.Tensor) -> torch.Tensor:
        media = media.to(hidden.dtype).expand(hidden.shape[0], -1, -1)
        read = self.attn(self.norm(hidden), media, media, need_weights=False)[0]
        hidden = hidden + torch.tanh(self.attn_gate).to(hidden.dtype) * read
        return hidden + torch.tanh(self.ff_gate).to(hidden.dtype) * self.ff(hidden)


def decoder_layers(backbone: nn.Module) -> nn.ModuleList:
    """The backbone's stack of decoder layers: the longest ModuleList (Llama, Qwen and their PEFT wrappers)."""
    lists = [m for m in backbone.modules() if isinstance(m, nn.ModuleList)]
    if not lists:
        raise ValueError("the backbone has no decoder layer list to attach cross-attention to")
    return max(lists, key=len)


class PerceiverCrossAttention(nn.Module):
    splices = False  # the series reaches the backbone through cross-attention, not as tokens

    def __init__(self, d_encoder: int, d_model: int, settings) -> None:
        super().__init__()
        self.latents = nn.Parameter(torch.randn(settings.latents, d_encoder) * 0.02)
        self.resampler = nn.ModuleList(
            QueryBlock(d_encoder, include_queries=True) for _ in range(settings.fusion_layers)
        )
        self.channel = nn.Embedding(MAX_CHANNELS, d_encoder)
        self.to_model = nn.Sequential(nn.LayerNorm(d_encoder), nn.Linear(d_encoder, d_model))
        self.every = settings.xattn_every
        self.blocks: nn.ModuleList | None = None
        self._media: torch.Tensor | None = None

    def attach(self, backbone: nn.Module, d_model: int) -> None:
        """A gated block before every k-th decoder layer, run by a forward pre-hook on that layer."""
        layers = decoder_layers(backbone)
        chosen = list(range(0, len(layers), self.every))
        self.blocks = nn.ModuleList(GatedCrossAttention(d_model) for _ in chosen)
        for block, index in zip(self.blocks, chosen):
            layers[index].register_forward_pre_hook(self._hook(block), with_kwargs=True)

    def _hook(self, block: GatedCrossAttention):
        def before_layer(module, args, kwargs):
            if self._media is None:
                return None
            if args:
                return (block(args[0], self._media), *args[1:]), kwargs
            return args, {**kwargs, "hidden_states": block(kwargs["hidden_states"], self._media)}

        return before_layer

    def media(self, patches: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """(channels, N, d_enc) -> (1, channels x latents, d_model): what the text cross-attends to."""
        channels = patches.shape[0]
        latents = self.latents.unsqueeze(0).expand(channels, -1, -1).to(patches.dtype)
        for block in self.resampler:
            latents = block(latents, patches, mask)
        ids = torch.arange(channels, device=patches.device) % MAX_CHANNELS
        latents = latents + self.channel(ids).unsqueeze(1).to(latents.dtype)
        return self.to_model(latents).reshape(1, -1, self.to_model[1].out_features)

    @contextmanager
    def reading(self, media: torch.Tensor):
        self._media = media
        try:
            yield
        finally:
            self._media = None
