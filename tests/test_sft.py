"""`sft-baseline`: real generated data, real scripted RLM eval results, a tiny random Llama and SmolLM2 (LoRA).

Training runs are kept to a handful of rows and short prompts so the file fits a few CPU minutes.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from tsbench import results as schema
from tsbench.core.config import build, read_toml_table
from tsbench.core.episode import EpisodeTask
from tsbench.core.errors import UserError
from tsbench.eval.config import EvalConfig
from tsbench.eval.runner import run_eval
from tsbench.harness.rlm import RLMSettings
from tsbench.harness.settings import HarnessSettings
from tsbench.harness.single_pass import run_single_pass
from tsbench.models.base import Message
from tsbench.models.registry import get_model
from tsbench.tasks import get_taskset
from tsbench.tasks.anomalyxl import labels as lb
from tsbench.tasks.anomalyxl.config import preset
from tsbench.tasks.anomalyxl.generate import generate_split, update_manifest
from tsbench.tasks.anomalyxl.metrics import metrics as score_metrics
from tsbench.tasks.anomalyxl.rows import iter_rows, read_index
from tsbench.tasks.base import SampleRef
from tsbench.testing.tiny import make_small_vocab_llama, make_tiny_random_llama
from tsbench.train import sft_data as sd
from tsbench.train.sft import run_sft
from tsbench.train.sft_config import SFTConfig
from tsbench.train.sft_text import as_dataset

EXPERIMENTS = Path(__file__).resolve().parents[1] / "experiments" / "sft"
ANOMALYXL = get_taskset("anomalyxl")


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory) -> Path:
    """`--preset small` train, val and test splits at seed 42."""
    root = tmp_path_factory.mktemp("anomalyxl")
    cfg = preset("small")
    entries = {split: generate_split(cfg, split, root) for split in ("train", "val", "test")}
    update_manifest(cfg, root, entries)
    return root / "seed42"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    return make_tiny_random_llama(tmp_path_factory.mktemp("tiny") / "llama")


@pytest.fixture(scope="module")
def small(tmp_path_factory) -> Path:
    """The model the training runs use: a 23-word vocabulary keeps TRL's CPU steps fast."""
    return make_small_vocab_llama(tmp_path_factory.mktemp("small") / "llama")


@pytest.fixture(scope="module")
def tiny_chat(tiny):
    model = get_model(f"local/{tiny}", max_new_tokens=4)
    yield model
    model.close()


@pytest.fixture(scope="module")
def rlm_results(data_dir, tmp_path_factory) -> dict[str, Path]:
    """scripted/zscore under the rlm harness (real kernels): one row per category of train; two of val and test."""
    root = tmp_path_factory.mktemp("results")
    runs = {}
    small = {"regime": "coarse", "categories": [lb.PRESENCE, lb.INDICATOR]}
    for split, extra in (("train", {}), ("val", small), ("test", small)):
        cfg = EvalConfig(
            model="scripted/zscore",
            harness="rlm",
            data=[str(data_dir)],
            split=split,
            limit_per_category=1,
            concurrency=2,
            out=str(root / split),
            **extra,
        )
        runs[split] = run_eval(cfg)
    return runs


def trained_spans(example: sd.Example) -> list[list[int]]:
    spans, current = [], []
    for token, label in zip(example.input_ids.tolist(), example.labels.tolist()):
        if label != sd.IGNORE:
            assert label == token
            current.append(token)
        elif current:
            spans.append(current)
            current = []
    return spans + ([current] if current else [])


