"""A TSLM: frozen series encoder -> trainable fusion -> LoRA-adapted language backbone.

One prompt text (rendered with the backbone's chat template, one marker per channel) and the series
(channels x L) go in. Splicing fusions (ChatTS, ITFormer) put their per-channel tokens at the
markers; Flamingo drops the markers and lets the text cross-attend to its latents. `loss` trains on
the answer tokens only; `generate` decodes greedily from the same inputs.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from tsbench.models.base import ModelUnavailableError
from tsbench.models.tslm.chatts import PatchSplice
from tsbench.models.tslm.encoder import SeriesEncoder
from tsbench.models.tslm.flamingo import PerceiverCrossAttention
from tsbench.models.tslm.itformer import SummaryTokens
from tsbench.models.tslm.prompt import split_at_markers
from tsbench.models.tslm.settings import TSLMSettings

FUSIONS = {"chatts": PatchSplice, "flamingo": PerceiverCrossAttention, "itformer": SummaryTokens}
IGNORE = -100


class InputTooLong(Exception):
    """The backbone input would exceed max_input_tokens (the configured memory budget)."""


@dataclass
class Inputs:
    embeds: torch.Tensor  # (1, T, d_model)
    series_tokens: int  # of T, how many carry the series
    media: torch.Tensor | None  # Flamingo's latents, else None


class SeriesLanguageModel(nn.Module):
    """What every series-reading language model here shares (TSLM, toto_qa.TotoQA): the input-length
    budget, and which parameters train."""

    settings: TSLMSettings

    def _check_length(self, n_tokens: int) -> None:
        limit = self.settings.max_input_tokens
        if limit is not None and n_tokens > limit:
            raise InputTooLong(f"{n_tokens} backbone input tokens exceed max_input_tokens {limit}")

    def trainable_state(self) -> dict[str, torch.Tensor]:
        return {name: p.detach().cpu() for name, p in self.named_parameters() if p.requires_grad}

    def parameter_counts(self) -> dict[str, int]:
        trainable = sum(p.numel() for p in self.parameters() if p.requires_grad)
        return {"trainable": trainable, "frozen": sum(p.numel() for p in self.parameters()) - trainable}

    def save_trainable(self, path: Path) -> None:
        from safetensors.torch import save_file

        save_file({k: v.contiguous() for k, v in self.trainable_state().items()}, str(path))

    def load_trainable(self, path: Path, fits: str = "this model") -> None:
        """The trainable weights saved at `path` restored: every one of them, or an error."""
        from safetensors.torch import load_file

        weights = load_file(str(path))
        expected = set(self.trainable_state())
        if set(weights) != expected:
            missing, extra = sorted(expected - set(weights))[:3], sorted(set(weights) - expected)[:3]
            raise ModelUnavailableError(f"{path} does not fit {fits} (missing {missing}, extra {extra})")
        self.load_state_dict(weights, strict=False)


class TSLM(SeriesLanguageModel):
    def __init__(self, arch: str, encoder: SeriesEncoder, backbone: nn.Module, tokenizer, settings: TSLMSettings):
        super().__init__()
        self.arch = arch
        self.encoder = encoder
        self.backbone = backbone
        self.tokenizer = tokenizer
        self.settings = settings
        d_model = int(backbone.get_input_embeddings().embedding_dim)
        self.fusion = FUSIONS[arch](encoder.dim, d_model, settings)
        if not self.fusion.splices:
            self.fusion.attach(backbone, d_model)

    # -- inputs ----------------------------------------------------------------------------------
    def render_prompt(self, messages) -> str:
        """The prompt this model reads: the chat text rendered with the backbone's template."""
        turns = [{"role": m.role, "content": m.content} for m in messages]
        return self.tokenizer.apply_chat_template(turns, tokenize=False, add_generation_prompt=True)

    @property
    def device(self) -> torch.device:
        return self.backbone.get_input_embeddings().weight.device

    def _text_embeds(self, text: str) -> torch.Tensor:
        ids = self.tokenizer(text, add_special_tokens=False, return_tensors="pt")["input_ids"].to(self.device)
        return self.backbone.get_input_embeddings()(ids)[0]

    def build_inputs(self, prompt: str, series: torch.Tensor) -> Inputs:
        """prompt: the rendered chat text with one marker per channel; series: (channels, L)."""
        pieces = split_at_markers(prompt, series.shape[0])
        patches, mask = self.encoder(series)
        patches = patches.to(self.device, next(self.fusion.parameters()).dtype)
        mask = mask.to(self.device)
        dtype = self.backbone.get_input_embeddings().weight.dtype
        if self.fusion.splices:
            blocks = self.fusion.series_tokens(patches, mask)
            parts = [self._text_embeds(pieces[0])]
            for block, piece in zip(blocks, pieces[1:]):
                parts += [block.to(dtype), self._text_embeds(piece)]
            embeds = torch.cat(parts).unsqueeze(0)
            return Inputs(embeds, sum(len(b) for b in blocks), None)
        media = self.fusion.media(patches, mask)
        return Inputs(self._text_embeds("".join(pieces)).unsqueeze(0), 0, media)

    def _run(self, inputs: Inputs, fn):
        if inputs.media is None:
            return fn()
        with self.fusion.reading(inputs.media):
            return fn()

    # -- training --------------------------------------------------------------------------------
    def loss(self, prompt: str, series: torch.Tensor, answer_ids: list[int]) -> torch.Tensor:
        inputs = self.build_inputs(prompt, series)
        answer = torch.tensor([answer_ids], device=self.device)
        embeds = torch.cat([inputs.embeds, self.backbone.get_input_embeddings()(answer)], dim=1)
        self._check_length(embeds.shape[1])
        labels = torch.full(embeds.shape[:2], IGNORE, dtype=torch.long, device=self.device)
        labels[0, inputs.embeds.shape[1] :] = answer[0]
        attention = torch.ones(embeds.shape[:2], dtype=torch.long, device=self.device)
        return self._run(
            inputs, lambda: self.backbone(inputs_embeds=embeds, attention_mask=attention, labels=labels).loss
        )

    # -- inference -------------------------------------------------------------------------------
    @torch.no_grad()
    def generate(self, prompt: str, series: torch.Tensor, max_new_tokens: int) -> tuple[list[int], int]:
        """(new token ids, backbone input length)."""
        inputs = self.build_inputs(prompt, series)
        self._check_length(inputs.embeds.shape[1] + max_new_tokens)
        attention = torch.ones(inputs.embeds.shape[:2], dtype=torch.long, device=self.device)
        eos = self.tokenizer.eos_token_id
        out = self._run(
            inputs,
            lambda: self.backbone.generate(
                inputs_embeds=inputs.embeds,
                attention_mask=attention,
                max_new_tokens=max_new_tokens,
                do_sample=False,
                eos_token_id=eos,
                pad_token_id=self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else eos,
            ),
        )
        return out[0].tolist(), int(inputs.embeds.shape[1])
