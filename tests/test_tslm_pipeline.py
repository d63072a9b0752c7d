"""A TSLM end to end through the command line: sft-baseline on AnomalyXL's train split, eval that
reads the series natively (an OOM at a length is its own error type), and the leaderboard that
prints that cell `OOM*` and places the run in Table 1's TSLM block with --with-paper.

The backbone is a tiny random Llama with SmolLM2's tokenizer and the encoder a tiny random
Chronos-2, so the whole run takes seconds; tests/test_tslm.py covers the SmolLM2 backbone."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("chronos")

from tsbench.leaderboard.build import build_leaderboard  # noqa: E402
from tsbench.leaderboard.paper_rows import OOM_MARK, OUR_TSLM_SECTION  # noqa: E402
from tsbench.results.store import load_samples  # noqa: E402
from tsbench.tasks.anomalyxl.config import preset  # noqa: E402
from tsbench.tasks.anomalyxl.generate import generate_split, update_manifest  # noqa: E402
from tsbench.testing.tiny import make_tiny_random_llama  # noqa: E402


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("anomalyxl")
    cfg = preset("small")
    update_manifest(cfg, root, {split: generate_split(cfg, split, root) for split in ("train", "val", "test")})
    return root / "seed42"


@pytest.fixture(scope="module")
def backbone(tmp_path_factory) -> Path:
    return make_tiny_random_llama(tmp_path_factory.mktemp("tiny") / "llama")


@pytest.fixture(scope="module")
def trained(data_dir, backbone, tmp_path_factory, run_tsbench) -> Path:
    """sft-baseline --model tslm/chatts --regime coarse on 4 train rows, 1 epoch."""
    out = tmp_path_factory.mktemp("runs") / "chatts-coarse"
    code = run_tsbench(
        *["sft-baseline", "--model", "tslm/chatts", "--regime", "coarse", "--data", data_dir],
        *["--backbone", backbone, "--encoder", "tiny-random", "--device", "cpu", "--train-rows", "4"],
        *["--val-rows", "2", "--epochs", "1", "--val-max-new-tokens", "4", "--out", out],
    )
    assert code == 0
    return out


def test_sft_baseline_writes_a_run_dir_of_the_papers_lora(trained):
    record = json.loads((trained / "tslm.json").read_text())
    assert record["arch"] == "chatts"
    assert record["lora"] == {"r": 16, "alpha": 32, "dropout": 0.05, "targets": ["q_proj", "v_proj"]}
    run = json.loads((trained / "run.json").read_text())
    assert run["regime"] == "coarse" and run["data"]["train"]["examples"] == 4 and run["data"]["val_from"] == "val"
    trainable = run["model"]["trainable_params"]
    assert trainable > 0 and run["model"]["total_params"] - trainable > trainable
    assert (trained / "encoder" / "config.json").is_file()  # the tiny random encoder travels with the run


def test_eval_reads_the_series_natively_and_records_oom_then_the_board_prints_it(trained, data_dir, tmp_path, cli):
    """ChatTS puts L/16 tokens per channel in the stream: with a budget of 500 input tokens the
    longest (multi-channel) rows do not fit (OOM) and the shortest do."""
    out = tmp_path / "results"
    code, _, err = cli(
        "eval",
        "--model",
        f"tslm/{trained}",
        "--data",
        data_dir,
        "--regime",
        "coarse",
        "--limit-per-category",
        "2",
        "--max-tokens",
        "8",
        "-M",
        "max_input_tokens=500",
        "--out",
        out,
    )
    assert code in (0, 1), err  # 1: some rows are errors (the OOM ones)
    rows = load_samples(out)
    assert set(rows["harness"]) == {"series"}
    oom = rows[rows["error_type"] == "oom"]
    fine = rows[rows["error_type"].isna()]
    assert len(oom) and len(fine)
    size = rows["length"] * rows["n_channels"]  # ChatTS's series tokens are size / 16
    assert size[oom.index].min() > size[fine.index].min() and size[oom.index].max() > size[fine.index].max()
    assert (fine["input_tokens"] + 8 <= 500).all()
    assert oom["error"].str.contains("exceed max_input_tokens 500").all()
    assert fine["score"].notna().all() and oom["score"].isna().all()
    user = json.loads(fine["transcript"].iloc[0])[1]  # the prompt: a marker per channel, never the values
    assert user["role"] == "user" and user["content"].count("<ts>") == fine["n_channels"].iloc[0]
    assert len(user["content"]) < 3000

    board = build_leaderboard([out], tmp_path / "board", with_paper=True, n_boot=50)
    by_category = rows.groupby("category")["error_type"].apply(lambda e: (e == "oom").any())
    oom_categories = set(by_category[by_category].index)
    assert oom_categories
    paper = board.paper
    ours = paper[paper["section"] == OUR_TSLM_SECTION]
    # The run dir's regime suffix is dropped: a model's -coarse and -precise runs share one line.
    # a checkpoint named by its absolute path is shown by its folder's name, as a path-named server model is
    assert len(ours) == 1 and ours.iloc[0]["model"].startswith("tslm/chatts · series")
    # Right after the paper's own TSLM rows (ChatTS ... Toto), before the single-pass block.
    assert ours.index[0] == paper.index[paper["section"] == "TSLM"].max() + 1
    for category in oom_categories:
        assert ours.iloc[0][category] == OOM_MARK
    for category in set(fine["category"]) - oom_categories:
        assert ours.iloc[0][category] not in ("", OOM_MARK)
    markdown = (tmp_path / "board" / "leaderboard.md").read_text()
    main_row = next(line for line in markdown.splitlines() if line.startswith(f"| tslm/{trained.name}"))
    assert OOM_MARK in main_row


def test_bad_tslm_inputs_are_one_line(data_dir, backbone, tmp_path, cli):
    code, _, err = cli("sft-baseline", "--model", "tslm/gpt", "--data", data_dir)
    assert code == 2 and "chatts, flamingo, itformer" in err and "Traceback" not in err
    code, _, err = cli("eval", "--model", f"tslm/{tmp_path / 'nowhere'}", "--data", data_dir)
    assert code == 2 and "no TSLM run" in err and len(err.strip().splitlines()) == 1
    code, _, err = cli(
        "sft-baseline", "--model", "tslm/itformer", "--regime", "coarse", "--data", data_dir,
        "--backbone", backbone, "--encoder", str(tmp_path / "no-chronos"), "--out", tmp_path / "x",
    )  # fmt: skip
    assert code == 2 and "no Chronos-2 checkpoint" in err and "Traceback" not in err
    code, _, err = cli(
        "eval", "--model", "local/smollm2-135m", "--harness", "series", "--data", data_dir,
        "--out", tmp_path / "y",
    )  # fmt: skip
    assert code == 2 and "read the series natively" in err


def test_the_coarse_and_precise_runs_of_one_tslm_fill_one_row_of_the_tslm_block():
    import pandas as pd

    from tsbench.leaderboard.paper_rows import paper_table, with_tslm_rows

    def cell(model, category, mean, f1=float("nan"), oom=False):
        return {"dataset": "d", "model": model, "harness": "series", "depth": 0, "category": category}, {
            "mean": mean,
            "f1": f1,
            "oom": oom,
        }

    records = [
        cell("tslm/models/tslm-itformer-coarse", "presence", 0.5, f1=0.4),
        cell("tslm/models/tslm-itformer-coarse", "identification", float("nan"), oom=True),
        cell("tslm/models/tslm-itformer-precise", "localize", 0.25),
        cell("local/other", "localize", 0.9),  # not a TSLM: stays out of the block
    ]
    cells = pd.DataFrame([{**key, **values} for key, values in records])
    paper, _ = paper_table()
    placed = with_tslm_rows(paper, cells, {"d": "anomalyxl"}, lambda dataset, config: " · ".join(map(str, config)))
    ours = placed[placed["section"] == OUR_TSLM_SECTION]
    assert len(placed) == len(paper) + 1 and len(ours) == 1
    row = ours.iloc[0]
    assert row["model"] == "tslm/models/tslm-itformer · series · 0 (tsbench run)"
    assert (row["presence"], row["identification"], row["localize"], row["lead_lag_with_magnitude"]) == (
        "0.400",  # MCQ columns carry macro-F1, as the paper's
        OOM_MARK,
        "0.250",
        "",
    )


def test_a_missing_toto_checkpoint_is_one_line(data_dir, tmp_path, cli):
    code, _, err = cli("eval", "--model", f"toto/{tmp_path / 'no-toto'}", "--data", data_dir)
    assert code == 2 and "no Toto checkpoint" in err and len(err.strip().splitlines()) == 1