def test_trajectory_masks_train_only_the_policys_replies(rlm_results, tiny_chat):
    trajectories, selection = sd.load_trajectories([rlm_results["train"]], min_score=0.5, regimes=("precise", "coarse"))
    assert trajectories and selection["kept"] == len(trajectories)
    samples = schema.load_samples(rlm_results["train"])
    assert selection["kept"] + selection["skipped"].get("below_min_score", 0) == len(samples)
    assert all(t.score >= 0.5 for t in trajectories)
    tok = tiny_chat.tokenizer
    eos = tok.eos_token_id
    for trajectory in trajectories[:3]:
        example = sd.trajectory_example(tok, trajectory, {eos})
        messages = trajectory.messages
        assert [m["role"] for m in messages] == ["system", "user", "assistant", "user", "assistant"]
        assert messages[3]["content"].startswith("Output:\nZSCORE_SUMMARY")
        # The whole sequence is the template's rendering of the conversation, nothing lost or added.
        whole = tok.apply_chat_template(messages, tokenize=True, return_dict=True)["input_ids"]
        assert example.input_ids.tolist() == list(whole)
        # Trained: each reply and its end-of-turn token; never the system prompt, question or observation.
        spans = [tok.decode(s) for s in trained_spans(example)]
        replies = [m["content"] for m in messages if m["role"] == "assistant"]
        assert spans == [reply + tok.eos_token for reply in replies]
        assert not any("ZSCORE_SUMMARY {" in span or "Output:" in span for span in spans)
        assert example.n_trained == sum(len(s) for s in trained_spans(example))
        # Before each reply, the prefix is token for token what LocalHFModel.generate feeds the model.
        starts = [
            i
            for i in range(1, example.n_tokens)
            if example.labels[i] != sd.IGNORE and example.labels[i - 1] == sd.IGNORE
        ]
        for start, turn in zip(starts, [2, 4]):
            history = [Message(m["role"], m["content"]) for m in messages[:turn]]
            assert tiny_chat.generate(history, max_tokens=1).prompt_token_ids == example.input_ids[:start].tolist()


def test_transcript_rebuilds_the_prompt_the_rlm_harness_sent(data_dir, tiny_chat):
    """A one-turn episode is forced final: the notice joins the question, as the harness sent it."""
    from tsbench.harness.rlm import run_rlm

    row = next(iter_rows(data_dir / "train-precise.parquet"))
    task = EpisodeTask(row.id, row.category, row.regime, row.question, row.channel_names, row.values, row.options)
    result = run_rlm(tiny_chat, task, RLMSettings(max_turns=1, max_tokens=2), image=False)
    assert result.forced_final and [e["role"] for e in result.transcript] == ["system", "user", "notice", "assistant"]
    messages = sd.transcript_messages(result.transcript)
    assert [m["role"] for m in messages] == ["system", "user", "assistant"]
    history = [Message(m["role"], m["content"]) for m in messages[:-1]]
    assert sd.prompt_ids(tiny_chat.tokenizer, history) == result.token_trace[0]["prompt_ids"]


def test_single_pass_example_is_the_harness_prompt_plus_the_gold(data_dir, tiny_chat):
    path = data_dir / "train-precise.parquet"
    row = next(iter_rows(path))
    sample = ANOMALYXL.load(SampleRef("anomalyxl", str(path), row.id))
    example = sd.single_pass_example(tiny_chat.tokenizer, ANOMALYXL, sample, 300, {tiny_chat.tokenizer.eos_token_id})
    task = EpisodeTask(row.id, row.category, row.regime, row.question, row.channel_names, row.values, row.options)
    result = run_single_pass(tiny_chat, task, HarnessSettings(text_budget_chars=300, max_tokens=1), image=False)
    prompt = result.token_trace[0]["prompt_ids"]
    assert example.input_ids[: len(prompt)].tolist() == prompt
    assert (example.labels[: len(prompt)] == sd.IGNORE).all()
    [span] = trained_spans(example)
    assert tiny_chat.tokenizer.decode(span) == row.gold_text() + tiny_chat.tokenizer.eos_token
    assert "_L" not in row.gold_text() and json.loads(row.gold_text()).items() <= row.gold.items()


def test_fitted_text_budget_keeps_prompts_inside_the_context(data_dir, tiny_chat):
    path = data_dir / "train-precise.parquet"
    index = read_index(path)
    rows = [ANOMALYXL.load(r).task for r in sd.balanced_refs(ANOMALYXL, [path], index["category"].nunique())]
    assert {r.category for r in rows} == set(index["category"])
    budget = sd.fit_text_budget(tiny_chat.tokenizer, rows, 1024, 64)
    assert 300 < budget < 1024 * 4
    examples, stats = sd.single_pass_examples(
        tiny_chat.tokenizer,
        ANOMALYXL,
        sd.balanced_refs(ANOMALYXL, [path], 10),
        text_budget_chars=budget,
        max_seq_len=1024,
        eos_ids={tiny_chat.tokenizer.eos_token_id},
    )
    assert stats.examples == 10 and not stats.skipped and stats.max_tokens <= 1024
    assert len({e.category for e in examples}) == index["category"].nunique()  # round-robin over categories


