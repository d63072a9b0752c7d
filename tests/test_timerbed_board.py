"""The TimerBed board end to end: a TimerBed set generated from UCR .tsv and UCI HAR text files, three
"seed" runs of `tsbench eval` (an OpenAI-compatible server on 127.0.0.1 that always names one class,
under single-pass-image, so the paper's plot is what is sent), then `tsbench leaderboard --with-paper`."""

from __future__ import annotations

import base64
import io
import math

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from tsbench.core.config import build
from tsbench.core.errors import UserError
from tsbench.eval.config import EvalConfig
from tsbench.eval.runner import run_eval
from tsbench.leaderboard import build_leaderboard
from tsbench.leaderboard.timerbed import split_seed
from tsbench.tasks import get_taskset
from tsbench.testing.fake_openai_server import FakeOpenAIServer

CTU_LABELS = [1, 1, 1, 2]  # 3 Desktop, 1 Laptop
ANSWERS = {"1": "Desktop", "2": "laptop", "3": "DESKTOP"}  # what each seed's model always answers


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    release = tmp_path_factory.mktemp("timerbed-release")
    rng = np.random.default_rng(0)
    (release / "Computers").mkdir()
    for suffix in ("_TRAIN", "_TEST"):
        table = np.column_stack([CTU_LABELS, rng.random((4, 72))])
        np.savetxt(release / "Computers" / f"Computers{suffix}.tsv", table, delimiter="\t", fmt="%.6g")
    har = release / "UCI HAR Dataset" / "test"
    (har / "Inertial Signals").mkdir(parents=True)
    np.savetxt(har / "y_test.txt", [1, 4], fmt="%d")
    for axis in "xyz":
        np.savetxt(har / "Inertial Signals" / f"body_acc_{axis}_test.txt", rng.standard_normal((2, 128)))
    out = tmp_path_factory.mktemp("timerbed")
    get_taskset("timerbed").generate({"path": str(release), "seed": 1, "split": "test"}, out)
    return out / "seed1"


@pytest.fixture(scope="module")
def board(dataset, tmp_path_factory):
    runs = tmp_path_factory.mktemp("runs")
    sent = []
    for seed, answer in ANSWERS.items():
        with FakeOpenAIServer(
            default=f"ok:<think>The plot looks like a {answer}.</think><class>{answer}</class>"
        ) as server:
            cfg = {
                "family": "timerbed",
                "model": f"openai/tm-seed{seed}",
                "base_url": server.base_url,
                "harness": "single-pass-image",
                "data": [str(dataset)],
                "concurrency": 1,
                "out": str(runs / f"tm-seed{seed}"),
            }
            run_eval(build(EvalConfig, cfg))
            sent += server.bodies
    out = tmp_path_factory.mktemp("board")
    build_leaderboard([runs], out, with_paper=True, n_boot=50)
    return out, sent


def test_the_image_sent_is_the_papers_plot_and_the_question_is_the_papers_prompt(board):
    _, sent = board
    assert len(sent) == 3 * 6
    content = sent[0]["messages"][-1]["content"]
    text = next(p["text"] for p in content if p["type"] == "text")
    url = next(p["image_url"]["url"] for p in content if p["type"] == "image_url")
    image = Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1])))
    assert image.size in {(562, 230), (389, 233)}  # CTU's or HAR's size in the paper
    assert text.startswith("You are analyzing") and "stacked over a shared sample-index axis" not in text


