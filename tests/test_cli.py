"""The `tsbench` command as a user runs it: a real subprocess, real files, exit codes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tsbench.testing import readiness

TSBENCH = [sys.executable, "-m", "tsbench.cli"]


def run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return readiness.run([*TSBENCH, *args], capture_output=True, text=True, cwd=cwd)


def test_generate_small_writes_files_and_manifest(tmp_path):
    out = tmp_path / "data"
    res = run("generate", "--preset", "small", "--seed", "7", "--split", "all", "--out", str(out))
    assert res.returncode == 0, res.stderr
    root = out / "seed7"
    for split in ("test", "val", "train"):
        for regime in ("precise", "coarse"):
            assert (root / f"{split}-{regime}.parquet").is_file()
    manifest = json.loads((root / "manifest.json").read_text())
    assert manifest["seed"] == 7 and set(manifest["splits"]) == {"test", "val", "train"}
    test = manifest["splits"]["test"]
    assert test["files"]["test-precise.parquet"]["rows"] == 32
    assert test["config"]["preset"] == "small" and "numpy" in manifest["versions"]
    assert "git_commit" in manifest
    assert test["cells"]["localize"] == {"1024": 4, "2048": 4}


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--preset", "huge"], "unknown preset"),
        (["--split", "dev"], "--split"),
        (["--lengths", "100"], "too short"),
        (["--lengths", "abc"], "integers"),
        (["--p-present", "1.5"], "--p-present"),
        (["--width-range", "300", "10"], "--width-range"),
        (["--categories", "forecast"], "unknown categories"),
        (["--noise-weights", "1,1"], "--noise-weights"),
    ],
)
def test_bad_generate_arguments_exit_2_with_one_line(tmp_path, args, needle):
    res = run("generate", "--preset", "small", "--out", str(tmp_path), *args)
    assert res.returncode == 2
    assert needle in res.stderr
    assert "Traceback" not in res.stderr


def test_describe_and_plot(small_data, tmp_path):
    import os

    def describe(columns: str | None) -> subprocess.CompletedProcess:
        env = {k: v for k, v in os.environ.items() if k != "COLUMNS"} | ({"COLUMNS": columns} if columns else {})
        args = [*TSBENCH, "describe", str(small_data / "test-precise.parquet")]
        return readiness.run(args, text=True, env=env)

    res = describe(None)
    assert res.returncode == 0, res.stderr
    assert "localize_all_channels" in res.stdout and "no_anomaly_share" in res.stdout
    assert max(map(len, res.stdout.splitlines())) > 100  # piped: 200 columns, not rich's 80
    narrow = describe("80")  # piped into a pager: the width the user asked for
    assert narrow.returncode == 0 and "no_anomaly_share" in narrow.stdout
    assert max(map(len, narrow.stdout.splitlines())) == 80
    png = tmp_path / "row.png"
    res = run(
        "describe", str(small_data / "test-precise.parquet"), "--plot", "test-localize-1024-00000", "--out", str(png)
    )
    assert res.returncode == 0, res.stderr
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    res = run("describe", str(small_data / "test-precise.parquet"), "--plot", "no-such-row")
    assert res.returncode == 2 and "no row with id" in res.stderr


def test_missing_file_is_a_clean_error(tmp_path):
    res = run("describe", str(tmp_path / "absent.parquet"))
    assert res.returncode == 2 and "no such file" in res.stderr and "Traceback" not in res.stderr


def test_every_experiment_config_is_a_valid_eval_config():
    import tomllib

    from tsbench.core.config import build
    from tsbench.eval.config import EvalConfig
    from tsbench.harness import HARNESSES
    from tsbench.models.registry import split_spec

    configs = sorted(Path(__file__).resolve().parents[1].joinpath("experiments", "table1").glob("*.toml"))
    assert len(configs) >= 14
    for path in configs:
        table = tomllib.loads(path.read_text())["eval"]
        cfg = build(EvalConfig, table)
        providers = ("openai", "vllm", "local", "scripted", "tslm", "toto")
        assert cfg.harness in HARNESSES and split_spec(cfg.model)[0] in providers
        assert cfg.harness_config.max_turns == table.get("max_turns", 15)


def test_score_your_own_predictions(small_data, tmp_path):
    import pandas as pd

    from tsbench.tasks.anomalyxl.rows import read_index

    index = read_index(small_data / "test-coarse.parquet")
    answers = tmp_path / "answers.jsonl"
    lines = [
        json.dumps({"id": rid, "response": f"Answer: {json.loads(g)['answer']}"})
        for rid, g in zip(index["id"], index["gold"])
    ]
    lines[0] = json.dumps({"id": index["id"][0], "response": "I am not sure"})
    answers.write_text("\n".join(lines) + "\n")
    out = tmp_path / "scores.parquet"
    res = run(
        "score", "--data", str(small_data / "test-coarse.parquet"), "--responses", str(answers), "--out", str(out)
    )
    assert res.returncode == 0, res.stderr
    scores = pd.read_parquet(out)
    assert len(scores) == len(index) and scores["score"].sum() == len(index) - 1
    assert "macro-F1" in res.stdout
    answers.write_text("not json\n")
    bad = run("score", "--data", str(small_data / "test-coarse.parquet"), "--responses", str(answers))
    assert bad.returncode == 2 and ":1:" in bad.stderr and "Traceback" not in bad.stderr


def test_timeclaw_memory_build_and_tools_eval_from_the_command_line(small_data, tmp_path):
    env_run = tmp_path / "zscore"
    common = ["--data", str(small_data), "--regime", "precise", "--limit-per-category", "1", "--concurrency", "1"]
    assert run("eval", "--model", "scripted/zscore", "--harness", "rlm", *common, "--out", str(env_run)).returncode == 0
    bank = tmp_path / "banks" / "b.parquet"
    refused = run("memory", "build", "--from", str(env_run), "--embedder", "none", "--out", str(bank))
    assert refused.returncode == 2 and "--include-test-split" in refused.stderr and not bank.exists()
    res = run(
        "memory",
        "build",
        str(env_run),
        "--admission",
        "successful",
        "--min-score",
        "0.0",
        "--embedder",
        "none",
        "--out",
        str(bank),
        "--include-test-split",
    )  # run dirs as arguments, as show and leaderboard take them (--from: the same)
    assert res.returncode == 0, res.stderr[-2000:]
    assert bank.is_file()
    out = tmp_path / "tools-run"
    res = run(
        "eval",
        "--model",
        "scripted/tools",
        "--harness",
        "tools",
        *common,
        "--memory",
        str(bank),
        "--top-k",
        "2",
        "--out",
        str(out),
    )
    assert res.returncode == 0, res.stderr[-2000:]
    samples = __import__("pandas").read_parquet(out / "samples.parquet")
    assert len(samples) == 5 and samples["error_type"].isna().all() and (samples["code_cells"] > 0).all()
    first_user = [e for e in json.loads(samples.iloc[0]["transcript"]) if e["role"] == "user"][0]["content"]
    assert "precedent" in first_user.lower()
    assert run("memory", "build", str(tmp_path), "--out", str(bank)).returncode == 2
    assert "name at least one run dir" in run("memory", "build", "--out", str(bank)).stderr


def test_sft_baseline_then_eval_from_the_command_line(tmp_path):
    """A tiny random Llama trained by `sft-baseline` loads in `eval`, which reuses its prompt budget.
    (A 23-word vocabulary: TRL scores every position over the whole vocabulary on a CPU.)"""
    from tsbench.tasks.anomalyxl.generate import generate_split
    from tsbench.testing.tiny import make_small_vocab_llama

    cfg = __import__("tsbench.tasks.anomalyxl.config", fromlist=["preset"]).preset("small")
    for split in ("train", "val", "test"):
        generate_split(cfg, split, tmp_path / "data")
    tiny = make_small_vocab_llama(tmp_path / "tiny")
    out = tmp_path / "models" / "tiny-sft"
    res = run(
        "sft-baseline",
        "--model",
        str(tiny),
        "--data",
        str(tmp_path / "data" / "seed42"),
        "--regime",
        "coarse",
        "--epochs",
        "1",
        "--train-rows",
        "4",
        "--val-rows",
        "2",
        "--full",
        "--lr",
        "1e-3",
        "--out",
        str(out),
    )
    assert res.returncode == 0, res.stderr[-3000:]
    hint = json.loads((out / "run.json").read_text())["eval_hint"]
    assert hint["text_budget_chars"] > 0
    run_dir = tmp_path / "run"
    res = run(
        "eval",
        "--model",
        f"local/{out}",
        "--harness",
        "single-pass-text",
        "--data",
        str(tmp_path / "data" / "seed42"),
        "--regime",
        "coarse",
        "--limit-per-category",
        "1",
        "--max-tokens",
        "8",
        "--out",
        str(run_dir),
    )
    assert res.returncode == 0, res.stderr[-3000:]
    info = json.loads((run_dir / "run.json").read_text())
    assert info["settings"]["text_budget_chars"] == hint["text_budget_chars"]
    samples = __import__("pandas").read_parquet(run_dir / "samples.parquet")
    assert samples["error_type"].isna().all() and samples["output_tokens"].gt(0).all()


@pytest.mark.slow
def test_train_grpo_one_step_then_eval_the_checkpoint(small_data, tmp_path):
    """The command line end to end on a tiny model (tests/test_train_grpo.py trains the real SmolLM2)."""
    from tsbench.testing.tiny import make_small_vocab_llama

    tiny = make_small_vocab_llama(tmp_path / "tiny")
    out = tmp_path / "grpo"
    res = run(
        "train-grpo",
        "--model",
        f"local/{tiny}",
        "--lora",
        "4",
        "--steps",
        "1",
        "--group-size",
        "2",
        "--batch-size",
        "2",
        "--max-turns",
        "1",
        "--max-tokens",
        "8",
        "--preset",
        "small",
        "--categories",
        "localize",
        "--lengths",
        "1024",
        "--out",
        str(out),
    )
    assert res.returncode == 0, res.stderr[-3000:]
    metrics = __import__("pandas").read_parquet(out / "metrics.parquet")
    assert list(metrics["step"]) == [1] and metrics["groups"].iloc[0] == 1
    assert (out / "final" / "adapter_config.json").is_file()
    res = run(
        "eval",
        "--model",
        f"local/{out / 'final'}",
        "--harness",
        "rlm",
        "--data",
        str(small_data),
        "--regime",
        "precise",
        "--categories",
        "localize",
        "--limit-per-category",
        "1",
        "--max-turns",
        "1",
        "--max-tokens",
        "8",
        "--out",
        str(tmp_path / "run"),
    )
    assert res.returncode == 0, res.stderr[-3000:]
    samples = __import__("pandas").read_parquet(tmp_path / "run" / "samples.parquet")
    assert samples["error_type"].isna().all() and (samples["output_tokens"] > 0).all()


def _cache_without(features: Path, into: Path, left_out: set[str]) -> None:
    """A copy of a classical feature cache (its part files as one) without the rows keyed `left_out`."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    table = pa.concat_tables(pq.read_table(part) for part in sorted(features.glob("part-*.parquet")))
    kept = table.filter(pc.invert(pc.is_in(table["key"], value_set=pa.array(sorted(left_out)))))
    assert kept.num_rows == table.num_rows - len(left_out)
    into.mkdir(parents=True)
    pq.write_table(kept, into / "part-0-0-00000.parquet")