def sft(model, **values) -> SFTConfig:
    lora = values.pop("lora", 0)
    return build(SFTConfig, {"model": model, "lora": lora, **values})


def test_full_finetune_loss_falls_and_the_model_reloads(data_dir, small, tmp_path):
    cfg = sft(
        f"local/{small}",
        data=[str(data_dir)],
        regime="precise",
        epochs=3,
        lr=5e-3,
        train_rows=4,
        val_rows=2,
        text_budget_chars=300,
        val_max_new_tokens=8,
        out=str(tmp_path / "m"),
    )
    events = []
    out = run_sft(cfg, lambda event, values: events.append(event))
    epochs = pd.read_parquet(out / "metrics.parquet")
    steps = pd.read_parquet(out / "steps.parquet")
    print(
        "small full single-pass train loss per epoch:",
        epochs["train_loss"].round(3).tolist(),
        "val loss:",
        epochs["val_loss"].round(3).tolist(),
    )
    assert list(epochs["epoch"]) == [1, 2, 3] and len(steps) == 12
    assert np.all(np.diff(epochs["train_loss"]) < 0) and np.all(np.diff(epochs["val_loss"]) < 0)
    assert epochs["val_primary"].between(0, 1).all() and (epochs["val_rows"] == 2).all()
    # floor(0.03 * 12) = 0 warmup steps: the first step trains at the full rate, then linear decay.
    assert steps["grad_norm"].gt(0).all() and steps["lr"].iloc[0] == pytest.approx(5e-3)
    assert np.all(np.diff(steps["lr"]) < 0)
    info = json.loads((out / "run.json").read_text())
    assert info["complete"] and info["epochs_run"] == 3 and not info["stopped_early"]
    assert info["best_epoch"] in (1, 2, 3) and epochs.loc[epochs["saved"], "epoch"].max() == info["best_epoch"]
    assert info["data"]["files"]["train"][0]["sha256"] and info["versions"]["trl"] and "git_commit" in info
    assert (
        info["eval_hint"]["text_budget_chars"] == 300
        and info["model"]["trainable_params"] == info["model"]["total_params"]
    )
    assert info["data"]["train"]["examples"] == 4 and info["optimizer"]["warmup_steps"] == 0
    assert {"step", "val_row", "epoch_end", "done"} <= set(events)
    assert (out / "config.json").is_file() and not (out / "adapter_config.json").exists()
    model = get_model(f"local/{out}", max_new_tokens=6)
    try:
        completion = model.generate([Message("user", "Is there an anomaly?")])
        assert 0 < completion.output_tokens <= 6
    finally:
        model.close()


def test_a_one_step_run_trains(data_dir, small, tmp_path):
    """The warmup rounds down: a 1-step run moves the weights (HF's ceil would spend it at lr 0)."""
    from safetensors.torch import load_file

    out = run_sft(
        sft(
            f"local/{small}",
            data=[str(data_dir)],
            regime="coarse",
            epochs=1,
            lr=1e-2,
            train_rows=1,
            val_rows=0,
            text_budget_chars=100,
            out=str(tmp_path / "one"),
        )
    )
    before, after = load_file(str(small / "model.safetensors")), load_file(str(out / "model.safetensors"))
    assert any(not torch.equal(before[k], after[k]) for k in before)
    assert pd.read_parquet(out / "steps.parquet")["lr"].tolist() == [pytest.approx(1e-2)]


