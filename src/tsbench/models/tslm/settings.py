"""The TSLM baselines' own settings (Section 4.1, Appendix C): which encoder and backbone, and the
sizes of each architecture's fusion. Plain data without torch, so `sft-baseline --help` and the
TOML reader see them without loading a model; `[sft.tslm]` in a TOML, or the flags of the same name."""

from __future__ import annotations

from dataclasses import dataclass

ARCHITECTURES = ("chatts", "flamingo", "itformer")
TINY_ENCODER = "tiny-random"  # a small Chronos-2 built from a config with seeded random weights (tests, CPU)


@dataclass
class TSLMSettings:
    """A frozen Chronos-2 encoder, a fusion module, a LoRA-adapted language backbone."""

    backbone: str = "Qwen/Qwen3.5-4B"
    """Language backbone: local/smollm2-135m, a directory, or a hub id in the local hub cache (never downloaded)."""
    encoder: str = "amazon/chronos-2"
    """Time-series encoder: a Chronos-2 directory, a hub id in the local hub cache, or tiny-random."""
    latents: int = 64
    """flamingo: the Perceiver resampler's latents per channel."""
    summary_tokens: int = 32
    """itformer: summary tokens the series is aggregated into."""
    xattn_every: int = 4
    """flamingo: a gated cross-attention block before every k-th decoder layer."""
    fusion_layers: int = 2
    """flamingo / itformer: attention layers in the resampler / the summary aggregator."""
    toto_max_length: int = 4096
    """toto: samples per channel Toto reads (ARFBench's max-ts-length); a longer series is averaged in blocks."""
    toto_max_channels: int = 20
    """toto: channel slots, one series token each (ARFBench's max groups); more channels are cut."""
    max_input_tokens: int | None = None
    """Longest backbone input (text + series tokens); longer is recorded as OOM [the backbone's context]."""
    device: str | None = None
    """cpu, cuda or cuda:N [cuda when available]."""
    compute_dtype: str | None = None
    """float32 or bfloat16 [bfloat16 on GPU, float32 on CPU]."""

    def problems(self) -> list[str]:
        found = []
        if self.latents < 1 or self.summary_tokens < 1 or self.xattn_every < 1 or self.fusion_layers < 1:
            found.append("latents, summary_tokens, xattn_every and fusion_layers must be >= 1")
        if self.compute_dtype not in (None, "float32", "bfloat16", "float16"):
            found.append("compute_dtype must be float32, bfloat16 or float16")
        if self.toto_max_length < 16 or self.toto_max_channels < 1:
            found.append("toto_max_length must be >= 16 and toto_max_channels >= 1")
        if self.max_input_tokens is not None and self.max_input_tokens < 16:
            found.append("max_input_tokens must be >= 16")
        return found