def test_classical_baseline_and_detector_through_eval(tmp_path, classical_small):
    from tsbench.baselines.feature_cache import load_cache, signal_key
    from tsbench.tasks.anomalyxl.config import preset
    from tsbench.tasks.anomalyxl.generate import generate_split, update_manifest
    from tsbench.tasks.anomalyxl.rows import read_index

    cfg = preset("small")
    entries = {split: generate_split(cfg, split, tmp_path / "data") for split in ("train", "val", "test")}
    update_manifest(cfg, tmp_path / "data", entries)
    data = tmp_path / "data" / "seed42"
    model_dir = tmp_path / "models" / "classical"
    # The same split's features from the run's shared classical model (featurised and stumpy compiled once per
    # run), less five validation rows: the command reads the cache, computes those five in its worker pool and
    # reports its progress.
    left_out = {signal_key(json.loads(plan)) for plan in read_index(data / "val-precise.parquet")["plan"][:5]}
    _cache_without(classical_small[0] / "model" / "features", model_dir / "features", left_out)
    res = run(
        "sft-baseline", "--model", "classical", "--data", str(data), "--out", str(model_dir), "--train-rows", "80"
    )
    assert res.returncode == 0, res.stderr[-3000:]
    # stderr is no terminal here: progress comes as log lines with an ETA, features weighted by cost
    assert "features: 100.0% done" in res.stderr and "ETA" in res.stderr
    assert left_out <= set(load_cache(model_dir / "features"))  # computed by the command and cached
    assert json.loads((model_dir / "meta.json").read_text())["training"]["train_rows_limit"] == 80
    for model in (f"classical/{model_dir}", "detector/default"):
        out = tmp_path / model.replace("/", "_")
        res = run("eval", "--model", model, "--data", str(data), "--limit-per-category", "1", "--out", str(out))
        assert res.returncode == 0, res.stderr[-3000:]
        samples = __import__("pandas").read_parquet(out / "samples.parquet")
        assert len(samples) == 11 and samples["error_type"].isna().all() and samples["valid"].all()
        assert (samples["harness"] == "direct").all()  # reference policies run under their own label
        assert json.loads((out / "run.json").read_text())["reference"]
        refused = run(
            "eval", "--model", model, "--harness", "single-pass-text", "--data", str(data), "--out", str(tmp_path / "y")
        )
        assert refused.returncode == 2 and "plays direct" in refused.stderr
    assert (
        run("eval", "--model", "classical/nowhere", "--data", str(data), "--out", str(tmp_path / "x")).returncode == 2
    )