def test_report_to_writes_tensorboard_events_and_an_offline_wandb_run(data_dir, small, tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    out = run_sft(
        sft(
            f"local/{small}",
            data=[str(data_dir)],
            regime="coarse",
            epochs=1,
            lr=1e-2,
            train_rows=2,
            val_rows=0,
            text_budget_chars=100,
            report_to=["tensorboard", "wandb"],
            out=str(tmp_path / "tracked"),
        )
    )
    events = EventAccumulator(str(out / "tensorboard")).Reload()
    assert len(events.Scalars("train/loss")) == 2  # one point per optimizer step
    offline = list((out / "wandb").glob("offline-run-*/run-*.wandb"))
    assert len(offline) == 1 and offline[0].stat().st_size > 0
    # the trackers' places held for this run only: a later eval in this process writes to its own dir
    assert os.environ.get("WANDB_DIR") != str(out) and os.environ.get("TENSORBOARD_LOGGING_DIR") is None
    import wandb

    assert wandb.run is None  # the training run is finished, not left open for the next run to log into
    with pytest.raises(UserError, match="--report-to takes tensorboard, wandb"):
        run_sft(sft(f"local/{small}", data=[str(data_dir)], report_to=["mlflow"], out=str(tmp_path / "never")))


def test_early_stopping_when_val_loss_stops_improving(data_dir, small, tmp_path):
    """lr 0 leaves the weights as they are: the val loss never improves after epoch 1.

    The text budget is left to be fitted to an 800-token max_seq_len."""
    cfg = sft(
        f"local/{small}",
        data=[str(data_dir)],
        regime="coarse",
        epochs=5,
        lr=0.0,
        patience=2,
        train_rows=2,
        val_rows=1,
        max_seq_len=800,
        val_max_new_tokens=2,
        out=str(tmp_path / "m"),
    )
    out = run_sft(cfg)
    epochs = pd.read_parquet(out / "metrics.parquet")
    info = json.loads((out / "run.json").read_text())
    budget = info["eval_hint"]["text_budget_chars"]
    assert (
        50 < budget <= 800 * 4 and info["data"]["train"]["max_tokens"] <= 800 and not info["data"]["train"]["skipped"]
    )
    assert list(epochs["epoch"]) == [1, 2, 3]
    assert epochs["val_loss"].nunique() == 1
    assert info["stopped_early"] and info["epochs_run"] == 3 and info["best_epoch"] == 1
    assert list(epochs["saved"]) == [True, False, False]


def test_trl_trains_exactly_the_assistant_masks(data_dir, tiny_chat):
    """TRL's SFTTrainer turns our assistant masks into its labels: only the reply and its end token train."""
    from trl import SFTConfig as TRLConfig
    from trl import SFTTrainer

    refs = sd.balanced_refs(ANOMALYXL, [data_dir / "train-precise.parquet"], None)[:2]
    examples = [
        sd.single_pass_example(
            tiny_chat.tokenizer, ANOMALYXL, ANOMALYXL.load(r), 200 + 100 * i, {tiny_chat.tokenizer.eos_token_id}
        )
        for i, r in enumerate(refs)
    ]
    args = TRLConfig(output_dir="/tmp/unused-sft-out", max_length=None, report_to=[], use_cpu=True, bf16=False)
    trainer = SFTTrainer(
        model=tiny_chat.model, args=args, train_dataset=as_dataset(examples), processing_class=tiny_chat.tokenizer
    )
    prepared = trainer.train_dataset
    for row, example in zip(prepared, examples):
        assert row["input_ids"] == example.input_ids.tolist() and row["labels"] == example.labels.tolist()


def test_rlm_trajectory_lora_warm_start_reloads_and_continues(rlm_results, small, tmp_path):
    cfg = sft(
        f"local/{small}",
        lora=16,
        format="rlm-trajectories",
        data=[str(rlm_results["train"]), str(rlm_results["val"])],
        epochs=2,
        lr=2e-2,
        train_rows=3,
        val_rows=1,
        val_max_new_tokens=6,
        out=str(tmp_path / "warm"),
    )
    out = run_sft(cfg)
    info = json.loads((out / "run.json").read_text())
    epochs = pd.read_parquet(out / "metrics.parquet")
    print(
        "small LoRA rlm-trajectories train loss per epoch:",
        epochs["train_loss"].round(3).tolist(),
        "val loss:",
        epochs["val_loss"].round(3).tolist(),
    )
    assert epochs["train_loss"].iloc[-1] < epochs["train_loss"].iloc[0]
    assert all(r.startswith("train-") for r in info["data"]["train_rows"])
    assert info["data"]["val_rows"] and all(r.startswith("val-") for r in info["data"]["val_rows"])
    assert info["data"]["selection"]["skipped"].get("below_min_score", 0) > 0
    assert 0 < info["model"]["trainable_params"] < info["model"]["total_params"] / 4  # the LoRA, not the base
    assert info["data"]["train"]["trained_tokens"] < info["data"]["train"]["tokens"]
    adapter = json.loads((out / "adapter_config.json").read_text())
    assert adapter["base_model_name_or_path"] == str(small.resolve()) and adapter["r"] == 16
    assert sorted(adapter["target_modules"]) == ["q_proj", "v_proj"] and adapter["lora_alpha"] == 32
    model = get_model(f"local/{out}", max_new_tokens=6)
    try:
        assert model.adapter_dir == out and model.generate([Message("user", "hello")]).output_tokens > 0
    finally:
        model.close()
    # An adapter given as the model is the starting point: folded into <out>/warm_start, and a new
    # adapter of the requested rank trains on top of it.
    again = run_sft(
        sft(
            f"local/{out}",
            lora=4,
            format="rlm-trajectories",
            data=[str(rlm_results["train"])],
            epochs=1,
            val_rows=0,
            train_rows=1,
            out=str(tmp_path / "again"),
        )
    )
    info = json.loads((again / "run.json").read_text())
    assert info["model"]["warm_start"] == str(out.resolve()) and info["best_epoch"] == 1
    adapter = json.loads((again / "adapter_config.json").read_text())
    assert adapter["base_model_name_or_path"] == str((again / "warm_start").resolve()) and adapter["r"] == 4


def test_test_split_transcripts_and_missing_data_are_one_line_errors(rlm_results, tmp_path):
    with pytest.raises(UserError, match="--split train") as caught:
        run_sft(
            sft(
                "local/never-loaded",
                format="rlm-trajectories",
                data=[str(rlm_results["test"])],
                out=str(tmp_path / "a"),
            )
        )
    assert "\n" not in str(caught.value)
    with pytest.raises(UserError, match=r"tsbench generate --seed 42 --split all") as caught:
        run_sft(sft("local/never-loaded", data=[str(tmp_path / "seed42")], out=str(tmp_path / "b")))
    assert "\n" not in str(caught.value) and not (tmp_path / "b").exists()
    with pytest.raises(UserError, match="needs --data"):
        run_sft(sft("local/x", format="rlm-trajectories"))
    with pytest.raises(UserError, match="--regime"):
        run_sft(sft("local/x", regime="both"))


def test_experiment_configs_load():
    files = sorted(EXPERIMENTS.glob("*.toml"))
    assert len(files) >= 3
    for path in files:
        cfg = build(SFTConfig, read_toml_table(path, "sft"))
        assert (cfg.epochs, cfg.lr, cfg.weight_decay, cfg.grad_clip, cfg.warmup, cfg.batch_size) == (
            5,
            1e-4,
            0.01,
            1.0,
            0.03,
            1,
        )
        p = cfg.policy
        assert (p.lora, p.lora_alpha, p.lora_dropout, p.lora_target, cfg.patience, cfg.val_rows) == (
            16,
            32,
            0.05,
            "q_proj,v_proj",
            3,
            500,
        )
    assert build(SFTConfig, {**read_toml_table(files[0], "sft"), "epochs": 2}).epochs == 2


@pytest.mark.slow
def test_smollm2_lora_single_pass_learns_the_answer_format(data_dir, tmp_path):
    """One row seen twice (a CPU step of SmolLM2 takes seconds): the loss on it falls and the answer format is learnt."""
    cfg = sft(
        "local/smollm2-135m",
        lora=16,
        data=[str(data_dir)],
        regime="coarse",
        epochs=2,
        lr=3e-3,
        warmup=0.0,
        train_rows=1,
        val_rows=1,
        text_budget_chars=60,
        val_max_new_tokens=10,
        out=str(tmp_path / "smol"),
    )
    out = run_sft(cfg)
    epochs = pd.read_parquet(out / "metrics.parquet")
    print(
        "smollm2 LoRA single-pass train loss per epoch:",
        epochs["train_loss"].round(3).tolist(),
        "val loss:",
        epochs["val_loss"].round(3).tolist(),
        "val primary:",
        epochs["val_primary"].tolist(),
    )
    assert epochs["train_loss"].iloc[1] < epochs["train_loss"].iloc[0]
    adapter = json.loads((out / "adapter_config.json").read_text())
    assert adapter["base_model_name_or_path"] == "smollm2-135m"
    row = next(iter_rows(data_dir / "val-coarse.parquet"))
    model = get_model(f"local/{out}", max_new_tokens=10)
    try:
        text = model.generate(sd.single_pass_messages(row, 60)).text
    finally:
        model.close()
    assert score_metrics(row.category, row.gold, text)["valid"], text


# -- single-pass-text SFT data from families other than AnomalyXL -------------------------------------


def test_single_pass_examples_of_the_spike_count_family(tiny_chat, tmp_path):
    """The test family's default `sft_target` (its gold as JSON) is an answer its scorer accepts."""
    import sys

    sys.path.insert(0, str(Path(__file__).parent / "families"))
    from spike_count import FAMILY, write_dataset

    family = get_taskset(FAMILY)
    path = write_dataset(tmp_path / "spikes", rows=2)
    refs = sd.balanced_refs(family, [path], 3)
    assert [r.id for r in refs] == ["few-00", "few-01", "many-00"]  # round-robin, in file order
    examples, stats = sd.single_pass_examples(
        tiny_chat.tokenizer,
        family,
        refs,
        text_budget_chars=200,
        max_seq_len=4096,
        eos_ids={tiny_chat.tokenizer.eos_token_id},
    )
    assert stats.examples == 3 and stats.categories == {"few": 2, "many": 1}
    for ref, example in zip(refs, examples):
        sample = family.load(ref)
        [span] = trained_spans(example)
        reply = tiny_chat.tokenizer.decode(span).removesuffix(tiny_chat.tokenizer.eos_token)
        assert json.loads(reply) == sample.gold and family.score(example.category, example.gold, reply).score == 1.0
        prompt = sd.single_pass_messages(sample.task, 200)
        assert (
            sd.prompt_ids(tiny_chat.tokenizer, prompt)
            == example.input_ids[: len(sd.prompt_ids(tiny_chat.tokenizer, prompt))].tolist()
        )
    # Rows the family labels "test" never train, whatever file they were found in; a dir without a
    # train split is one line that names the fix.
    kept, skipped = sd.single_pass_examples(
        tiny_chat.tokenizer,
        family,
        refs,
        text_budget_chars=200,
        max_seq_len=4096,
        eos_ids={tiny_chat.tokenizer.eos_token_id},
        split="train",
    )
    assert kept == [] and skipped.skipped == {"other_split": 3}
    with pytest.raises(UserError, match="no spike_count train split in .*tsbench generate"):
        run_sft(sft("local/never-loaded", family=FAMILY, data=[str(path.parent)], out=str(tmp_path / "never")))


@pytest.fixture(scope="module")
def timerbed_data(tmp_path_factory) -> Path:
    """GunPoint (shipped in aeon's wheel) in TimerBed's published format: a train and a test split, no val."""
    datasets = pytest.importorskip("aeon.datasets")
    import shutil

    release = tmp_path_factory.mktemp("timerbed-release")
    shipped = Path(datasets.__file__).parent / "data" / "GunPoint"
    (release / "GunPoint").mkdir()
    for split in ("TRAIN", "TEST"):
        shutil.copy(shipped / f"GunPoint_{split}.ts", release / "GunPoint" / f"GunPoint_{split}.ts")
    out = tmp_path_factory.mktemp("timerbed")
    get_taskset("timerbed").generate({"path": str(release), "seed": 1, "split": "all", "rows_per_cell": 10}, out)
    return out / "seed1"


def test_sft_on_timerbed_trains_on_its_train_split_and_holds_out_part_of_it(timerbed_data, small, tmp_path):
    out = run_sft(
        sft(
            f"local/{small}",
            family="timerbed",
            data=[str(timerbed_data)],
            epochs=1,
            lr=1e-2,
            train_rows=3,
            val_rows=1,
            text_budget_chars=60,
            val_max_new_tokens=4,
            out=str(tmp_path / "tb"),
        )
    )
    info = json.loads((out / "run.json").read_text())
    data = info["data"]
    assert data["family"] == "timerbed" and data["val_from"] == "train" and data["regime"] is None
    assert data["train"]["examples"] == 3 and data["val"]["examples"] == 1 and not data["train"]["skipped"]
    assert [f["path"] for f in data["files"]["train"]] == [str(timerbed_data / "train.parquet")]
    assert data["train"]["categories"] == {"gunpoint": 3}
    epochs = pd.read_parquet(out / "metrics.parquet")
    assert list(epochs["epoch"]) == [1] and epochs["val_primary"].between(0, 1).all()
