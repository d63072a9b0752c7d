"""The three TSLM architectures (models/tslm/), each a tiny random Chronos-2 encoder and the shipped
SmolLM2-135M backbone with the paper's LoRA: what enters the backbone at two series lengths, which
parameters train, and that SFT lowers the loss on 20 rows."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pandas as pd
import pytest
import torch

pytest.importorskip("chronos")

from tsbench.core.episode import EpisodeTask  # noqa: E402
from tsbench.harness.series import series_messages  # noqa: E402
from tsbench.models.tslm.build import build_tslm  # noqa: E402
from tsbench.models.tslm.settings import ARCHITECTURES, TSLMSettings  # noqa: E402

SETTINGS = dict(backbone="local/smollm2-135m", encoder="tiny-random", latents=8, summary_tokens=8, fusion_layers=1)
LENGTHS = (1000, 3000)  # the tiny encoder reads 2,048 samples at a time: 3,000 takes two windows


def tiny_settings(**changes) -> TSLMSettings:
    return TSLMSettings(**{**SETTINGS, "xattn_every": 10, "device": "cpu", **changes})


@pytest.fixture(scope="module")
def built():
    """One model per architecture, built on first use and kept for the module (the backbone loads once each)."""
    cache: dict[str, object] = {}

    def get(arch: str):
        if arch not in cache:
            cache.clear()  # one SmolLM2 in memory at a time
            cache[arch] = build_tslm(arch, tiny_settings(), seed=0)
        return cache[arch]

    return get


def prompt_for(model, channels: int, length: int) -> str:
    task = EpisodeTask("r", "c", "precise", "Where is the anomaly?", [f"ch{i}" for i in range(channels)], None)
    task.values = torch.zeros(channels, length).numpy()
    return model.render_prompt(series_messages(task))


def text_tokens(model, prompt: str) -> int:
    """Splicing fusions tokenize the text between markers piece by piece; Flamingo drops the markers."""
    pieces = prompt.split("<ts>") if model.fusion.splices else ["".join(prompt.split("<ts>"))]
    return sum(len(model.tokenizer(p, add_special_tokens=False)["input_ids"]) for p in pieces)


@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_series_tokens_and_masks_at_two_lengths(built, arch, one_torch_thread):
    model = built(arch)
    d_model = model.backbone.get_input_embeddings().embedding_dim
    seen = {}
    for length in LENGTHS:
        series = torch.randn(2, length, generator=torch.Generator().manual_seed(length))
        patches, mask = model.encoder(series)
        assert patches.shape == (2, math.ceil(length / 16), model.encoder.dim)
        assert mask.shape == patches.shape[:2] and bool(mask.all())
        prompt = prompt_for(model, 2, length)
        inputs = model.build_inputs(prompt, series)
        expected_series = {"chatts": 2 * math.ceil(length / 16), "itformer": 2 * 8, "flamingo": 0}[arch]
        assert inputs.series_tokens == expected_series
        assert inputs.embeds.shape == (1, text_tokens(model, prompt) + expected_series, d_model)
        if arch == "flamingo":  # text only in the stream; the latents are what the text cross-attends to
            assert inputs.media.shape == (1, 2 * 8, d_model)
        else:
            assert inputs.media is None
        seen[length] = inputs.series_tokens
    # Full resolution grows with L; the fixed-size fusions do not.
    assert (seen[3000] > seen[1000]) if arch == "chatts" else (seen[3000] == seen[1000])


def test_every_sample_is_encoded_window_by_window(built):
    """A series longer than the encoder's context is cut into windows, none dropped: the last sample
    moves the last window's patches and leaves the first window's alone."""
    model = built(ARCHITECTURES[0])
    series = torch.randn(1, 3000, generator=torch.Generator().manual_seed(1))
    before, _ = model.encoder(series)
    series[0, -1] += 50.0
    after, _ = model.encoder(series)
    first_window = model.encoder.window // model.encoder.patch
    assert torch.equal(before[:, :first_window], after[:, :first_window])
    assert not torch.allclose(before[:, -1], after[:, -1])


FUSION_PARTS = {  # the projector / fusion parameters that must train, by name fragment
    "chatts": ("fusion.project.",),
    "itformer": ("fusion.queries", "fusion.blocks.", "fusion.project."),
    "flamingo": (
        "fusion.latents",
        "fusion.resampler.",
        "fusion.to_model.",
        "fusion.blocks.0.attn_gate",
        "fusion.blocks.0.attn.",
    ),
}


@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_encoder_stays_frozen_while_fusion_and_lora_train(built, arch, one_torch_thread):
    model = built(arch)
    counts = model.parameter_counts()
    encoder = sum(p.numel() for p in model.encoder.parameters())
    assert counts["frozen"] >= encoder + 134_000_000 and counts["trainable"] > 0
    assert all(not p.requires_grad for p in model.encoder.parameters())
    named = dict(model.named_parameters())
    trainable = {n for n, p in named.items() if p.requires_grad}
    assert trainable == {n for n in named if "lora_" in n or n.startswith("fusion.")}
    assert {n for n in trainable if "lora_" in n} and all(
        ("q_proj" in n or "v_proj" in n) for n in trainable if "lora_" in n
    )
    start = {n: p.detach().clone() for n, p in named.items()}
    optimizer = torch.optim.AdamW([named[n] for n in trainable], lr=1e-3, weight_decay=0.0)
    series = torch.randn(1, 512, generator=torch.Generator().manual_seed(0))
    prompt = prompt_for(model, 1, 512)
    answer = model.tokenizer('{"present": true}', add_special_tokens=False)["input_ids"]
    model.train()
    for _ in range(3):  # Flamingo's gates start at 0: its cross-attention gets gradient from step 2 on
        optimizer.zero_grad()
        model.loss(prompt, series, answer).backward()
        optimizer.step()
    moved = {n for n, p in named.items() if not torch.equal(p.detach(), start[n])}
    assert not any(n.startswith("encoder.") for n in moved)
    assert moved <= trainable  # the backbone's own weights never move
    for part in FUSION_PARTS[arch]:
        assert any(n.startswith(part) for n in moved), part
    assert any("lora_B" in n for n in moved)
    model.eval()


@pytest.mark.slow
def test_sft_loss_falls_on_20_rows(tmp_path, one_torch_thread):
    """sft-baseline (transformers' Trainer over SeriesLM) on 20 rows of a family with a train split (the test
    family), SmolLM2 backbone."""
    sys.path.insert(0, str(Path(__file__).parent / "families"))
    from spike_count import FAMILY, write_dataset

    from tsbench.train.sft import run_sft
    from tsbench.train.sft_config import SFTConfig

    data = tmp_path / "spikes"
    write_dataset(data, rows=10, split="train")  # 2 categories x 10 = 20 rows
    write_dataset(data, rows=2, split="val")
    cfg = SFTConfig(
        family=FAMILY, data=[str(data)], epochs=1, lr=1e-3, val_rows=4, val_max_new_tokens=6, out=str(tmp_path / "run")
    )
    cfg.policy.model = "tslm/itformer"
    cfg.tslm = tiny_settings()
    out = run_sft(cfg)
    steps = pd.read_parquet(out / "steps.parquet")
    assert len(steps) == 20
    assert steps["loss"].tail(5).mean() < 0.5 * steps["loss"].head(5).mean()
    run = json.loads((out / "run.json").read_text())
    val_loss = pd.read_parquet(out / "metrics.parquet")["val_loss"].iloc[0]
    assert val_loss < 0.5 * run["val_loss_before"]
    assert run["data"]["train"]["examples"] == 20 and run["best_epoch"] == 1
    assert (out / "tslm.json").is_file() and (out / "trainable.safetensors").is_file()