def run_in_process(monkeypatch, capsys, *args: str) -> tuple[int, str, str]:
    """`tsbench ARGS` through the real entry point (error lines and exit codes included), in this process."""
    from tsbench.cli import main

    monkeypatch.setattr(sys, "argv", ["tsbench", *args])
    with pytest.raises(SystemExit) as exited:
        main()
    captured = capsys.readouterr()
    return exited.value.code or 0, captured.out, captured.err


def test_foreign_files_are_one_line_errors_and_describe_takes_a_seed_dir(small_data, tmp_path, monkeypatch, capsys):
    import pandas as pd

    text = tmp_path / "notes.parquet"
    text.write_text("not a parquet file\n")
    other = tmp_path / "other.parquet"
    pd.DataFrame({"a": [1, 2]}).to_parquet(other)
    answers = tmp_path / "answers.jsonl"
    answers.write_text('{"id": "x", "response": "Yes"}\n')
    for bad in (text, other):
        for args in (
            ["describe", str(bad)],
            ["describe", str(bad), "--plot", "x"],
            ["score", "--data", str(bad), "--responses", str(answers)],
            ["eval", "--model", "scripted/zscore", "--data", str(bad), "--out", str(tmp_path / "run")],
        ):
            code, _, err = run_in_process(monkeypatch, capsys, *args)
            assert code == 2 and "is not an AnomalyXL parquet file" in err, (args, err)
            assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    code, out, err = run_in_process(monkeypatch, capsys, "describe", str(small_data))
    assert code == 0, err
    assert "test-precise.parquet" in out and "test-coarse.parquet" in out


