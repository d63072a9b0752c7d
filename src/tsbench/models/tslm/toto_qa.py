"""Toto-1.0-QA (ARFBench's TSFM-VLM hybrid; the paper's "Toto Qwen3-VL 32B" rows): a frozen Toto
encoder, a frozen variate embedding and projector, and a vision-language backbone that also sees
the series as a rendered plot.

As ARFBench builds it: Toto's per-time-step embeddings are averaged per channel, RMS-normalised and
passed through an MLP (`variate_embedding`), projected to the VLM's width (`ts_projector`), and the
resulting one token per channel slot is put before the whole chat text, whose user turn holds the
plot; the VLM gets `inputs_embeds` only, as ARFBench calls it (so its positions are sequential). The paper's SFT (Appendix C) trains only a LoRA on the text decoder's q_proj / v_proj; Toto
and both projection modules stay frozen. The module names match ARFBench's `ts_modules.pt`, so its
checkpoint loads as it is (toto_checkpoint.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from tsbench.models.base import Message
from tsbench.models.tslm.model import IGNORE, SeriesLanguageModel
from tsbench.models.tslm.prompt import toto_user_prompt
from tsbench.models.tslm.settings import TSLMSettings
from tsbench.models.tslm.toto_encoder import TotoSeriesEncoder


class VariateEmbedding(nn.Module):
    """(channels, T, d) Toto embeddings -> (channels, d): the mean over time, RMSNorm, an MLP."""

    def __init__(self, dim: int, hidden: int, dropout: float):
        super().__init__()
        from toto.model.util import RMSNorm

        self.norm = RMSNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, hidden), nn.ReLU(), nn.Dropout(dropout), nn.Linear(hidden, dim))

    def forward(self, embeddings: torch.Tensor) -> torch.Tensor:
        return self.mlp(self.norm(torch.nan_to_num(embeddings.mean(dim=-2))))


class SeriesProjector(nn.Module):
    """(channels, d) -> (channels, d_model): two layers and a LayerNorm into the VLM's embedding space."""

    def __init__(self, dim: int, d_model: int, hidden: int, dropout: float):
        super().__init__()
        self.projection = nn.Sequential(
            nn.Linear(dim, hidden), nn.GELU(), nn.Dropout(dropout), nn.Linear(hidden, d_model), nn.LayerNorm(d_model)
        )

    def forward(self, variates: torch.Tensor) -> torch.Tensor:
        return self.projection(variates)


@dataclass
class TotoInputs:
    embeds: torch.Tensor  # (1, channel slots + prompt tokens, d_model)
    series_tokens: int  # the channel slots in front
    vision: dict  # pixel_values, image_grid_thw, ... for the plot


def plain_messages(messages: list[Message]) -> list[Message]:
    """The series harness's messages as Toto-1.0-QA was trained on them: the user turn's question, then its
    channel list (ARFBench's layout), no `<ts>` markers (the series tokens stand before the whole text)."""
    return [Message(m.role, toto_user_prompt(m.content) if m.role == "user" else m.content, m.images) for m in messages]


class TotoQA(SeriesLanguageModel):
    wants_plot = True  # the series harness and the SFT rows attach the rendered plot to the user turn

    def __init__(
        self,
        encoder: TotoSeriesEncoder,
        variate_embedding: VariateEmbedding,
        ts_projector: SeriesProjector,
        vlm: nn.Module,
        processor,
        settings: TSLMSettings,
    ):
        super().__init__()
        self.arch = "toto"
        self.encoder = encoder
        self.variate_embedding = variate_embedding
        self.ts_projector = ts_projector
        self.vlm = vlm
        self.processor = processor
        self.settings = settings
        for module in (self.variate_embedding, self.ts_projector):  # Appendix C: frozen, as the encoder
            module.requires_grad_(False)

    @property
    def tokenizer(self):
        return self.processor.tokenizer

    @property
    def device(self) -> torch.device:
        return self.vlm.get_input_embeddings().weight.device

    def train(self, mode: bool = True) -> TotoQA:  # only the LoRA trains: the frozen parts keep eval mode
        super().train(mode)
        for module in (self.encoder, self.variate_embedding, self.ts_projector):
            module.eval()
        return self

    def render_prompt(self, messages: list[Message]) -> list[Message]:
        """The prompt this model reads: the messages themselves (plot PNGs inside), encoded per call."""
        return plain_messages(messages)

    def series_embeddings(self, series: torch.Tensor) -> torch.Tensor:
        """(channels, L) -> (max_channels, d_model): one token per channel slot (the empty ones too, as ARFBench)."""
        dtype = self.vlm.get_input_embeddings().weight.dtype
        embeddings = self.encoder(series).to(self.device, dtype)
        return self.ts_projector(self.variate_embedding(embeddings))

    def build_inputs(self, prompt: list[Message], series: torch.Tensor, answer_ids: list[int] = ()) -> TotoInputs:
        from tsbench.models.local_vlm import PER_TOKEN_KEYS, encode_messages

        encoded = encode_messages(self.processor, prompt)
        ids = torch.tensor([encoded.ids + list(answer_ids)], device=self.device)
        tokens = self.series_embeddings(series).unsqueeze(0)
        embeds = torch.cat([tokens, self.vlm.get_input_embeddings()(ids)], dim=1)
        vision = {}
        for key, value in encoded.inputs.items():
            value = value.to(self.device)
            if key in PER_TOKEN_KEYS:  # per-token: zeros for the series slots and the answer
                value = torch.cat(
                    [value.new_zeros(1, tokens.shape[1]), value, value.new_zeros(1, len(answer_ids))], dim=1
                )
            vision[key] = value
        return TotoInputs(embeds, int(tokens.shape[1]), vision)

    def loss(self, prompt: list[Message], series: torch.Tensor, answer_ids: list[int]) -> torch.Tensor:
        inputs = self.build_inputs(prompt, series, answer_ids)
        total = inputs.embeds.shape[1]
        self._check_length(total)
        labels = torch.full((1, total), IGNORE, dtype=torch.long, device=self.device)
        labels[0, total - len(answer_ids) :] = torch.tensor(answer_ids, device=self.device)
        attention = torch.ones((1, total), dtype=torch.long, device=self.device)
        return self.vlm(inputs_embeds=inputs.embeds, attention_mask=attention, labels=labels, **inputs.vision).loss

    @torch.no_grad()
    def generate(self, prompt: list[Message], series: torch.Tensor, max_new_tokens: int) -> tuple[list[int], int]:
        """(new token ids, backbone input length); greedy, never an image placeholder."""
        inputs = self.build_inputs(prompt, series)
        n_input = int(inputs.embeds.shape[1])
        self._check_length(n_input + max_new_tokens)
        config = self.vlm.config
        placeholders = [getattr(config, k, None) for k in ("image_token_id", "video_token_id")]
        eos = self.tokenizer.eos_token_id
        pad = self.tokenizer.pad_token_id
        out = self.vlm.generate(
            inputs_embeds=inputs.embeds,
            attention_mask=torch.ones((1, n_input), dtype=torch.long, device=self.device),
            max_new_tokens=max_new_tokens,
            do_sample=False,
            eos_token_id=eos,
            pad_token_id=pad if pad is not None else eos,
            suppress_tokens=[i for i in placeholders if isinstance(i, int)] or None,
            **inputs.vision,
        )
        return out[0].tolist(), n_input