def test_board_has_accuracy_and_macro_f1_per_task_with_mean_and_sd_over_three_seeds(board):
    out, _ = board
    table = pd.read_csv(out / "timerbed_board.csv")
    assert set(table["config"]) == {"openai/tm · single-pass-image · depth 0"} and set(table["seeds"]) == {3}
    acc = table[table["metric"] == "accuracy"].iloc[0]
    f1 = table[table["metric"] == "f1"].iloc[0]
    per_seed = [0.75, 0.25, 0.75]  # Desktop, laptop (case-insensitive), DESKTOP on 3 Desktop + 1 Laptop
    assert acc["ctu"] == pytest.approx(np.mean(per_seed)) and acc["ctu_sd"] == pytest.approx(np.std(per_seed, ddof=1))
    desktop_f1, laptop_f1 = (2 * 3 / 7) / 2, (2 * 1 / 5) / 2
    assert f1["ctu"] == pytest.approx(np.mean([desktop_f1, laptop_f1, desktop_f1]))
    assert acc["har"] == 0.0 and f1["har"] == 0.0  # "Desktop" is no activity
    assert acc["avg"] == pytest.approx(np.mean([(a + 0.0) / 2 for a in per_seed])) and acc["avg_tasks"] == 2
    assert math.isnan(acc["ecg"])


def test_markdown_board_has_avg_and_the_papers_rows_labelled_as_quoted(board):
    out, _ = board
    text = (out / "leaderboard.md").read_text()
    assert "TimerBed (TimeMaster Tables 1 and 3)" in text and "Avg. acc" in text and "Avg. F1" in text
    assert "58.33 ± 28.87" in text  # CTU accuracy, mean ± sd over the three seeds, in %
    assert "TimeMaster (SFT+RL) [paper: Qwen2.5-VL-3B (image+text)]" in text and "75.56 ± 1.30" in text
    assert "quoted from TimeMaster Table 1" in text and "TimeMaster reports accuracy only" in text
    assert "the AnomalyXL paper reports macro-F1; TimeMaster's TimerBed table reports accuracy only" in text
    assert "Quoted from the paper's Table 1" not in text  # AnomalyXL's quoted rows stay off a TimerBed board


def test_seed_tags():
    assert split_seed("local/ckpt-tm-seed2") == ("local/ckpt-tm", "2")
    assert split_seed("openai/gpt-4o") == ("openai/gpt-4o", "")


def test_cli_generate_eval_with_the_reference_policy_and_leaderboard(tmp_path):
    """`tsbench generate --family timerbed --path DIR`, `tsbench eval --family timerbed --data <seed dir>
    --model scripted-timerbed/first --harness single-pass-image`, `tsbench leaderboard --with-paper`."""
    from typer.testing import CliRunner

    from tsbench.cli import app

    release = tmp_path / "release" / "Computers"
    release.mkdir(parents=True)
    table = np.column_stack([CTU_LABELS, np.random.default_rng(1).random((4, 72))])
    np.savetxt(release / "Computers_TEST.tsv", table, delimiter="\t", fmt="%.6g")
    runner = CliRunner()
    done = runner.invoke(
        app, ["generate", "--family", "timerbed", "--path", str(release.parent), "--out", str(tmp_path / "d")]
    )
    assert done.exit_code == 0, done.output
    run = tmp_path / "runs" / "first"
    args = [
        "eval",
        "--family",
        "timerbed",
        "--data",
        str(tmp_path / "d" / "seed42"),
        "--model",
        "scripted-timerbed/first",
    ]
    done = runner.invoke(app, [*args, "--harness", "single-pass-image", "--out", str(run)])
    assert done.exit_code == 0, done.output
    rows = pd.read_parquet(run / "samples.parquet")
    assert rows["score"].mean() == 0.75 and rows["final_message"].str.contains("<class>Desktop</class>").all()
    done = runner.invoke(app, ["leaderboard", str(tmp_path / "runs"), "--out", str(tmp_path / "b"), "--with-paper"])
    assert done.exit_code == 0, done.output
    assert "| 75.00 |" in (tmp_path / "b" / "leaderboard.md").read_text()  # one seed: no sd
    missing = runner.invoke(app, ["generate", "--family", "timerbed", "--path", str(tmp_path / "nothing-here")])
    assert isinstance(missing.exception, UserError) and "physionet.org/content/emgdb" in str(missing.exception)