def test_broken_run_dirs_and_bad_output_paths_are_one_line_errors(small_data, tmp_path, monkeypatch, capsys):
    listed = tmp_path / "listed"
    listed.mkdir()
    (listed / "run.json").write_text("[1, 2]")  # valid JSON, not a run
    taken = tmp_path / "taken.parquet"
    taken.write_text("a file where the board's folder would go")
    first = "test-classify_with_evidence-1024-00000"
    for args, needle in (
        (["leaderboard", str(listed), "--out", str(tmp_path / "board")], "no run could be read"),
        (["leaderboard", str(listed), "--out", str(taken)], "is a file"),
        (
            ["describe", str(small_data), "--plot", first, "--out", str(tmp_path / "plot.txt")],
            "must be .png, .svg or .pdf",
        ),
        (
            [
                "eval",
                "--model",
                "scripted/zscore",
                "--data",
                str(small_data),
                "--fail-on-error",
                "-1",
                "--out",
                str(tmp_path / "never"),
            ],
            "fail_on_error (--fail-on-error) must be >= 0, got -1",
        ),
        (
            [
                "eval",
                "--model",
                "scripted/zscore",
                "--data",
                str(small_data),
                "--client-timeout",
                "0",
                "--out",
                str(tmp_path / "never"),
            ],
            "client_timeout_s (--client-timeout-s) must be > 0",
        ),
    ):
        code, _, err = run_in_process(monkeypatch, capsys, *args)
        assert code == 2 and needle in err, (args, err)
        assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_a_log_gets_a_progress_line_while_no_row_finishes(small_data, tmp_path, monkeypatch, capsys):
    """Not a terminal: a slow server still shows the run is alive, every LOG_EVERY_S."""
    from tsbench.cli import eval_progress
    from tsbench.testing.fake_openai_server import FakeOpenAIServer

    monkeypatch.setattr(eval_progress, "LOG_EVERY_S", 0.5)
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    with FakeOpenAIServer(["sleep:3"], default='ok:{"answer": "Yes"}') as server:
        code, _, err = run_in_process(
            monkeypatch,
            capsys,
            "eval",
            "--model",
            "openai/fake-model",
            "--base-url",
            server.base_url,
            "--harness",
            "single-pass-text",
            "--data",
            str(small_data),
            "--sample-id",
            "test-localize-1024-00000",
            "--out",
            str(tmp_path / "run"),
        )
    assert code == 0, err
    waiting = [line for line in err.splitlines() if line.startswith("0/1 rows")]
    assert len(waiting) >= 3, err  # about one per half second of the 3 s wait
    assert any(line.startswith("1/1 rows") for line in err.splitlines())


