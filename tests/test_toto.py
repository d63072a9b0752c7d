"""Toto-1.0-QA (`toto/<checkpoint>`, Table 1's "Toto Qwen3-VL 32B" rows) on CPU, offline.

The checkpoint is a tiny random one in ARFBench's layout (models/tslm/tiny_toto.py): a small Toto
from Datadog's own model code (toto-ts), random variate embedding and projector in ts_modules.pt,
and a tiny random Qwen3-VL (the paper's backbone family) as the VLM. Covered: the series tokens and the plot in the inputs at
two lengths, what trains (the text decoder's LoRA only), the SFT loss falling on 20 rows,
`sft-baseline` then `eval` of both rows, the board placing them, and one-line errors.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

pytest.importorskip("toto", reason="toto-ts is installed by make setup (pip install --no-deps)")

from tsbench.core.episode import EpisodeTask  # noqa: E402
from tsbench.harness.series import series_messages  # noqa: E402
from tsbench.leaderboard.build import build_leaderboard  # noqa: E402
from tsbench.leaderboard.paper_rows import OUR_TSLM_SECTION  # noqa: E402
from tsbench.models.tslm.build import LoraSpec  # noqa: E402
from tsbench.models.tslm.model import InputTooLong  # noqa: E402
from tsbench.models.tslm.settings import TSLMSettings  # noqa: E402
from tsbench.models.tslm.tiny_toto import make_tiny_toto_checkpoint  # noqa: E402
from tsbench.models.tslm.toto_checkpoint import build_for_sft  # noqa: E402
from tsbench.results.store import load_samples  # noqa: E402
from tsbench.tasks.anomalyxl.config import preset  # noqa: E402
from tsbench.tasks.anomalyxl.generate import generate_split, update_manifest  # noqa: E402

MAX_LENGTH, CHANNELS = 256, 4  # Toto's input window and channel slots, small for CPU


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> Path:
    return make_tiny_toto_checkpoint(tmp_path_factory.mktemp("toto") / "Toto-1.0-QA-tiny")


@pytest.fixture(scope="module")
def model(checkpoint):
    torch.set_num_threads(1)
    settings = TSLMSettings(device="cpu", toto_max_length=MAX_LENGTH, toto_max_channels=CHANNELS)
    return build_for_sft(str(checkpoint), settings, LoraSpec())


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("anomalyxl")
    cfg = preset("small")
    update_manifest(cfg, root, {split: generate_split(cfg, split, root) for split in ("train", "val", "test")})
    return root / "seed42"


def task_of(channels: int, length: int) -> EpisodeTask:
    values = np.random.default_rng(length).normal(size=(channels, length)).astype(np.float32)
    names = [f"c{i}" for i in range(channels)]
    return EpisodeTask("r", "localize", "precise", "Where is the anomaly?", names, values)


@pytest.mark.parametrize("channels,length", [(1, 200), (2, 3000)])
def test_series_tokens_plot_and_masks_at_two_lengths(model, channels, length):
    task = task_of(channels, length)
    prompt = model.render_prompt(series_messages(task, with_plot=True))
    assert len(prompt[1].images) == 1 and "<ts>" not in prompt[1].content  # the plot, no TSLM markers
    listed = "\n".join(f"Channel {k + 1}: c{k}" for k in range(channels))  # ARFBench's channel list, after the question
    assert (
        prompt[1].content.startswith(task.question)
        and f"Time Series Channels (in order):\n{listed}\n" in prompt[1].content
    )
    series, mask = model.encoder.prepare(torch.tensor(task.values))
    fitted = min(length, -(-length // -(-length // MAX_LENGTH)))  # 3000 -> blocks of 12 -> 250 samples
    assert series.shape == mask.shape == (CHANNELS, MAX_LENGTH)
    assert mask[:channels].sum(dim=1).tolist() == [fitted] * channels and not mask[channels:].any()
    assert torch.allclose(series[0, :fitted].mean(), torch.tensor(task.values[0]).mean(), atol=1e-4)
    inputs = model.build_inputs(prompt, torch.tensor(task.values))
    from tsbench.models.local_vlm import encode_messages

    encoded = encode_messages(model.processor, prompt)
    d_model = model.vlm.get_input_embeddings().embedding_dim
    assert inputs.series_tokens == CHANNELS  # one token per channel slot, before all text
    assert inputs.embeds.shape == (1, CHANNELS + len(encoded.ids), d_model)
    assert inputs.vision["image_grid_thw"].shape == (1, 3)
    per_token = inputs.vision["mm_token_type_ids"]
    assert per_token.shape == (1, inputs.embeds.shape[1]) and not per_token[0, :CHANNELS].any()
    assert per_token[0, CHANNELS:].tolist() == encoded.inputs["mm_token_type_ids"][0].tolist()
    model.settings.max_input_tokens = inputs.embeds.shape[1] - 1  # a budget one token short: the OOM error type
    try:
        with pytest.raises(InputTooLong, match="exceed max_input_tokens"):
            model.loss(prompt, torch.tensor(task.values), [1])
    finally:
        model.settings.max_input_tokens = None


def test_toto_and_projections_stay_frozen_and_only_the_text_lora_moves(model):
    model.train()
    trainable = [n for n, p in model.named_parameters() if p.requires_grad]
    assert trainable and all("lora_" in n and "language_model" in n for n in trainable)
    assert {n.split(".self_attn.")[1].split(".")[0] for n in trainable} == {"q_proj", "v_proj"}
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2)
    task = task_of(2, 600)
    prompt = model.render_prompt(series_messages(task, with_plot=True))
    answer = model.tokenizer("a b c", add_special_tokens=False)["input_ids"]
    for _ in range(2):
        optimizer.zero_grad()
        model.loss(prompt, torch.tensor(task.values), answer).backward()
        optimizer.step()
    moved = {n for n, p in model.named_parameters() if not torch.equal(p, before[n])}
    assert moved and moved <= set(trainable) and any("lora_B" in n for n in moved)
    for prefix in ("encoder.", "variate_embedding.", "ts_projector."):
        assert not any(n.startswith(prefix) for n in moved)
    counts = model.parameter_counts()
    assert counts["trainable"] == sum(p.numel() for n, p in model.named_parameters() if n in trainable)
    model.eval()


@pytest.fixture(scope="module")
def trained(checkpoint, data_dir, tmp_path_factory, run_tsbench) -> Path:
    """sft-baseline --model toto/<checkpoint> --regime precise on 20 train rows, one epoch."""
    out = tmp_path_factory.mktemp("runs") / "toto-precise"
    code = run_tsbench(
        *["sft-baseline", "--model", f"toto/{checkpoint}", "--regime", "precise", "--data", data_dir],
        *["--device", "cpu", "--toto-max-length", MAX_LENGTH, "--toto-max-channels", CHANNELS],
        *["--train-rows", "20", "--val-rows", "1", "--epochs", "1", "--lr", "1e-2", "--warmup", "0"],
        *["--val-max-new-tokens", "2", "--out", out],
    )
    assert code == 0
    return out


def test_sft_loss_falls_on_20_rows_and_the_run_holds_the_papers_lora(trained):
    import pandas as pd

    record = json.loads((trained / "toto.json").read_text())
    assert record["arch"] == "toto" and Path(record["base"]).name == "Toto-1.0-QA-tiny"
    assert record["lora"] == {"r": 16, "alpha": 32, "dropout": 0.05, "targets": ["q_proj", "v_proj"]}
    run = json.loads((trained / "run.json").read_text())
    trainable = run["model"]["trainable_params"]
    assert run["data"]["train"]["examples"] == 20 and run["model"]["total_params"] - trainable > 10 * trainable
    steps = pd.read_parquet(trained / "steps.parquet")
    assert len(steps) == 20 and steps["loss"].tail(5).mean() < steps["loss"].head(5).mean() - 0.1
    metrics = pd.read_parquet(trained / "metrics.parquet")
    assert metrics["val_loss"].iloc[-1] < run["val_loss_before"]  # the LoRA alone lowers the held-out loss
    from safetensors.torch import load_file

    from tsbench.models.tslm.toto_checkpoint import load_any

    loaded = load_any(str(trained), device="cpu")  # toto/<run>: the base checkpoint plus the trained LoRA
    saved = load_file(str(trained / "trainable.safetensors"))
    assert set(saved) == set(loaded.trainable_state()) and any(
        v.abs().sum() > 0 for k, v in saved.items() if "lora_B" in k
    )
    assert all(torch.equal(loaded.trainable_state()[k], v) for k, v in saved.items())
    assert loaded.encoder.max_length == MAX_LENGTH  # the run's own window unless -M toto_max_length says otherwise


def test_eval_without_and_with_sft_writes_rows_the_board_places(checkpoint, trained, data_dir, tmp_path, cli):
    outs = []
    for name, spec in (("no-sft", f"toto/{checkpoint}"), ("sft", f"toto/{trained}")):
        out = tmp_path / name
        code, _, err = cli(
            "eval", "--model", spec, "--data", data_dir, "--regime", "precise",
            "--limit", "2", "--max-tokens", "4", "-M", f"toto_max_length={MAX_LENGTH}",
            "-M", f"toto_max_channels={CHANNELS}", "--out", out,
        )  # fmt: skip
        assert code == 0, err
        rows = load_samples(out)
        assert set(rows["harness"]) == {"series"} and rows["error_type"].isna().all()
        assert rows["score"].notna().all()
        user = json.loads(rows["transcript"].iloc[0])[1]
        assert user["images"] == 1 and len(user["content"]) < 3000  # the plot on the user turn, never the values
        assert (rows["input_tokens"] > CHANNELS).all()
        outs.append(out)
    board = build_leaderboard(outs, tmp_path / "board", with_paper=True, n_boot=20)
    paper = board.paper
    ours = paper[paper["section"] == OUR_TSLM_SECTION]
    assert len(ours) == 2 and all(m.startswith("toto/") for m in ours["model"])
    assert ours.index.min() == paper.index[paper["section"] == "TSLM"].max() + 1  # right after Toto's paper rows
    assert "Toto Qwen3-VL 32B (no SFT)" in set(paper["model"])


def test_missing_or_wrong_checkpoints_are_one_line(data_dir, tmp_path, cli):
    for target, says in (
        (tmp_path / "no-toto", "no Toto checkpoint"),
        (tmp_path, "no readable config.json"),
    ):
        code, _, err = cli("eval", "--model", f"toto/{target}", "--data", data_dir)
        assert code == 2 and says in err and len(err.strip().splitlines()) == 1, err
    code, _, err = cli(
        "sft-baseline", "--model", f"toto/{tmp_path / 'none'}", "--regime", "coarse",
        "--data", data_dir, "--out", tmp_path / "x",
    )  # fmt: skip
    assert code == 2 and "no Toto checkpoint" in err and "Traceback" not in err


def test_missing_toto_code_is_one_line(monkeypatch):
    from tsbench.models.base import ModelUnavailableError
    from tsbench.models.tslm.toto_encoder import import_toto

    monkeypatch.setitem(sys.modules, "toto.model.toto", None)  # as if toto-ts were not installed
    with pytest.raises(ModelUnavailableError, match="pip install --no-deps toto-ts==0.2.0"):
        import_toto()