def test_score_warns_about_rows_without_a_response(small_data, tmp_path, monkeypatch, capsys):
    from tsbench.tasks.anomalyxl.rows import read_index

    index = read_index(small_data / "test-coarse.parquet")
    answers = tmp_path / "answers.jsonl"
    given = [json.dumps({"id": rid, "response": "Answer: Yes"}) for rid in index["id"][2:]]
    answers.write_text("\n".join(given + [json.dumps({"id": "stranger", "response": "No"})]) + "\n")
    code, out, err = run_in_process(
        monkeypatch, capsys, "score", "--data", str(small_data / "test-coarse.parquet"), "--responses", str(answers)
    )
    assert code == 0, err
    assert f"warning: 2 of {len(index)} rows have no response (scored 0)" in err
    assert "warning: 1 response ids are not in test-coarse.parquet" in err


def test_describe_plot_names_the_anomaly_and_overlays_a_runs_prediction(small_data, tmp_path, monkeypatch, capsys):
    from tsbench.core.config import build
    from tsbench.eval.config import EvalConfig
    from tsbench.eval.runner import run_eval

    row_id = "test-classify_with_evidence-1024-00000"
    run = run_eval(
        build(
            EvalConfig,
            {
                "model": "scripted/zscore",
                "harness": "single-pass-text",
                "data": [str(small_data)],
                "sample_ids": [row_id],
                "concurrency": 1,
                "out": str(tmp_path / "run"),
            },
        )
    )
    for suffix in ("svg", "pdf"):
        out = tmp_path / f"row.{suffix}"
        code, printed, err = run_in_process(
            monkeypatch, capsys, "describe", str(small_data), "--plot", row_id, "--run", str(run), "--out", str(out)
        )
        assert code == 0, err
        assert str(out) in printed
    svg = (tmp_path / "row.svg").read_text()
    assert "classify_with_evidence, L = 1,024" in svg and "σ, width" in svg  # kind and magnitude in the title
    assert "gold window" in svg and "predicted window" in svg and "predicted: {" in svg and "zoom: ch_00" in svg
    assert (tmp_path / "row.pdf").read_bytes()[:5] == b"%PDF-"


def test_one_help_style_and_a_command_list_that_is_never_cut():
    """Every command's --help writes a value's type as typer does (`<int>`, never `INTEGER`), and the
    command list keeps each description whole at 80 columns."""
    import re

    import typer.main
    from typer.testing import CliRunner

    from tsbench.cli import COMMANDS, TRAIN, app

    runner = CliRunner()
    top = runner.invoke(app, ["--help"], terminal_width=80, env={"COLUMNS": "80"})
    listed = top.output.split("Commands:")[1]
    assert top.exit_code == 0 and "..." not in listed and "…" not in listed, top.output
    assert all(f"  {name}  " in listed and f"{short}\n" in listed for name, (_, short) in COMMANDS.items())
    group = typer.main.get_command(app)
    memory = group.get_command(None, "memory").real()  # type: ignore[attr-defined]
    paths = [[name] for name in COMMANDS if name not in TRAIN] + [["memory", name] for name in memory.commands]
    for path in paths:
        res = runner.invoke(app, [*path, "--help"], terminal_width=100, env={"COLUMNS": "100"})
        assert res.exit_code == 0, (path, res.output)
        assert not re.search(r"--[a-z-]+ (INTEGER|TEXT|NUMBER|FLOAT|PATH)\b", res.output), (path, res.output)
        if path == ["memory"]:
            assert "..." not in res.output.split("Commands:")[-1]


def test_the_eval_progress_line_fits_80_columns_and_keeps_its_parts_whole():
    from tsbench.cli.eval_progress import LineState, progress_text

    busy = LineState(1234, 20480, (0.51234, 0.0123), 17, 12_345_678, 12.5, 3 * 3600 + 5, 7 * 3600)
    for width in (200, 120, 80, 60, 40):
        line = progress_text(busy, width)
        assert len(line) <= width and line.startswith("1234/20480 rows"), (width, line)
        for part in line.split("  ")[1:]:  # every part shown is whole: nothing is cut mid-word
            assert part in progress_text(busy, 500, bar=False) or set(part) <= set("━╌"), (width, part)
    assert "tokens 12,345,678" in progress_text(busy, 80) and "errors 17" in progress_text(busy, 80)
    assert "━" in progress_text(busy, 200) and "━" not in progress_text(busy, 80)  # a bar only where it fits
    assert progress_text(LineState(0, 0, None, 0, 0, 0.0, 1.0, None), 80).startswith("selecting rows")
